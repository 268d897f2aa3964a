"""The package's reference, written from the code at every site build so it cannot drift:

- the public API: an autodoc directive for every name in ``labqueue.__all__`` (Sphinx reads
  each one's signature and docstring when it renders), and the submodules in ``MODULES``;
- the command line: every ``labqueue`` subcommand and option, from the parser
  ``labqueue.cli.build_parser()`` builds (``bench`` and ``chaos`` from their own ``--help``);
- the worker's settings and their ``LABQUEUE_*`` variables, from the fields of
  ``WorkerSettings`` and ``PoolSettings`` (and the variables the parser's help names);
- the errors: every ``LabqueueError`` in ``labqueue.errors``, as a tree and from their classes;
- the metrics: the families ``labqueue.metrics.prometheus_text`` writes for a real queue;
- the schema versions: the steps of both drivers' migrations.

``pages()`` returns each page's Markdown (MyST) by its name under ``package/reference/``;
tests/test_reference.py holds every public name, option, setting, error and metric to it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import inspect
import io
import os
import re
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import labqueue
from labqueue import cli, errors, metrics
from labqueue.settings import Option, PoolSettings, Settings, WorkerSettings

ROOT = Path(__file__).resolve().parents[2]

# How the names of labqueue.__all__ are grouped on the API page; a name not listed here is
# still documented, under "Other names" (the reference test fails on no name left out).
GROUPS = {
    "Opening a queue": ["open_queue", "JobQueue", "SCHEMA", "sqlite_report"],
    "Jobs": ["Job", "JobRecord"],
    "Running jobs": ["handler", "cancelled", "KeepAlive", "start_worker", "kill_tree"],
    "Testing": ["FakeClock"],
}
# What a name of labqueue.__all__ that is a value, not a class or function, holds: a value
# has no docstring of its own, so its line is kept here.
VALUES = {
    "SCHEMA": "The SQLite schema of a new queue (its tables and indexes), as ``JobQueue`` creates it.",
}
# Submodules documented beside labqueue.__all__: the names of each a user imports from it.
MODULES = {
    "labqueue.postgres": ["PgJobQueue", "drop_schema"],
    "labqueue.postgres.server": ["throwaway_server"],
    "labqueue.settings": ["WorkerSettings", "PoolSettings"],
    "labqueue.worker": ["run"],
    "labqueue.pool": ["WorkerPool"],
    "labqueue.schedule": ["Every"],
    "labqueue.fairness": ["QueueTurns", "parse_queues"],
    "labqueue.durations": ["parse_duration", "format_duration"],
    "labqueue.redaction": ["redact"],
    "labqueue.metrics": ["prometheus_text", "serve"],
    "labqueue.migrate": ["migrate", "Plan"],
}


def error_classes() -> list[type[errors.LabqueueError]]:
    """Every error labqueue.errors declares, in the order it declares them."""
    return [
        value
        for value in vars(errors).values()
        if inspect.isclass(value)
        and issubclass(value, errors.LabqueueError)
        and value.__module__ == errors.__name__
    ]


def api_names() -> list[str]:
    """The names of labqueue.__all__ the API page documents (the errors have their own page)."""
    raised = {cls.__name__ for cls in error_classes()}
    return [name for name in labqueue.__all__ if name not in raised]


# What Markdown would read as markup in a help text: a backslash, emphasis, HTML, a link.
MARKDOWN_SPECIAL = re.compile(r"[\\*<>\[\]]")


def _cell(text: str) -> str:
    """Text for a Markdown table cell: one line, its pipes escaped."""
    said = MARKDOWN_SPECIAL.sub(lambda m: "\\" + m[0], " ".join(str(text).split()))
    return said.replace("|", "\\|")


def autodoc(directive: str, target: str, *options: str) -> str:
    """An autodoc directive in a MyST page (autodoc writes reStructuredText: eval-rst reads it)."""
    lines = [f".. {directive}:: {target}"]
    for option in options:  # "members" or "members: A, B"
        name, _, value = option.partition(": ")
        lines.append(f"   :{name}: {value}".rstrip())
    return "```{eval-rst}\n" + "\n".join(lines) + "\n```\n"


def _directive(name: str) -> str:
    obj = getattr(labqueue, name)
    if inspect.isclass(obj):
        return autodoc("autoclass", f"labqueue.{name}", "members", "inherited-members")
    if inspect.isroutine(obj):
        return autodoc("autofunction", f"labqueue.{name}")
    note = VALUES.get(name, "")
    return f"```{{py:data}} labqueue.{name}\n\n{note}\n```\n"


def api_page() -> str:
    names = api_names()
    listed = [n for group in GROUPS.values() for n in group]
    groups = {title: [n for n in group if n in names] for title, group in GROUPS.items()}
    groups["Other names"] = [n for n in names if n not in listed]
    out = [
        "# The API: `import labqueue`\n",
        "Every name `labqueue` exports (`labqueue.__all__`), with its signature and docstring as the "
        "code has them. The errors are on [their own page](errors.md); the submodules a program imports "
        "from are on [Submodules](modules.md).\n",
    ]
    for title, group in groups.items():
        if group:
            out.append(f"## {title}\n")
            out += [_directive(name) for name in group]
    if "SCHEMA" in names:
        out.append(f"The schema `labqueue.SCHEMA` holds:\n\n```sql\n{labqueue.SCHEMA.strip()}\n```\n")
    return "\n".join(out)


def modules_page() -> str:
    out = [
        "# Submodules\n",
        "The modules beyond `labqueue` itself that a program imports from: each module's docstring, "
        "then the names it offers.\n",
    ]
    for module, names in MODULES.items():
        out.append(f"## `{module}`\n")
        out.append(autodoc("automodule", module, f"members: {', '.join(names)}", "member-order: bysource"))
    return "\n".join(out)


# -- the command line --------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> tuple[argparse._SubParsersAction, dict[str, str]]:
    action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
    return action, helps


def _expanded_help(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    return parser._get_formatter()._expand_help(action) if action.help else ""


def _invocation(action: argparse.Action) -> str:
    """How an argument is written, as code: `--batch N`, `--strict`, `DB`, `-h`, `--help`."""
    if not action.option_strings:
        return f"`{action.metavar or action.dest}`"
    value = "" if action.nargs == 0 else f" {action.metavar or action.dest.upper()}"
    if action.nargs == "?":
        value = f" [{value.strip()}]"
    return ", ".join(f"`{flag}{value}`" for flag in action.option_strings)


def _choices(action: argparse.Action) -> str:
    return f" (one of {', '.join(f'`{c}`' for c in action.choices)})" if action.choices else ""


def prose(text: str) -> str:
    """A help text or docstring (plain text, wrapped anywhere) as Markdown paragraphs, which wrap
    to the reader's screen: each paragraph joined into one line, its Markdown marks escaped; an
    indented paragraph (an example) kept as it is, in a code block."""
    out = []
    for paragraph in re.split(r"\n\s*\n", inspect.cleandoc(text)):
        lines = paragraph.splitlines()
        if lines and all(line.startswith((" ", "\t")) for line in lines):
            out.append("```text\n" + inspect.cleandoc(paragraph) + "\n```")
        else:
            joined = MARKDOWN_SPECIAL.sub(lambda m: "\\" + m[0], " ".join(line.strip() for line in lines))
            out.append("\\" + joined if joined.startswith("#") else joined)
    return "\n\n".join(out) + "\n"


def _tool_help(module_name: str) -> str:
    """A tool's own --help, as `labqueue bench --help` or `labqueue chaos --help` prints it."""
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        return f"(its options need an extra that is not installed here: {exc})"
    out = io.StringIO()
    with _columns(100), contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        module.main(["--help"])
    # A default under this checkout (where a benchmark saves its data) as a reader's own.
    return out.getvalue().strip().replace(f"{ROOT}{os.sep}", "")


