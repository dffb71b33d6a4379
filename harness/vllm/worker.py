"""vLLM's offline engine (``vllm.LLM``) in a process of its own, spoken to over stdin/stdout in JSON lines.

Run by the vLLM venv's interpreter as a script (standard library and vLLM only, none of the harness):

    .venv-vllm/bin/python harness/vllm/worker.py '{"model": "<folder>", "max_model_len": 4096, ...}'

The argument is ``vllm.LLM``'s keyword arguments. The worker prints ``{"ready": true, "vllm_version": ...}`` once the
engine is up, then answers each request line ``{"id", "messages", "sampling", "n", "lora": [name, path] | null}``
with ``{"id", "prompt_tokens", "outputs": [{"text", "completion_tokens", "finish_reason"}]}`` or
``{"id", "error": "..."}``. Requests that arrive while the engine is busy are run together in one ``LLM.chat`` call
(the engine batches them). The protocol has the original stdout to itself: vLLM's logs go to stderr. It exits when
stdin closes.
"""
from __future__ import annotations

import json
import os
import queue
import sys
import threading

_out = os.fdopen(os.dup(1), "w", buffering=1)  # the protocol's stream
os.dup2(2, 1)                                  # everything else printed (vLLM's logs) goes to stderr

MAX_BATCH = 64


def _send(obj: dict) -> None:
    _out.write(json.dumps(obj) + "\n")
    _out.flush()


def _params(req: dict):
    from vllm import SamplingParams  # pyright: ignore[reportMissingImports]  (the gpu extra)

    s = dict(req.get("sampling") or {})
    logprobs = s.pop("top_logprobs", None) if s.pop("logprobs", False) else None
    s.pop("top_logprobs", None)
    return SamplingParams(n=int(req.get("n") or 1), logprobs=logprobs, **s)


def _lora(req: dict, ids: dict[str, int]):
    if not req.get("lora"):
        return None
    from vllm.lora.request import LoRARequest  # pyright: ignore[reportMissingImports]  (the gpu extra)

    name, path = req["lora"]
    ids.setdefault(name, len(ids) + 1)
    return LoRARequest(name, ids[name], path)


def _reader(lines: queue.Queue) -> None:
    for line in sys.stdin:
        lines.put(line)
    lines.put(None)  # stdin closed: the harness is done


def _read_batch(lines: queue.Queue) -> list[dict] | None:
    """One request (waiting for it), plus every request already waiting."""
    line = lines.get()
    if line is None:
        return None
    batch = [json.loads(line)]
    while len(batch) < MAX_BATCH:
        try:
            more = lines.get_nowait()
        except queue.Empty:
            break
        if more is None:
            lines.put(None)
            break
        batch.append(json.loads(more))
    return batch


def _answer(llm, batch: list[dict], ids: dict[str, int]) -> None:
    ok, params, loras = [], [], []
    for req in batch:
        try:
            params.append(_params(req))
            loras.append(_lora(req, ids))
            ok.append(req)
        except Exception as exc:  # noqa: BLE001 - a bad request is that request's error, not the batch's
            _send({"id": req.get("id"), "error": f"{type(exc).__name__}: {exc}"})
    if not ok:
        return
    try:
        outs = llm.chat([r["messages"] for r in ok], params, use_tqdm=False,
                        lora_request=loras if any(loras) else None)
    except Exception as exc:  # noqa: BLE001 - sent back as each request's error (the harness raises it)
        for r in ok:
            _send({"id": r.get("id"), "error": f"{type(exc).__name__}: {exc}"})
        return
    for r, out in zip(ok, outs):
        _send({"id": r.get("id"), "prompt_tokens": len(out.prompt_token_ids or []),
               "outputs": [{"text": o.text, "completion_tokens": len(o.token_ids), "finish_reason": o.finish_reason,
                            "logprobs": _logprobs(o)} for o in out.outputs]})


def _logprobs(o) -> list[dict] | None:
    if not o.logprobs:
        return None
    out = []
    for tok, lp in zip(o.token_ids, o.logprobs):
        chosen = lp.get(tok)
        out.append({"token": getattr(chosen, "decoded_token", None), "logprob": getattr(chosen, "logprob", None)})
    return out


def main(argv: list[str]) -> int:
    engine_args = json.loads(argv[0]) if argv else {}
    import vllm  # pyright: ignore[reportMissingImports]  (the gpu extra)
    from vllm import LLM  # pyright: ignore[reportMissingImports]  (the gpu extra)

    llm = LLM(**engine_args)
    _send({"ready": True, "vllm_version": vllm.__version__, "pid": os.getpid()})
    ids: dict[str, int] = {}
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(lines,), daemon=True).start()
    while (batch := _read_batch(lines)) is not None:
        _answer(llm, batch, ids)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
