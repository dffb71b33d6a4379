"""AUQ: Agentic Uncertainty Quantification (arXiv 2601.15703): UAM, UAR, Dual-Process, trajectory metrics."""
