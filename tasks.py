"""Course tasks that work on a fresh machine with nothing but Python 3.10+:

    python tasks.py lab        open the course in JupyterLab (at its first notebook)
    python tasks.py test       run the whole test suite, notebooks and browser test included
    python tasks.py execute NB [NB ...]   re-run notebooks in place, saving their outputs
    python tasks.py bench [ARGS]          labqueue against its peers (python -m labqueue.bench)
    python tasks.py bench pg [ARGS]       PostgreSQL beside SQLite (python -m labqueue.bench.pg)
    python tasks.py chaos [ARGS]          a chaos run of any size (python -m labqueue.chaos)
    python tasks.py binder-url [REMOTE] [--ref REF]   the Binder link (and badge) for this repository
    python tasks.py site [--remote URL]   the course and the package's guide and reference as a website
                                          in build/site/ (offline)

Two environments, each made on first use and remade when what it is built from changes:
./.venv-lab, the course's, built exactly as Binder builds it (a fresh virtual environment,
`pip install -r binder/requirements.txt`, then binder/postBuild's step), for `lab` and `chaos`;
and ./.venv, the developers', with the test extra, for `test`, `execute` and `bench`.
Two more tasks are steps of those: `lab-env` builds ./.venv-lab only, and `lab-config` installs
the course's Jupyter settings into the running interpreter's environment (binder/postBuild runs it).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import venv
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parent
BINDER = ROOT / "binder"
SCRIPTS = "Scripts" if os.name == "nt" else "bin"
EXE = "python.exe" if os.name == "nt" else "python"
VENV = ROOT / ".venv"  # the developers' environment: the test extra
PYTHON = VENV / SCRIPTS / EXE
LAB_VENV = ROOT / ".venv-lab"  # the course's environment: what Binder builds from binder/
LAB_PYTHON = LAB_VENV / SCRIPTS / EXE
CHROMIUM = "/usr/bin/chromium"

# The notebook the course opens at: here, in the README's Binder badge and in its test.
FIRST_NOTEBOOK = "notebooks/00_introduction.ipynb"

# What ./.venv-lab is built from; a change to any of them rebuilds it from nothing, as Binder does.
LAB_ENV_INPUTS = (
    "binder/requirements.txt",
    "binder/runtime.txt",
    "binder/postBuild",
    "binder/jupyter_server_config.json",
    "binder/overrides.json",
    "pyproject.toml",  # `-e .` installs the package's own dependencies and scripts
)
# The course's Jupyter settings (binder/), and where `lab-config` puts them in an environment.
SERVER_CONFIG = ("binder/jupyter_server_config.json", "etc/jupyter/jupyter_server_config.json")
LAB_OVERRIDES = ("binder/overrides.json", "share/jupyter/lab/settings/overrides.d/labqueue.json")


def check_python() -> None:
    if sys.version_info < (3, 10):  # noqa: UP036 (tasks.py runs before anything is installed)
        sys.exit(f"labqueue needs Python 3.10 or newer; this is {sys.version.split()[0]}")


def ensure_venv(extra: str, project_after: Callable[[], None] | None = None) -> None:
    """Create .venv and install the project with `extra`; cheap when already done. With
    `project_after`, the dependencies go in first, then `project_after()` is called (it waits
    for ./.venv-lab's build, whose `-e .` writes labqueue.egg-info in this checkout too), then
    the project itself."""
    check_python()
    if not PYTHON.exists():
        print(f"creating {VENV}", flush=True)
        venv.EnvBuilder(with_pip=True).create(VENV)
    pyproject = ROOT / "pyproject.toml"
    stamp = VENV / f".installed-{extra}"
    if stamp.exists() and stamp.stat().st_mtime >= pyproject.stat().st_mtime:
        return
    started = time.monotonic()
    print(f"installing .[{extra}] into {VENV}: a minute or two, once per pyproject.toml", flush=True)
    run([PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    needs = dependencies(extra) if project_after is not None else None
    if needs:  # these touch nothing in the checkout
        run([PYTHON, "-m", "pip", "install", "--quiet", *needs])
    if project_after is not None:
        project_after()
    # With its dependencies in, the project alone (resolving them all again costs 25 s)
    run([PYTHON, "-m", "pip", "install", "--quiet", *(["--no-deps"] if needs else []), "-e", f".[{extra}]"])
    stamp.touch()
    print(f"installed .[{extra}] into {VENV} in {time.monotonic() - started:.0f} s", flush=True)


def dependencies(extra: str) -> list[str] | None:
    """What `.[extra]` requires, read from pyproject.toml with the project's own extras
    (labqueue[notebooks,...]) expanded; None without tomllib (Python 3.10)."""
    try:
        import tomllib
    except ImportError:
        return None
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project.get("optional-dependencies", {})
    found, todo, seen = list(project.get("dependencies", [])), [extra], set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for requirement in extras.get(name, []):
            own = re.fullmatch(rf"{re.escape(project['name'])}\[([^\]]*)\]", requirement.strip())
            if own:
                todo += [e.strip() for e in own.group(1).split(",")]
            else:
                found.append(requirement)
    return list(dict.fromkeys(found))


def ensure_test_setup() -> None:
    """Everything `test` needs, made side by side: ./.venv (the test extra) in this thread,
    ./.venv-lab and, when missing, Chromium (apt) in two more. On a fresh machine with two
    CPUs the two environments took 116 s against 188 s one after the other, and
    Chromium's 40 s disappear into them. Only the two installs of the project itself, which
    both write labqueue.egg-info in this checkout, take turns."""
    failed: list[BaseException] = []

    def started(step: Callable[[], None], name: str) -> threading.Thread:
        def guarded() -> None:
            try:
                step()
            except BaseException as exc:  # run() ends a failed step with SystemExit
                failed.append(exc)

        thread = threading.Thread(target=guarded, name=name)
        thread.start()
        return thread

    lab_env, chromium = started(ensure_lab_env, "lab-env"), started(ensure_chromium, "chromium")
    try:
        ensure_venv("test", project_after=lab_env.join)
    finally:
        lab_env.join()
        chromium.join()
    if failed:
        raise failed[0]


def lab_env_digest() -> str:
    digest = hashlib.sha256()
    for name in LAB_ENV_INPUTS:
        path = ROOT / name
        digest.update(name.encode() + b"\0" + (path.read_bytes() if path.exists() else b"-") + b"\0")
    return digest.hexdigest()


def runtime_python() -> tuple[str, str]:
    """The interpreter to build ./.venv-lab with: binder/runtime.txt's Python (python-3.11) when
    it is on PATH, as Binder uses; else this one. Returns (command, what to call it)."""
    runtime = (BINDER / "runtime.txt").read_text().strip()
    match = re.fullmatch(r"python-(\d+\.\d+)", runtime)
    here = f"{sys.version_info.major}.{sys.version_info.minor}"
    if match and match.group(1) != here and os.name != "nt":
        found = shutil.which(f"python{match.group(1)}")
        if found:
            return found, f"Python {match.group(1)} (binder/runtime.txt)"
        print(
            f"note: binder/runtime.txt asks for Python {match.group(1)}, which is not on PATH;"
            f" building with this Python {here}",
            flush=True,
        )
    return sys.executable, f"Python {here}"


def ensure_lab_env() -> None:
    """Build ./.venv-lab as repo2docker builds Binder's image from binder/: a fresh virtual
    environment, `pip install -r binder/requirements.txt` from the repository root, then
    binder/postBuild's step. Nothing else goes in, so a package the course needs and
    binder/requirements.txt lacks fails here as it would on Binder. Cheap when up to date."""
    check_python()
    stamp = LAB_VENV / ".built-from"
    digest = lab_env_digest()
    if LAB_PYTHON.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return
    with build_lock():
        if LAB_PYTHON.exists() and stamp.exists() and stamp.read_text().strip() == digest:
            return  # another task built it while this one waited
        build_lab_env(digest)


@contextlib.contextmanager
def build_lock() -> Iterator[None]:
    """One build of ./.venv-lab at a time (two tasks started together must not both rebuild it)."""
    try:
        import fcntl
    except ImportError:  # Windows: no lock
        yield
        return
    lock = ROOT / "work" / ".venv-lab.lock"  # work/ is git-ignored scratch
    lock.parent.mkdir(exist_ok=True)
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def build_lab_env(digest: str) -> None:
    stamp = LAB_VENV / ".built-from"
    started = time.monotonic()
    if LAB_VENV.exists():
        print(f"binder/ or pyproject.toml changed: rebuilding {LAB_VENV} from nothing", flush=True)
        shutil.rmtree(LAB_VENV)
    interpreter, which = runtime_python()
    print(
        f"building {LAB_VENV} with {which}, as Binder does: pip install -r binder/requirements.txt"
        " (a minute or two)",
        flush=True,
    )
    if interpreter == sys.executable:
        venv.EnvBuilder(with_pip=True).create(LAB_VENV)
    else:
        run([interpreter, "-m", "venv", LAB_VENV])
    # Never committed, never linted: the environment ignores itself.
    (LAB_VENV / ".gitignore").write_text("*\n")
    run([LAB_PYTHON, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    run([LAB_PYTHON, "-m", "pip", "install", "--quiet", "-r", "binder/requirements.txt"])
    run([LAB_PYTHON, "-m", "pip", "check"])  # e.g. a jupyterlab_widgets pin ipywidgets refuses
    run([LAB_PYTHON, "tasks.py", "lab-config"])  # what binder/postBuild runs
    stamp.write_text(digest + "\n")
    print(f"built {LAB_VENV} in {time.monotonic() - started:.0f} s", flush=True)


def lab_config(args: list[str]) -> None:
    """Install the course's Jupyter settings into the environment of the Python running this.
    binder/postBuild runs this on Binder; ensure_lab_env runs it in ./.venv-lab."""
    install_lab_config(Path(sys.prefix))
    print(f"installed the course's Jupyter settings in {sys.prefix}", flush=True)


def install_lab_config(prefix: Path) -> None:
    """The server's settings (idle kernels culled) into <prefix>/etc/jupyter, merged into what
    is there, and JupyterLab's defaults (no news question, no update check, no kernel dialog,
    a notebook's kernel shut down with its tab) into <prefix>/share/jupyter/lab/settings/overrides.d."""
    source, target = SERVER_CONFIG
    server = json.loads((ROOT / source).read_text())
    path = prefix / target
    if path.exists():  # keep what is there, our sections win
        merged = json.loads(path.read_text())
        for section, values in server.items():
            merged.setdefault(section, {}).update(values)
        server = merged
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(server, indent=2) + "\n")
    source, target = LAB_OVERRIDES
    path = prefix / target
    path.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(ROOT / source, path)


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


