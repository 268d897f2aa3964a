"""The course's "Your turn" exercises: one module per notebook (``nb04`` for notebook 04).

Each exercise gives the learner something to change (a SQL statement, a setting, a
function) and a checker that runs the step's experiment with the learner's version
and says whether it behaves as the exercise asks. A checker never raises on a wrong
answer: it returns a Verdict, which a notebook shows as a green or red line.

Every module also keeps its exercises' worked answers (``ANSWERS``) and starting
points (``STARTERS``), so the tests can check that each checker accepts the answer
and rejects the unchanged starting point and a wrong version: the answers cannot rot.
"""

from __future__ import annotations

import html
from dataclasses import dataclass


@dataclass(frozen=True, repr=False)
class Verdict:
    """What a checker found: whether the change does what the exercise asks, and why."""

    passed: bool
    message: str

    def __bool__(self) -> bool:
        return self.passed

    def __str__(self) -> str:
        return f"{'PASS' if self.passed else 'NOT YET'}: {self.message}"

    __repr__ = __str__  # where only plain text shows (a terminal, GitHub), the same line

    def _repr_html_(self) -> str:
        colour, word = ("#1a7f37", "PASS") if self.passed else ("#b35900", "NOT YET")
        return (
            f'<div style="border-left: 4px solid {colour}; padding: 2px 8px">'
            f'<b style="color: {colour}">{word}</b> {html.escape(self.message)}</div>'
        )


def passed(message: str) -> Verdict:
    return Verdict(True, message)


def not_yet(message: str) -> Verdict:
    return Verdict(False, message)
