"""What the distribution carries: one version everywhere, py.typed in the wheel, the
project's links and classifiers, and a changelog entry for this version."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import labqueue

ROOT = Path(__file__).resolve().parent.parent


def pyproject() -> dict:
    toml = pytest.importorskip("tomllib", reason="tomllib comes with Python 3.11")
    return toml.loads((ROOT / "pyproject.toml").read_text())


def test_the_version_is_written_once_and_the_command_says_it():
    settings = pyproject()
    project = settings["project"]
    assert "version" not in project and "version" in project["dynamic"]
    assert settings["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "labqueue.__version__"}
    shown = subprocess.run([sys.executable, "-m", "labqueue", "--version"], capture_output=True, text=True)
    assert shown.stdout.strip() == f"labqueue {labqueue.__version__}"


def test_the_changelog_has_this_versions_entry():
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{labqueue.__version__}] - " in changelog
    assert changelog.index(f"## [{labqueue.__version__}]") < changelog.index("## [0.1.0]")


def test_the_project_names_its_links_and_classifiers():
    project = pyproject()["project"]
    assert {"Homepage", "Changelog", "Issues"} <= set(project["urls"])
    assert "Typing :: Typed" in project["classifiers"]


def test_the_top_level_help_has_no_markup():
    shown = subprocess.run([sys.executable, "-m", "labqueue", "--help"], capture_output=True, text=True)
    assert shown.returncode == 0 and "``" not in shown.stdout and "COMMAND --help" in shown.stdout


@pytest.mark.slow
def test_a_built_wheel_carries_py_typed_and_the_version(tmp_path):
    assert (Path(labqueue.__file__).parent / "py.typed").is_file()
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(ROOT)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    if built.returncode != 0 and "Could not find a version" in built.stderr:
        pytest.skip("the build backend cannot be downloaded here (offline)")
    assert built.returncode == 0, built.stderr[-2000:]
    [wheel] = tmp_path.glob("labqueue-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "labqueue/py.typed" in names
    assert f"\nVersion: {labqueue.__version__}\n" in metadata