@contextlib.contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse's help wrapped at `width`, whatever terminal the build runs in."""
    saved = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if saved is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = saved


@contextlib.contextmanager
def _no_labqueue_variables() -> Iterator[None]:
    """The parser without this machine's LABQUEUE_* variables (they would become defaults)."""
    saved = {name: value for name, value in os.environ.items() if name.startswith("LABQUEUE_")}
    for name in saved:
        del os.environ[name]
    try:
        yield
    finally:
        os.environ.update(saved)


def command_parser() -> argparse.ArgumentParser:
    with _no_labqueue_variables():
        return cli.build_parser()


def _arguments(parser: argparse.ArgumentParser) -> str:
    """A parser's arguments as a table: how each is written, and its help."""
    rows = [
        f"| {_invocation(a)} | {_cell(_expanded_help(parser, a))}{_choices(a)} |"
        for a in parser._actions
        if not isinstance(a, argparse._SubParsersAction)
    ]
    return "| argument | what it does |\n| --- | --- |\n" + "\n".join(rows) + "\n"


def cli_page() -> str:
    with _columns(100):
        return _cli_page()


def _cli_page() -> str:
    parser = command_parser()
    action, helps = _subcommands(parser)
    out = [
        "# The `labqueue` command\n",
        "Every subcommand and option, read from the command's own parser "
        "(`labqueue.cli.build_parser`). `labqueue COMMAND --help` prints the same; "
        "`python -m labqueue` is the same command.\n",
        f"```text\n{parser.format_usage().strip()}\n```\n",
        parser.description or "",
        "",
        "Durations take a unit everywhere: `90s`, `15m`, `2h`, `1d`, `1w` (or plain seconds). A bad "
        "argument is a one-line usage error (exit code 2) naming the option and the value; labqueue's "
        "own errors are one line and exit code 1.\n",
        _arguments(parser),
        "| command | what it does |\n| --- | --- |",
        *(f"| [`{name}`](#labqueue-{name}) | {_cell(helps.get(name, ''))} |" for name in action.choices),
        "",
    ]
    for name, sub in action.choices.items():
        out.append(f"## labqueue {name}\n")
        if name in cli.TOOLS:
            module_name, help_text, extra = cli.TOOLS[name]
            out.append(
                f"{help_text[0].upper()}{help_text[1:]}: `labqueue {name} ...` hands its arguments to "
                f"`python -m {module_name.rsplit('.', 1)[0]}` (the `{extra}` extra). Its options:\n"
            )
            out.append(f"```text\n{_tool_help(module_name)}\n```\n")
            continue
        out.append(f"```text\n{sub.format_usage().strip()}\n```\n")
        if sub.description:
            out.append(prose(sub.description))
        out.append(_arguments(sub))
    return "\n".join(out)


