"""What the kernel's DAMON sees of a hotcold process: each second, every kdamond's
regions (its stat scheme's tried_regions) summed over hotcold's hot and cold ranges.

    python3 damon_view.py --ready FILE --seconds S [--views N] [--interval-ms 1000]
                          [--prefix P]

It reads for S seconds and at least N times (a slow guest reads less often).

kdamond 0 watches the process's virtual addresses (vaddr), kdamond 1, when there is one,
node 1's physical addresses (paddr). Each read prints one JSON line:

    {"kind": "damon-view", "t": s, "uptime": s, "vaddr": {"nr_regions": n,
     "max_nr_accesses": m, "hot": {"pages": n, "mean_nr_accesses": x,
     "hist": [pages with 0, 1, ... m]}, "cold": {...}},
     "paddr": {"nr_regions": n, "max_nr_accesses": m, "pages": [pages with 0, 1, ... m]}}

A region counts for a range by its pages inside it; paddr's histogram is over all of
node 1's frames (the hot range is the only thing there). Standard library only.
"""
from __future__ import annotations

import argparse
import json
import os
import time

K = "/sys/kernel/mm/damon/admin/kdamonds"
PAGE = 4096


def read_int(path: str) -> int:
    with open(path) as f:
        return int(f.read().split()[0])


def tried_regions(k: int) -> list:
    """(start, end, nr_accesses) of kdamond k's scheme 0's regions, fresh."""
    with open(f"{K}/{k}/state", "w") as f:
        f.write("update_schemes_tried_regions")
    base = f"{K}/{k}/contexts/0/schemes/0/tried_regions"
    out = []
    for d in sorted((d for d in os.listdir(base) if d.isdigit()), key=int):
        p = f"{base}/{d}"
        out.append((read_int(f"{p}/start"), read_int(f"{p}/end"), read_int(f"{p}/nr_accesses")))
    return out


def summary(regions, lo: int, hi: int, m: int) -> dict:
    """Pages of [lo, hi) by their region's nr_accesses, and the pages' mean."""
    hist = [0] * (m + 1)
    for s, e, nr in regions:
        n = (min(e, hi) - max(s, lo)) // PAGE
        if n > 0:
            hist[min(nr, m)] += n
    pages = sum(hist)
    mean = sum(i * h for i, h in enumerate(hist)) / pages if pages else None
    return {"pages": pages, "mean_nr_accesses": mean, "hist": hist}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ready", required=True, help="hotcold's ready file")
    ap.add_argument("--seconds", type=float, required=True)
    ap.add_argument("--views", type=int, default=0, help="read at least this many times")
    ap.add_argument("--interval-ms", type=float, default=1000)
    ap.add_argument("--prefix", default="")
    a = ap.parse_args()
    with open(a.ready) as f:
        ready = json.loads(f.read())
    hot, cold = ready["hot"], ready["cold"]
    ctxs = {"vaddr": 0}
    if read_int(f"{K}/nr_kdamonds") > 1:
        ctxs["paddr"] = 1
    t0, n = time.monotonic(), 0
    while time.monotonic() - t0 < a.seconds or n < a.views:
        n += 1
        time.sleep(a.interval_ms / 1000)
        out = {"kind": "damon-view", "t": round(time.monotonic() - t0, 3)}
        for name, k in ctxs.items():
            I = f"{K}/{k}/contexts/0/monitoring_attrs/intervals"
            m = read_int(f"{I}/aggr_us") // read_int(f"{I}/sample_us")
            regs = tried_regions(k)
            c = {"nr_regions": len(regs), "max_nr_accesses": m}
            if name == "vaddr":
                c["hot"] = summary(regs, hot[0], hot[1], m)
                c["cold"] = summary(regs, cold[0], cold[1], m)
            else:
                c["pages"] = summary(regs, 0, 1 << 62, m)["hist"]
            out[name] = c
        with open("/proc/uptime") as f:
            out["uptime"] = float(f.read().split()[0])
        print(a.prefix + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
