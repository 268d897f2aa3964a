"""The package's reference (labqueue.website.reference) against the code: every public name has a
docstring and is in the reference, and so is every `labqueue` subcommand and option, every worker
setting and its variable, every error and every metric. The reference pages are rendered by
Sphinx here as the site renders them, warnings as errors."""

from __future__ import annotations

import importlib
import inspect
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import labqueue
from labqueue import metrics
from labqueue.settings import PoolSettings, WorkerSettings
from labqueue.website import reference
from labqueue.website.build import HERE


def public_members(cls: type) -> Iterator[tuple[str, object]]:
    """A class's public attributes, its own and those it inherits from labqueue's classes."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("labqueue"):
            for name, value in vars(klass).items():
                if not name.startswith("_"):
                    yield f"{cls.__name__}.{name}", value


def undocumented(owner: object, name: str) -> list[str]:
    """`name` of `owner` and its public methods and properties that have no docstring."""
    obj = getattr(owner, name)
    if not (inspect.isclass(obj) or inspect.isroutine(obj)):
        return [] if name in reference.VALUES else [name]  # a value's line is kept in VALUES
    missing = [] if (obj.__doc__ or "").strip() else [name]
    if inspect.isclass(obj) and not issubclass(obj, BaseException):
        for member, value in public_members(obj):
            function = value.fget if isinstance(value, property) else getattr(value, "__func__", value)
            if inspect.isroutine(function) and not (function.__doc__ or "").strip():
                missing.append(member)
    return missing


def test_the_check_finds_a_name_without_a_docstring():
    class Thing:
        """Documented."""

        def said(self) -> None:
            """Documented too."""

        def unsaid(self) -> None:
            pass

        @property
        def size(self) -> int:
            return 1

    def bare() -> None:
        pass

    holder = type("holder", (), {"Thing": Thing, "bare": bare, "VALUE": 3})
    Thing.__module__ = "labqueue.example"  # its methods count as labqueue's own
    assert undocumented(holder, "Thing") == ["Thing.unsaid", "Thing.size"]
    assert undocumented(holder, "bare") == ["bare"]
    assert undocumented(holder, "VALUE") == ["VALUE"]


def test_every_public_name_has_a_docstring():
    missing = [name for exported in labqueue.__all__ for name in undocumented(labqueue, exported)]
    for module_name, names in reference.MODULES.items():
        module = importlib.import_module(module_name)
        if not (module.__doc__ or "").strip():
            missing.append(module_name)
        missing += [f"{module_name}.{name}" for exported in names for name in undocumented(module, exported)]
    assert missing == [], f"public names without a docstring: {missing}"


@pytest.fixture(scope="module")
def pages() -> dict[str, str]:
    return reference.pages()


def test_every_exported_name_is_in_the_reference(pages):
    written = pages["api"] + pages["errors"]
    missing = [
        name
        for name in labqueue.__all__
        if not re.search(rf"(\.\. auto\w+:: |\{{py:data\}} )labqueue\.{name}\n", written)
    ]
    assert missing == [], f"in labqueue.__all__ but not in the reference: {missing}"
    for module_name, names in reference.MODULES.items():
        assert f".. automodule:: {module_name}\n   :members: {', '.join(names)}\n" in pages["modules"]


def test_every_subcommand_and_option_is_in_the_command_reference(pages):
    parser = reference.command_parser()
    commands, _ = reference._subcommands(parser)
    assert len(commands.choices) >= 15
    top = pages["cli"].split("\n## ", 1)[0]
    for action in parser._actions:
        assert all(f"`{flag}" in top for flag in action.option_strings), action.option_strings
    for name, sub in commands.choices.items():
        section = pages["cli"].split(f"\n## labqueue {name}\n", 1)[1].split("\n## ", 1)[0]
        if name in ("bench", "chaos"):
            assert "usage: python -m labqueue." in section and "--jobs" in section, name
            continue
        for action in sub._actions:
            for flag in action.option_strings or [action.metavar or action.dest]:
                assert f"`{flag}" in section, f"labqueue {name} {flag} is not in the command reference"


def test_every_setting_and_variable_is_in_the_settings_reference(pages):
    text = pages["settings"]
    for kind in (PoolSettings, WorkerSettings):
        for field, option in kind.options():
            row = next((line for line in text.splitlines() if line.startswith(f"| `{field.name}` |")), "")
            assert f"`{option.flag}" in row, f"{kind.__name__}.{field.name}"
            if option.env:
                assert f"`{option.env}`" in row and f"| `{option.env}` |" in text, option.env
    for variable in ("LABQUEUE_DB", "LABQUEUE_DASHBOARD_TOKEN"):  # read by the commands, not settings
        assert f"| `{variable}` |" in text


def test_every_error_is_in_the_error_reference(pages):
    classes = reference.error_classes()
    assert {cls.__name__ for cls in classes} >= {"LabqueueError", "CannotCancel", "ConnectionLost"}
    for cls in classes:
        assert f".. autoexception:: labqueue.{cls.__name__}\n" in pages["errors"]
        assert f"{{py:exc}}`~labqueue.{cls.__name__}`" in pages["errors"]  # and in the tree


def test_every_metric_the_code_names_is_in_the_metrics_reference(pages):
    named = set(re.findall(r"\blabqueue_[a-z_]+", Path(metrics.__file__).read_text(encoding="utf-8")))
    assert len(named) >= 8
    table = {line.split("`")[1] for line in pages["metrics"].splitlines() if line.startswith("| `labqueue_")}
    assert table == named
    row = next(line for line in pages["metrics"].splitlines() if line.startswith("| `labqueue_jobs` |"))
    assert "`queue`, `state`" in row and "| gauge |" in row


@pytest.fixture(scope="module")
def rendered(tmp_path_factory, pages) -> Path:
    """The reference pages rendered by Sphinx with the site's settings, warnings as errors."""
    root = tmp_path_factory.mktemp("reference")
    source = root / "source"
    (source / "package" / "reference").mkdir(parents=True)
    for name, text in pages.items():
        (source / "package" / "reference" / f"{name}.md").write_text(text, encoding="utf-8")
    (source / "index.md").write_text("# Site\n\n```{toctree}\npackage/reference/index\n```\n")
    shutil.copytree(HERE / "_static", source / "_static")
    # Warnings are errors, but for links out of the reference (to the how-tos): the pages they
    # point at are not in this small build; the whole site's build checks them.
    outside = "mystnb.unknown_mime_type,myst.header,misc.highlighting_failure,myst.xref_missing"
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(HERE), "-W", "-q"]
    command += ["-D", f"suppress_warnings={outside}"]
    subprocess.run([*command, str(source), str(root / "html")], check=True)
    return root / "html" / "package" / "reference"


