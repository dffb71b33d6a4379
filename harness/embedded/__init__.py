"""The embedded backbone's serving: llama-server's build (build), its launch and pool (server), the GGUF model
files (gguf), the in-process peft backbone (peft), and the watchdog that stops a server when the harness dies
(parent_watch). Kept apart from the core so that ``harness/`` reads without them: the core only reaches these
through ``agentic_repro.harness.backbones`` and the runner's server pool."""
