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


def core_modules() -> list[Path]:
    return sorted(CORE.glob("*.py"))


def imported_names(path: Path) -> set[str]:
    """Every module a file imports, relative imports resolved against the core package."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = "labqueue" if node.level == 1 else ""
            module = ".".join(part for part in (base, node.module or "") if part)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names


def test_no_core_module_imports_the_course_or_the_tools():
    offenders = {
        path.name: sorted(n for n in imported_names(path) if n.startswith(ROOMS))
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
