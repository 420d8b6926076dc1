"""The sorts of the hint faults' calendar and of PEBS's samples (issue 18):
`structures.argsort_untied` (a bucket sort from `SMALL` to `BUCKET_MAX` keys, numpy's
quicksort beyond) against numpy's argsort and gather, on keys like theirs: uniform
(a PEBS poll's sample works, a calendar bucket's fault works), exponential, and two
lumps (the bucket sort gives up and numpy sorts). Prints CPU ns a key, warm, each the
best of `--repeat` rounds.

    .venv/bin/python benchmarks/bench_sorts.py [--sizes 4096,16384,65536,262144]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from tierlab import structures



def _best(fn, keys, repeat: int, calls: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        for _ in range(calls):
            fn(keys)
        best = min(best, (time.process_time() - t) / calls)
    return best / keys.shape[0] * 1e9


def _numpy(keys):
    order = np.argsort(keys)
    return order, keys[order]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="4096,16384,65536,262144")
    ap.add_argument("--repeat", type=int, default=5)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    print("| keys | n | argsort_untied ns/key | numpy argsort + gather ns/key |")
    print("|---|---:|---:|---:|")
    for n in (int(x) for x in a.sizes.split(",")):
        kinds = {"uniform": 5.0 + rng.random(n) * 3.0,
                 "exponential": rng.exponential(size=n),
                 "two lumps": np.concatenate((rng.random(n // 2) * 1e-3,
                                              1.0 + rng.random(n - n // 2)))}
        calls = max(1, 2_000_000 // n)
        for name, keys in kinds.items():
            order, k = structures.argsort_untied(keys)  # compiles
            assert np.array_equal(order, np.argsort(keys, kind="stable"))
            ours = _best(structures.argsort_untied, keys, a.repeat, calls)
            ref = _best(_numpy, keys, a.repeat, calls)
            print(f"| {name} | {n} | {ours:.1f} | {ref:.1f} |")


if __name__ == "__main__":
    main()
