"""What a notebook's kernel holds of the tutorial's code: put back to the course's, and
compared with it.

A Part 1 notebook's cells change the tutorial's code in two places: names in the kernel's
namespace (a cell defines `JobQueue`, `FAIL` or `KeepAlive` there) and the package's own
classes (`add_to_class(JobQueue)` on the `JobQueue` a notebook imported sets the method on
`labqueue.tutorial.jobqueue.JobQueue`). `reset()` undoes both; `differences()` reads both,
method by method, so that what it reports is what the kernel would run.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import linecache
import textwrap
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from .sections import MODULES, Section, package_text, split

PACKAGE_NAME = __package__ or "labqueue.tutorial"
MISSING = object()


def _module(name: str) -> ModuleType:
    return importlib.import_module(f"{PACKAGE_NAME}.{name}")


def _pristine() -> dict[str, tuple[dict[str, Any], dict[str, dict[str, Any]]]]:
    """Each module's names and each of its classes' attributes, as the course's text made
    them: taken when this module is first imported, before any cell has run."""
    found = {}
    for name in MODULES:
        module = _module(name)
        classes = {
            k: dict(v.__dict__)
            for k, v in vars(module).items()
            if inspect.isclass(v) and v.__module__ == module.__name__
        }
        found[name] = (dict(vars(module)), classes)
    return found


PRISTINE = _pristine()
UNSETTABLE = ("__dict__", "__weakref__")


def restore_package() -> None:
    """Put the package's modules and classes back as the course's text made them."""
    for name, (names, classes) in PRISTINE.items():
        module = _module(name)
        for key, value in names.items():
            if vars(module).get(key, MISSING) is not value:
                setattr(module, key, value)
        for class_name, attributes in classes.items():
            cls = names[class_name]
            for key in [k for k in vars(cls) if k not in attributes]:
                delattr(cls, key)
            for key, value in attributes.items():
                if key not in UNSETTABLE and vars(cls).get(key, MISSING) is not value:
                    setattr(cls, key, value)


def _course_sections() -> Iterator[tuple[str, Section]]:
    for module in MODULES:
        for section in split(package_text(module))[1]:
            yield module, section


def reset(namespace: MutableMapping[str, Any], notebook: str) -> list[str]:
    """Give the kernel the course's code back: the package's classes restored, this
    notebook's saved cells run again from the course's text where the kernel holds their
    names, and the names it holds of earlier notebooks' cells bound to the package's own.
    Returns the names put back."""
    restore_package()
    put_back: list[str] = []
    for number, (module, section) in enumerate(_course_sections()):
        held = sorted(n for n in section.names if n in namespace)
        if not held or section.notebook > notebook:
            continue
        if section.notebook == notebook:
            filename = f"<course {module}.py, cell {number} of the course>"
            lines = section.body.splitlines(keepends=True)
            linecache.cache[filename] = (len(section.body), None, lines, filename)  # for inspect
            exec(compile(section.body, filename, "exec"), namespace)  # the course's own text
            put_back += held
            continue
        for name in held:
            course = getattr(_module(module), name, MISSING)
            if _same_kind(namespace[name], course) and namespace[name] is not course:
                namespace[name] = course
                put_back.append(name)
    return put_back


def _same_kind(value: Any, course: Any) -> bool:
    """Whether a kernel's name holds the course's definition of that name (perhaps edited),
    not a variable of the same name: code for code, text for text."""
    if course is MISSING:
        return False
    if inspect.isfunction(course) or inspect.isclass(course):
        return inspect.isfunction(value) or inspect.isclass(value)
    return type(value) is type(course)


@dataclass(frozen=True)
class Definition:
    """One definition of a saved cell: where the kernel keeps it, and the course's text."""

    module: str
    notebook: str
    owner: str | None  # the class it belongs to, or None for a name of the module
    name: str
    course: str  # the course's source of it
    constant: bool


