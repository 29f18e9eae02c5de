"""Reading a SQLite store whose WAL holds commits that cannot be merged where it lies.

A WAL database is read through its shared-memory file (``-shm``); in a folder this user cannot
write, with no ``-shm`` there, SQLite cannot open it read-only, and ``immutable=1`` reads the
main file alone: the commits still in the ``-wal`` file (a copy taken while dse was running)
would be missing without a word. Such a store is read from a private copy of the file and its
WAL, in a temporary folder removed when the process ends.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

from dse.core.errors import UsageError

_COPIES: dict[tuple[str, int, int, int, int], Path] = {}  # one copy a process, per version


def pending_wal(path: Path) -> Path | None:
    """The ``-wal`` file beside ``path`` when it holds frames (commits not yet in the file)."""
    wal = path.with_name(path.name + "-wal")
    try:
        return wal if wal.stat().st_size > 0 else None
    except OSError:  # none, or one this user cannot see
        return None


def readable_copy(path: Path, wal: Path) -> Path:
    """A copy of the store ``path`` with its ``wal``, in a temporary folder this user may
    write, where SQLite merges the WAL as it reads; the same copy for every engine of this
    process while neither file changes.

    Raises:
        UsageError: the copy cannot be made (no space, the WAL unreadable), naming the WAL.
    """
    main, log = path.stat(), wal.stat()
    key = (str(path), main.st_mtime_ns, main.st_size, log.st_mtime_ns, log.st_size)
    if key in _COPIES and _COPIES[key].exists():
        return _COPIES[key]
    folder = Path(tempfile.mkdtemp(prefix="dse-read-"))
    atexit.register(shutil.rmtree, folder, True)
    copy = folder / path.name
    try:
        shutil.copyfile(path, copy)
        shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
    except OSError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        raise UsageError(f"--storage: {path}'s commits since its last checkpoint are in {wal}, "
                         "which cannot be merged there (the folder cannot be written), and a "
                         f"copy to read them could not be made in {folder.parent} "
                         f"({exc.strerror or exc}): copy both files to a folder you can "
                         "write and read that") from None
    print(f"dse: {path} has commits in {wal.name} that cannot be merged in its folder: "
          f"reading a copy of both in {folder}", file=sys.stderr)
    _COPIES[key] = copy
    return copy