def lab_command(args: list[str]) -> list[str]:
    """The JupyterLab command `lab` runs in ./.venv-lab."""
    # Jupyter refuses to run as root (containers, Binder-like machines) without this flag.
    as_root = ["--allow-root"] if hasattr(os, "geteuid") and os.geteuid() == 0 else []
    # `-m jupyterlab`, not `-m jupyter lab`: the latter looks up `jupyter-lab` on PATH and can
    # start another installation's JupyterLab. The root is the repository, so data/ and the
    # package sit beside the notebooks in the file browser. The first notebook is the default
    # URL, so the browser opens there and the link printed with --no-browser leads there too.
    course = [f"--ServerApp.root_dir={ROOT}", f"--LabApp.default_url=/lab/tree/{FIRST_NOTEBOOK}"]
    return [str(LAB_PYTHON), "-m", "jupyterlab", *course, *as_root, *args]


def course_link(info: dict) -> str:
    """The link to the first notebook, token included, from a server's jpserver-PID.json."""
    link = f"{info['url'].rstrip('/')}/lab/tree/{FIRST_NOTEBOOK}"
    return f"{link}?token={info['token']}" if info.get("token") else link


def announce(proc: subprocess.Popen, runtime_dir: Path, timeout: float = 120.0) -> None:
    """Once the server has written its jpserver-PID.json, print the course's link plainly."""
    info_file = runtime_dir / f"jpserver-{proc.pid}.json"
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            info = json.loads(info_file.read_text())
        except (OSError, ValueError):
            time.sleep(0.2)
            continue
        time.sleep(0.5)  # let JupyterLab's own start-up lines come first
        rule = "=" * 78
        print(
            f"\n{rule}\n  The course is open in JupyterLab at {FIRST_NOTEBOOK}."
            f"\n  If no browser window opened, open this link:\n\n    {course_link(info)}\n"
            f"\n  Stop JupyterLab with Ctrl+C (twice).\n{rule}\n",
            flush=True,
        )
        return


