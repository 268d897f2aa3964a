"""A docstring as the project writes it, plain text, made into reStructuredText for autodoc.

The project's docstrings are prose: `name` for code, indented lines for an example, "- " for a
list item, lines wrapped anywhere. autodoc reads a docstring as reStructuredText, where a single
backtick, an asterisk, a word ending in an underscore or an indented line each mean something
else, and the site is built with warnings as errors: one example in a docstring would stop the
build. `as_rst(lines)` keeps what the text says and writes it so that docutils reads it as meant:

- a paragraph is joined into one line; `name` becomes ``name`` (code); outside code, ``*``, ``|``
  and a word's trailing ``_`` are escaped;
- a paragraph indented deeper than the docstring's text is an example: a literal block;
- lines that begin with "- " or "* " are list items (a line indented under one continues it);
- a paragraph that starts with ">>>" is a doctest block, left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

CODE = re.compile(r"``.+?``|`[^`\n]+`")  # a code span, double or single backticks
SPECIAL = re.compile(r"[*|]|(?<=\w)_(?!\w)|\\")  # reST markup outside code: escaped
BULLET = re.compile(r"^[-*] ")


def inline(text: str) -> str:
    """One line of prose as reStructuredText: code spans as literals, markup escaped."""
    out, end = [], 0
    for match in CODE.finditer(text):
        out.append(SPECIAL.sub(lambda m: "\\" + m[0], text[end : match.start()]))
        span = match[0]  # ``code`` stays as it is; `code` becomes ``code``
        out.append(span if span.startswith("``") else f"``{span[1:-1]}``")
        end = match.end()
    rest = SPECIAL.sub(lambda m: "\\" + m[0], text[end:]).replace("`", "\\`")
    return "".join(out) + rest


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _paragraphs(lines: Iterable[str]) -> list[list[str]]:
    found: list[list[str]] = [[]]
    for line in lines:
        if line.strip():
            found[-1].append(line.rstrip())
        elif found[-1]:
            found.append([])
    return [p for p in found if p]


def as_rst(lines: list[str]) -> list[str]:
    """The docstring's lines (as autodoc gives them: dedented) as reStructuredText lines."""
    paragraphs = _paragraphs(lines)
    if not paragraphs:
        return []
    base = min(_indent(p[0]) for p in paragraphs)
    out: list[str] = []
    example: list[list[str]] = []  # indented paragraphs in a row: one example, blank lines kept
    for paragraph in [*paragraphs, []]:
        if paragraph and _indent(paragraph[0]) > base and not paragraph[0].lstrip().startswith(">>>"):
            example.append(paragraph)
            continue
        if example:
            margin = min(_indent(line) for p in example for line in p)
            block = [["    " + line[margin:] for line in p] for p in example]
            out += ["::", "", *"\n\n".join("\n".join(p) for p in block).split("\n"), ""]
            example = []
        if not paragraph:
            break
        if paragraph[0].lstrip().startswith(">>>"):
            out += [line[base:] for line in paragraph]
        else:
            out += _prose(paragraph)
        out.append("")
    return out


def _prose(paragraph: list[str]) -> list[str]:
    """A paragraph of text and the list items it holds: one line each, a blank line before the
    list. A line that is no item continues the one before it."""
    items: list[list[str]] = []
    for line in paragraph:
        text = line.strip()
        if BULLET.match(text) or not items:
            items.append([text])
        else:
            items[-1].append(text)
    out: list[str] = []
    for item in items:
        joined = " ".join(item)
        if not BULLET.match(joined):
            out.append(inline(joined))  # the text before the list
            continue
        if out and not out[-1].startswith("- "):
            out.append("")
        out.append(f"- {inline(joined[2:])}")
    if out[-1].endswith("::"):  # would announce a literal block that does not follow
        out[-1] = out[-1][:-1]
    return out
