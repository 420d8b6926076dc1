"""AutoTiering's LAP list at bench_memsim's size (issue 18): `pagemap.pages_by_byte`
over a 134 M-page map (512 GiB of 4 KiB pages) whose DRAM node holds a first-touched
run of 10 M pages and 1.5 M pages its promotions scattered over the rest, so every
block holds some and none is skipped. Prints the CPU of each call, warm.

    .venv/bin/python benchmarks/bench_lap_list.py [--calls 3] [--scattered 1500000]
"""
from __future__ import annotations

import argparse
import time

import numpy as np
from tierlab.engine import pagemap


NPAGES = 134_217_728
BLOCK = 512  #: engine.memory.BLOCK


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--run", type=int, default=10_000_000, help="first-touched DRAM pages")
    ap.add_argument("--scattered", type=int, default=1_500_000,
                    help="DRAM pages scattered over the rest")
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    node = np.ones(NPAGES, np.uint8)
    node[: a.run] = 0
    node[rng.integers(a.run, NPAGES, a.scattered)] = 0
    blocks = np.zeros((NPAGES // BLOCK, 2), np.int64)
    for k in range(2):
        blocks[:, k] = (node.reshape(-1, BLOCK) == k).sum(1)
    hist = rng.integers(0, 256, NPAGES, dtype=np.uint8)
    lut = rng.integers(0, 9, 256).astype(np.uint8)
    out = pagemap.pages_by_byte(node, blocks, BLOCK, 0, hist, lut)  # compiles
    for _ in range(a.calls):
        t = time.process_time()
        out = pagemap.pages_by_byte(node, blocks, BLOCK, 0, hist, lut, out)
        print(f"pages_by_byte: {out.shape[0]:,} pages of the node, "
              f"{time.process_time() - t:.3f} s of CPU")


if __name__ == "__main__":
    main()
