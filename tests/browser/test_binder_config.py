"""The Binder configuration agrees with pyproject.toml: the project is installed from the checkout,
everything the notebooks import is pinned to one exact version that the project accepts, and the
Python that Binder builds is one the project supports."""

from __future__ import annotations

import re
import sys
from urllib.parse import parse_qs, unquote, urlparse

from browser_lab import ROOT
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
    needed = [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["notebooks"]]
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


def test_readme_badge_opens_jupyterlab_on_notebook_00() -> None:
    readme = (ROOT / "README.md").read_text()
    badge = re.search(r"\[!\[Binder\]\(https://mybinder\.org/badge_logo\.svg\)\]\((?P<url>[^)]+)\)", readme)
    assert badge, "README.md has no Binder badge"
    url = urlparse(badge["url"])
    assert url.netloc == "mybinder.org" and url.path.startswith("/v2/gh/"), badge["url"]
    (urlpath,) = parse_qs(url.query)["urlpath"]
    assert unquote(urlpath) == "lab/tree/notebooks/00_versions.ipynb", urlpath
    assert (ROOT / "notebooks" / "00_versions.ipynb").is_file()
