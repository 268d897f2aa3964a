"""Course tasks that work on a fresh machine with nothing but Python 3.10+:

    python tasks.py lab        open the course in JupyterLab (notebook 00)
    python tasks.py test       run the whole test suite, notebooks and browser test included
    python tasks.py execute NB [NB ...]   re-run notebooks in place, saving their outputs
    python tasks.py bench [ARGS]          labqueue against its peers (python -m labqueue.bench)
    python tasks.py chaos [ARGS]          a chaos run of any size (python -m labqueue.chaos)

Each task creates ./.venv on first use and installs what it needs into it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
VENV = ROOT / ".venv"
BIN = VENV / ("Scripts" if os.name == "nt" else "bin")
PYTHON = BIN / ("python.exe" if os.name == "nt" else "python")
CHROMIUM = "/usr/bin/chromium"


def ensure_venv(extra: str) -> None:
    """Create .venv and install the project with `extra`; cheap when already done."""
    if sys.version_info < (3, 10):  # noqa: UP036 (tasks.py runs before anything is installed)
        sys.exit(f"labqueue needs Python 3.10 or newer; this is {sys.version.split()[0]}")
    if not PYTHON.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    pyproject = ROOT / "pyproject.toml"
    # The test extra includes the notebooks extra, so a test install also covers `lab`.
    covering = [extra, "test"] if extra == "notebooks" else [extra]
    stamps = [VENV / f".installed-{name}" for name in covering]
    if any(s.exists() and s.stat().st_mtime >= pyproject.stat().st_mtime for s in stamps):
        return
    stamp = stamps[0]
    run([PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    run([PYTHON, "-m", "pip", "install", "--quiet", "-e", f".[{extra}]"])
    stamp.touch()


def ensure_chromium() -> None:
    """The browser test drives Debian's Chromium; install it when missing and allowed."""
    if Path(CHROMIUM).exists() or os.name == "nt":
        return
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing chromium for the browser test", flush=True)
        run(["apt-get", "update", "-qq"])
        run(["apt-get", "install", "-y", "-qq", "chromium"], env={"DEBIAN_FRONTEND": "noninteractive"})
    else:
        print(f"note: {CHROMIUM} is missing, so the browser test will be skipped", flush=True)


def run(cmd: list, env: dict | None = None) -> None:
    full_env = {**os.environ, **(env or {})}
    result = subprocess.run([str(c) for c in cmd], cwd=ROOT, env=full_env)
    if result.returncode != 0:
        sys.exit(result.returncode)


def lab(args: list[str]) -> None:
    ensure_venv("notebooks")
    # Jupyter refuses to run as root (containers, Binder-like machines) without this flag.
    as_root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    # `-m jupyterlab`, not `-m jupyter lab`: the latter looks up `jupyter-lab` on PATH and can
    # start another installation's JupyterLab. The root is the repository, so data/ and the
    # package sit beside the notebooks in the file browser.
    course = ["notebooks/00_versions.ipynb", f"--ServerApp.root_dir={ROOT}"]
    run([PYTHON, "-m", "jupyterlab", *course, *as_root, *args])


def test(args: list[str]) -> None:
    ensure_venv("test")
    ensure_chromium()
    run([PYTHON, "-m", "ruff", "check", "."])
    # Paths among the arguments (tests/test_queue.py, notebooks/02_leases.ipynb, a::node id)
    # replace the default of everything; options such as -m "not browser" add to it.
    named = any(Path(arg.split("::")[0]).exists() for arg in args if not arg.startswith("-"))
    run([PYTHON, "-m", "pytest", "--nbval-lax", *([] if named else ["tests", "notebooks"]), *args])


def execute(args: list[str]) -> None:
    ensure_venv("test")
    if not args:
        sys.exit("usage: python tasks.py execute NOTEBOOK [NOTEBOOK ...]")
    run([PYTHON, "-m", "labqueue.lab.execute", *args])


def bench(args: list[str]) -> None:
    ensure_venv("test")  # the test extra includes the peers the benchmark races
    run([PYTHON, "-m", "labqueue.bench", *args])


def chaos(args: list[str]) -> None:
    ensure_venv("notebooks")
    run([PYTHON, "-m", "labqueue.chaos", *args])


TASKS = {"lab": lab, "test": test, "execute": execute, "bench": bench, "chaos": chaos}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in TASKS:
        sys.exit(__doc__)
    TASKS[sys.argv[1]](sys.argv[2:])
