"""Benchmarks (loaders, prompts, scoring) and the pure scoring pieces: extraction, equivalence, F1, sandbox."""
