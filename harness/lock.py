"""One process per results folder: an exclusive ``fcntl.flock`` on ``<folder>/.lock``.

Two copies of one command on one folder would pay every overlapping call twice, duplicate prediction ids
and leave ``metrics.json`` disagreeing with the ledger. The lock is held for the run's life and released
by the kernel when the process exits, however it exits (a crash or ``kill -9`` leaves no stale lock). The
file holds the holder's pid, host and start time, so the refusal can name them. Never delete the lock file
of a live folder (a restart clears the folder *except* the lock: :meth:`FolderLock.clear`).
"""
from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typing.Self is Python 3.11+
    from typing_extensions import Self

LOCK_NAME = ".lock"


class FolderBusy(RuntimeError):
    """Another live process holds the folder's lock."""


class LockUnsupported(RuntimeError):
    """The folder's file system refuses flock (e.g. Lustre mounted without ``-o flock``): one writer per
    folder cannot be guaranteed there, so nothing runs (docs/cluster.md)."""


class FolderLock:
    """``with FolderLock(folder, what="results folder"):`` — raises :class:`FolderBusy` when held elsewhere."""

    def __init__(self, folder: str | os.PathLike[str], what: str = "results folder") -> None:
        self.folder = Path(folder)
        self.what = what
        self.path = self.folder / LOCK_NAME
        self._fd: int | None = None

    def acquire(self) -> FolderLock:
        from agentic_repro.harness.results import ResultsWriteError

        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise ResultsWriteError(self.path, exc) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise FolderBusy(
                f"{self.folder} is in use by another process ({holder}): a second process on one {self.what} "
                "would pay every call twice and mix its results with the first's; wait for that process to "
                "end (or stop it), then re-run this command") from None
        except OSError as exc:  # ENOLCK, ENOSYS, EOPNOTSUPP: no lock, not a busy one
            os.close(fd)
            raise LockUnsupported(
                f"cannot lock {self.path}: {exc.strerror or exc}: its file system does not support flock(2) (e.g. "
                "Lustre without the flock mount option, NFS without lockd), so one writer per folder cannot be "
                "guaranteed; put results_root on a file system whose locks work across hosts (docs/cluster.md)"
            ) from exc
        os.ftruncate(fd, 0)
        info = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time(),
                "command": " ".join(sys.argv)[:500]}
        os.write(fd, json.dumps(info).encode())
        self._fd = fd
        return self

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            try:
                os.ftruncate(fd, 0)
            except OSError:
                pass
            os.close(fd)  # closing the last descriptor releases the flock

    def clear(self) -> None:
        """Remove everything in the folder but the lock file (``restart=true`` of a whole folder)."""
        if self._fd is None:
            raise RuntimeError(f"{self.path} is not held: take the lock before clearing its folder")
        for child in self.folder.iterdir():
            if child.name == LOCK_NAME:
                continue
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    def __enter__(self) -> Self:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _holder(fd: int) -> str:
    """'pid 123 on host, since 12:00:00 UTC' from the lock file, or why it cannot say."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 4096).decode() or "{}")
    except (OSError, ValueError):
        info = {}
    if not isinstance(info, dict) or not info.get("pid"):
        return "pid not yet recorded"
    since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(info.get("started") or 0)))
    return f"pid {info['pid']} on {info.get('host', '?')}, since {since}"
