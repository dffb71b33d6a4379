"""One install step of the Makefile: one line when it starts, a heartbeat while it runs, the log's tail if it fails.

Why: pip and a compiler either flood the terminal (pip's harmless warnings) or print nothing for minutes (a quiet
build), and a newcomer cannot tell a build from a hang. Every install target runs its command through this::

    python3 scripts/install_step.py --step 3/6 --title "building llama-server (one time, ~5 min on 2 idle cores)" \\
        --log .cache/install-logs/server.log -- .venv/bin/python -m agentic_repro.harness.embedded.build

- prints ``[3/6] building llama-server (...) …`` once, then every ``--every`` seconds (15) a heartbeat with the
  elapsed time and the newest progress line of the log (a compiler's ``[n/N]``, a download's percentage), if any;
- the command's stdout and stderr go to ``--log`` only (truncated at the start), never to the terminal;
- on success: ``done in 1m20s`` and the warning and error lines of the log not known to be harmless (``HARMLESS``);
- on failure: the last ``--tail`` lines of the log, the full log's path, and the command's exit status.

Standard library only: the first step creates the virtual environment, so it runs with the system ``python3``.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

#: Log lines that are known harmless and never shown: pip's extra index locations that do not exist on this
#: machine, setuptools' and pip's notices about editable installs and license metadata, pip's upgrade nag.
HARMLESS = (
    re.compile(r"Location '.*' is ignored"),
    re.compile(r"(?i)editable"),
    re.compile(r"project\.license"),
    re.compile(r"(?i)license.*(deprecat|SPDX)|(deprecat|SPDX).*license"),
    re.compile(r"(?i)new release of pip|pip install --upgrade pip"),
    re.compile(r"(?i)running pip as the 'root' user"),
)
#: Lines shown after a successful step: warnings, and the errors a step reports without failing (`make data`'s
#: ``ERR <file> ... could not be downloaded`` for an optional file).
WARNING = re.compile(r"^\s*(WARNING|WARN|DEPRECATION|ERROR|ERR)\b|Warning:")
#: A progress line worth repeating in a heartbeat: ninja's/cmake's ``[12/206]``, a percentage.
PROGRESS = re.compile(r"^\s*\[\s*\d+\s*/\s*\d+\s*\]|\b\d{1,3}%")


def elapsed(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}m{s % 60:02d}s" if s >= 60 else f"{s}s"


def last_progress(log: Path, max_bytes: int = 65536) -> str | None:
    """The newest progress line in the last ``max_bytes`` of the log (split on CR too: bars rewrite one line)."""
    try:
        with log.open("rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - max_bytes))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    for line in reversed(re.split(r"[\r\n]+", text)):
        if PROGRESS.search(line):
            return line.strip()[:100]
    return None


def tail(log: Path, n: int) -> list[str]:
    try:
        return log.read_text(encoding="utf-8", errors="replace").splitlines()[-n:]
    except OSError:
        return []


def warnings_of(log: Path) -> list[str]:
    """The log's warning lines that are not known harmless (each once, in order)."""
    seen: dict[str, None] = {}
    for line in tail(log, 10**7):
        if WARNING.search(line) and not any(h.search(line) for h in HARMLESS):
            seen.setdefault(line.strip(), None)
    return list(seen)


def run_step(cmd: list[str], step: str, title: str, log: Path, every: float = 15.0, n_tail: int = 40,
             out=sys.stdout) -> int:
    """Run ``cmd`` with its output in ``log``; report as described in the module docstring. Returns its status."""
    log.parent.mkdir(parents=True, exist_ok=True)
    prefix = f"[{step}] " if step else ""
    print(f"{prefix}{title} …", file=out, flush=True)
    t0 = time.monotonic()
    with log.open("wb") as f:
        try:
            proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        except OSError as e:
            f.write(f"cannot start {cmd[0]}: {e}\n".encode())
            rc = 127
        else:
            next_beat = t0 + every
            while True:
                try:
                    rc = proc.wait(timeout=max(0.05, min(1.0, next_beat - time.monotonic())))
                    break
                except subprocess.TimeoutExpired:
                    pass
                except KeyboardInterrupt:
                    proc.terminate()
                    rc = proc.wait()
                    break
                if time.monotonic() >= next_beat:
                    prog = last_progress(log)
                    print(f"    … {elapsed(time.monotonic() - t0)}" + (f"  {prog}" if prog else ""), file=out,
                          flush=True)
                    next_beat += every
    took = elapsed(time.monotonic() - t0)
    if rc == 0:
        print(f"    done in {took}", file=out, flush=True)
        for w in warnings_of(log):
            print(f"    {w}", file=out, flush=True)
        return 0
    print(f"{prefix}FAILED after {took} (exit status {rc}): {title}", file=out, flush=True)
    print(f"---- last {n_tail} lines of {log} ----", file=out)
    for line in tail(log, n_tail):
        print(f"  {line}", file=out)
    print(f"---- full log: {log.resolve()}", file=out, flush=True)
    return rc


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--step", default="", help="e.g. 3/6, printed as [3/6]")
    ap.add_argument("--title", required=True)
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--every", type=float, default=15.0, help="seconds between heartbeats")
    ap.add_argument("--tail", type=int, default=40, help="log lines shown on failure")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args(argv)
    cmd = a.cmd[1:] if a.cmd[:1] == ["--"] else a.cmd
    if not cmd:
        ap.error("no command after --")
    return run_step(cmd, a.step, a.title, a.log, a.every, a.tail)


if __name__ == "__main__":
    raise SystemExit(main())
