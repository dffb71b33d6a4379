"""DenoiseFlow (arXiv 2603.00532): Sensing -> Regulating -> Correcting with online calibration.

Entry point for the harness: ``agentic_repro.denoiseflow.method:DenoiseFlow`` (``configs/method/denoiseflow.yaml``).
See ``denoiseflow/README.md`` for every option, its source, and the ablation switches.
"""
