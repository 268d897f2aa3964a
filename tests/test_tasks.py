"""tasks.py's pure parts: the Binder link from a git remote, the course link a started JupyterLab
prints, the Jupyter settings `lab-config` installs, and what rebuilds the course environment."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[1]


def load_tasks():
    spec = importlib.util.spec_from_file_location("labqueue_tasks", ROOT / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


tasks = load_tasks()
FIRST = "lab%2Ftree%2F" + tasks.FIRST_NOTEBOOK.replace("/", "%2F")


@pytest.mark.parametrize(
    "remote",
    [
        "https://github.com/ada/labqueue",
        "https://github.com/ada/labqueue.git",
        "https://github.com/ada/labqueue/",
        "https://ada@github.com/ada/labqueue.git",
        "http://github.com/ada/labqueue.git",
        "git@github.com:ada/labqueue.git",
        "git@github.com:ada/labqueue",
        "ssh://git@github.com/ada/labqueue.git",
        "ssh://git@github.com:22/ada/labqueue.git",
        "git://github.com/ada/labqueue.git",
        "  https://github.com/ada/labqueue.git\n",  # as `git remote get-url` prints it
    ],
)
def test_binder_url_from_every_github_remote_form(remote: str) -> None:
    assert tasks.binder_url(remote) == f"https://mybinder.org/v2/gh/ada/labqueue/HEAD?urlpath={FIRST}"


def test_binder_url_keeps_a_renamed_repository_and_dotted_names() -> None:
    url = tasks.binder_url("git@github.com:Ada-L/queue.course.git")
    assert url.startswith("https://mybinder.org/v2/gh/Ada-L/queue.course/HEAD?"), url


def test_binder_url_opens_the_first_notebook_in_jupyterlab() -> None:
    url = urlparse(tasks.binder_url("https://github.com/ada/labqueue"))
    (urlpath,) = parse_qs(url.query)["urlpath"]
    assert unquote(urlpath) == f"lab/tree/{tasks.FIRST_NOTEBOOK}"


def test_binder_url_encodes_a_branch_with_a_slash() -> None:
    url = tasks.binder_url("https://github.com/ada/labqueue", ref="workshop/march")
    assert "/v2/gh/ada/labqueue/workshop%2Fmarch?" in url, url


@pytest.mark.parametrize(
    "remote",
    [
        "https://gitlab.com/ada/labqueue.git",
        "/srv/git/labqueue",
        "../labqueue",
        "https://github.com/ada",
        "https://github.com.evil.example/ada/labqueue",
        "",
    ],
)
def test_binder_url_refuses_what_is_not_a_github_repository(remote: str) -> None:
    with pytest.raises(ValueError, match="not a GitHub repository"):
        tasks.binder_url(remote)


def test_course_link_carries_the_token_and_the_first_notebook() -> None:
    info = {"url": "http://localhost:8888/", "token": "abc123"}
    assert tasks.course_link(info) == f"http://localhost:8888/lab/tree/{tasks.FIRST_NOTEBOOK}?token=abc123"
    assert tasks.course_link({"url": "http://localhost:8888/", "token": ""}).endswith(".ipynb")


def test_lab_command_opens_the_first_notebook_from_the_course_environment() -> None:
    cmd = tasks.lab_command(["--no-browser"])
    assert cmd[:3] == [str(tasks.LAB_PYTHON), "-m", "jupyterlab"]
    assert f"--LabApp.default_url=/lab/tree/{tasks.FIRST_NOTEBOOK}" in cmd
    assert cmd[-1] == "--no-browser"


def test_lab_config_installs_culling_and_quiet_defaults(tmp_path: Path) -> None:
    server_file = tmp_path / "etc/jupyter/jupyter_server_config.json"
    server_file.parent.mkdir(parents=True)
    # what another package (or repo2docker) may have put there is kept
    server_file.write_text(json.dumps({"ServerApp": {"ip": "0.0.0.0"}, "MappingKernelManager": {"x": 1}}))
    tasks.install_lab_config(tmp_path)
    server = json.loads(server_file.read_text())
    assert server["ServerApp"] == {"ip": "0.0.0.0"}
    culling = server["MappingKernelManager"]
    assert culling["x"] == 1
    assert 0 < culling["cull_idle_timeout"] <= 3600 and culling["cull_interval"] > 0
    assert culling["cull_connected"] is True  # learners leave earlier notebooks open
    overrides = json.loads((tmp_path / "share/jupyter/lab/settings/overrides.d/labqueue.json").read_text())
    notification = overrides["@jupyterlab/apputils-extension:notification"]
    assert notification == {"checkForUpdates": False, "fetchNews": "false"}
    tracker = overrides["@jupyterlab/notebook-extension:tracker"]
    assert tracker["autoStartDefaultKernel"] is True  # a culled kernel comes back without a dialog
    assert tracker["kernelShutdown"] is True  # closing a notebook's tab frees its kernel's memory


def test_every_input_of_the_course_environment_exists_and_rebuilds_it() -> None:
    for name in tasks.LAB_ENV_INPUTS:
        assert (ROOT / name).is_file(), name
    assert tasks.SERVER_CONFIG[0] in tasks.LAB_ENV_INPUTS and tasks.LAB_OVERRIDES[0] in tasks.LAB_ENV_INPUTS
