"""Train a LoRA with trl (SFT, KTO or DPO) from a dataset file; export it as a peft folder and a GGUF LoRA.

    python -m agentic_repro.training.train kind=sft data=results/datasets/designer-sft.jsonl base=local out=adapters/designer
    python -m agentic_repro.training.train kind=kto data=...kto.jsonl base=local out=adapters/designer-kto lr=1e-4
    python -m agentic_repro.training.train kind=dpo data=...dpo.jsonl base=Qwen/Qwen2.5-7B-Instruct out=adapters/planner

The options are ``configs/training/<kind>.yaml`` (Hydra overrides: ``key=value``). The output folder holds:
``adapter/`` (peft: what vLLM's ``--lora-modules`` and peft load), ``adapter.gguf`` (what the embedded llama.cpp
server loads), an identity file beside each (sha256, base model identity, training-data sha256, config: what
the serving side records per call), ``loss.png`` (always) and ``log.jsonl``, ``result.json``, and
``checkpoints/`` (a killed run resumes from the last one when re-run with the same command). wandb logs the same
when ``logger=wandb``.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Sequence

from agentic_repro.harness.embedded.base_model import base_identity, load_base, resolve_base, save_base_config
from agentic_repro.training.datasets import read_dataset
from agentic_repro.training.identity import write_identity

__all__ = ["TrainError", "TrainResult", "compose_config", "train"]

CONFIG_DIR = Path(__file__).resolve().parent.parent / "configs" / "training"
KINDS = ("sft", "kto", "dpo")
# options that may change between a killed run and its resumption (they do not change what is trained)
_RESUMABLE_CHANGES = {"resume", "logger", "threads", "max_steps", "epochs", "save_steps", "save_total_limit",
                      "logging_steps", "eval_steps", "export_gguf", "gguf_outtype", "name", "out"}


class TrainError(RuntimeError):
    """A training run cannot start or continue (bad config, wrong dataset kind, a mismatched resume)."""


@dataclass
class TrainResult:
    out: Path
    adapter_dir: Path
    gguf: Path | None
    identity: dict[str, Any]
    losses: list[float]
    eval_losses: list[float]
    steps: int
    resumed_from: str | None
    seconds_per_step: float | None


def compose_config(kind: str, overrides: Sequence[str] = ()) -> dict[str, Any]:
    """``configs/training/<kind>.yaml`` with Hydra overrides applied, as a plain dict."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    if kind not in KINDS:
        raise TrainError(f"kind={kind!r}: choose one of {', '.join(KINDS)} (configs/training/<kind>.yaml)")
    with initialize_config_dir(config_dir=str(CONFIG_DIR), version_base="1.3"):
        cfg = compose(config_name=kind, overrides=list(overrides))
    missing = [k for k in ("data", "out") if OmegaConf.is_missing(cfg, k)]
    if missing:
        raise TrainError(f"training needs {' and '.join(f'{k}=...' for k in missing)} "
                         f"(python -m agentic_repro.training.train kind={kind} data=<dataset.jsonl> out=<folder>)")
    return OmegaConf.to_container(cfg, resolve=True)  # type: ignore[return-value]


