"""Preflight checks: model.py (results, facts, the two kinds of check), registry.py (all checks, in order), and one
module per area (clock, names, network, npu, system)."""
