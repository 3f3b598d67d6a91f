"""The user docs; ``python -m docs.tables`` regenerates their tables from docs/results/."""
