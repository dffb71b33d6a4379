"""Interactive agent environments (ALFWorld, WebShop): benchmarks whose problems are episodes, scored by the
environment through the core's protocol (harness/env.py). See envs/README.md."""