# ---- data ---------------------------------------------------------------------------------------------------------
def _messages(prompt: Any) -> list[dict[str, Any]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    return [{"role": m["role"], "content": m["content"]} for m in prompt]


def _assistant(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def _to_trl_rows(kind: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Dataset rows -> trl's conversational format (the chat template is applied as the served model sees it)."""
    need = {"sft": ("prompt", "completion"), "kto": ("prompt", "completion", "label"),
            "dpo": ("prompt", "chosen", "rejected")}[kind]
    out = []
    for i, r in enumerate(rows):
        absent = [k for k in need if k not in r]
        if absent:
            raise TrainError(f"kind={kind}: dataset row {i + 1} lacks {absent}; build it with training.datasets."
                             f"build_{kind}")
        if kind == "sft":
            out.append({"prompt": _messages(r["prompt"]), "completion": _assistant(r["completion"])})
        elif kind == "kto":
            out.append({"prompt": _messages(r["prompt"]), "completion": _assistant(r["completion"]),
                        "label": bool(r["label"])})
        else:
            out.append({"prompt": _messages(r["prompt"]), "chosen": _assistant(r["chosen"]),
                        "rejected": _assistant(r["rejected"])})
    return out


def _split(rows: list[dict[str, Any]], fraction: float, seed: int) -> tuple[list[dict], list[dict]]:
    import random

    if fraction <= 0 or len(rows) < 2:
        return rows, []
    idx = list(range(len(rows)))
    random.Random(seed).shuffle(idx)
    n_val = max(1, round(len(rows) * fraction))
    val = set(idx[:n_val])
    return [r for i, r in enumerate(rows) if i not in val], [r for i, r in enumerate(rows) if i in val]


# ---- the run ------------------------------------------------------------------------------------------------------
def _run_key(cfg: dict[str, Any], data_sha: str, base_id: dict[str, Any]) -> dict[str, Any]:
    return {"data_sha256": data_sha, "base_model": base_id,
            "config": {k: v for k, v in cfg.items() if k not in _RESUMABLE_CHANGES}}


def _last_checkpoint(ckpt_dir: Path) -> Path | None:
    from transformers.trainer_utils import get_last_checkpoint

    return Path(p) if ckpt_dir.is_dir() and (p := get_last_checkpoint(str(ckpt_dir))) else None


def _dtype(cfg: dict[str, Any]) -> str:
    import torch

    if cfg["dtype"] != "auto":
        return str(cfg["dtype"])
    return "bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported() else "float32"


def _trainer_args(cfg: dict[str, Any], out: Path, has_eval: bool, dtype: str) -> Any:
    import torch
    import trl

    kind = cfg["kind"]
    common = dict(
        output_dir=str(out / "checkpoints"), per_device_train_batch_size=int(cfg["batch_size"]),
        per_device_eval_batch_size=int(cfg["batch_size"]), gradient_accumulation_steps=int(cfg["grad_accum"]),
        learning_rate=float(cfg["lr"]), num_train_epochs=float(cfg["epochs"]), max_steps=int(cfg["max_steps"]),
        lr_scheduler_type=str(cfg["scheduler"]), warmup_steps=float(cfg["warmup_ratio"]),
        logging_steps=int(cfg["logging_steps"]), save_strategy="steps", save_steps=int(cfg["save_steps"]),
        save_total_limit=cfg["save_total_limit"], eval_strategy="steps" if has_eval else "no",
        eval_steps=int(cfg["eval_steps"]) if has_eval else None, seed=int(cfg["seed"]), data_seed=int(cfg["seed"]),
        report_to=["wandb"] if cfg["logger"] == "wandb" else [], run_name=str(cfg.get("name") or out.name),
        use_cpu=not torch.cuda.is_available(), bf16=dtype == "bfloat16",
        gradient_checkpointing=bool(cfg["gradient_checkpointing"]), max_length=int(cfg["max_length"]),
        dataloader_num_workers=0, disable_tqdm=True, logging_first_step=True,
    )
    if kind == "sft":
        return trl.SFTConfig(completion_only_loss=bool(cfg["completion_only_loss"]), **common)
    if kind == "kto":
        return trl.KTOConfig(beta=float(cfg["beta"]), desirable_weight=float(cfg["desirable_weight"]),
                             undesirable_weight=float(cfg["undesirable_weight"]), **common)
    return trl.DPOConfig(beta=float(cfg["beta"]), loss_type=[str(cfg["loss_type"])], **common)


def _callbacks(out: Path, step_times: list[float]) -> list[Any]:
    from transformers import TrainerCallback

    class Progress(TrainerCallback):
        """log.jsonl as it happens, loss.png at each checkpoint (a killed run keeps its curve), step times."""

        def __init__(self) -> None:
            self._t = None

        def on_step_begin(self, args, state, control, **kw):
            self._t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            if self._t is not None:
                step_times.append(time.perf_counter() - self._t)

        def on_log(self, args, state, control, logs=None, **kw):
            with open(out / "log.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"step": state.global_step, "time": round(time.time(), 3), **(logs or {})}) + "\n")

        def on_save(self, args, state, control, **kw):
            plot_losses(state.log_history, out / "loss.png")

    return [Progress()]


def plot_losses(history: list[dict[str, Any]], path: Path) -> Path:
    """Training (and validation) loss against the optimiser step, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [(h["step"], h["loss"]) for h in history if "loss" in h and "step" in h]
    evals = [(h["step"], h["eval_loss"]) for h in history if "eval_loss" in h and "step" in h]
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if train:
        ax.plot(*zip(*train), marker=".", label="train loss")
    if evals:
        ax.plot(*zip(*evals), marker="o", linestyle="--", label="validation loss")
    ax.set_xlabel("optimiser step")
    ax.set_ylabel("loss")
    ax.set_title(path.parent.name)
    ax.grid(alpha=0.3)
    if train or evals:
        ax.legend()
    fig.tight_layout()
    tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(tmp, dpi=110)
    plt.close(fig)
    os.replace(tmp, path)
    return path


def _make_trainer(kind: str, model: Any, args: Any, train_ds: Any, eval_ds: Any, tok: Any, lora: Any,
                  callbacks: list[Any]) -> Any:
    import trl

    cls = {"sft": trl.SFTTrainer, "kto": trl.KTOTrainer, "dpo": trl.DPOTrainer}[kind]
    return cls(model=model, args=args, train_dataset=train_ds, eval_dataset=eval_ds, processing_class=tok,
               peft_config=lora, callbacks=callbacks)


def train(cfg: dict[str, Any], *, callbacks: Sequence[Any] = ()) -> TrainResult:
    """Run (or resume) one training run described by a composed config (see :func:`compose_config`)."""
    kind = cfg["kind"]
    if kind not in KINDS:
        raise TrainError(f"kind={kind!r}: choose one of {', '.join(KINDS)}")
    if cfg["logger"] not in ("none", "wandb"):
        raise TrainError(f"logger={cfg['logger']!r}: none | wandb")
    if cfg["logger"] == "wandb":
        from agentic_repro.harness.logging_wandb import _import_wandb, resolve_mode

        wandb = _import_wandb()
        mode = os.environ.get("WANDB_MODE") or resolve_mode(None)
        project = os.environ.get("WANDB_PROJECT") or "agentic-repro"
        with _env(WANDB_MODE=mode, WANDB_PROJECT=project):
            # Start the run ourselves with an explicit mode: transformers' callback reuses an active run,
            # and wandb's process-wide settings may predate WANDB_MODE (it then asked for a login).
            run = wandb.init(mode=mode, project=project, dir=os.environ.get("WANDB_DIR"),
                             name=str(cfg.get("name") or Path(str(cfg["out"])).name),
                             config={k: v for k, v in cfg.items() if isinstance(v, (str, int, float, bool))})
            try:
                return _train(cfg, callbacks)
            finally:
                run.finish()
    return _train(cfg, callbacks)


@contextlib.contextmanager
def _env(**values: str):
    """Environment variables for transformers' wandb integration, for this run only."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _train(cfg: dict[str, Any], callbacks: Sequence[Any]) -> TrainResult:
    import torch
    from datasets import Dataset as HFDataset
    from peft import LoraConfig

    kind = cfg["kind"]
    if cfg.get("threads"):
        torch.set_num_threads(int(cfg["threads"]))
    out = Path(cfg["out"]).expanduser().resolve()
    data = read_dataset(cfg["data"])
    if data.provenance.get("kind") != kind:
        raise TrainError(f"{data.path} is a {data.provenance.get('kind')!r} dataset, but kind={kind}")
    if not data.rows:
        raise TrainError(f"{data.path} has no rows ({data.provenance.get('counts')})")
    base = resolve_base(cfg["base"])
    base_id = base_identity(base)
    key = _run_key(cfg, data.sha256, base_id)

    ckpt = _last_checkpoint(out / "checkpoints")
    run_file = out / "run.json"
    if run_file.is_file():
        before = json.loads(run_file.read_text(encoding="utf-8"))
        if kind == "sft":   # made before the option existed: trained with trl's own truncation
            before.get("config", {}).setdefault("truncation", "keep_start")
        if str(cfg["resume"]).lower() in ("false", "no", "0"):
            raise TrainError(f"{out} already holds a training run; resume=auto continues it, or choose another out=")
        if before != json.loads(json.dumps(key, default=str)):
            diff = sorted(k for k in set(before["config"]) | set(key["config"])
                          if before["config"].get(k) != key["config"].get(k))
            what = (["data_sha256"] if before["data_sha256"] != key["data_sha256"] else []) + \
                   (["base_model"] if before["base_model"] != key["base_model"] else []) + diff
            raise TrainError(f"{out} was trained with different {', '.join(what)}; resuming would mix two runs. "
                             "Use another out=, or delete the folder to start over")
    out.mkdir(parents=True, exist_ok=True)
    run_file.write_text(json.dumps(key, indent=2, sort_keys=True, default=str) + "\n", encoding="utf-8")

    train_rows, val_rows = _split(_to_trl_rows(kind, data.rows), float(cfg["val_fraction"]), int(cfg["seed"]))
    dtype = _dtype(cfg)
    t_load = time.perf_counter()
    model, tok = load_base(base, dtype=dtype)
    load_s = time.perf_counter() - t_load
    cutoff_report = None
    if kind == "sft":   # how many examples the cutoff cuts, and the rule that cuts them (training/cutoff.py)
        train_rows, val_rows, cutoff_report = _cut_sft(cfg, tok, train_rows, val_rows)
    train_ds = HFDataset.from_list(train_rows)
    eval_ds = HFDataset.from_list(val_rows) if val_rows else None
    init = None
    if cfg.get("init_adapter"):
        from peft import PeftModel

        from agentic_repro.harness.embedded.peft import peft_dir_for
        from agentic_repro.training.identity import read_adapter_identity

        folder = peft_dir_for(cfg["init_adapter"])
        init = read_adapter_identity(folder)
        model = PeftModel.from_pretrained(model, str(folder), is_trainable=True)
        lora = None  # the init adapter's own shape; trl keeps a frozen copy of it as the KTO/DPO reference
    else:
        lc = cfg["lora"]
        lora = LoraConfig(r=int(lc["r"]), lora_alpha=int(lc["alpha"]), lora_dropout=float(lc["dropout"]),
                          target_modules=list(lc["target_modules"]), task_type="CAUSAL_LM")
    step_times: list[float] = []
    args = _trainer_args(cfg, out, eval_ds is not None, dtype)
    trainer = _make_trainer(kind, model, args, train_ds, eval_ds, tok, lora,
                            [*_callbacks(out, step_times), *callbacks])
    t0 = time.perf_counter()
    trainer.train(resume_from_checkpoint=str(ckpt) if ckpt else None)
    if eval_ds is not None:
        trainer.evaluate()
    train_s = time.perf_counter() - t0
    history = trainer.state.log_history
    plot_losses(history, out / "loss.png")

    adapter_dir = out / "adapter"
    trainer.model.save_pretrained(adapter_dir, selected_adapters=["default"])  # not trl's frozen "ref" copy
    gguf, export_s = None, None
    if cfg["export_gguf"]:
        t_export = time.perf_counter()
        from agentic_repro.training.llama_cpp import convert_lora_to_gguf

        base_cfg_dir = save_base_config(base, trainer.model, tok, out / "base-config")
        gguf = convert_lora_to_gguf(adapter_dir, base_cfg_dir, out / "adapter.gguf", outtype=str(cfg["gguf_outtype"]))
        export_s = round(time.perf_counter() - t_export, 2)
    losses = [float(h["loss"]) for h in history if "loss" in h]
    evals = [float(h["eval_loss"]) for h in history if "eval_loss" in h]
    name = str(cfg.get("name") or out.name)
    record = {
        "name": name, "kind": f"trained-{kind}", "base_model": base_id, "training_data_sha256": data.sha256,
        "training_data": {"path": str(data.path), "sha256": data.sha256, "kind": data.provenance.get("kind"),
                          "rows": len(data.rows), "sources": [s.get("run_id") for s in data.provenance.get("sources", [])],
                          "builder_version": data.provenance.get("builder_version")},
        "init_adapter": init, "config": cfg, "versions": _versions(), "steps": trainer.state.global_step,
        "first_loss": losses[0] if losses else None, "last_loss": losses[-1] if losses else None,
        "eval_loss": evals[-1] if evals else None, "cutoff": cutoff_report,
    }
    if gguf is not None:
        write_identity(gguf, record)
    write_identity(adapter_dir, {**record, "gguf_sha256": _sha(gguf) if gguf else None})
    sps = sorted(step_times)[len(step_times) // 2] if step_times else None
    result = {"out": str(out), "adapter_dir": str(adapter_dir), "gguf": str(gguf) if gguf else None,
              "steps": trainer.state.global_step, "resumed_from": str(ckpt) if ckpt else None,
              "losses": losses, "eval_losses": evals, "seconds_per_step_median": sps, "load_s": round(load_s, 2),
              "train_s": round(train_s, 2), "export_s": export_s, "device": "cuda" if torch.cuda.is_available() else "cpu",
              "threads": torch.get_num_threads(), "cutoff": cutoff_report}
    (out / "result.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return TrainResult(out, adapter_dir, gguf, record, losses, evals, trainer.state.global_step,
                       str(ckpt) if ckpt else None, sps)


def _cut_sft(cfg: dict[str, Any], tok: Any, train_rows: list[dict], val_rows: list[dict]
             ) -> tuple[list[dict], list[dict], dict[str, Any]]:
    """Measure the cutoff on every SFT example (printed, recorded) and, under ``truncation=llamafactory``, hand
    trl the rows already tokenized and cut by LLaMA-Factory's rule (trl's own ``max_length`` then cuts nothing);
    ``truncation=keep_start`` leaves the rows to trl's truncation."""
    from agentic_repro.training.cutoff import MODES, describe, measure, tokenized_rows

    mode = str(cfg.get("truncation", "keep_start"))
    if mode not in MODES:
        raise TrainError(f"truncation={mode!r}: choose one of {', '.join(MODES)} (configs/training/sft.yaml)")
    cutoff = None if cfg.get("max_length") is None else int(cfg["max_length"])
    report = {"truncation": mode, **measure(tok, train_rows + val_rows, cutoff)}
    print(describe(report, mode), file=sys.stderr, flush=True)
    if mode == "llamafactory":
        train_rows, val_rows = tokenized_rows(tok, train_rows, cutoff, mode), tokenized_rows(tok, val_rows, cutoff, mode)
    return train_rows, val_rows, report


def _sha(path: Path) -> str:
    from agentic_repro.training.identity import adapter_sha256

    return adapter_sha256(path)


def _versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {}
    for p in ("torch", "transformers", "peft", "trl", "gguf", "accelerate"):
        try:
            out[p] = md.version(p)
        except md.PackageNotFoundError:
            continue
    return out


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    kinds = [a for a in argv if a.startswith("kind=")]
    if not kinds:
        print("usage: python -m agentic_repro.training.train kind=sft|kto|dpo data=<dataset.jsonl> out=<folder> "
              "[base=local] [key=value ...]  (options: configs/training/<kind>.yaml)", file=sys.stderr)
        return 2
    kind = kinds[-1].split("=", 1)[1]
    try:
        cfg = compose_config(kind, [a for a in argv if not a.startswith("kind=")])
        res = train(cfg)
    except (TrainError, FileNotFoundError, ValueError) as exc:
        print(f"agentic_repro.training.train: {exc}", file=sys.stderr)
        return 2
    first = f"{res.losses[0]:.4f}" if res.losses else "n/a"
    last = f"{res.losses[-1]:.4f}" if res.losses else "n/a"
    sps = f"{res.seconds_per_step:.2f}" if res.seconds_per_step is not None else "n/a"
    print(f"trained {kind}: {res.steps} steps, loss {first} -> {last}, {sps} s/step; adapter {res.adapter_dir}"
          + (f", GGUF {res.gguf}" if res.gguf else "") + (f" (resumed from {res.resumed_from})" if res.resumed_from else ""))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
