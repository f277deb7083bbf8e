"""Performance profiles of every rank: who is slow, which link is slow, how much of a step is communication.

`read.py` reads PyTorch profiler Chrome traces and Ascend (torch_npu / msprof-analyze) step_trace_time.csv,
communication.json and communication_matrix.json into `model.RankInput`s; `analyse.py` votes for the slow rank,
judges the links and writes the verdict. Pure readers and arithmetic: no nodes, no typer, no rich.
"""