def test_the_rendered_reference_has_every_name_and_enqueues_parameters(rendered):
    api = (rendered / "api.html").read_text(encoding="utf-8")
    errors = (rendered / "errors.html").read_text(encoding="utf-8")
    for name in labqueue.__all__:
        assert f'id="labqueue.{name}"' in api + errors, name
    start = api.index('id="labqueue.JobQueue.enqueue"')
    signature = api[start : api.index("</dt>", start)]
    for parameter in inspect.signature(labqueue.JobQueue.enqueue).parameters:
        if parameter != "self":
            assert f'<span class="n"><span class="pre">{parameter}</span>' in signature, parameter
    cli = (rendered / "cli.html").read_text(encoding="utf-8")
    assert "--commit-interval DURATION" in cli and 'id="labqueue-worker"' in cli


def test_every_schema_version_of_both_drivers_is_in_the_schema_reference(pages):
    from labqueue.drivers.postgres import schema as pg_schema
    from labqueue.drivers.sqlite import sql as sqlite_sql

    rows = {line.split(" | ")[0].lstrip("| "): line for line in pages["schema"].splitlines()}
    for version, name in enumerate(sqlite_sql.MIGRATION_NAMES, start=1):
        assert name in rows[str(version)], version
    for step in pg_schema.STEPS:
        assert step.name in rows[str(step.version)] and rows[str(step.version)].endswith(f"| {step.kind} |")
