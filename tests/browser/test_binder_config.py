"""The Binder configuration agrees with pyproject.toml: the project is installed from the checkout,
everything the notebooks import is pinned to one exact version that the project accepts, and the
Python that Binder builds is one the project supports. Every module the course imports (in a
notebook, a lab module, or a test notebook 11 runs) comes from a package Binder installs, and
Binder's postBuild installs the same Jupyter settings as `python tasks.py lab`."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import os
import re
import sys
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

from browser_lab import ROOT, load_tasks
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10 has no tomllib; pip carries the same parser
    try:
        import tomli as tomllib
    except ImportError:
        from pip._vendor import tomli as tomllib

BINDER = ROOT / "binder"


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def binder_lines() -> list[str]:
    text = (BINDER / "requirements.txt").read_text()
    return [line.split("#")[0].strip() for line in text.splitlines() if line.split("#")[0].strip()]


def binder_pins() -> dict[str, Requirement]:
    pins = {}
    for line in binder_lines():
        if line.startswith("-"):
            continue
        req = Requirement(line)
        pins[canonicalize_name(req.name)] = req
    return pins


def test_binder_installs_the_project_from_the_checkout() -> None:
    assert "-e ." in binder_lines(), "binder/requirements.txt must install this repository (-e .)"


def test_binder_pins_every_notebook_dependency_exactly() -> None:
    project = pyproject()["project"]
    extras = project["optional-dependencies"]
    # notebook 17 runs the queue on PostgreSQL, so the course needs the postgres extra too
    needed = [Requirement(r) for r in project["dependencies"] + extras["notebooks"] + extras["postgres"]]
    pins = binder_pins()
    for req in needed:
        name = canonicalize_name(req.name)
        assert name in pins, f"binder/requirements.txt does not pin {req.name}"
        specs = list(pins[name].specifier)
        assert len(specs) == 1 and specs[0].operator == "==", f"{pins[name]} is not one exact version"
        version = Version(specs[0].version)
        assert req.specifier.contains(version), f"binder pins {pins[name]}, but pyproject needs {req}"


def test_binder_python_is_supported() -> None:
    runtime = (BINDER / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-(\d+\.\d+)", runtime)
    assert match, f"binder/runtime.txt should read like python-3.11, got {runtime!r}"
    supported = SpecifierSet(pyproject()["project"]["requires-python"])
    assert supported.contains(Version(match.group(1))), f"{runtime} is outside requires-python {supported}"


def test_readme_badge_opens_jupyterlab_at_the_first_notebook() -> None:
    """The badge is the link `python tasks.py binder-url` prints for github.com/OWNER/labqueue,
    and the README says how to get the real one."""
    tasks = load_tasks()
    readme = (ROOT / "README.md").read_text()
    badge = re.search(r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]\((?P<url>[^)]+)\)", readme)
    assert badge, "README.md has no Binder badge"
    url = urlparse(badge["url"])
    assert url.netloc == "mybinder.org" and url.path.startswith("/v2/gh/"), badge["url"]
    (urlpath,) = parse_qs(url.query)["urlpath"]
    assert unquote(urlpath) == f"lab/tree/{tasks.FIRST_NOTEBOOK}", urlpath
    assert badge["url"] == tasks.binder_url("https://github.com/OWNER/labqueue.git")
    assert "python tasks.py binder-url" in readme, "README.md should say how to get the real badge link"
    first = ROOT / tasks.FIRST_NOTEBOOK
    assert first.is_file(), f"the course opens at {tasks.FIRST_NOTEBOOK}, which is missing"


def test_binder_post_build_installs_the_lab_settings() -> None:
    """repo2docker runs binder/postBuild (it must be executable); it runs `tasks.py lab-config`,
    the same step `python tasks.py lab` runs in ./.venv-lab; the settings it installs exist."""
    tasks = load_tasks()
    post_build = BINDER / "postBuild"
    assert os.access(post_build, os.X_OK), "binder/postBuild must be executable"
    script = post_build.read_text()
    assert re.search(r"^python .*tasks\.py\" lab-config$", script, re.M), script
    for source, _ in (tasks.SERVER_CONFIG, tasks.LAB_OVERRIDES):
        json.loads((ROOT / source).read_text())
    culling = json.loads((ROOT / tasks.SERVER_CONFIG[0]).read_text())["MappingKernelManager"]
    assert culling["cull_idle_timeout"] > 0 and culling["cull_connected"] is True, culling


# --- every module the course imports comes from a package Binder installs ---------------------


def top_level_imports(source: str) -> set[str]:
    """The top-level names of every absolute import in the code, however deeply nested."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def notebook_code(path: Path) -> str:
    """A notebook's code cells as Python: IPython's %magic and !shell lines left out."""
    cells = [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]
    lines = [
        line
        for cell in cells
        for line in "".join(cell["source"]).splitlines()
        if not line.lstrip().startswith(("%", "!"))
    ]
    return "\n".join(lines)


def course_sources() -> dict[str, str]:
    """What runs in a learner's kernel: the notebooks, the lab modules they call, and the
    tests notebook 11 offers to run (tests/test_*.py with their conftest.py)."""
    sources = {p.relative_to(ROOT).as_posix(): notebook_code(p) for p in (ROOT / "notebooks").glob("*.ipynb")}
    files = [*(ROOT / "labqueue" / "lab").rglob("*.py"), *(ROOT / "tests").glob("test_*.py")]
    files.append(ROOT / "tests" / "conftest.py")
    sources |= {p.relative_to(ROOT).as_posix(): p.read_text() for p in files}
    return sources


def test_every_module_the_course_imports_is_pinned_for_binder() -> None:
    provided = importlib.metadata.packages_distributions()
    pins = set(binder_pins())
    # the tests' own helper modules (tests/cli_helpers.py ...) come with the checkout
    local = {p.stem for folder in ("tests", "notebooks") for p in (ROOT / folder).glob("*.py")}
    missing = []
    for where, source in sorted(course_sources().items()):
        for name in sorted(top_level_imports(source)):
            if name in sys.stdlib_module_names or name == "labqueue" or name in local:
                continue
            dists = {canonicalize_name(d) for d in provided.get(name, [])}
            if not dists:
                missing.append(f"{where} imports {name}, which no installed package provides")
            elif not dists & pins:
                found = ", ".join(sorted(dists))
                missing.append(f"{where} imports {name} (from {found}), which binder does not pin")
    assert missing == [], "binder/requirements.txt lacks what the course imports:\n" + "\n".join(missing)


def test_the_import_check_sees_nested_imports_and_skips_magics(tmp_path: Path) -> None:
    assert top_level_imports("def f():\n    import yaml.x\n    from toml import a\nfrom . import b") == {
        "yaml",
        "toml",
    }
    nb = tmp_path / "x.ipynb"
    cell = {"cell_type": "code", "source": ["%matplotlib inline\n", "import six"]}
    nb.write_text(json.dumps({"cells": [cell]}))
    assert top_level_imports(notebook_code(nb)) == {"six"}
