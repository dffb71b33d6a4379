"""``agentic-repro view [results/...] [--export DIR] [--port N]``: browse runs in a local web page.

The site is written once (viewer/site.py) and then either served from a temporary folder on 127.0.0.1
(never on another interface: traces hold prompts and data) or left in ``--export DIR``. Read-only: nothing
is written under the results folders given.
"""
from __future__ import annotations

import argparse
import functools
import shutil
import signal
import sys
import tempfile
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from agentic_repro.viewer import site

HOST = "127.0.0.1"
DEFAULT_PORT = 8765


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # the stdlib's signature; no access log
        pass


def serve(folder: Path, port: int = DEFAULT_PORT) -> ThreadingHTTPServer:
    """An HTTP server for ``folder`` on 127.0.0.1:``port`` (0: any free port), already serving in a thread;
    stop it with ``.shutdown()``."""
    handler = functools.partial(_Quiet, directory=str(folder))
    server = ThreadingHTTPServer((HOST, port), handler)
    threading.Thread(target=server.serve_forever, name="viewer-http", daemon=True).start()
    return server


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agentic-repro view", description="Browse runs, their problems and each "
                                "problem's calls and trace in a local web page on 127.0.0.1 (read-only).")
    p.add_argument("paths", nargs="*", default=["results"], help="results folders or run folders (default: results)")
    p.add_argument("--export", metavar="DIR", help="write a static copy into DIR (opens without the harness) and exit")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on {HOST} (default {DEFAULT_PORT}; 0: any)")
    p.add_argument("--cache", metavar="PATH", help="the response cache holding prompts and replies "
                   "(default: each run's config.yaml cache.path)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    roots = [Path(p) for p in args.paths]
    missing = [str(r) for r in roots if not r.exists()]
    if missing:
        print(f"agentic-repro view: no such folder: {', '.join(missing)}", file=sys.stderr)
        return 2
    cache = Path(args.cache) if args.cache else None
    if args.export:
        out = Path(args.export)
        try:
            info = site.build(roots, out, cache=cache)
        except site.ExportError as exc:
            print(f"agentic-repro view: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {info['runs']} runs ({info['problem_pages']} problem pages) to {out}; open {out / 'index.html'}")
        return 0
    tmp = Path(tempfile.mkdtemp(prefix="agentic-repro-view-"))
    try:
        info = site.build(roots, tmp, cache=cache)
        try:
            server = serve(tmp, args.port)
        except OSError as exc:
            print(f"agentic-repro view: cannot listen on {HOST}:{args.port}: {exc} (try --port 0)", file=sys.stderr)
            return 2
        print(f"{info['runs']} runs: http://{HOST}:{server.server_address[1]}/index.html  (Ctrl-C stops)", flush=True)
        stop = threading.Event()
        for sig in (signal.SIGINT, signal.SIGTERM):  # Ctrl-C (or a kill) stops it, whichever thread the kernel told
            signal.signal(sig, lambda *_: stop.set())
        while not stop.wait(0.5):  # the main thread wakes to run the handler: a KeyboardInterrupt in an untimed
            pass                   # wait could be missed (CI: still serving 30 s after SIGINT)
        server.shutdown()
        return 0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
