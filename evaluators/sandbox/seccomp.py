"""The pod's seccomp filter: a small classic-BPF program that bwrap installs (``--seccomp FD``) just
before it starts the pod's interpreter, so the pod's init and every solution process inherit it.

Why: the view, the namespaces and the missing capabilities already keep untrusted code away from
the harness; this refuses the system calls that exist mainly to cross such boundaries (tracing,
mounting, new namespaces, keyrings, BPF, perf, kernel modules) and the IPC objects that outlive a run
(System V shared memory, semaphores, message queues; POSIX message queues), so a kernel bug behind one of them
is out of reach too, and a solution cannot trace its pod's init. Refused calls fail with EPERM
(``clone3``: ENOSYS, so that the C library falls back to ``clone``, whose namespace flags are
checked); a foreign system-call ABI (x32, i386) kills the process. Built by hand because it is
30 instructions and the libseccomp bindings are not on PyPI for every interpreter; x86_64 only
(elsewhere :func:`program` returns None and the pod runs without it, which the run records).
"""
from __future__ import annotations

import platform
import struct

__all__ = ["BLOCKED", "program"]

# x86_64 system call numbers (arch/x86/entry/syscalls/syscall_64.tbl)
BLOCKED = {
    "ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "mount": 165, "umount2": 166,
    "pivot_root": 155, "chroot": 161, "unshare": 272, "setns": 308, "keyctl": 250, "add_key": 248,
    "request_key": 249, "bpf": 321, "perf_event_open": 298, "userfaultfd": 323, "kexec_load": 246,
    "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176, "swapon": 167,
    "swapoff": 168, "reboot": 169, "acct": 163, "quotactl": 179, "iopl": 172, "ioperm": 173,
    "name_to_handle_at": 303, "open_by_handle_at": 304, "open_tree": 428, "move_mount": 429,
    "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442,
    # System V IPC and POSIX message queues: objects that outlive the process that made them, in the pod's one IPC
    # namespace, so a run could leave a value for the next run to read (issue 28); no solution needs them
    "shmget": 29, "shmat": 30, "shmctl": 31, "shmdt": 67, "semget": 64, "semop": 65, "semctl": 66,
    "semtimedop": 220, "msgget": 68, "msgsnd": 69, "msgrcv": 70, "msgctl": 71, "mq_open": 240, "mq_unlink": 241,
    "mq_timedsend": 242, "mq_timedreceive": 243, "mq_notify": 244, "mq_getsetattr": 245,
}
CLONE, CLONE3 = 56, 435
CLONE_NEW_FLAGS = 0x7E020000  # CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
AUDIT_ARCH_X86_64 = 0xC000003E
X32_BIT = 0x40000000

_LD_W_ABS, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW, _KILL_PROCESS = 0x7FFF0000, 0x80000000
_ERRNO = 0x00050000
EPERM, ENOSYS = 1, 38


def program() -> bytes | None:
    """The filter as bwrap reads it (``struct sock_filter`` array), or None off x86_64."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    # (code, jt, jf, k) with jumps given as labels, resolved below
    body: list[tuple[int, object, object, int]] = [
        (_LD_W_ABS, 0, 0, 4),                      # seccomp_data.arch
        (_JEQ, 1, 0, AUDIT_ARCH_X86_64),
        (_RET, 0, 0, _KILL_PROCESS),
        (_LD_W_ABS, 0, 0, 0),                      # seccomp_data.nr
        (_JGE, "eperm", 0, X32_BIT),
    ]
    body += [(_JEQ, "eperm", 0, nr) for nr in sorted(BLOCKED.values())]
    body += [
        (_JEQ, "enosys", 0, CLONE3),
        (_JEQ, 0, "allow", CLONE),
        (_LD_W_ABS, 0, 0, 16),                     # clone's flags (args[0], low word)
        (_JSET, "eperm", "allow", CLONE_NEW_FLAGS),
    ]
    labels = {"allow": len(body), "eperm": len(body) + 1, "enosys": len(body) + 2}
    body += [(_RET, 0, 0, _ALLOW), (_RET, 0, 0, _ERRNO | EPERM), (_RET, 0, 0, _ERRNO | ENOSYS)]

    def jump(target: object, at: int) -> int:
        return labels[target] - at - 1 if isinstance(target, str) else int(target)  # type: ignore[arg-type]

    return b"".join(struct.pack("=HBBI", code, jump(jt, i), jump(jf, i), k) for i, (code, jt, jf, k) in enumerate(body))