def lab(args: list[str]) -> None:
    ensure_lab_env()
    runtime = subprocess.run(
        [str(LAB_PYTHON), "-c", "from jupyter_core.paths import jupyter_runtime_dir as d; print(d())"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    proc = subprocess.Popen(lab_command(args), cwd=ROOT)
    if hasattr(signal, "SIGTERM") and os.name != "nt":  # a stop for us is a stop for JupyterLab
        signal.signal(signal.SIGTERM, lambda *_: proc.terminate())
    try:
        announce(proc, Path(runtime))
        while True:
            try:
                sys.exit(proc.wait())
            except KeyboardInterrupt:  # Ctrl+C reaches JupyterLab too, which asks and stops
                continue
    finally:
        if proc.poll() is None:
            proc.terminate()


def test(args: list[str]) -> None:
    ensure_test_setup()  # the browser test starts JupyterLab with `tasks.py lab`, in ./.venv-lab
    run([PYTHON, "-m", "ruff", "check", "."])
    run([PYTHON, "-m", "mypy"])  # the core, as pyproject.toml's [tool.mypy] says
    # Paths among the arguments (tests/test_queue.py, notebooks/02_leases.ipynb, a::node id)
    # replace the default of everything; options such as -m "not browser" add to it.
    named = any(Path(arg.split("::")[0]).exists() for arg in args if not arg.startswith("-"))
    run(
        [
            PYTHON,
            "-m",
            "pytest",
            "--nbval-lax",
            *parallel(args),
            *([] if named else ["tests", "notebooks"]),
            *args,
        ]
    )


def parallel(args: list[str]) -> list[str]:
    """One test process per CPU (pytest-xdist), each taking whole files: a notebook's cells
    run in order in one kernel, and a browser test file's JupyterLab serves all its notebooks.
    A process more than the CPUs was tried: no faster here, and the tests that race real
    worker processes against the clock (a claim within a second, one scheduled job per period)
    began to fail. `-n 0` (or any -n/--numprocesses, --dist, or -p no:xdist) among the
    arguments chooses otherwise."""
    if any(a == "-n" or a.startswith(("-n", "--numprocesses", "--dist")) or "xdist" in a for a in args):
        return []
    # conftest.py puts the longest files first; xdist would order them by their number of tests
    return ["-n", str(os.cpu_count() or 1), "--dist", "loadfile", "--no-loadscope-reorder"]


def execute(args: list[str]) -> None:
    ensure_venv("test")
    if not args:
        sys.exit("usage: python tasks.py execute NOTEBOOK [NOTEBOOK ...]")
    run([PYTHON, "-m", "labqueue.lab.execute", *args])


def site(args: list[str]) -> None:
    ensure_venv("test")  # the test extra includes the site extra (Sphinx, myst-nb, furo)
    run([PYTHON, "-m", "labqueue.website", *args])


def bench(args: list[str]) -> None:
    ensure_venv("test")  # the test extra includes the peers the benchmark races
    run([PYTHON, "-m", "labqueue.bench", *args])


def chaos(args: list[str]) -> None:
    ensure_lab_env()
    run([LAB_PYTHON, "-m", "labqueue.chaos", *args])


def lab_env(args: list[str]) -> None:
    ensure_lab_env()
    print(f"{LAB_VENV} is up to date with binder/ and pyproject.toml", flush=True)


# --- the Binder link ------------------------------------------------------------------------

_GITHUB = re.compile(
    r"""^(?:
        (?:https?|git|ssh)://(?:[^@/]+@)?github\.com(?::\d+)?/   # https://github.com/, ssh://git@github.com/
      | [^@/\s]+@github\.com:                                    # git@github.com:
    )(?P<owner>[^/\s]+)/(?P<repo>[^/\s]+?)(?:\.git)?/?$""",
    re.VERBOSE,
)


def binder_url(remote: str, ref: str = "HEAD", notebook: str = FIRST_NOTEBOOK) -> str:
    """The mybinder.org link that builds the GitHub repository at `remote` (an https, ssh or
    git@ URL, as `git remote get-url` prints it) and opens JupyterLab at `notebook`.
    Raises ValueError, naming the remote, for anything that is not a GitHub repository."""
    match = _GITHUB.match(remote.strip())
    if not match:
        raise ValueError(
            f"the git remote {remote.strip()!r} is not a GitHub repository; mybinder.org builds"
            " public repositories from GitHub (push this one there, then run this again)"
        )
    repository = f"{match['owner']}/{match['repo']}"
    urlpath = quote(f"lab/tree/{notebook}", safe="")
    return f"https://mybinder.org/v2/gh/{repository}/{quote(ref, safe='')}?urlpath={urlpath}"


def binder_url_task(args: list[str]) -> None:
    """binder-url [REMOTE] [--ref REF]: REMOTE defaults to origin, REF (a branch, tag or commit
    for Binder to build) to HEAD, the default branch."""
    ref = "HEAD"
    if "--ref" in args:
        at = args.index("--ref")
        if at + 1 >= len(args):
            sys.exit("usage: python tasks.py binder-url [REMOTE] [--ref BRANCH_TAG_OR_COMMIT]")
        ref = args[at + 1]
        args = args[:at] + args[at + 2 :]
    name = args[0] if args else "origin"
    found = subprocess.run(["git", "remote", "get-url", name], cwd=ROOT, capture_output=True, text=True)
    if found.returncode != 0:
        sys.exit(
            f"this repository has no git remote named {name!r}, so there is no Binder link yet: publish"
            " it on GitHub (git remote add origin https://github.com/<owner>/<repository>.git; git push)"
            " and run `python tasks.py binder-url` again"
        )
    try:
        url = binder_url(found.stdout, ref=ref)
    except ValueError as exc:
        sys.exit(str(exc))
    print(url)
    print(f"\nthe README badge for it:\n[![Binder](https://mybinder.org/badge_logo.svg)]({url})")


TASKS = {
    "lab": lab,
    "test": test,
    "execute": execute,
    "site": site,
    "bench": bench,
    "chaos": chaos,
    "binder-url": binder_url_task,
    "lab-env": lab_env,
    "lab-config": lab_config,
}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in TASKS:
        sys.exit(__doc__)
    TASKS[sys.argv[1]](sys.argv[2:])
