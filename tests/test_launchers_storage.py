"""What a shared results folder and the response cache need on a cluster (docs/cluster.md), made true:

- the response cache uses SQLite's rollback journal, not WAL, on a network file system (WAL's index lives in
  memory shared by the processes of one host), and two processes still share it;
- a results folder whose file system refuses flock is refused with one line naming it (one writer per folder
  cannot be guaranteed), not an errno.
"""
from __future__ import annotations

import errno
import fcntl
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from agentic_repro.harness import cache as cache_mod
from agentic_repro.harness.cache import CacheError, ResponseCache, filesystem_type, journal_mode_for

REPO = Path(__file__).resolve().parents[1]

MOUNTS = """\
/dev/vda1 / ext4 rw,relatime 0 0
tmpfs /dev/shm tmpfs rw 0 0
nas:/export/home /home nfs4 rw,vers=4.2 0 0
10.0.0.1@tcp:/lustre /scratch lustre rw,flock 0 0
/dev/vdb1 /scratch/local\\040disk ext4 rw 0 0
sshfs#me@host: /mnt/remote fuse.sshfs rw 0 0
lxcfs /proc/cpuinfo fuse.lxcfs rw 0 0
"""


def test_filesystem_type_is_the_longest_mount_point_above_the_path():
    assert filesystem_type("/home/me/repo/.cache/responses.sqlite", MOUNTS) == "nfs4"
    assert filesystem_type("/scratch/me/results", MOUNTS) == "lustre"
    assert filesystem_type("/scratch/local disk/me/c.sqlite", MOUNTS) == "ext4"  # octal-escaped space
    assert filesystem_type("/scratch/localdisk/c.sqlite", MOUNTS) == "lustre"  # a prefix of a name is no parent
    assert filesystem_type("/tmp/c.sqlite", MOUNTS) == "ext4"
    assert filesystem_type("/home", MOUNTS) == "nfs4"
    assert filesystem_type(REPO, "") == ""


@pytest.mark.parametrize("kind, mode", [("nfs4", "delete"), ("nfs", "delete"), ("lustre", "delete"),
                                        ("gpfs", "delete"), ("beegfs", "delete"), ("fuse.sshfs", "delete"),
                                        ("ext4", "wal"), ("xfs", "wal"), ("tmpfs", "wal"), ("fuse.lxcfs", "wal"),
                                        ("", "wal")])
def test_journal_mode_by_file_system(monkeypatch, kind, mode):
    monkeypatch.setattr(cache_mod, "filesystem_type", lambda path, mounts=None: kind)
    assert journal_mode_for("/anywhere/c.sqlite") == mode


def test_a_local_cache_is_in_wal_mode(tmp_path):
    c = ResponseCache(tmp_path / "c.sqlite")
    c.put("k", {"text": "a"})
    assert c.journal_mode == "wal" and (tmp_path / "c.sqlite-wal").exists()
    c.close()


WRITER = """
import sys
import agentic_repro.harness.cache as c
c.filesystem_type = lambda path, mounts=None: "nfs4"   # this file counts as one on a network file system
cache = c.ResponseCache(sys.argv[1])
assert cache.journal_mode == "delete", cache.journal_mode
for i in range(40):
    cache.put(f"{sys.argv[2]}-{i}", {"text": str(i)})
cache.close()
"""


def test_a_cache_on_a_network_file_system_uses_the_rollback_journal_shared_by_two_processes(tmp_path, monkeypatch):
    path = tmp_path / "shared" / "c.sqlite"
    monkeypatch.setattr(cache_mod, "filesystem_type", lambda p, mounts=None: "nfs4")
    first = ResponseCache(path)
    assert first.journal_mode == "delete"
    first.put("parent", {"text": "p"})
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(path), name], cwd=REPO, stderr=subprocess.PIPE,
                              text=True) for name in ("a", "b")]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err[-2000:]
    assert len(first) == 81 and first.get("a-39") == {"text": "39"} and first.get("b-0") == {"text": "0"}
    first.close()
    assert not path.with_name("c.sqlite-wal").exists() and not path.with_name("c.sqlite-shm").exists()
    with sqlite3.connect(path) as raw:  # the journal mode is the file's: a plain connection sees it too
        assert raw.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


def test_a_wal_cache_open_elsewhere_is_refused_on_a_network_file_system(tmp_path, monkeypatch):
    """A WAL file cannot leave WAL mode while another connection has it open: refused, never used in WAL."""
    path = tmp_path / "c.sqlite"
    local = ResponseCache(path)
    local.put("k", {"text": "a"})
    monkeypatch.setattr(cache_mod, "filesystem_type", lambda p, mounts=None: "lustre")
    with pytest.raises(CacheError, match="WAL does not work on a network file system"):
        ResponseCache(path)
    local.close()
    again = ResponseCache(path)  # alone now: converted to the rollback journal, entries kept
    assert again.journal_mode == "delete" and again.get("k") == {"text": "a"}
    again.close()


def test_a_results_folder_whose_file_system_refuses_flock_is_named(tmp_path, monkeypatch):
    from agentic_repro.harness import lock as lock_mod

    def no_locks(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")

    monkeypatch.setattr(lock_mod.fcntl, "flock", no_locks)
    with pytest.raises(lock_mod.LockUnsupported) as err:
        lock_mod.FolderLock(tmp_path / "run").acquire()
    msg = str(err.value)
    assert str(tmp_path / "run" / ".lock") in msg and "No locks available" in msg and "docs/cluster.md" in msg
    monkeypatch.undo()
    assert fcntl.flock is not no_locks
    with lock_mod.FolderLock(tmp_path / "run"):  # the refused attempt left nothing held
        pass
