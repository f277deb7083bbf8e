"""The collect bundle: its writer (collect.py) and its summaries (summaries.py)."""
