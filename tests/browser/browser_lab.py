"""Drive the course in real JupyterLab: a throwaway server, and a notebook page a test can use
the way a learner does (menus, buttons, sliders), with checks for errors and unrendered widgets.

The server is started with the README's own command, `python tasks.py lab ...`, so JupyterLab
and every kernel run in ./.venv-lab, the environment that command builds exactly as Binder
builds its image from binder/ (with the course's Jupyter settings installed); the test itself
runs in the developers' environment, .venv.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    "--disable-dev-shm-usage",  # containers often give /dev/shm only 64 MB; tall screenshots need more
]
SCREENSHOTS = ROOT / "screenshots" / "browser"
# A picture of each whole notebook after its clean run, for a person to look through: set
# LABQUEUE_SCREENSHOTS=1. Off by default: each is the page rendered up to 16,000 px tall and
# encoded, seconds of Chromium's CPU per notebook in a run nobody looks at. A failed run and
# every panel a test drives are pictured either way.
WHOLE_SCREENSHOTS = os.environ.get("LABQUEUE_SCREENSHOTS", "") not in ("", "0")
BINDER_MEMORY = 2 * 1024**3  # mybinder.org gives a session 2 GB (and 1 CPU)
# Set LABQUEUE_BROWSER_CPUS=1 to run JupyterLab, its kernels and their workers on one CPU, as
# on Binder (Linux only); by default they use every CPU, to keep the suite quick.
CPUS_ENV = "LABQUEUE_BROWSER_CPUS"

# JupyterLab settings for the throwaway server: never write the opened copies back (no
# autosave), keep every cell in the DOM so prompts and outputs can be read. Nothing else: no
# news question, no update check and no kernel dialog must come from the course environment's
# own settings (binder/overrides.json), as a learner gets them.
LAB_SETTINGS = {
    "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def lab_command(args: list[str]) -> list[str]:
    """The README's `python tasks.py lab ARGS`: JupyterLab from ./.venv-lab (tasks.py adds the
    repository as root_dir, the first notebook as the default URL, and --allow-root as root)."""
    return [sys.executable, str(ROOT / "tasks.py"), "lab", *args]


def build_lab_env() -> None:
    """`python tasks.py lab-env`: build or update ./.venv-lab before the server's start clock
    runs (a fresh build takes a minute or two; `tasks.py test` has done it already)."""
    subprocess.run([sys.executable, str(ROOT / "tasks.py"), "lab-env"], cwd=ROOT, check=True)


def load_tasks() -> Any:
    """tasks.py as a module, for its constants (FIRST_NOTEBOOK, LAB_VENV) and pure functions."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("labqueue_tasks", ROOT / "tasks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@dataclass
class LabServer:
    """JupyterLab on a free localhost port with a random token. The notebooks it serves are
    copies in a scratch folder (under the git-ignored work/), so the committed ones stay as
    they are and every kernel writes its scratch databases next to the copy."""

    scratch: Path
    port: int = field(default_factory=free_port)
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    proc: subprocess.Popen | None = None
    command: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def copies(self) -> Path:
        """The folder, under the server's root (the repository), holding the notebook copies."""
        return self.scratch / "course"  # not "tree": JupyterLab's /lab/tree/ URLs would misread it

    def start(self, timeout: float = 300.0) -> LabServer:
        shutil.copytree(ROOT / "notebooks", self.copies / "notebooks", ignore=_scratch_files)
        if (ROOT / "data").is_dir():
            shutil.copytree(ROOT / "data", self.copies / "data")
        settings = self.scratch / "lab-settings"
        for name, values in LAB_SETTINGS.items():
            (settings / name).parent.mkdir(parents=True, exist_ok=True)
            (settings / name).write_text(json.dumps(values))
        args = [
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}",
            "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            f"--LabApp.user_settings_dir={settings}",
            f"--LabApp.workspaces_dir={self.scratch / 'workspaces'}",
            "--LabApp.expose_app_in_browser=True",
            # A safety net should the test process die without stopping the server: the
            # course's own settings cull idle kernels (binder/jupyter_server_config.json), and
            # then the server ends itself, instead of running on.
            "--ServerApp.shutdown_no_activity_timeout=1200",
        ]
        self.command = lab_command(args)
        env = {
            **os.environ,
            "JUPYTER_RUNTIME_DIR": str(self.scratch / "runtime"),
            "JUPYTER_CONFIG_DIR": str(self.scratch / "config"),
            "PYTHONUNBUFFERED": "1",
        }
        self.log = self.scratch / "jupyterlab.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                self.command,
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=_cpu_limit(),  # one system call, safe with threads around
            )
        self.memory = PeakMemory(self.proc.pid)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with code {self.proc.returncode}:\n{self.log_tail()}")
            with contextlib.suppress(OSError, urllib.error.URLError):
                self.api("GET", "status")
                return self
            time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"JupyterLab did not answer within {timeout:.0f} s:\n{self.log_tail()}")

    def api(self, method: str, path: str) -> Any:
        request = urllib.request.Request(
            f"{self.base}/api/{path}", method=method, headers={"Authorization": f"token {self.token}"}
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            body = response.read()
        return json.loads(body) if body else None

    def copy_path(self, notebook: Path) -> str:
        """The server path of the scratch copy of notebooks/<name>."""
        return (self.copies / "notebooks" / notebook.name).relative_to(ROOT).as_posix()

    def log_tail(self, lines: int = 40) -> str:
        text = self.log.read_text(errors="replace") if self.log.exists() else ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self) -> None:
        if getattr(self, "memory", None):
            self.memory.stop()
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(OSError, urllib.error.URLError):
            self.api("POST", "shutdown")
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            from labqueue.procs import kill_tree

            kill_tree(self.proc)


