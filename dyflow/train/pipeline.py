"""DyFlow's designer training, end to end: (self-play runs) -> collect -> SFT -> KTO -> an adapter to serve.

    python -m agentic_repro.dyflow.train.pipeline runs=results/dyflow_selfplay out=adapters/dyplanner base=local
    python -m agentic_repro.dyflow.train.pipeline runs=... out=... base=microsoft/phi-4 sft.gradient_checkpointing=true \
        kto.gradient_checkpointing=true           # the paper's recipe on a GPU (docs/training.md, DyFlow)
    python -m agentic_repro.dyflow.train.pipeline ... steps=collect,sft    # only some steps (each resumes / is reused)

Options: ``runs`` (run folders, comma-separated), ``out``, ``base`` (as ``agentic_repro.training.train``), ``steps``
(default ``collect,sft,kto``; add ``kto_only`` for Table 4's "w/o SFT" adapter), collection options of :mod:`agentic_repro.dyflow.train.collect` (``prompt``, ``completion``,
``label_source``, ``threshold``, ``ratio``, ``seed``, ``benchmarks``, ``train_splits``: a run on any other split is
refused), and ``sft.<key>=...`` / ``kto.<key>=...``
overrides of ``configs/training/dyflow_sft.yaml`` / ``dyflow_kto.yaml`` (the D.2 hyper-parameters).

The output folder: ``data/`` (the datasets and ``collect.json``), ``sft/`` and ``kto/`` (``agentic_repro.training.train``
folders: ``adapter/`` for peft and vLLM, ``adapter.gguf`` for the embedded server, identity files, ``loss.png``,
resumable ``checkpoints/``) and ``serve.json``: the overrides that make the KTO adapter the designer role of a
DyFlow run with no code change. Adapter names (``configs/method/dyflow*.yaml``): ``dyplanner`` = ``kto/`` (SFT then
KTO), ``dyplanner_sft`` = ``sft/`` (Table 4 "w/o KTO"), ``dyplanner_kto`` = ``kto_only/`` (KTO from a fresh LoRA with
the base as reference: "w/o SFT", step ``kto_only``).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from agentic_repro.dyflow.train.collect import CollectOptions, _parse_options, collect

__all__ = ["compose_stage", "main", "run_pipeline", "serve_overrides"]

CONFIG_DIR = Path(__file__).resolve().parents[2] / "configs" / "training"
STEPS = ("collect", "sft", "kto", "kto_only")
DEFAULT_STEPS = ("collect", "sft", "kto")
# adapter name (as configs/method/dyflow*.yaml bind them) -> sub-folder of the pipeline's out
ADAPTERS = {"dyplanner": "kto", "dyplanner_sft": "sft", "dyplanner_kto": "kto_only"}


def compose_stage(stage: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """``configs/training/dyflow_<stage>.yaml`` with Hydra overrides, as a plain dict for ``agentic_repro.training.train``."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    if stage not in ("sft", "kto"):
        raise ValueError(f"stage {stage!r}: sft | kto")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name=f"dyflow_{stage}", overrides=list(overrides))
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


def serve_overrides(out: Path, name: str = "dyplanner") -> dict[str, list[str]]:
    """agentic_repro.harness.run overrides that serve the trained designers: embedded llama.cpp (GGUF LoRA), peft in process,
    vLLM (peft folders). Every adapter on disk is declared (the ablations bind dyplanner_sft / dyplanner_kto
    themselves); ``name`` is bound to the designer role."""
    have = {n: (out / sub).resolve() for n, sub in ADAPTERS.items() if (out / sub / "adapter").is_dir()}
    gguf = [f"+backbone.adapters.{n}.path={d / 'adapter.gguf'}" for n, d in have.items() if (d / "adapter.gguf").is_file()]
    peft = [f"+backbone.adapters.{n}.path={d / 'adapter'}" for n, d in have.items()]
    bind = [f"roles.designer.adapter={name}"] if name in have else []
    return {
        "local": [*gguf, *bind],
        "peft-local": ["backbone=peft-local", *peft, *bind],
        "vllm": ["backbone=vllm", *peft, *bind,
                 "# server side: vllm serve <base> --enable-lora --max-lora-rank 16 --lora-modules "
                 + " ".join(f"{n}={d / 'adapter'}" for n, d in have.items())],
    }


