"""The rooms: the queue (labqueue), the course (labqueue.lab, and labqueue.tutorial, the
queue the course's Part 1 builds) and the tools (labqueue.bench, labqueue.chaos). The core
imports neither of the others, and a plain worker knows no job kinds until the operator
registers some."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import labqueue

CORE = Path(labqueue.__file__).resolve().parent
ROOMS = ("labqueue.lab", "labqueue.tutorial", "labqueue.bench", "labqueue.chaos")


# Subpackages that are not the queue: the course's rooms and the site builder (a tool of the course).
NOT_CORE = {"lab", "tutorial", "bench", "chaos", "website"}


def core_modules() -> list[Path]:
    """The queue's modules, its subpackages included (drivers, dashboard, demo handlers)."""
    return sorted(p for p in CORE.rglob("*.py") if not NOT_CORE & set(p.relative_to(CORE).parts[:-1]))


def imported_names(path: Path) -> set[str]:
    """Every module a file imports, relative imports resolved against the core package."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            package = path.relative_to(CORE.parent).parent.parts  # ("labqueue", "dashboard")
            base = ".".join(package[: len(package) - node.level + 1]) if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_no_core_module_imports_the_course_or_the_tools():
    offenders = {
        str(path.relative_to(CORE)): sorted(n for n in imported_names(path) if n.startswith(ROOMS))
        for path in core_modules()
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def test_importing_labqueue_loads_no_course_or_tool_module():
    code = "import sys, labqueue, labqueue.worker; print([m for m in sys.modules if m.startswith(%r)])"
    out = subprocess.run([sys.executable, "-c", code % (ROOMS,)], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_a_plain_worker_knows_no_job_kinds():
    code = "import labqueue.worker as w; print(sorted(w.registry.HANDLERS))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_tools_import_nothing_from_the_course():
    """What the tools and the course share (demo handlers, scratch files) is labqueue.demo."""
    tools = [path for room in ("bench", "chaos") for path in sorted((CORE / room).glob("*.py"))]
    assert len(tools) > 5
    offenders = {
        str(path.relative_to(CORE)): course_imports(path)
        for path in tools
    }
    assert {name: found for name, found in offenders.items() if found} == {}


def course_imports(path: Path) -> list[str]:
    return sorted(name for name in _absolute_imports(path) if name.startswith("labqueue.lab"))


def _absolute_imports(path: Path) -> set[str]:
    """Every module a file of a subpackage imports, relative imports resolved."""
    package = "labqueue." + path.parent.name
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def module_imports(package: Path) -> dict[str, set[str]]:
    """Which of a package's modules each of its modules imports (anywhere in the file, a
    function's lazy import too), relative imports resolved. `from a import b` imports a.b when
    that is a module, else a; importing a.b.c runs a/__init__.py and a/b/__init__.py first,
    so those count too (except the importer's own enclosing packages, already running)."""
    names = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names[".".join(parts)] = path
    graph = {}
    for name, path in names.items():
        here = name if path.name == "__init__.py" else name.rpartition(".")[0]
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = here.rsplit(".", node.level - 1)[0] if node.level else ""
                module = ".".join(part for part in (base, node.module or "") if part)
                targets = [f"{module}.{a.name}" for a in node.names]
                targets = [t if t in names else module for t in targets]
            else:
                continue
            for target in targets:
                while target and target not in names:
                    target = target.rpartition(".")[0]
                pieces = target.split(".") if target else []
                parents = {".".join(pieces[:i]) for i in range(1, len(pieces))}
                found |= {p for p in parents if not (name == p or name.startswith(p + "."))}
                found |= {target} - {"", name}
        graph[name] = found
    return graph


def import_cycles(graph: dict[str, set[str]]) -> list[str]:
    """Each import circle once, as "a -> b -> a" (the shortest one through its first module)."""
    cycles, seen = [], set()
    for start in sorted(graph):
        paths, visited = {start: [start]}, {start}
        queue = [start]
        while queue:
            module = queue.pop(0)
            for target in sorted(graph[module]):
                if target == start:
                    cycle = paths[module] + [start]
                    if frozenset(cycle) not in seen:
                        seen.add(frozenset(cycle))
                        cycles.append(" -> ".join(cycle))
                    queue = []
                    break
                if target not in visited:
                    visited.add(target)
                    paths[target] = paths[module] + [target]
                    queue.append(target)
    return cycles


# Rooms a newcomer can hold: no module of the core past about 700 lines and no class past
# about 300. The SQL modules are constants, one statement each; a driver's class is one
# backend's statements, side by side with the other's, and is left whole.
MOST_LINES_PER_MODULE = 720
MOST_LINES_PER_CLASS = 300
LEFT_WHOLE = {"sql.py"}
DRIVER_CLASSES = {"SqliteDriver", "PgDriver"}


def test_no_core_module_or_class_has_grown_past_what_a_newcomer_can_hold():
    too_long = []
    for path in core_modules():
        text = path.read_text()
        where = path.relative_to(CORE)
        if path.name not in LEFT_WHOLE and len(text.splitlines()) > MOST_LINES_PER_MODULE:
            too_long.append(f"{where}: {len(text.splitlines())} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.name not in DRIVER_CLASSES:
                size = node.end_lineno - node.lineno + 1
                if size > MOST_LINES_PER_CLASS:
                    too_long.append(f"{where}: class {node.name}, {size} lines")
    assert too_long == []


def test_the_queue_is_its_roles_over_one_base():
    """Queue's methods come from its role classes, each over QueueBase: none is written on
    Queue itself, and every public method has one home."""
    from labqueue.roles import Queue, QueueBase

    assert [name for name in vars(Queue) if not name.startswith("__")] == []
    roles = [cls for cls in Queue.__mro__ if cls not in (Queue, QueueBase, object)]
    assert roles and all(issubclass(cls, QueueBase) for cls in roles)
    homes: dict[str, list[str]] = {}
    for cls in roles:
        for name in vars(cls):
            if not name.startswith("_"):
                homes.setdefault(name, []).append(cls.__name__)
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}


def test_no_import_circle_in_labqueue():
    assert import_cycles(module_imports(CORE)) == []


def test_an_import_circle_through_a_package_init_is_found(tmp_path):
    """The circle labqueue had (backends -> postgres -> postgres.queue -> postgres.driver ->
    backends), laid out again: the check must name it."""
    files = {
        "__init__.py": "",
        "backends.py": "def open_queue():\n    from .postgres import PgJobQueue\n",
        "postgres/__init__.py": "from .queue import PgJobQueue\n",
        "postgres/queue.py": "from .driver import PgDriver\n",
        "postgres/driver.py": "from ..backends import redact\n",
    }
    for name, text in files.items():
        (tmp_path / "pkg" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "pkg" / name).write_text(text)
    assert import_cycles(module_imports(tmp_path / "pkg")) == [
        "pkg.backends -> pkg.postgres -> pkg.postgres.queue -> pkg.postgres.driver -> pkg.backends"
    ]
