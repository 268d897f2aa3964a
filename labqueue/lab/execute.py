"""Run notebooks top to bottom in place, keeping their outputs, as they are committed.

python -m labqueue.lab.execute notebooks/02_leases.ipynb [...]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def execute(path: Path, timeout: int = 600) -> float:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    started = time.perf_counter()
    NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()
    nbformat.write(nb, path)
    return time.perf_counter() - started


def main(argv: list[str]) -> int:
    for name in argv:
        seconds = execute(Path(name))
        print(f"{name}: executed in {seconds:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
