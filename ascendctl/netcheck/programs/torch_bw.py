"""ascendctl netcheck: point-to-point bandwidth between two nodes with torch.distributed (gloo, CPU tensors).

Runs as `python - ARGS` with this file on stdin; GLOO_SOCKET_IFNAME names the cluster interface.
server BIND_IP SIZE TIMEOUT MODE
    rank 0: a TCPStore on BIND_IP (port chosen by the kernel), prints `PORT <n>`.
client SERVER_IP PORT SIZE TIMEOUT MODE
    rank 1, joining through that store.
MODE `both`: each rank sends SIZE bytes to the other and receives SIZE bytes at the same time;
MODE `send`: only rank 1 sends. Each rank prints one JSON line {"recv_bytes", "recv_seconds"}.
"""

from __future__ import annotations

import json
import sys
import time
from datetime import timedelta


def run(rank: int, host: str, port: int, size: int, timeout: float, mode: str) -> dict[str, float]:
    import torch
    import torch.distributed as dist

    store = dist.TCPStore(host, port, 2, rank == 0, timedelta(seconds=timeout), wait_for_workers=False)
    if rank == 0:
        print(f"PORT {store.port}", flush=True)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=2, timeout=timedelta(seconds=timeout))
    peer = 1 - rank
    sending = mode == "both" or rank == 1
    receiving = mode == "both" or rank == 0
    out = torch.zeros(size, dtype=torch.uint8)
    into = torch.empty(size, dtype=torch.uint8)
    warm = torch.zeros(1, dtype=torch.uint8)
    dist.all_reduce(warm)  # both ranks connected before the clock starts
    started = time.monotonic()
    send = dist.isend(out, peer) if sending else None
    recv = dist.irecv(into, peer) if receiving else None
    seconds = 0.0
    if recv is not None:
        recv.wait()
        seconds = time.monotonic() - started
    if send is not None:
        send.wait()
    dist.barrier()
    dist.destroy_process_group()
    return {"recv_bytes": float(size if receiving else 0), "recv_seconds": seconds}


def main(argv: list[str]) -> int:
    try:
        if argv[:1] == ["server"] and len(argv) == 5:
            result = run(0, argv[1], 0, int(argv[2]), float(argv[3]), argv[4])
        elif argv[:1] == ["client"] and len(argv) == 6:
            result = run(1, argv[1], int(argv[2]), int(argv[3]), float(argv[4]), argv[5])
        else:
            print("usage: server BIND_IP SIZE TIMEOUT MODE | client SERVER_IP PORT SIZE TIMEOUT MODE", file=sys.stderr)
            return 2
    except Exception as exc:  # any failure (import, rendezvous, gloo) is reported as one line, never a traceback
        print(f"torch_bw {argv[0] if argv else ''}: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