def _cpu_limit():
    """A pre-exec hook pinning the server (and so its kernels and workers) to the first N of
    this process's CPUs when $LABQUEUE_BROWSER_CPUS=N is set; None otherwise."""
    wanted = os.environ.get(CPUS_ENV)
    if not wanted:
        return None
    if not hasattr(os, "sched_setaffinity"):
        raise RuntimeError(f"{CPUS_ENV} needs Linux (os.sched_setaffinity), and this is {sys.platform}")
    if not wanted.isdigit() or int(wanted) < 1:
        raise ValueError(f"{CPUS_ENV} must be a whole number of CPUs, at least 1, got {wanted!r}")
    cpus = set(sorted(os.sched_getaffinity(0))[: int(wanted)])
    return lambda: os.sched_setaffinity(0, cpus)


class PeakMemory:
    """The highest resident memory of a process and all its descendants (here JupyterLab, its
    kernels and the workers they start), sampled from a background thread. Shared pages are
    counted once per process, so the figure errs high. Twice a second: each sample reads every
    process of the machine (several ms in a test run), and what the course starts lives for
    seconds at least."""

    def __init__(self, pid: int, interval: float = 0.5) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def now(self) -> int:
        import psutil

        total = 0
        with contextlib.suppress(psutil.Error):
            for p in [self.root, *self.root.children(recursive=True)]:
                with contextlib.suppress(psutil.Error):
                    total += p.memory_info().rss
        return total

    def reset(self) -> None:
        self.peak = self.now()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak = max(self.peak, self.now())


def _scratch_files(folder: str, names: list[str]) -> list[str]:
    return [n for n in names if n in {"work", ".ipynb_checkpoints"}]


def scratch_folder() -> Path:
    """A fresh folder under the repository's git-ignored work/ (the server's root must hold
    both the notebook `tasks.py lab` opens and the copies the test drives)."""
    parent = ROOT / "work"
    parent.mkdir(exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="browser-", dir=parent))


# --- the page ----------------------------------------------------------------------------

# Every script below gets the notebook panel's id and finds the panel among JupyterLab's open
# documents, so several notebooks can be open as tabs in one window, as a learner has them.
_PANEL = """
  const app = window.jupyterapp;
  let panel = null;
  for (const w of app.shell.widgets('main')) { if (w.id === id) panel = w; }
  if (!panel) throw new Error('no open notebook with id ' + id);
"""

