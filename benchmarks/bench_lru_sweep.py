"""kswapd's list sweep at bench_scale's size (issue 18): a 28.8 M-page map (110 GiB of
4 KiB pages), the hand's batches of one list taken from 4 points around it, by
`lru.lru_sweep` (the walk, the accessed-bit draws and the list changes in one
pass) and by the three passes it replaced (`pages_on`, `draw_accessed`,
`set_active`), on the same state, which both leave identical (checked). Prints ns a
page, best of the repeats, warm.

Layouts (`--layout`): `dense` (a quarter of the pages on the node, 85% of them active,
the active hand's batches); `sparse` (2% on the node); `clustered` (14% on the node,
its inactive pages in 13% of the 512-page blocks, as counted in a 40 s autonuma-tiering
run at bench_scale; the inactive hand's batches).

    .venv/bin/python benchmarks/bench_lru_sweep.py [--layout dense,sparse,clustered]
        [--repeat 3]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from tierlab.engine.memory import PassTimes
from tierlab.engine import lru, pagemap
from tierlab.monitors import draws
from tierlab import structures

NPAGES = 28_800_000
ACTIVE = 1


def layout(name: str, rng):
    """(node map, ACTIVE flags, the list swept: active or not, batch size: each batch
    ends before the next one's start, 7.2 M addresses on)."""
    node = np.full(NPAGES, 2, np.uint8)
    if name == "clustered":
        node[rng.random(NPAGES) < 0.14] = 0
        act = np.ones(NPAGES, bool)
        blocks = np.repeat(rng.random(NPAGES // 512) < 0.13, 512)
        act[blocks & (rng.random(NPAGES) < 0.45)] = False
        return node, act, False, 50_000
    dense = name == "dense"
    node[rng.random(NPAGES) < (0.25 if dense else 0.02)] = 0
    return node, rng.random(NPAGES) < 0.85, True, 1_000_000 if dense else 100_000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--layout", default="dense,sparse,clustered")
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    passes = PassTimes(NPAGES)
    for s in range(0, NPAGES, NPAGES // 20):
        passes.set(s, s + NPAGES // 40, s / NPAGES)
    starts = np.sort(rng.choice(NPAGES, 100, replace=False)).astype(np.int64)
    starts[0] = 0
    ends = np.concatenate(([0], starts[1:], [NPAGES])).astype(np.int64)
    tables = (starts, np.zeros(2, np.int64), rng.random(101) * 3e-9, ends,
              np.array([0.0]), np.array([False]), np.array([2e9]), False)
    w_tab = np.asarray(passes.times) * 1e9
    keep = ~np.uint8(7)
    for name in a.layout.split(","):
        node, act, active, batch = layout(name, rng)
        bits = pagemap.NodeBits(node, 4)
        act_words = structures.PageBits(act).words
        on = not active

        def separate(flags, sel, g, nr, s):
            pages, _, _, (which, _) = bits.pages_on(0, s, batch, sel=sel, sel_on=active,
                                                    passes=passes)
            ref = np.zeros(len(pages), bool)
            draws.draw_accessed(ref, g, pages, which, False, w_tab, tables)
            lru.set_active(flags, node, pages, on, ACTIVE, ACTIVE if on else 0, keep,
                               nr, sel, sel=ref, sel_val=on)
            return len(pages)

        def fused(flags, sel, g, nr, s):
            return lru.lru_sweep(bits, 0, s, batch, sel, active, passes, w_tab, tables,
                                     g, flags, node, on, ACTIVE, ACTIVE if on else 0, keep,
                                     nr, on, 0)[2]

        def run(fn):
            flags, sel = act.astype(np.uint8), act_words.copy()
            g, nr = np.random.default_rng(5), np.zeros(4, np.int64)
            t, n = time.perf_counter(), 0
            for s in range(0, NPAGES, NPAGES // 4):
                n += fn(flags, sel, g, nr, s)
            return (time.perf_counter() - t) / n * 1e9, (flags, sel, nr, g.random(2))

        run(separate), run(fused)  # compiles
        best = {"separate": np.inf, "fused": np.inf}
        for _ in range(a.repeat):
            ts, ws = run(separate)
            tf, wf = run(fused)
            assert all(np.array_equal(x, y) for x, y in zip(ws, wf)), "the passes differ"
            best["separate"], best["fused"] = min(best["separate"], ts), min(best["fused"], tf)
        print(f"{name}: lru_sweep {best['fused']:.2f} ns a page, the three passes "
              f"{best['separate']:.2f}")


if __name__ == "__main__":
    main()
