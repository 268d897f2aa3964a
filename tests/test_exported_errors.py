"""Every error the documentation asks users to handle can be imported from `labqueue`."""

from __future__ import annotations

import builtins
import inspect
import re
from pathlib import Path

import labqueue
from labqueue import errors

ROOT = Path(__file__).resolve().parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]  # the guide in docs/package/ too
# a backticked name, maybe qualified (`labqueue.CannotCancel`, `q.cancel`): its last part
BACKTICKED = re.compile(r"`(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)")


def labqueue_errors() -> set[str]:
    return {
        name
        for name, value in vars(errors).items()
        if inspect.isclass(value) and issubclass(value, errors.LabqueueError)
    }


def documented_errors() -> dict[str, str]:
    """The error names README.md and docs/**/*.md put in backticks (those ending in Error, or
    named in labqueue.errors; Python's own, such as `ValueError`, left out), by document."""
    ours = labqueue_errors()
    found: dict[str, str] = {}
    for document in DOCUMENTS:
        for name in BACKTICKED.findall(document.read_text(encoding="utf-8")):
            if (name in ours or name.endswith("Error")) and not hasattr(builtins, name):
                found.setdefault(name, document.name)
    return found


def test_the_documents_name_errors_at_all():
    named = documented_errors()
    assert {"CannotCancel", "ConnectionLost"} <= set(named), named


def test_every_error_the_documents_name_is_exported():
    missing = {name: where for name, where in documented_errors().items() if name not in labqueue.__all__}
    assert not missing, f"named in the documentation but not in labqueue.__all__: {missing}"


def test_every_labqueue_error_is_exported_and_is_the_same_class():
    assert labqueue_errors() - set(labqueue.__all__) == set()
    for name in labqueue_errors():
        assert getattr(labqueue, name) is getattr(errors, name)