# -- settings and variables ----------------------------------------------------------------


def _default(value: Any) -> str:
    if value is None:
        return "none"
    if value == ():
        return "none"
    return f"`{value!r}`" if not isinstance(value, bool) else f"`{value}`"


def settings_rows(kind: type[Settings]) -> list[tuple[dataclasses.Field, Option]]:
    return kind.options()


def named_variables() -> dict[str, str]:
    """The LABQUEUE_* variables the parser's help names beyond the settings' (`$LABQUEUE_DB`),
    each with the commands and options that read it."""
    parser = command_parser()
    action, _ = _subcommands(parser)
    found: dict[str, dict[str, list[str]]] = {}
    for name, sub in action.choices.items():
        for a in sub._actions:
            for variable in re.findall(r"\$(LABQUEUE_[A-Z_]+)", a.help or ""):
                found.setdefault(variable, {}).setdefault(_invocation(a), []).append(f"`{name}`")
    return {
        variable: "; ".join(
            f"{argument} of `labqueue` {', '.join(names)}" for argument, names in where.items()
        )
        for variable, where in found.items()
    }


def settings_page() -> str:
    out = [
        "# Worker settings and `LABQUEUE_*` variables\n",
        "Every option of `labqueue worker` is a field of a settings type in `labqueue/settings.py`: "
        "`PoolSettings` for the supervisor, `WorkerSettings` for each worker process. The parser, the "
        "variables, the settings a worker process is started with and `worker.run` all derive from "
        "these fields, and this page is written from them. In code, `WorkerPool`, `start_worker` "
        "and `labqueue.worker.run` take a `WorkerSettings` or any of its fields as keywords "
        "(`run('jobs.db', 'w1', 30, batch=50)`).\n",
        "A variable stands in for its option where a container or unit file is easier to configure "
        "with the environment; an option on the command line wins. A variable is read only by the "
        "command that has its option, and only when the command line does not give it; a bad value "
        "that is used is a usage error naming the option and the variable. A repeatable option's "
        "variable is comma-separated.\n",
    ]
    for kind, said in (
        (PoolSettings, "`PoolSettings`: the supervisor (`labqueue worker` itself)"),
        (WorkerSettings, "`WorkerSettings`: every worker process"),
    ):
        out.append(f"## {said}\n")
        out.append(inspect.getdoc(kind) or "")
        out.append("")
        out.append(
            "| setting | option | variable | default | what it does |\n| --- | --- | --- | --- | --- |"
        )
        for f, opt in settings_rows(kind):
            flag = f"`{opt.flag}{' ' + opt.metavar if opt.metavar else ''}`"
            variable = f"`{opt.env}`" if opt.env else "–"
            choices = f" (one of {', '.join(f'`{c}`' for c in opt.choices)})" if opt.choices else ""
            out.append(
                f"| `{f.name}` | {flag} | {variable} | {_default(f.default)} | {_cell(opt.help)}{choices} |"
            )
        out.append("")
    out.append("## Every variable\n")
    out.append("| variable | stands in for |\n| --- | --- |")
    for kind in (PoolSettings, WorkerSettings):
        for f, opt in settings_rows(kind):
            if opt.env:
                out.append(f"| `{opt.env}` | `labqueue worker {opt.flag}` ({kind.__name__}.{f.name}) |")
    for variable, where in named_variables().items():
        out.append(f"| `{variable}` | {where} |")
    out.append("")
    return "\n".join(out)


