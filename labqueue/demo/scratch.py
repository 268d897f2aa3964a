"""Fresh scratch database files for the labs and the tools, kept out of git."""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import InvalidArgument

SCRATCH_ENV = "LABQUEUE_WORK"


def work_folder() -> Path:
    """The scratch folder: $LABQUEUE_WORK if set, else ./work (git-ignored); made if missing,
    so a notebook opened first in a fresh clone can write there (notebook 17's log did not)."""
    folder = Path(os.environ.get(SCRATCH_ENV) or Path.cwd() / "work")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def db_path(name: str, folder: str | os.PathLike[str] | None = None) -> Path:
    """Return the path <folder>/<name>.db, after deleting any earlier database of
    that name together with its -wal, -shm and -journal files."""
    if (
        not isinstance(name, str)
        or not name
        or name in {".", ".."}
        or any(sep in name for sep in ("/", "\\", os.sep))
    ):
        raise InvalidArgument(f"name must be a plain file name without a folder, got {name!r}")
    root = Path(folder) if folder is not None else work_folder()
    root.mkdir(parents=True, exist_ok=True)
    path = root / f"{name}.db"
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    return path
