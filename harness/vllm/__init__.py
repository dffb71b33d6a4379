"""vLLM as a backbone on this machine: its own venv (``make install-vllm``), the embedded GGUF converted for it,
a managed OpenAI-compatible server (``backbone=vllm-cpu``) and the engine in a process of its own
(``backbone=vllm-inprocess``). The harness and vLLM pin different torch/transformers versions, so vLLM never runs in
the harness's interpreter here; ``convert.py`` and ``worker.py`` are scripts the vLLM venv runs (standard library and
vLLM only), the other modules are the harness's side. docs/backbones.md ("vLLM on this machine") has the why.
"""
