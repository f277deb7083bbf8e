"""Critical values of Dixon's Q (r10) at 95% for n = 31..100, by Monte Carlo (ascendctl/perf/analyse.py DIXON_Q95).

Rorabacher (1991) tabulates n = 3..30 only. This draws N samples of n standard normal values, takes
Q = max(x2 - x1, xn - x(n-1)) / (xn - x1) and prints its 95th percentile; for n = 3..30 it reproduces the published
values within 0.003 (checked: 3 -> 0.970, 4 -> 0.830, 5 -> 0.711, 10 -> 0.466, 20 -> 0.344, 30 -> 0.297).

    .venv/bin/python tests/data/perf/dixon_q95.py > /tmp/q95.txt
"""

from __future__ import annotations

import numpy as np

N = 400_000


def main() -> None:
    rng = np.random.default_rng(20261126)
    for n in range(31, 101):
        x = np.sort(rng.standard_normal((N, n)), axis=1)
        spread = x[:, -1] - x[:, 0]
        q = np.maximum(x[:, 1] - x[:, 0], x[:, -1] - x[:, -2]) / spread
        print(n, f"{float(np.quantile(q, 0.95)):.3f}", flush=True)


if __name__ == "__main__":
    main()
