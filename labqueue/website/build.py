"""Build the site: the course (every notebook as a page, its committed outputs, not a re-run;
an index with the table of contents, Part 1 and Part 2; the glossary) and the package's guide
and reference (docs/package/, docs/deploy.md and the pages labqueue.website.reference writes
from the code), into build/site/.

    python tasks.py site [--remote URL]     (python -m labqueue.website)

The pages are prepared in a scratch folder first: each notebook gains a line with its
"Run this notebook" link (mybinder.org, for the GitHub repository the remote names) and
its links to the glossary are pointed at the site's page. Nothing is fetched from the
network; Sphinx and myst-nb render what is committed (see conf.py)."""

from __future__ import annotations

import argparse
import json
import posixpath
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from ..redaction import redact

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
NOTEBOOKS = ROOT / "notebooks"
GLOSSARY = ROOT / "docs" / "glossary.md"
FEEDBACK = ROOT / "docs" / "feedback.md"
IMAGES = ROOT / "docs" / "images"  # pictures in the notebooks' text: ![...](../docs/images/x.png)
PACKAGE = ROOT / "docs" / "package"  # the package's guide: quickstart, concepts, how-tos
# Repository files beyond docs/package/ that are pages of the site, as they are: their place there.
GUIDE_PAGES = {"docs/deploy.md": "package/howto/deploy.md", "docs/course.md": "course.md"}
OUT = ROOT / "build" / "site"
PART_2_FROM = "13"  # the bridge to labqueue opens Part 2
# The repository the Binder links build when no GitHub remote is known (README's placeholder).
PLACEHOLDER_REPOSITORY = "OWNER/labqueue"
GITHUB = re.compile(
    r"(?:https://github\.com/|git@github\.com:|ssh://git@github\.com/)(?P<repo>[^/]+/[^/]+?)(?:\.git)?/?$"
)


@dataclass(frozen=True)
class Page:
    """One notebook as the site shows it."""

    path: Path
    title: str
    minutes: int | None

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def part(self) -> int:
        return 2 if self.name[:2] >= PART_2_FROM else 1