def run_pipeline(runs: Sequence[str], out: str | Path, *, base: str = "local", steps: Sequence[str] = DEFAULT_STEPS,
                 opts: CollectOptions | None = None, sft_overrides: Sequence[str] = (),
                 kto_overrides: Sequence[str] = (), name: str = "dyplanner") -> dict[str, Any]:
    from agentic_repro.training.train import train

    out = Path(out)
    bad = [s for s in steps if s not in STEPS]
    if bad:
        raise ValueError(f"steps {bad}: choose from {', '.join(STEPS)}")
    data = out / "data"
    result: dict[str, Any] = {"out": str(out)}
    if "collect" in steps:
        c = collect(runs, data, opts)
        result["collect"] = {"sft": c.summary["sft"], "kto": c.summary["kto"], "summary": str(c.summary_path)}
    sft_adapter = out / "sft" / "adapter"
    if "sft" in steps:
        cfg = compose_stage("sft", [f"data={data / 'designer-sft.jsonl'}", f"out={out / 'sft'}", f"base={base}",
                                    f"name={name}-sft", *sft_overrides])
        r = train(cfg)
        result["sft"] = {"adapter": str(r.adapter_dir), "gguf": str(r.gguf) if r.gguf else None, "steps": r.steps,
                         "losses": r.losses}
    final = sft_adapter
    if "kto" in steps:
        # KTO refines the SFT adapter (also its reference policy); kto.init_adapter=null = "w/o SFT" (Table 4)
        user_init = any(o.startswith("init_adapter=") for o in kto_overrides)
        init = [f"init_adapter={sft_adapter}"] if sft_adapter.is_dir() and not user_init else []
        cfg = compose_stage("kto", [f"data={data / 'designer-kto.jsonl'}", f"out={out / 'kto'}", f"base={base}",
                                    f"name={name}", *init, *kto_overrides])
        r = train(cfg)
        result["kto"] = {"adapter": str(r.adapter_dir), "gguf": str(r.gguf) if r.gguf else None, "steps": r.steps,
                         "losses": r.losses, "init_adapter": cfg.get("init_adapter")}
        final = r.adapter_dir
    if "kto_only" in steps:   # Table 4 "w/o SFT": KTO from a fresh LoRA, the base model as the reference
        cfg = compose_stage("kto", [f"data={data / 'designer-kto.jsonl'}", f"out={out / 'kto_only'}", f"base={base}",
                                    f"name={name}_kto", "init_adapter=null", *kto_overrides])
        r = train(cfg)
        result["kto_only"] = {"adapter": str(r.adapter_dir), "gguf": str(r.gguf) if r.gguf else None,
                              "steps": r.steps, "losses": r.losses}
    if final.is_dir() or (out / "kto_only" / "adapter").is_dir():
        result["serve"] = serve_overrides(out, name)
        (out / "serve.json").write_text(json.dumps(result, indent=2, default=str) + "\n", encoding="utf-8")
    return result


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    sft_ov = [a[4:] for a in argv if a.startswith("sft.")]
    kto_ov = [a[4:] for a in argv if a.startswith("kto.")]
    rest = [a for a in argv if not a.startswith(("sft.", "kto."))]
    kv = dict(a.split("=", 1) for a in rest if "=" in a)
    runs = [p for p in kv.pop("runs", "").split(",") if p]
    out = kv.pop("out", "")
    base = kv.pop("base", "local")
    name = kv.pop("name", "dyplanner")
    steps = [s for s in kv.pop("steps", ",".join(DEFAULT_STEPS)).split(",") if s]
    if not out or ("collect" in steps and not runs):
        print(__doc__, file=sys.stderr)
        return 2
    try:
        opts = _parse_options(kv)
        res = run_pipeline(runs, out, base=base, steps=steps, opts=opts, sft_overrides=sft_ov, kto_overrides=kto_ov,
                           name=name)
    except (FileNotFoundError, ValueError) as exc:
        print(f"agentic_repro.dyflow.train.pipeline: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # training.train's own errors carry their message
        if type(exc).__name__ == "TrainError":
            print(f"agentic_repro.dyflow.train.pipeline: {exc}", file=sys.stderr)
            return 2
        raise
    for s in ("sft", "kto", "kto_only"):
        if s in res:
            lo = res[s]["losses"]
            print(f"{s}: {res[s]['steps']} steps, loss {lo[0]:.4f} -> {lo[-1]:.4f}; {res[s]['adapter']}"
                  if lo else f"{s}: {res[s]['steps']} steps; {res[s]['adapter']}")
    if "serve" in res:
        print("serve it as the designer (no code change):\n  python -m agentic_repro.harness.run method=dyflow benchmark=<b> "
              "backbone=local " + " ".join(res["serve"]["local"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
