"""Persistent response cache (SQLite).

The key covers everything that can change a completion: the backbone identity
(model + endpoint kind + model file hash), the messages, every sampling
parameter, the request seed, the sample index and the LoRA adapter (when one is used). Sampled requests are
therefore never collapsed into one entry (the inspect_ai #2580 bug): five
Monte-Carlo draws at T=0.7 are five keys. Concurrency, retry and timeout knobs
are deliberately *not* in the key. Only completions are stored: an error is never cached.

The endpoint is not the model: an ``openai``-kind backbone is keyed by its model name, not its URL, so a
vLLM server restarted on another port (or ``localhost`` vs ``127.0.0.1``) replays the same entries.

A cache that cannot be read or written raises :class:`CacheError` naming the file and the fix (never an
sqlite traceback); a failed write comes after the call's ledger line (:mod:`agentic_repro.harness.llm`), so the bill
stays complete.

On a local disk the file is in WAL mode. On a network file system (NFS, Lustre, GPFS, ...: a cluster's shared
folder) it uses SQLite's rollback journal instead: WAL keeps its index in memory shared by the processes of one
host and does not work over a network file system (sqlite.org/wal.html); the rollback journal relies on the file
system's POSIX locks, the ones :mod:`agentic_repro.harness.lock` needs across hosts too (docs/cluster.md).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Literal

CacheMode = Literal["read-write", "read-only", "off"]
MODES: tuple[str, ...] = ("read-write", "read-only", "off")


def cache_key(backbone_id: str, messages: list[dict[str, str]], params: dict[str, Any],
              sample_index: int, adapter: dict[str, Any] | None = None) -> str:
    """``adapter`` (name and sha256 of a LoRA adapter) enters the key only when set, so base-model keys
    written before adapters existed stay valid."""
    payload: dict[str, Any] = {
        "backbone": backbone_id,
        "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
        "params": {k: params[k] for k in sorted(params) if params[k] is not None},
        "sample_index": sample_index,
    }
    if adapter is not None:
        payload["adapter"] = adapter
    blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()


class CacheError(OSError):
    """The response cache file cannot be opened, read or written: one line naming it and the fix."""

    def __init__(self, path: Path, what: str, exc: BaseException) -> None:
        super().__init__(getattr(exc, "errno", None) or 0, str(exc), str(path))
        self.path = path
        self.what = what
        self.cause = exc

    def __str__(self) -> str:
        return (f"cannot {self.what} the response cache {self.path}: {type(self.cause).__name__}: {self.cause}; "
                "fix: free space on its disk, or delete that file if it is damaged (answered calls are paid "
                "again), or point cache.path=... elsewhere, or run without it with cache.mode=off")


#: mount types whose files other hosts write too (/proc/self/mounts names); fuse.* file systems are network
#: ones unless listed in LOCAL_FUSE
NETWORK_FS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs", "beegfs", "ceph", "glusterfs",
                        "9p", "afs", "panfs", "orangefs", "pvfs2", "ocfs2", "gfs2", "wekafs"})
LOCAL_FUSE = frozenset({"fuse.portal", "fuse.gvfsd-fuse", "fuse.lxcfs"})


def _unescape(field: str) -> str:
    """/proc/self/mounts writes space, tab, newline and backslash in paths as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def filesystem_type(path: str | Path, mounts: str | None = None) -> str:
    """The mount type of the file system holding ``path`` (which need not exist yet): the longest mount point
    above its real path in ``mounts`` (default: /proc/self/mounts). ``""`` when unknown (no /proc)."""
    if mounts is None:
        try:
            mounts = Path("/proc/self/mounts").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
    target = Path(os.path.realpath(path))
    best, kind = -1, ""
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) < 3:
            continue
        point = Path(_unescape(parts[1]))
        if (target == point or point in target.parents) and len(point.parts) > best:
            best, kind = len(point.parts), parts[2]
    return kind


def journal_mode_for(path: str | Path) -> str:
    """``wal`` on a local disk, ``delete`` (the rollback journal) on a network file system."""
    kind = filesystem_type(path)
    network = kind in NETWORK_FS or (kind.startswith("fuse.") and kind not in LOCAL_FUSE)
    return "delete" if network else "wal"


class ResponseCache:
    """A small thread-safe SQLite key → JSON store. One connection; WAL mode on a local disk, the rollback
    journal on a network file system (:func:`journal_mode_for`)."""

    def __init__(self, path: str | Path, mode: CacheMode = "read-write") -> None:
        if mode not in MODES:
            raise ValueError(f"cache.mode={mode!r} is not one of {MODES}; fix it in the run config")
        self.mode = mode
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None
        self.write_error: CacheError | None = None  # the first failed write (the runner stops the run on it)
        self.journal_mode = journal_mode_for(self.path)  # what the file's file system allows
        if mode != "off":
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._db = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30)
                wanted, why = self.journal_mode, ("the file is in WAL mode and open elsewhere; WAL does not work "
                                                  "on a network file system: stop that process, or give this "
                                                  "host a cache on a local disk (docs/cluster.md)")
                try:
                    got = str(self._db.execute(f"PRAGMA journal_mode={wanted}").fetchone()[0]).lower()
                except sqlite3.OperationalError as exc:  # "database is locked": leaving WAL needs it alone
                    if wanted != "delete":
                        raise
                    raise sqlite3.OperationalError(f"{exc}: {why}") from exc
                if wanted == "delete" and got == "wal":
                    raise sqlite3.OperationalError(why)
                self.journal_mode = got
                # NORMAL never corrupts a WAL file (a power loss may drop the last commits); the rollback journal
                # needs FULL, SQLite's default, for that
                self._db.execute(f"PRAGMA synchronous={'NORMAL' if self.journal_mode == 'wal' else 'FULL'}")
                self._db.execute(
                    "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL,"
                    " created REAL NOT NULL)")
                self._db.commit()
            except (sqlite3.Error, OSError) as exc:  # "file is not a database", a read-only or full disk
                if self._db is not None:
                    self._db.close()
                    self._db = None
                raise CacheError(self.path, "open", exc) from exc

    def get(self, key: str) -> dict[str, Any] | None:
        if self._db is None:
            return None
        try:
            with self._lock:
                row = self._db.execute("SELECT value FROM responses WHERE key=?", (key,)).fetchone()
            return json.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError) as exc:  # a damaged page or entry: never a miss that pays again silently
            raise CacheError(self.path, f"read entry {key[:12]}... of", exc) from exc

    def put(self, key: str, value: dict[str, Any]) -> None:
        if self._db is None or self.mode == "read-only":
            return
        blob = json.dumps(value, ensure_ascii=False)
        try:
            with self._lock:
                self._db.execute("INSERT OR REPLACE INTO responses(key, value, created) VALUES (?,?,?)",
                                 (key, blob, time.time()))
                # Committed per reply, right after the call's ledger line: a kill in between costs one
                # re-sent request on resume, never a call missing from the bill (sharing one commit between
                # the replies of an event-loop turn saved ~0.1 ms per reply and lost exactly those at a SIGKILL).
                self._db.commit()
        except (sqlite3.Error, OSError) as exc:
            try:
                self._db.rollback()
            except sqlite3.Error:
                pass
            self.write_error = self.write_error or CacheError(self.path, "write", exc)
            raise CacheError(self.path, "write", exc) from exc

    def __len__(self) -> int:
        if self._db is None:
            return 0
        with self._lock:
            return int(self._db.execute("SELECT COUNT(*) FROM responses").fetchone()[0])

    def close(self) -> None:
        if self._db is not None:
            with self._lock:
                self._db.commit()
                self._db.close()
            self._db = None