def pages(folder: Path = NOTEBOOKS) -> list[Page]:
    """Every notebook of the course in order, with its title and time estimate."""
    found = []
    for path in sorted(folder.glob("[0-9][0-9]_*.ipynb")):
        first = "".join(json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"])
        title = next((line[2:].strip() for line in first.splitlines() if line.startswith("# ")), path.stem)
        minutes = re.search(r"about (\d+) minutes", first)
        found.append(Page(path, title, int(minutes[1]) if minutes else None))
    return found


# A markdown link from a notebook to a file of the repository, `](../README.md#anchor)`.
REPOSITORY_LINK = re.compile(r"\]\(\.\./([^)\s]+)\)")


def repository(remote: str | None) -> str:
    """owner/name of the GitHub repository `remote` names, or the README's placeholder."""
    match = GITHUB.match((remote or "").strip())
    return match["repo"] if match else PLACEHOLDER_REPOSITORY


def placeholder_note(remote: str | None) -> str | None:
    """What to tell the person building the site when `remote` names no GitHub repository: the
    Run links then open the README's placeholder, which no Binder can build. (A remote may
    carry a token, so it is shown redacted.)"""
    if repository(remote) != PLACEHOLDER_REPOSITORY:
        return None
    given = (remote or "").strip()
    named = f"git's origin is {redact(given)!r}" if given else "there is no git origin"
    return (
        f"note: {named}, not a GitHub repository, so every 'Run this notebook' link names "
        f"{PLACEHOLDER_REPOSITORY}; give --remote https://github.com/OWNER/NAME for working links"
    )


def run_link(repo: str, notebook: str, ref: str = "HEAD") -> str:
    """The mybinder.org link that opens `notebook` live in JupyterLab (as tasks.py binder-url)."""
    urlpath = quote(f"lab/tree/notebooks/{notebook}", safe="")
    return f"https://mybinder.org/v2/gh/{repo}/{quote(ref, safe='')}?urlpath={urlpath}"


def image_alt(cell: dict, heading: str) -> str:
    """The alt text of a code cell's figures: what the figure says of itself (the course's figures
    carry their title, or what they plot against what, in the output's metadata), else the
    section it is drawn in."""
    said = [
        str(out.get("metadata", {}).get("image/png", {}).get("alt", ""))
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]
    known = [text for text in said if text]
    return "; ".join(dict.fromkeys(known)) if known else f"Chart in the section: {heading}"


def page_source(page: Page, repo: str) -> dict:
    """The notebook as the site renders it: a run link first, glossary and feedback links to the
    site's pages, and alt text on every figure."""
    nb = json.loads(page.path.read_text(encoding="utf-8"))
    heading = page.title
    for cell in nb["cells"]:
        figures = [o for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        if cell["cell_type"] == "code" and figures:
            options = cell.setdefault("metadata", {}).setdefault("mystnb", {})
            options["image"] = {"alt": image_alt(cell, heading)}
        if cell["cell_type"] == "markdown":
            text = "".join(cell["source"])
            heading = next(
                (line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")), heading
            )
            for doc in ("glossary", "feedback"):
                text = text.replace(f"../docs/{doc}.md", f"{doc}.md")
            text = text.replace("](../docs/images/", "](images/")  # copied beside the pages
            # Other repository files (the README) are not pages of the site: link to them on GitHub.
            text = REPOSITORY_LINK.sub(rf"](https://github.com/{repo}/blob/HEAD/\1)", text)
            cell["source"] = text.splitlines(keepends=True)
    note = (
        f'<div class="run-live">\n\n**Run this notebook** live in JupyterLab on Binder: '
        f"[{page.path.name}]({run_link(repo, page.path.name)}). Here it is read-only, as last run: "
        "its panels show their saved state, and they come alive in JupyterLab.\n\n</div>"
    )
    nb["cells"].insert(
        1,
        {
            "cell_type": "markdown",
            "id": "site-run-link",
            "metadata": {},
            "source": note.splitlines(keepends=True),
        },
    )
    return nb


def site_places(found: Sequence[Page]) -> dict[str, str]:
    """Each repository file that is a page of the site (by its path in the repository): its
    path in the site."""
    places = {f"notebooks/{p.path.name}": p.path.name for p in found}
    places |= {"docs/glossary.md": "glossary.md", "docs/feedback.md": "feedback.md", **GUIDE_PAGES}
    from .reference import NAMES  # written at build time: linked as docs/package/reference/NAME.md

    places |= {f"docs/package/reference/{name}.md": f"package/reference/{name}.md" for name in NAMES}
    for path in sorted(PACKAGE.rglob("*.md")):
        inside = path.relative_to(PACKAGE).as_posix()
        places[f"docs/package/{inside}"] = f"package/{inside}"
    return places


# A markdown link to a file beside the page, `](../deploy/Dockerfile)` or `](concepts.md#leases)`.
RELATIVE_LINK = re.compile(r"\]\((?!https?:|mailto:|#)(?P<path>[^)\s#]+)(?P<anchor>#[^)\s]*)?\)")


def guide_source(where: str, text: str, places: dict[str, str], repo: str) -> str:
    """A guide page (the repository file `where`) as the site renders it: a link to another file
    that is a page of the site points at that page, any other link at the file on GitHub."""
    here = places[where]

    def relinked(match: re.Match[str]) -> str:
        target = posixpath.normpath(posixpath.join(posixpath.dirname(where), match["path"]))
        anchor = match["anchor"] or ""
        if target in places:
            return f"]({posixpath.relpath(places[target], posixpath.dirname(here) or '.')}{anchor})"
        return f"](https://github.com/{repo}/blob/HEAD/{target}{anchor})"

    return RELATIVE_LINK.sub(relinked, text) + ask(here)


def ask(place: str) -> str:
    """The line saying where to ask, for the page at `place` in the site."""
    feedback = posixpath.relpath("feedback.md", posixpath.dirname(place) or ".")
    return ASK.replace("](feedback.md)", f"]({feedback})")


def guide_sources(found: Sequence[Page], repo: str) -> dict[str, str]:
    """The guide's pages by their path in the site (docs/package/, docs/deploy.md, docs/course.md)
    with their links pointed into the site, and the reference written from the code."""
    from . import reference

    places = site_places(found)
    written = {f"docs/package/reference/{name}.md" for name in reference.NAMES}
    sources = {
        place: guide_source(where, (ROOT / where).read_text(encoding="utf-8"), places, repo)
        for where, place in places.items()
        if (where.startswith("docs/package/") or where in GUIDE_PAGES) and where not in written
    }
    for name, text in reference.pages().items():
        place = f"package/reference/{name}.md"
        sources[place] = text + ask(place)
    return sources


def index_text(found: Sequence[Page]) -> str:
    """The home page: what the course is, and the table of contents in two parts."""

    def toc(part: int, caption: str) -> str:
        names = "\n".join(p.name for p in found if p.part == part)
        return f"```{{toctree}}\n:caption: {caption}\n:maxdepth: 1\n\n{names}\n```\n"

    minutes = {part: sum(p.minutes or 0 for p in found if p.part == part) for part in (1, 2)}
    rows = "\n".join(f"| [{p.title}]({p.name}.ipynb) | {p.minutes or '–'} min |" for p in found)
    return f"""# labqueue, the course

A durable job queue on one SQLite file: leases, fencing tokens, retries with backoff, dead letters,
heartbeats and partial indexes, built step by step in {len(found)} notebooks. Part 1 (about
{minutes[1] // 60} h {minutes[1] % 60} min) follows the reference tutorial; Part 2 (about
{minutes[2] // 60} h {minutes[2] % 60} min) adds retention, priorities, cancellation, periodic jobs,
waking workers and PostgreSQL.

The package the course is built on has its own guide and reference here too: a
[quickstart](package/quickstart.md), the [concepts](package/concepts.md),
[how-to guides](package/howto/index.md) and a [reference](package/reference/index.md) written from
the code.

This site is the course as last run, to read anywhere. Each page has a link that opens it live in
JupyterLab on Binder, where every experiment, widget and exercise runs. The words of the trade are in
the [glossary](glossary.md).

| notebook | time |
| --- | --- |
{rows}

{toc(1, "Part 1 · build the tutorial's queue, step by step")}
{toc(2, "Part 2 · labqueue: what the tutorial leaves out")}
```{{toctree}}
:caption: The package · guide and reference
:maxdepth: 2

package/index
```

```{{toctree}}
:caption: Reference
:maxdepth: 1

course
glossary
feedback
```

{ASK}"""


ASK = "\n**Questions or feedback?** See [where to ask](feedback.md).\n"


def feedback_text(repo: str) -> str:
    """docs/feedback.md with the link to the repository's issues, which the site knows (the teacher's
    guide it names is not a page of the site: it is linked on GitHub)."""
    text = FEEDBACK.read_text(encoding="utf-8").replace(
        "](workshop.md)", f"](https://github.com/{repo}/blob/HEAD/docs/workshop.md)"
    )
    return text + (f"\nThis course's issues: [github.com/{repo}/issues](https://github.com/{repo}/issues).\n")


def build(out: Path = OUT, *, remote: str | None = None, quiet: bool = True) -> Path:
    """Write the pages to a scratch folder beside `out`, then render them into `out`."""
    import sys

    found = pages()
    repo = repository(remote)
    source = out.parent / f"{out.name}-source"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir(parents=True)
    for page in found:
        (source / page.path.name).write_text(json.dumps(page_source(page, repo)), encoding="utf-8")
    (source / "index.md").write_text(index_text(found), encoding="utf-8")
    (source / "glossary.md").write_text(GLOSSARY.read_text(encoding="utf-8") + ASK, encoding="utf-8")
    (source / "feedback.md").write_text(feedback_text(repo), encoding="utf-8")
    for place, text in guide_sources(found, repo).items():
        (source / place).parent.mkdir(parents=True, exist_ok=True)
        (source / place).write_text(text, encoding="utf-8")
    shutil.copytree(HERE / "_static", source / "_static")
    if IMAGES.is_dir():
        shutil.copytree(IMAGES, source / "images")
    shutil.rmtree(out, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "sphinx",
        "-b",
        "html",
        "-c",
        str(HERE),
        "-W",
        "--keep-going",
        *(["-q"] if quiet else []),
        str(source),
        str(out),
    ]
    subprocess.run(command, check=True)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tasks.py site", description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--remote", help="the GitHub repository URL for the Run links (default: git's origin)"
    )
    parser.add_argument("--out", type=Path, default=OUT, help=f"where the site goes (default {OUT})")
    args = parser.parse_args(argv)
    remote = args.remote
    if remote is None:
        found = subprocess.run(
            ["git", "remote", "get-url", "origin"], cwd=ROOT, capture_output=True, text=True
        )
        remote = found.stdout if found.returncode == 0 else None
    note = placeholder_note(remote)
    if note:
        print(note, file=sys.stderr)
    out = build(args.out, remote=remote)
    print(
        f"built {len(pages())} notebook pages and the package's guide and reference into {out} "
        f"(open {out / 'index.html'})"
    )
    return 0