# -- errors ------------------------------------------------------------------------------------


def errors_page() -> str:
    found = error_classes()
    children: dict[type, list[type]] = {}
    for cls in found:
        parent = next((b for b in cls.__bases__ if b in found), None)
        children.setdefault(parent, []).append(cls)

    def tree(parent: type | None, depth: int) -> list[str]:
        lines = []
        for cls in children.get(parent, []):
            also = [b.__name__ for b in cls.__bases__ if b not in found and b is not Exception]
            extra = f" (also a `{'`, `'.join(also)}`)" if also else ""
            lines.append(f"{'  ' * depth}- {{py:exc}}`~labqueue.{cls.__name__}`{extra}")
            lines += tree(cls, depth + 1)
        return lines

    out = [
        "# Errors\n",
        "Every error labqueue raises on purpose, from `labqueue/errors.py`; each is exported by "
        "`labqueue`. Each message says what was wrong and with which value; where an error says "
        "nothing was written, the database is as it was. On both backends the same faults raise the "
        "same errors (a lock or statement timeout `QueueBusy`, a read-only file or server "
        "`CannotOpen`, a full disk `StorageFull`, a lost server `ConnectionLost`). The `labqueue` "
        "command prints one line for any of them and exits with code 1.\n",
        *tree(None, 0),
        "",
    ]
    for cls in found:
        out.append(autodoc("autoexception", f"labqueue.{cls.__name__}", "show-inheritance"))
    return "\n".join(out)


# -- metrics -----------------------------------------------------------------------------------

FAMILY = re.compile(r"^# HELP (?P<name>\S+) (?P<help>.*)\n# TYPE (?P=name) (?P<type>\S+)$", re.MULTILINE)


def metric_families() -> list[dict[str, Any]]:
    """Each family `prometheus_text` writes, read back from its output for a real queue that
    has one job of each kind of reading (ready, done): name, type, labels and help."""
    with tempfile.TemporaryDirectory() as folder, labqueue.JobQueue(Path(folder) / "metrics.db") as q:
        q.enqueue("example", {}, concurrency_key="customer:1", concurrency_limit=1)
        q.enqueue("example", {}, concurrency_key="customer:1", concurrency_limit=1)
        q.enqueue("example", {})
        for job in q.claim("reference", limit=1):
            q.complete(job)
        q.claim("reference", limit=1)
        text = metrics.prometheus_text(metrics.read(q))
    families = []
    for match in FAMILY.finditer(text):
        name = match["name"]
        samples = re.findall(rf"^{re.escape(name)}(?:\{{(.*?)\}})? ", text, re.MULTILINE)
        labels = sorted({pair.split("=")[0] for sample in samples for pair in sample.split(",") if pair})
        families.append({"name": name, "type": match["type"], "labels": labels, "help": match["help"]})
    return families


