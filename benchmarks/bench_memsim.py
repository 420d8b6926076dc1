"""Issue 18, target 1: HeMem's memsim scenario at full scale, every registered policy in
at most 10 s wall and 2 GiB peak RSS (16 bytes per 4 KiB page); with 10x the updates in
at most 2x that wall.

    .venv/bin/python benchmarks/bench_memsim.py [--policies hemem,tpp] [--updates-x 10]
        [--profile POLICY] [--records FILE]

GUPS over 512 GiB (134 M pages of 4 KiB) with a 1 GiB hot set (90% of the updates), 87 M
updates from one thread (memsim replays one stream of accesses), on benchmarks/memsim.toml (42 GiB fast at 82 ns + 512 GiB slow at 1000 ns),
`--scale 1`. Each policy runs in a fresh process (its own peak RSS); the table gives
wall, CPU (user + sys of that process: other load on the machine inflates wall, not
CPU), peak RSS and peak RSS over pages. `--profile P` runs policy P in this process
under cProfile instead and prints the top functions.
"""
from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _harness import parser, run_policies, save_records, table  # noqa: E402

PAGES = 512 * 2**30 // 4096


def kwargs(policy: str, updates_x: float, seed: int) -> dict:
    return {"machine": str(HERE / "memsim.toml"), "policy": policy, "seed": seed,
            "workload": f"gups:hotset,size=512GiB,hot=1GiB,threads=1,updates={87e6 * updates_x:.6g}",
            "scale": 1.0}


def main():
    ap = parser(__doc__, "--updates-x", 1.0, "multiply the 87 M updates")
    a = ap.parse_args()
    rows = run_policies(a, lambda p: kwargs(p, a.updates_x, a.seed), PAGES)
    if rows is None:
        return
    print(f"\n512 GiB GUPS (memsim.toml), {87 * a.updates_x:g} M updates, seed {a.seed}:")
    print(table(rows, 10.0 * (2 if a.updates_x > 1 else 1), 2.0, 16.0))
    save_records(rows, a.records)


if __name__ == "__main__":
    main()