# Reads the notebook through JupyterLab's own model: prompts, error outputs, and every widget
# output with what it rendered.
_STATE_JS = (
    "id => {"
    + _PANEL
    + """
  const cells = [];
  panel.content.widgets.forEach((cell, index) => {
    if (cell.model.type !== 'code') return;
    const prompt = cell.node.querySelector('.jp-InputArea-prompt');
    const outputs = [];
    for (let i = 0; i < cell.model.outputs.length; i++) {
      const out = cell.model.outputs.get(i);
      const child = cell.outputArea.widgets[i];
      const node = child ? (child.node.querySelector('.jp-OutputArea-output') || child.node) : null;
      const box = node ? node.getBoundingClientRect() : {height: 0};
      outputs.push({
        type: out.type,
        widget: 'application/vnd.jupyter.widget-view+json' in (out.data || {}),
        mime: node ? node.getAttribute('data-mime-type') : null,
        views: node ? node.querySelectorAll('.jupyter-widgets').length : 0,
        png: 'image/png' in (out.data || {}),
        img: node ? node.querySelector('img') !== null : false,
        height: box.height,
        text: node ? node.textContent.slice(0, 300) : '',
        error: out.type === 'error' ? (out.toJSON().ename + ': ' + out.toJSON().evalue) : '',
      });
    }
    cells.push({index, prompt: prompt ? prompt.textContent.trim() : '', outputs});
  });
  return {cells};
}"""
)

# Opens a notebook the way the file browser does; resolves to the new panel's id.
_OPEN_JS = """
async path => {
  const panel = await window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'});
  await panel.context.ready;
  window.__kernelErrors = window.__kernelErrors || {};
  window.__kernelErrors[panel.id] = [];
  // Every error the kernel reports on IOPub, including exceptions raised in widget
  // callbacks, which no cell output shows.
  panel.sessionContext.iopubMessage.connect((_, msg) => {
    if (msg.header.msg_type === 'error') {
      window.__kernelErrors[panel.id].push(msg.content.ename + ': ' + msg.content.evalue);
    }
  });
  return panel.id;
}
"""

_KERNEL_JS = (
    "id => {"
    + _PANEL
    + """
  const session = panel.sessionContext.session;
  return {ready: !!(session && session.kernel), status: panel.sessionContext.kernelDisplayStatus,
          session: session ? session.id : null};
}"""
)

_ACTIVATE_JS = "id => {" + _PANEL + " app.shell.activateById(id); }"

# Runs code in the notebook's kernel, as a cell would, and returns what it printed or showed.
_EXECUTE_JS = (
    "async ([id, code]) => {"
    + _PANEL
    + """
  const future = panel.sessionContext.session.kernel.requestExecute({code, store_history: false});
  const said = [];
  future.onIOPub = msg => {
    const c = msg.content, type = msg.header.msg_type;
    if (type === 'stream') said.push(c.text);
    if (type === 'execute_result' || type === 'display_data') said.push(c.data['text/plain'] || '');
    if (type === 'error') said.push('ERROR ' + c.ename + ': ' + c.evalue);
  };
  await future.done;
  return said.join('\\n');
}"""
)

_DISPOSE_JS = "id => {" + _PANEL + " panel.dispose(); }"

# Every cell's source, in order (markdown cells included, so indexes match the notebook's).
_SOURCES_JS = (
    "id => {" + _PANEL + " return panel.content.widgets.map(c => c.model.sharedModel.getSource()); }"
)

# A learner's edit: the cell's text replaced, in the notebook's own model (as typing does).
_SET_SOURCE_JS = (
    "([id, index, text]) => {" + _PANEL + " panel.content.widgets[index].model.sharedModel.setSource(text); }"
)

# Select a cell and run a notebook command on it, as its menu entry does.
_ON_CELL_JS = (
    "async ([id, index, command]) => {"
    + _PANEL
    + """
  app.shell.activateById(id);
  panel.content.activeCellIndex = index;
  panel.content.deselectAll();
  await app.commands.execute(command);
}"""
)

# Scrolls the notebook to its top; returns the height of its cells in pixels.
_TO_TOP_JS = (
    "id => {"
    + _PANEL
    + """
  const content = panel.content;
  const scroller = content.node.querySelector('.jp-WindowedPanel-outer') || content.node;
  scroller.scrollTop = 0;
  const cells = content.node.querySelectorAll('.jp-Cell');
  if (!cells.length) return 0;
  return cells[cells.length - 1].getBoundingClientRect().bottom - scroller.getBoundingClientRect().top;
}"""
)

# Counts an <img>'s pixels of one colour by drawing it on a canvas (the widget's picture is a
# same-origin blob: URL, so the canvas may be read).
_PIXELS_JS = """
async (img, {rgb, tolerance}) => {
  if (!img.complete || !img.naturalWidth) await img.decode();
  const canvas = document.createElement('canvas');
  canvas.width = img.naturalWidth;
  canvas.height = img.naturalHeight;
  const context = canvas.getContext('2d');
  context.drawImage(img, 0, 0);
  const data = context.getImageData(0, 0, canvas.width, canvas.height).data;
  let count = 0;
  for (let i = 0; i < data.length; i += 4) {
    if (Math.abs(data[i] - rgb[0]) <= tolerance && Math.abs(data[i + 1] - rgb[1]) <= tolerance
        && Math.abs(data[i + 2] - rgb[2]) <= tolerance) count++;
  }
  return count;
}
"""