def metrics_page() -> str:
    out = [
        "# Metrics\n",
        "The families `labqueue metrics DB` serves at `/metrics` and `labqueue stats DB --format "
        "prometheus` prints, in Prometheus' text format (version 0.0.4). This table is read from "
        "what `labqueue.metrics.prometheus_text` writes for a real queue. Each is a gauge: a reading, "
        "not a running total, so a purge cannot make one go backwards. Each scrape opens the queue, "
        "reads it and closes it.\n",
        "| metric | type | labels | what it says |\n| --- | --- | --- | --- |",
    ]
    for family in metric_families():
        labels = ", ".join(f"`{label}`" for label in family["labels"]) or "–"
        out.append(f"| `{family['name']}` | {family['type']} | {labels} | {_cell(family['help'])} |")
    out.append("")
    out.append(
        "What each one is for, and what it costs, is in the module's own words on "
        "[Submodules](modules.md#labqueue-metrics).\n"
    )
    return "\n".join(out)


# -- schema versions ---------------------------------------------------------------------------


def schema_steps() -> list[tuple[int, str, str, str]]:
    """Each schema version: (version, what it does on SQLite, on PostgreSQL, expand or contract),
    from the two drivers' lists of steps ("–" where a backend has no such version)."""
    from labqueue.drivers.postgres import schema as pg_schema
    from labqueue.drivers.sqlite import sql as sqlite_sql

    sqlite = {n + 1: name for n, name in enumerate(sqlite_sql.MIGRATION_NAMES)}
    postgres = {step.version: (step.name, step.kind) for step in pg_schema.STEPS}
    versions = sorted(set(sqlite) | set(postgres))
    return [
        (v, sqlite.get(v, "–"), postgres.get(v, ("–", ""))[0], postgres.get(v, ("", "expand"))[1])
        for v in versions
    ]


def schema_page() -> str:
    out = [
        "# Schema versions\n",
        "Every version of a queue's schema, read from the two drivers' lists of steps "
        "(`drivers/sqlite/sql.py` `MIGRATION_NAMES`, `drivers/postgres/schema.py` `STEPS`). Opening a "
        "queue never migrates it: `labqueue migrate` takes the pending steps while the queue runs, "
        "and `--contract` the steps an older labqueue cannot run beside "
        "([Upgrades](../howto/upgrades.md)).\n",
        "| version | SQLite | PostgreSQL | kind |\n| --- | --- | --- | --- |",
    ]
    for version, sqlite, postgres, kind in schema_steps():
        out.append(f"| {version} | {_cell(sqlite)} | {_cell(postgres)} | {kind} |")
    return "\n".join(out) + "\n"


def index_page() -> str:
    return """# Reference

Written from the code each time the site is built, so it says what this version does.

- [The API](api.md): every name `import labqueue` gives, with its signature and docstring.
- [Submodules](modules.md): PostgreSQL, settings, the worker loop, the pool, schedules, durations.
- [The `labqueue` command](cli.md): every subcommand and option.
- [Worker settings and variables](settings.md): every setting, its option and its `LABQUEUE_*` variable.
- [Errors](errors.md): every error labqueue raises, and what each means.
- [Metrics](metrics.md): every metric, its labels and what it says.
- [Schema versions](schema.md): every step `labqueue migrate` takes, on each backend.

```{toctree}
:hidden:

api
modules
cli
settings
errors
metrics
schema
```
"""


NAMES = ("index", "api", "modules", "cli", "settings", "errors", "metrics", "schema")


def pages() -> dict[str, str]:
    """Each reference page's Markdown by its name (index, api, cli, ...)."""
    return {
        "index": index_page(),
        "api": api_page(),
        "modules": modules_page(),
        "cli": cli_page(),
        "settings": settings_page(),
        "errors": errors_page(),
        "metrics": metrics_page(),
        "schema": schema_page(),
    }
