"""Training on results: datasets built from run folders, SFT/KTO/DPO with trl on a peft LoRA, adapters exported
as a peft directory and as a GGUF LoRA that the embedded llama.cpp server (and vLLM, and peft) can serve.

Importing this package imports nothing heavy; torch, transformers, peft and trl (extra ``train``) are imported by
the modules that need them.
"""