WIDGET_FAILURE = re.compile(r"Error displaying widget|model not found|Loading widget")
VIEWPORT = {"width": 1280, "height": 900}


class LabWindow:
    """One JupyterLab window in headless Chromium; notebooks open in it as tabs."""

    def __init__(self, server: LabServer, browser: Any, timeout: float = 90.0) -> None:
        self.server = server
        self.context = browser.new_context(viewport=VIEWPORT)
        self.page = self.context.new_page()
        self.page_errors: list[str] = []
        self.page.on("pageerror", lambda exc: self.page_errors.append(str(exc)))
        self.page.goto(f"{server.base}/lab?reset&token={server.token}")
        self.page.wait_for_function(
            "() => window.jupyterapp && window.jupyterapp.shell && window.jupyterapp.commands"
            " && window.jupyterapp.commands.hasCommand('docmanager:open')",
            timeout=timeout * 1000,
        )
        # More room for the notebook: fold the file browser away, as on a narrow screen.
        self.page.evaluate(
            "async () => { await window.jupyterapp.restored; window.jupyterapp.shell.collapseLeft(); }"
        )

    def dialog_text(self) -> str | None:
        dialog = self.page.query_selector(".jp-Dialog")
        return dialog.inner_text() if dialog else None

    def dismiss_dialogs(self) -> None:
        for _ in range(5):
            if not self.dialog_text():
                return
            self.page.keyboard.press("Escape")
            time.sleep(0.2)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.context.close()


