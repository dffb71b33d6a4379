"""Training DyFlow's designer (paper §3.3, appendix D.2): self-play stages -> SFT -> KTO on a LoRA.

``agentic_repro.dyflow.train.collect`` turns finished DyFlow runs into (f_summary(s_t) -> G_t) examples labelled by the
trajectory's outcome; ``agentic_repro.dyflow.train.pipeline`` chains collection, SFT and KTO through ``agentic_repro.training.train``.
"""
