"""Baseline methods, each faithful to its own paper (see baselines/README.md)."""
