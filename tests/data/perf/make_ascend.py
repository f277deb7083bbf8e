"""Write tests/data/perf/ascend/: a format-true torch_npu profiler output of 4 ranks with rank 1 slow and link 2->3 slow.

Made, not captured (no Ascend machine here): the step_trace_time.csv header is the real one
(tests/data/samples/ascend/msprof_summary_csv_headers_from_source.txt, read here: torch_npu TraceStepTimeParser.title), the
directory layout (`<host>_<pid>_<time>_ascend_pt/profiler_info_<rank>.json`, `ASCEND_PROFILER_OUTPUT/`) and the keys of
communication.json / communication_matrix.json are those msprof-analyze's cluster_analyse reads (tests/data/perf/INDEX.md).
Deterministic: run it again and the files are the same. The second form writes tests/data/perf/ascend64/: 64 ranks,
rank 45 slow, link 20->21 slow, 3 steps, compact JSON.

    .venv/bin/python tests/data/perf/make_ascend.py
    .venv/bin/python tests/data/perf/make_ascend.py --ranks 64 --steps 3 --slow-rank 45 --slow-link 20,21 --out ascend64
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

RANKS = 4
STEPS = 6
SLOW_RANK = 1
SLOW_LINK = (2, 3)
# the real header, taken from the captured list in the repository (tests/data/samples/ascend/INDEX.md has its source)
SAMPLE = Path(__file__).resolve().parent.parent / "samples" / "ascend" / "msprof_summary_csv_headers_from_source.txt"
HEADER = next(line for line in SAMPLE.read_text(encoding="utf-8").splitlines() if line.startswith("Step,Computing,"))
GROUP = "14183311223327010417"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=RANKS)
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--slow-rank", type=int, default=SLOW_RANK)
    parser.add_argument("--slow-link", default=",".join(map(str, SLOW_LINK)))
    parser.add_argument("--out", default="ascend")
    args = parser.parse_args()
    src_dst = tuple(int(x) for x in args.slow_link.split(","))
    write(Path(__file__).resolve().parent / args.out, args.ranks, args.steps, args.slow_rank, (src_dst[0], src_dst[1]),
          indent=1 if args.ranks <= 8 else None)


def write(out: Path, ranks: int, steps: int, slow_rank: int, slow_link: tuple[int, int], *, indent: int | None) -> None:
    """One rank directory per rank under `out`."""
    for rank in range(ranks):
        root = out / f"node{rank // 8}_{41230 + rank}_20261126095500123_ascend_pt"  # 8 ranks a node
        data = root / "ASCEND_PROFILER_OUTPUT"
        data.mkdir(parents=True, exist_ok=True)
        (root / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}) + "\n")
        rows = [HEADER]
        comm: dict[str, dict[str, dict[str, object]]] = {}
        matrix: dict[str, dict[str, dict[str, object]]] = {}
        for step in range(1, steps + 1):
            jitter = ((rank * 7 + step * 3) % 5) * 40.0  # us: a little noise, the same on every run
            computing = 42000.0 + jitter + (13000.0 if rank == slow_rank else 0.0)
            wait = 400.0 + jitter / 4 if rank == slow_rank else 13000.0 + jitter
            transit = 2100.0 + jitter / 10
            communication = wait + transit
            overlapped = 900.0
            not_overlapped = communication - overlapped
            free = 300.0 + jitter / 2
            rows.append(f"{step},{computing:.3f},{not_overlapped:.3f},{overlapped:.3f},{communication:.3f},{free:.3f},"
                        f"0,0,{not_overlapped:.3f}")
            ops: dict[str, object] = {}
            links: dict[str, object] = {}
            for index in range(2):
                name = f"hcom_allReduce__{512 + index}_{step * 2 + index}_1@{GROUP}"
                ops[name] = {
                    "Communication Time Info": {
                        "Start Timestamp(us)": 1764150900000000.0 + step * 60000 + index * 3000,
                        "Elapse Time(ms)": round(communication / 2000, 6), "Transit Time(ms)": round(transit / 2000, 6),
                        "Wait Time(ms)": round(wait / 2000, 6), "Synchronization Time(ms)": round(wait / 2500, 6),
                        "Idle Time(ms)": 0.0, "Wait Time Ratio": round(wait / communication, 4),
                        "Synchronization Time Ratio": round(wait / 1.25 / communication, 4)},
                    "Communication Bandwidth Info": {
                        "HCCS": {"Transit Size(MB)": 48.0, "Transit Time(ms)": round(transit / 2000, 6),
                                 "Bandwidth(GB/s)": round(48.0 / (transit / 2000), 4), "Large Packet Ratio": 1.0,
                                 "Size Distribution": {"16.0": [3, round(transit / 2000, 6)]}},
                        "RDMA": {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0, "Large Packet Ratio": 0,
                                 "Size Distribution": {}}}}
                pairs: dict[str, object] = {}
                for src in range(ranks):
                    dst = (src + 1) % ranks
                    if rank not in (src, dst):
                        continue  # each rank lists the links it sends or receives on
                    time_ms = 0.88 + ((src % 8) * 0.01) + (rank == dst) * 0.05  # the receiver's view includes a little wait
                    if (src, dst) == slow_link:
                        time_ms *= 3.0
                    pairs[f"{src}-{dst}"] = {"Transport Type": "HCCS", "Transit Size(MB)": 16.0,
                                             "Transit Time(ms)": round(time_ms, 4),
                                             "Bandwidth(GB/s)": round(16.0 / time_ms, 4), "op_name": name.split("@")[0]}
                links[name] = pairs
            comm[f"step{step}"] = {"collective": ops, "p2p": {}}  # type: ignore[dict-item]
            matrix[f"step{step}"] = {"collective": links, "p2p": {}}  # type: ignore[dict-item]
        (data / "step_trace_time.csv").write_text("\n".join(rows) + "\n")
        (data / "communication.json").write_text(json.dumps(comm, indent=indent) + "\n")
        (data / "communication_matrix.json").write_text(json.dumps(matrix, indent=indent) + "\n")


if __name__ == "__main__":
    main()
