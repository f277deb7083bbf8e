"""Is this cluster ready: the checks (checks/) and the run that asks every node in parallel (run.py)."""