def _lines(body: str, node: ast.AST) -> str:
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])  # type: ignore[attr-defined]
    return textwrap.dedent("\n".join(body.splitlines()[first - 1 : node.end_lineno]))  # type: ignore[attr-defined]


def _owner(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """`JobQueue` for a function under `@add_to_class(JobQueue)`."""
    for deco in node.decorator_list:
        named = (
            isinstance(deco, ast.Call) and isinstance(deco.func, ast.Name) and deco.func.id == "add_to_class"
        )
        if named and deco.args and isinstance(deco.args[0], ast.Name):  # type: ignore[attr-defined]
            return deco.args[0].id  # type: ignore[attr-defined]
    return None


def definitions() -> list[Definition]:
    """Every function, method and constant of the course's saved cells, in course order."""
    found = []
    for module, section in _course_sections():
        tree = ast.parse(section.body)
        for node in tree.body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                text = _lines(section.body, node)
                found.append(Definition(module, section.notebook, _owner(node), node.name, text, False))
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                        text = _lines(section.body, item)
                        found.append(Definition(module, section.notebook, node.name, item.name, text, False))
            elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
                text = _lines(section.body, node)
                found.append(Definition(module, section.notebook, None, node.targets[0].id, text, True))
    return found


def _lookup(namespace: MutableMapping[str, Any], module: str, name: str) -> Any:
    course = PRISTINE[module][0].get(name, MISSING)
    if name in namespace and (course is MISSING or _same_kind(namespace[name], course)):
        return namespace[name]
    return getattr(_module(module), name, MISSING)


def held(namespace: MutableMapping[str, Any], d: Definition) -> Any:
    """The object the kernel holds for a definition, or MISSING."""
    if d.owner is None:
        return _lookup(namespace, d.module, d.name)
    cls = _lookup(namespace, d.module, d.owner)
    return vars(cls).get(d.name, MISSING) if inspect.isclass(cls) else MISSING


def _plain(value: Any) -> bool:
    """Data compared by value: text, numbers, and tuples of them."""
    if isinstance(value, tuple | frozenset):
        return all(_plain(v) for v in value)
    return isinstance(value, str | int | float | bool | type(None))


def kernel_text(value: Any, d: Definition) -> str | None:
    """The kernel's version of a definition as source, None when it has none."""
    if value is MISSING:
        return None
    if d.constant:
        course = PRISTINE[d.module][0].get(d.name, MISSING)
        if not _plain(value) or value == course:
            return d.course  # a table of functions, say, is compared by its functions
        if isinstance(value, str) and "\n" in value:
            return f'{d.name} = """{value}"""'  # as the course writes its SQL
        return f"{d.name} = {value!r}"
    function = inspect.unwrap(value.__func__ if isinstance(value, classmethod | staticmethod) else value)
    try:
        return textwrap.dedent(inspect.getsource(function)).rstrip("\n")
    except (OSError, TypeError):
        return f"# {d.name}: {value!r}, whose source this kernel cannot show"


def differences(namespace: MutableMapping[str, Any], notebook: str) -> str:
    """How the kernel's definitions differ from the course's, as a unified diff per module
    (empty when they do not). Definitions of notebooks after this one count only where the
    kernel holds them."""
    import difflib

    out: list[str] = []
    for module in MODULES:
        course, ours = [], []
        for d in (d for d in definitions() if d.module == module):
            mine = kernel_text(held(namespace, d), d)
            if mine is None and d.notebook > notebook:
                continue
            course.append(d.course + "\n\n")
            ours.append((mine if mine is not None else f"# {d.name}: not defined in this kernel") + "\n\n")
        lines = [line for part in course for line in part.splitlines(keepends=True)]
        mine_lines = [line for part in ours for line in part.splitlines(keepends=True)]
        out += difflib.unified_diff(lines, mine_lines, f"course/{module}.py", f"this kernel's {module}.py")
    return "".join(out)
