"""The course's "Your turn" exercises: one module per notebook (``nb04`` for notebook 04).

Each exercise gives the learner something to change (a SQL statement, a setting, a
function) and a checker that runs the step's experiment with the learner's version
and says whether it behaves as the exercise asks. A checker never raises on a wrong
answer: it returns a Verdict, which a notebook shows as a coloured line: PASS, NOT YET
for a change that does not do it yet, and YOUR TURN for the starting point left as it
came (what Run All shows before the learner has tried: an invitation, not a failure).

Every module also keeps its exercises' worked answers (``ANSWERS``) and starting
points (``STARTERS``), so the tests can check that each checker accepts the answer
and rejects the unchanged starting point and a wrong version: the answers cannot rot.
"""

from __future__ import annotations

import ast
import functools
import html
import inspect
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, replace
from types import CodeType
from typing import Any


@dataclass(frozen=True, repr=False)
class Verdict:
    """What a checker found: whether the change does what the exercise asks, and why."""

    passed: bool
    message: str
    started: bool = True  # False: the starting point, unchanged

    def __bool__(self) -> bool:
        return self.passed

    @property
    def word(self) -> str:
        return "PASS" if self.passed else "NOT YET" if self.started else "YOUR TURN"

    def __str__(self) -> str:
        return f"{self.word}: {self.message}"

    __repr__ = __str__  # where only plain text shows (a terminal, GitHub), the same line

    def _repr_html_(self) -> str:
        colour = {"PASS": "#1a7f37", "NOT YET": "#b35900", "YOUR TURN": "#0969da"}[self.word]
        word = self.word
        return (
            f'<div style="border-left: 4px solid {colour}; padding: 2px 8px">'
            f'<b style="color: {colour}">{word}</b> {html.escape(self.message)}</div>'
        )


def passed(message: str) -> Verdict:
    return Verdict(True, message)


def not_yet(message: str) -> Verdict:
    return Verdict(False, message)


def starting_points(module_name: str) -> None:
    """Make each checker of an exercise module say YOUR TURN, not NOT YET, to its starting point
    left unchanged. Called once at the end of every nbNN module, after its CHECKERS and STARTERS;
    the module's own ``check_*`` names are the wrapped checkers, which is what notebooks call."""
    module = sys.modules[module_name]
    for name, checker in list(module.CHECKERS.items()):
        wrapped = _your_turn_at(checker, module.STARTERS[name])
        module.CHECKERS[name] = wrapped
        if getattr(module, checker.__name__, None) is checker:
            setattr(module, checker.__name__, wrapped)


def _your_turn_at(checker: Callable[..., Verdict], starter: dict[str, Any]) -> Callable[..., Verdict]:
    signature = inspect.signature(checker)

    @functools.wraps(checker)
    def check(*args: Any, **kwargs: Any) -> Verdict:
        verdict = checker(*args, **kwargs)
        if verdict.passed:
            return verdict
        try:
            given = signature.bind(*args, **kwargs).arguments
        except TypeError:
            return verdict
        if all(key in given and unchanged(given[key], value) for key, value in starter.items()):
            return replace(verdict, started=False)
        return verdict

    return check


def unchanged(given: Any, start: Any) -> bool:
    """Whether the learner's value is the starting point: the same text give or take spacing,
    a function that compiles to the same code (its name, comments, annotations and line numbers
    aside, so a notebook cell's copy matches the module's), or an equal value."""
    if callable(start) and callable(given):
        if _compiled(given) is not None and _compiled(given) == _compiled(start):
            return True
        # Bytecode differs between compilers (a module's .pyc, IPython's cells): the source decides.
        return _body(given) is not None and _body(given) == _body(start)
    if isinstance(start, str) and isinstance(given, str):
        return given.split() == start.split()
    try:
        return bool(given == start) and type(given) is type(start)
    except Exception:  # a learner's object whose == raises is not the starting point
        return False


def _compiled(function: Any) -> tuple | None:
    """What a function does, from its code object: its bytecode, names and constants."""
    code = getattr(function, "__code__", None)
    return None if code is None else _code_key(code)


def _code_key(code: CodeType) -> tuple:
    consts = tuple(_code_key(c) if isinstance(c, CodeType) else c for c in code.co_consts)
    return (code.co_code, code.co_names, code.co_varnames, code.co_argcount, consts)


def _body(function: Any) -> list[str] | None:
    """A function's statements as syntax trees (its name, comments and annotations aside), or None
    when its source cannot be read."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return None
    node = tree.body[0] if tree.body else None
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return None
    return [ast.dump(statement) for statement in node.body]
