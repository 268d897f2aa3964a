"""Measure the course as a workshop participant on Binder meets it: one CPU, every notebook run
in order from the Run menu in real JupyterLab (started with `python tasks.py lab`, so in the
Binder environment), each left open with its kernel, as participants leave them. Prints each
notebook's Run All time and the memory of JupyterLab, its kernels and their workers (the figure
Binder's 2 GB limit applies to; the browser is on the participant's machine and not counted):
resident memory summed over the processes (RSS, its peak sampled as the notebook runs, which
counts shared pages once per process and so errs high) and, after each notebook, the
proportional set size (PSS, shared pages split among their users).

    .venv/bin/python tests/browser/workshop_run.py [--cpus 1] [--install] [--json FILE] [NN ...]

--install also times building the Binder environment from nothing on those CPUs: a fresh
virtual environment and `pip install --no-cache-dir -r binder/requirements.txt`, as repo2docker
runs it. Figures depend on the machine and on whatever else it runs at the time: say so when
quoting them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from browser_lab import (
    BINDER_MEMORY,
    CHROMIUM,
    CHROMIUM_ARGS,
    CPUS_ENV,
    ROOT,
    LabServer,
    LabWindow,
    NotebookPage,
    build_lab_env,
    load_tasks,
    scratch_folder,
)

MIB = 2**20


def time_install(cpus: int) -> float:
    """Seconds to build the Binder environment from nothing, pinned to `cpus` CPUs."""
    interpreter, which = load_tasks().runtime_python()
    chosen = set(sorted(os.sched_getaffinity(0))[:cpus])
    with tempfile.TemporaryDirectory(prefix="binder-env-") as folder:
        env = Path(folder) / "env"
        started = time.monotonic()
        for cmd in (
            [interpreter, "-m", "venv", str(env)],
            [
                str(env / "bin" / "python"),
                "-m",
                "pip",
                "install",
                "--quiet",
                "--no-cache-dir",
                "-r",
                "binder/requirements.txt",
            ],
        ):
            subprocess.run(cmd, cwd=ROOT, check=True, preexec_fn=lambda: os.sched_setaffinity(0, chosen))
        seconds = time.monotonic() - started
    print(f"Binder environment ({which}) built from nothing on {cpus} CPU(s) in {seconds:.0f} s", flush=True)
    return seconds


def proportional_mib(pid: int) -> int:
    """The proportional set size (PSS) of a process and its descendants: each shared page split
    among the processes sharing it, closer to what a memory limit such as Binder's counts than
    the resident size (RSS) PeakMemory adds up, which counts a shared page once per process."""
    import psutil

    total = 0
    root = psutil.Process(pid)
    for proc in [root, *root.children(recursive=True)]:
        try:
            total += proc.memory_full_info().pss
        except (psutil.Error, AttributeError):  # gone, or no PSS on this system
            continue
    return round(total / MIB)


def run_course(numbers: list[str]) -> list[dict]:
    from playwright.sync_api import sync_playwright

    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if numbers:
        notebooks = [nb for nb in notebooks if nb.name[:2] in numbers]
    build_lab_env()
    scratch = scratch_folder()
    server = LabServer(scratch)
    rows: list[dict] = []
    pages: list[NotebookPage] = []
    try:
        server.start()
        idle = server.memory.now()
        print(f"JupyterLab started, {idle / MIB:.0f} MiB before any kernel", flush=True)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            window = LabWindow(server, browser)
            for notebook in notebooks:
                page = NotebookPage(window, notebook)
                pages.append(page)
                page.open(timeout=180)
                started = time.monotonic()
                state = page.run_all(timeout=900)
                seconds = time.monotonic() - started
                time.sleep(1.0)  # the kernel settles; its workers have exited
                row = {
                    "notebook": notebook.stem,
                    "run_all_s": round(seconds, 1),
                    "problems": page.problems(state),
                    "open_kernels": len(server.api("GET", "kernels")),
                    "after_mib": round(server.memory.now() / MIB),
                    "after_pss_mib": proportional_mib(server.proc.pid),
                    "peak_so_far_mib": round(server.memory.peak / MIB),
                }
                rows.append(row)
                print(
                    f"{row['notebook']:28} {seconds:6.1f} s  {row['open_kernels']:2} kernels open"
                    f"  now {row['after_mib']:5} MiB (PSS {row['after_pss_mib']:5} MiB)"
                    f"  peak {row['peak_so_far_mib']:5} MiB"
                    + (f"  PROBLEMS: {row['problems']}" if row["problems"] else ""),
                    flush=True,
                )
            for page in pages:
                page.close()
            window.close()
            browser.close()
    finally:
        server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return rows


def main() -> None:
    raw = argparse.RawDescriptionHelpFormatter
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=raw)
    parser.add_argument("numbers", nargs="*", help="only these notebooks (00 01 ...); default all")
    parser.add_argument("--cpus", type=int, default=1, help="CPUs for JupyterLab and its kernels (Binder: 1)")
    parser.add_argument("--install", action="store_true", help="also time building the Binder environment")
    parser.add_argument("--json", type=Path, help="write the figures to this file as well")
    args = parser.parse_args()
    os.environ[CPUS_ENV] = str(args.cpus)
    figures: dict = {"cpus": args.cpus, "loadavg_at_start": os.getloadavg()}
    if args.install:
        figures["install_s"] = round(time_install(args.cpus))
    rows = run_course(args.numbers)
    peak = max((r["peak_so_far_mib"] for r in rows), default=0)
    figures |= {"notebooks": rows, "peak_mib": peak, "loadavg_at_end": os.getloadavg()}
    total = sum(r["run_all_s"] for r in rows)
    print(
        f"\nall {len(rows)} notebooks: {total:.0f} s of Run All; peak {peak} MiB of Binder's"
        f" {BINDER_MEMORY // MIB} MiB with every notebook left open; load average {os.getloadavg()}"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    sys.exit(1 if any(r["problems"] for r in rows) or peak * MIB >= BINDER_MEMORY else 0)


if __name__ == "__main__":
    main()
