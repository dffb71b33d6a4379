"""Command-line entry points: data fetching, reproduction targets, tables and figures (run with ``python -m``)."""
