"""``agentic-repro``: one console command in front of the harness's entry points.

Why: a researcher should not need to know which module runs what (``python -m agentic_repro.harness.run``,
``python -m agentic_repro.scripts.reproduce_table1``, ...). Each subcommand hands its arguments, unchanged, to the entry point it
names; nothing is imported before a subcommand is chosen, so ``--help`` is instant and a missing optional part
(the viewer, a training extra) is one line, not a traceback.

    agentic-repro run method=cot benchmark=gsm8k limit=5     # one run (the Hydra app, overrides pass through)
    agentic-repro table table1 size=smoke                    # a paper's table (table1, ablation, auq, ...)
    agentic-repro view results/                              # the run viewer
    agentic-repro estimate measured=local target=gpt-4o-mini # what a protocol would cost on an API
    agentic-repro data                                       # place the benchmark data (what `make data` does)
    agentic-repro reference-scores ...                       # the reference implementations' scores
"""
from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable, Sequence

#: subcommand -> (module:function taking argv, one-line help). ``run`` is special: a Hydra app reads sys.argv.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": ("agentic_repro.harness.run:main", "one run: method x benchmark x backbone (Hydra overrides, e.g. method=cot limit=5)"),
    "table": ("", "reproduce a paper's table or figure set: table <name> [key=value ...] (names below)"),
    "view": ("agentic_repro.viewer.cli:main", "browse runs, problems and traces under results/ in a local web page"),
    "estimate": ("agentic_repro.scripts.estimate_cost:main", "estimate a protocol's cost on an API from measured runs"),
    "data": ("agentic_repro.scripts.fetch_data:main", "place the benchmark data in $AGENTIC_REPRO_DATA (default data/)"),
    "reference-scores": ("agentic_repro.scripts.reference_scores:main", "a backbone's published single-model scores beside our 95% intervals"),
}
#: ``table <name>`` -> the script whose ``main(argv)`` runs it.
TABLES: dict[str, tuple[str, str]] = {
    "table1": ("agentic_repro.scripts.reproduce_table1:main", "DenoiseFlow's Table 1: every method on the six benchmarks"),
    "ablation": ("agentic_repro.scripts.ablation:main", "DenoiseFlow's ablation"),
    "sweep": ("agentic_repro.scripts.sweep:main", "DenoiseFlow's parameter sweeps (Hydra launchers)"),
    "efficiency": ("agentic_repro.scripts.efficiency:main", "cost/efficiency table from runs on disk"),
    "figures": ("agentic_repro.scripts.figures:main", "DenoiseFlow's figures from runs on disk"),
    "auq": ("agentic_repro.scripts.auq_tables:main", "AUQ's tables and figures (run what=... | build)"),
    "dyflow": ("agentic_repro.scripts.dyflow_tables:main", "DyFlow's tables and figures"),
    "dynagraph": ("agentic_repro.scripts.dynagraph_tables:main", "DynaGraph's Tables 1 and 2"),
}


class Unavailable(Exception):
    """The entry point of a subcommand cannot be imported (a part not installed, or not written yet)."""


def load(target: str) -> Callable:
    """``module:function`` -> the function; an import failure becomes one line naming what is missing."""
    mod_name, _, fn = target.partition(":")
    try:
        mod = importlib.import_module(mod_name)
    except ImportError as e:
        missing = getattr(e, "name", None) or str(e)
        hint = ("it is not part of this checkout" if missing and mod_name.startswith(missing.split(".")[0])
                else "install the extra that provides it (see `make help`)")
        raise Unavailable(f"{mod_name} cannot be imported: no module named {missing!r} ({hint})") from e
    func = getattr(mod, fn, None)
    if not callable(func):
        raise Unavailable(f"{mod_name} has no {fn}()")
    return func


def usage() -> str:
    lines = ["usage: agentic-repro <command> [args ...]", "", "commands:"]
    lines += [f"  {name:<17} {help_}" for name, (_, help_) in COMMANDS.items()]
    lines += ["", "tables (agentic-repro table <name> ...):"]
    lines += [f"  {name:<17} {help_}" for name, (_, help_) in TABLES.items()]
    lines += ["", "`agentic-repro <command> --help` shows a command's own options (run: Hydra's)."]
    return "\n".join(lines)


def _run_hydra(module: str, args: list[str]) -> int:
    """Run ``module`` as ``python -m module args`` would: Hydra's ``@hydra.main`` reads ``sys.argv`` and finds
    ``config_path`` relative to the file only when the module runs as ``__main__`` (the checkout's configs/)."""
    import runpy

    saved = sys.argv
    sys.argv = ["agentic-repro run", *args]
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    finally:
        sys.argv = saved
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(usage())
        return 0 if args else 2
    cmd, rest = args[0], args[1:]
    if cmd not in COMMANDS:
        print(f"agentic-repro: unknown command {cmd!r}; one of {', '.join(COMMANDS)} (agentic-repro --help)",
              file=sys.stderr)
        return 2
    target = COMMANDS[cmd][0]
    if cmd == "table":
        if not rest or rest[0] in ("-h", "--help"):
            print(usage())
            return 0 if rest else 2
        if rest[0] not in TABLES:
            print(f"agentic-repro table: unknown table {rest[0]!r}; one of {', '.join(TABLES)}", file=sys.stderr)
            return 2
        target, rest = TABLES[rest[0]][0], rest[1:]
    if cmd == "run":   # executed as __main__ (below), so only found here, not imported
        mod_name = target.partition(":")[0]
        if importlib.util.find_spec(mod_name) is None:
            print(f"agentic-repro run: {mod_name} cannot be found", file=sys.stderr)
            return 2
        return _run_hydra(mod_name, rest)
    try:
        func = load(target)
    except Unavailable as e:
        print(f"agentic-repro {cmd}: {e}", file=sys.stderr)
        return 2
    saved, sys.argv = sys.argv, [f"agentic-repro {cmd}", *rest]   # argparse names the command in its messages
    try:
        rc = func(rest)
    finally:
        sys.argv = saved
    return rc if isinstance(rc, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