class NotebookPage:
    """One notebook open as a tab of a LabWindow: run it, read it, use its widgets."""

    def __init__(self, window: LabWindow, notebook: Path) -> None:
        self.window = window
        self.server = window.server
        self.page = window.page
        self.notebook = notebook
        self.id: str | None = None
        self._errors_from = len(window.page_errors)

    # -- opening and running --

    def open(self, timeout: float = 90.0) -> None:
        self.window.dismiss_dialogs()
        self.id = self.page.evaluate(_OPEN_JS, self.server.copy_path(self.notebook))
        deadline = time.monotonic() + timeout
        while not self.kernel()["ready"]:
            self.fail_on_dialog()
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.notebook.name}: no kernel after {timeout:.0f} s")
            time.sleep(0.2)
        self.wait_idle(timeout)
        self.fail_on_dialog()

    def activate(self) -> None:
        """Bring this notebook's tab to the front (the menus act on the front tab)."""
        self.page.evaluate(_ACTIVATE_JS, self.id)

    def menu(self, top: str, item: str) -> None:
        """Click a main-menu entry, as a learner does: `menu("Run", "Run All Cells")`."""
        self.fail_on_dialog()
        self.activate()
        self.page.click(f'.lm-MenuBar-itemLabel:text-is("{top}")')
        self.page.click(f'.lm-Menu-itemLabel:text-is("{item}")')

    def run_all(self, timeout: float = 180.0) -> dict:
        """Clear the saved outputs, run every cell, and wait until all have run (or one failed)."""
        self.menu("Edit", "Clear Outputs of All Cells")
        deadline = time.monotonic() + 10
        while any(c["prompt"] != "[ ]:" or c["outputs"] for c in self.state()["cells"]):
            if time.monotonic() > deadline:  # else saved prompts could pass for a finished run
                raise AssertionError(f"{self.notebook.name}: saved outputs did not clear")
            time.sleep(0.1)
        self.menu("Run", "Run All Cells")
        deadline = time.monotonic() + timeout
        while True:
            prompts = [c["prompt"] for c in self.state()["cells"]]
            running = any("*" in p for p in prompts)
            all_ran = all(re.fullmatch(r"\[\d+\]:", p) for p in prompts)
            if all_ran or (not running and self.kernel_errors()):
                break
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{self.notebook.name}: cells still running after {timeout:.0f} s: {prompts}"
                )
            self.fail_on_dialog()
            time.sleep(0.5)
        self.wait_idle(timeout)
        self.wait_widgets()
        return self.state()

    def wait_idle(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while self.kernel()["status"] != "idle":
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.notebook.name}: kernel not idle after {timeout:.0f} s")
            time.sleep(0.2)

    def wait_widgets(self, timeout: float = 20.0) -> None:
        """Give widget views a moment to finish rendering ("Loading widget..." is transient)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            pending = [
                o
                for c in self.state()["cells"]
                for o in c["outputs"]
                if o["widget"] and "Loading widget" in o["text"]
            ]
            if not pending:
                return
            time.sleep(0.25)

    # -- reading --

    def kernel(self) -> dict:
        return self.page.evaluate(_KERNEL_JS, self.id)

    def execute(self, code: str) -> str:
        """Run `code` in the notebook's kernel, as one more cell would; what it printed or showed."""
        return self.page.evaluate(_EXECUTE_JS, [self.id, code])

    def state(self) -> dict:
        return self.page.evaluate(_STATE_JS, self.id)

    def sources(self) -> list[str]:
        return self.page.evaluate(_SOURCES_JS, self.id)

    def cell_index(self, starts: str) -> int:
        """The index of the one cell whose source starts with `starts`."""
        (found,) = [i for i, text in enumerate(self.sources()) if text.startswith(starts)]
        return found

    def edit_cell(self, index: int, old: str, new: str) -> None:
        """Replace `old` by `new` in cell `index`, as a learner's typing does."""
        text = self.sources()[index]
        assert old in text, f"{self.notebook.name}: cell {index} has no {old!r}"
        self.page.evaluate(_SET_SOURCE_JS, [self.id, index, text.replace(old, new)])

    def run_cells(self, index: int, below: bool = False, timeout: float = 120.0) -> dict:
        """Run cell `index` (Run > Run Selected Cell), or it and every cell below it (Run >
        Run Selected Cell and All Below), and wait until they have run."""
        before = [c["prompt"] for c in self.state()["cells"]]
        command = "notebook:run-all-below" if below else "notebook:run-cell"
        self.page.evaluate(_ON_CELL_JS, [self.id, index, command])
        deadline = time.monotonic() + timeout
        while True:
            prompts = [c["prompt"] for c in self.state()["cells"]]
            if prompts != before and not any("*" in p for p in prompts) and self.kernel()["status"] == "idle":
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.notebook.name}: cells from {index} still running: {prompts}")
            time.sleep(0.3)
        self.wait_widgets()
        return self.state()

    def output_of(self, index: int) -> tuple[str, str]:
        """(the text a cell shows, its error or '')."""
        (cell,) = [c for c in self.state()["cells"] if c["index"] == index]
        text = "\n".join(o["text"] for o in cell["outputs"])
        return text, "\n".join(o["error"] for o in cell["outputs"] if o["error"])

    def kernel_errors(self) -> list[str]:
        return self.page.evaluate("id => (window.__kernelErrors || {})[id] || []", self.id)

    def dialog_text(self) -> str | None:
        return self.window.dialog_text()

    def fail_on_dialog(self) -> None:
        text = self.dialog_text()
        if text:
            raise AssertionError(f"{self.notebook.name}: JupyterLab shows a dialog: {text!r}")

    def problems(self, state: dict | None = None) -> list[str]:
        """Everything a learner would see go wrong: errors, cells that did not run, widgets that
        did not render, dialogs and uncaught page errors."""
        state = state or self.state()
        found: list[str] = []
        for cell in state["cells"]:
            where = f"code cell {cell['index']}"
            if not re.fullmatch(r"\[\d+\]:", cell["prompt"]):
                found.append(f"{where} did not run (prompt {cell['prompt']!r})")
            for out in cell["outputs"]:
                if out["type"] == "error":
                    found.append(f"{where} raised {out['error']}")
                if WIDGET_FAILURE.search(out["text"]):
                    found.append(f"{where}: a widget did not render: {out['text']!r}")
                elif out["widget"] and out["views"] == 0 and out["text"].strip():
                    found.append(f"{where}: a widget shows as text, not rendered: {out['text'][:80]!r}")
                elif out["widget"] and out["views"] and out["height"] <= 0:
                    found.append(f"{where}: a widget rendered with no height")
        found += [f"kernel error: {e}" for e in self.kernel_errors()]
        found += [f"page error: {e}" for e in self.window.page_errors[self._errors_from :]]
        if self.dialog_text():
            found.append(f"dialog: {self.dialog_text()!r}")
        return found

    # -- widgets --

    def _scope(self) -> str:
        return f'[id="{self.id}"]'

    def button(self, description: str) -> Any:
        """The (one) widget button or toggle button with this description in the notebook."""
        self.activate()
        buttons = self.page.locator(f"{self._scope()} button.jupyter-button").filter(
            has_text=re.compile(rf"^\s*{re.escape(description)}\s*$")
        )
        count = buttons.count()
        if count != 1:
            raise AssertionError(f"{self.notebook.name}: expected one {description!r} button, found {count}")
        return buttons.first

    def panel_of(self, description: str) -> Any:
        """The outermost widget box holding the button with this description."""
        return self.button(description).locator(
            "xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' widget-box ')][last()]"
        )

    def panel_with(self, description: str) -> Any:
        """The outermost widget box holding the control labelled `description` (for panels
        that have no button: their controls act as soon as they change)."""
        self.activate()
        labels = self.page.locator(f'{self._scope()} label.widget-label:text-is("{description}")')
        count = labels.count()
        if count != 1:
            raise AssertionError(f"{self.notebook.name}: expected one {description!r} control, found {count}")
        return labels.first.locator(
            "xpath=ancestor::div[contains(concat(' ', normalize-space(@class), ' '), ' widget-box ')][last()]"
        )

    def _control(self, panel: Any, kind: str, description: str) -> Any:
        return panel.locator(f".widget-{kind}").filter(
            has=self.page.locator(f'label.widget-label:text-is("{description}")')
        )

    def set_slider(self, panel: Any, description: str, value: float) -> None:
        """Type a value into a slider's readout and press Enter, as a learner can."""
        readout = self._control(panel, "slider", description).locator(".widget-readout")
        readout.click()
        readout.press("ControlOrMeta+a")
        readout.type(str(value))
        readout.press("Enter")

    def slider_value(self, panel: Any, description: str) -> float:
        """The number a slider's readout shows (thousands separators dropped)."""
        text = self._control(panel, "slider", description).locator(".widget-readout").inner_text()
        return float(text.replace(",", ""))

    def choose(self, panel: Any, description: str, option: str) -> None:
        """Pick the option showing this text in the dropdown labelled `description`."""
        self._control(panel, "dropdown", description).locator("select").select_option(label=option)

    def chosen(self, panel: Any, description: str) -> str:
        """The text of the option a dropdown shows (ipywidgets writes its spaces as no-break spaces)."""
        select = self._control(panel, "dropdown", description).locator("select")
        text = select.evaluate("s => s.options[s.selectedIndex] ? s.options[s.selectedIndex].text : ''")
        return text.replace("\xa0", " ")

    def type_text(self, panel: Any, description: str, text: str) -> None:
        """Replace what a text box labelled `description` holds, then press Enter."""
        box = self._control(panel, "text", description).locator("input")
        box.fill(text)
        box.press("Enter")

    # -- pictures --

    @staticmethod
    def pixels_of_colour(image: Any, rgb: tuple[int, int, int], tolerance: int = 8) -> int:
        """How many pixels of a widget's picture (an <img>) are this colour, give or take
        `tolerance` per channel: read from the page, as the learner sees the picture."""
        return image.evaluate(_PIXELS_JS, {"rgb": list(rgb), "tolerance": tolerance})

    def screenshot(self, name: str, whole: bool = True) -> Path:
        """A picture of the notebook: all of it (the window made as tall as the notebook), or
        with `whole=False` just what is in view, e.g. a widget panel after it was used."""
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        path = SCREENSHOTS / f"{name}.png"
        self.activate()
        if not whole:
            self.page.screenshot(path=str(path))
            return path
        height = self.page.evaluate(_TO_TOP_JS, self.id)
        self.page.set_viewport_size({"width": 1280, "height": int(min(max(height + 160, 900), 16000))})
        time.sleep(0.5)
        self.page.evaluate(_TO_TOP_JS, self.id)
        self.page.screenshot(path=str(path))
        self.page.set_viewport_size(VIEWPORT)
        return path

    def close(self) -> None:
        """Shut the kernel down and close the tab (other open notebooks keep theirs)."""
        if self.id is None:
            return
        self.window.dismiss_dialogs()
        session = None
        with contextlib.suppress(Exception):
            session = self.kernel()["session"]
        if session:
            with contextlib.suppress(OSError, urllib.error.URLError):
                self.server.api("DELETE", f"sessions/{session}")
        with contextlib.suppress(Exception):
            self.page.evaluate(_DISPOSE_JS, self.id)
        self.id = None
