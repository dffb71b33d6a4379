"""Running untrusted generated code, with a pass/fail verdict the code cannot forge.

Why two processes. If a test runs in the interpreter that runs the code under test, that
code can rebind builtins, patch ``math.isclose``, return objects whose ``__eq__`` is always
True, exit with status 0, or find and write the pass marker itself; each guard against one
trick leaves the next. So the verdict is decided where generated code never runs:

* a **trusted** runner runs the benchmark's own code: the HumanEval prompt (for helpers such
  as ``poly``), the test and ``check(entry_point)``, or the MBPP imports, setup code and
  asserts. It has forked an **untrusted** process, which runs the solution (prompt +
  completion) and then only answers requests such as "call ``entry_point`` with these
  arguments". Arguments and results cross a socket as JSON-encoded *plain data* (None, bool,
  int, float, complex, str, bytes, list, tuple, dict, set, range, builtin types); the trusted
  side rebuilds exact builtin types, so every ``==``, ``abs``, ``isclose`` and ``assert`` in
  the test runs on values the solution cannot subvert. Anything else (an instance of a class
  the solution defines, say MBPP's ``Pair``) comes back as an opaque handle: it can be passed
  back, called, have attributes read or set, be iterated, measured and converted with
  ``str``/``repr``/``int``/``float``/``bool`` (each answer is again plain data, no more than
  the solution could have returned directly), but ``==``/``<``/``in``/``hash`` raise: those
  would hand the expected value to the solution, so "an object equal to everything" fails;
* the runner reports ``<nonce> <status>`` on a private pipe. The nonce is the last thing the
  runner reads from its stdin, after the untrusted process was forked and closed its own
  stdin, so the solution never has it; the solution's output, exit status and signals
  cannot produce a pass. The runner is non-dumpable (``PR_SET_DUMPABLE 0``): a same-uid
  process cannot read its memory or open ``/proc/<pid>/fd``.

Isolation (``configure(isolation=...)``, default ``$AGENTIC_SANDBOX_ISOLATION`` or ``bwrap``; the
threat model, per platform, is in this package's README). Under ``bwrap`` the untrusted side (the
pod: its init, the reaper, and every solution process it forks) lives in a bubblewrap view built
once per persistent runner: a read-only root holding only the interpreter, its standard library,
``libpython``, the system's shared-library directories and the packages of ``sandbox.packages`` (an
allow-list, each at ``/sandbox/site-packages/<name>``; never the harness's site-packages), a writable ``/scratch`` (the solution's cwd) and ``/tmp`` (tmpfs,
emptied after every run), a minimal ``/dev``, and ``/proc`` of the pod's own pid namespace; no
``/work``, no home, no data, results or cache, no socket but the channel it is handed; its own
pid, network, IPC and UTS namespaces; no capabilities at all (as root the pod's init becomes uid
65534 and drops the bounding and inheritable sets before it forks anything); ``no_new_privs``; a
seccomp filter refusing ptrace, mount, namespaces, keyrings, BPF, perf and the like
(:mod:`agentic_repro.evaluators.sandbox.seccomp`). :func:`isolation_record` is what a run records (the view, the
filter). Where bwrap cannot run, nothing runs: an infrastructure error names the reason and the
option ``sandbox.isolation=process``, the previous behaviour, which a user must choose and which
the record marks ("untrusted code ran without filesystem isolation"). Under ``process``, as root
(the reference container) the untrusted process becomes uid/gid 65534 (nobody) keeping exactly
one capability, CAP_DAC_READ_SEARCH, so it can import the interpreter even where it lives under
``/root`` (and read any file); if that is impossible, uid 0 without any capability; if that is
impossible too, nothing runs.

Namespaces and the reaper. The solution runs in a pid namespace (cannot see or
signal anything outside) inside a network namespace with no usable interface (no network even
past the audit hook; one per fork server, shared by its runs, or one per run when runners are
started directly; under bwrap one per pod). It is a child of a small reaper, the namespace's PID 1, that never runs
solution code: Linux drops signals a namespace's init sends itself, SIGKILL included, so a
solution running as PID 1 could survive its own ``os.kill(os.getpid(), 9)`` and pass. The
reaper reports how the solution ended, kills it if it stopped itself, and after every run
sweeps the namespace (``kill(-1, SIGKILL)`` from its init reaches everything inside but itself)
and reaps it before it forks the next run's solution process, so nothing a solution starts
outlives its run. Without the namespace the solution gets its own process group, swept the same way.
A bwrap pod's init also watches its runner's socket and ends the pod when the runner is gone.

The sandbox's own failures are not the code's: privileges that cannot be dropped, a runner that
crashed or lost its pod, a reaper that went without reporting while the solution could not reach
it, a benchmark test that does not run. Their ``ExecResult`` has ``infrastructure=True`` and the
scorers (``evaluators/code_tasks.py``) raise :class:`SandboxFailure`, so the problem is recorded as
an error, never as a 0.

Defence in depth (the verdict does not rest on it): a minimal environment without proxies;
``python -I -S`` (no user site, no ``.pth`` files; site-packages are appended to the solution's
``sys.path``); its own session, SIGKILLed at the wall-clock timeout; RLIMIT_AS (memory), RLIMIT_CPU,
RLIMIT_FSIZE, RLIMIT_CORE=0 and, as nobody, RLIMIT_NPROC; an audit hook in the untrusted process
refusing ``os.fork``/``subprocess``/``os.system``/``exec*``, sockets and DNS, imports of
``ctypes``/``_posixsubprocess`` (in a bwrap pod the imports are allowed, as sympy, pandas and scipy make them,
and a native function looked up or a library opened by name is refused instead: the pod is the boundary there),
and the reflection that could switch it off (``gc.get_objects``
and friends, replacing a function's ``__code__``): its lists are constants of its own code, with no
defaults or closure to rebind, and ``gc`` is not among the solution's loaded modules;
``PR_SET_NO_NEW_PRIVS``; ``PR_SET_PDEATHSIG``. Under ``process`` the working directory is a
temporary directory of its own (reused by a later run only if the solution left it empty).

Speed. A fork server (one warm ``python -I -S`` per harness process, which never sees run
data) keeps persistent trusted runners, one run at a time each, for many runs: a run only hands
a free runner the file descriptors of its spec, stdout, stderr and result pipes. Each runner,
before it reads anything of any run, forks its pod: the reaper (init of the runner's own pid
namespace), which keeps the next solution process forked and waiting. Per run only that one
process is forked, from the reaper, which has read nothing of any run; the runner's own pages
stay warm. After a verdict the runner drops the run's files and restores what a test may
change (``random``'s state, ``sys.path``, the recursion limit, the environment, its working
directory). Run directories are reused when the solution left them as made. Where a fork
server cannot run, each run starts ``python -I -S`` directly (same protocol, its own pod).
Under bwrap the pod is a fresh ``python -I -S`` that bwrap starts once per runner (the view is
built then, not per run), which preloads the common modules before it forks any solution.

Residual risks, stated plainly. This is not a VM: the pod shares the kernel (the seccomp filter
narrows what of it is reachable). Inside its view the solution can read what is there (the
interpreter, the standard library, the listed packages: public code) and, across the runs of one
runner, could leave state in the pod's init only by an exploit (it is non-dumpable and traced
calls are refused). Under ``process`` none of the filesystem isolation holds: the untrusted
process can read files (world-readable ones, and as nobody with CAP_DAC_READ_SEARCH any file) and,
when the harness does not run as root, write wherever the harness user can; code that
deliberately reaches native code can bypass the audit hook there. Runs of one ``process`` fork
server share its empty network namespace (abstract unix sockets), which holds nothing of any
verdict or gold. A persistent runner holds earlier runs' benchmark tests in its memory; the
solution cannot reach it (outside its pid namespace and view, non-dumpable, another uid).
Programs given as plain strings (not a :class:`Program` from :func:`humaneval_program` /
:func:`mbpp_program`) run entirely in the untrusted process and pass when they finish
without an exception: that only stops accidental false passes (exit codes, printed
markers), not an adversary. Compared with the official harness the split is stricter in rare
legitimate cases: non-plain results cannot be compared with ``==`` (numpy scalars and
subclasses of builtin types are converted to plain values first; numpy arrays are not),
arguments are copies (in-place mutation of a test's list is invisible to the test), and the
benchmark's helpers (HumanEval's ``poly``, ``encode_cyclic``) are the prompt's, not versions
a completion redefines.

Layout (each module says what it is):
``program`` builds programs and their trust split; ``verdict`` is the harness side of the
verdict channel (the nonce line, and the statuses when there is none); ``launch`` sets limits,
chooses the isolation and the pod's view, starts runners (fork server or direct), feeds them,
times them out and kills them; ``seccomp`` is the pod's system-call filter; ``child/`` is
the runner program itself (trusted runner, plain data, the benchmark's test side, the solution's
side with the reaper and the privilege drop, the fork server).
"""
from __future__ import annotations

from agentic_repro.evaluators.sandbox.launch import ISOLATIONS, configure, isolation, isolation_record, run_program, run_program_async
from agentic_repro.evaluators.sandbox.program import Program, humaneval_program, mbpp_program
from agentic_repro.evaluators.sandbox.verdict import STATUSES, ExecResult, SandboxFailure

__all__ = [
           "ISOLATIONS",
           "STATUSES",
           "ExecResult",
           "Program",
           "SandboxFailure",
           "configure",
           "humaneval_program",
           "isolation",
           "isolation_record",
           "mbpp_program",
           "run_program",
           "run_program_async",
]
