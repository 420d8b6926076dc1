"""Issue 18, target 4: the wall of `tierlab reproduce idt` at `--scale 1/8` and at
`--scale 1`, estimated from a measured sample of its runs.

    .venv/bin/python benchmarks/bench_repro_estimate.py [--scales 1/64,1/8]
        [--sample W:P,W:P,..] [--total-cpu-min 61.6] [--timeout S]

Runs each sampled (workload, policy) of the reproduction (optane-4tier, seed 0) at
every scale, one fresh process per run (CPU = user + sys of that process), and
estimates the whole reproduction at each scale by the ratio estimator: the measured
CPU of the whole reproduction at the first scale (`--total-cpu-min`, from
docs/benchmarks.md: `time tierlab reproduce idt` at 1/64) times the sample's CPU at that
scale over its CPU at the first. The spread of the per-run ratios is printed beside it:
the estimate is only as good as the sample's spread. Wall on this 2-core machine is the
CPU over 2 (the reproduction runs `--jobs 2`).
"""
from __future__ import annotations

import argparse
import math
import sys
from fractions import Fraction
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _harness import run_isolated  # noqa: E402

#: one run per @baselines workload, the policies rotated over the reproduction's kinds
#: (hint faults, kswapd, DAMON, IDT, PEBS-free baselines, the oracle)
SAMPLE = ["gups:uniform:autonuma", "gups:hotset:idt", "gups:dynamic:tpp",
          "graph:pr:damon-tiering", "ycsb:a:autonuma-tiering", "ycsb:d:autotiering",
          "stream:tiering-0.8", "masim:tiering:oracle"]


def split(item: str) -> tuple[str, str]:
    w, p = item.rsplit(":", 1)
    return w, p


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scales", default="1/64,1/8")
    ap.add_argument("--sample", default=",".join(SAMPLE),
                    help="WORKLOAD:POLICY items, comma-separated")
    ap.add_argument("--total-cpu-min", type=float, default=61.6,
                    help="measured CPU minutes of the whole reproduction at the first scale")
    ap.add_argument("--timeout", type=float, default=None, help="wall seconds per run")
    a = ap.parse_args()
    scales = [Fraction(s) for s in a.scales.split(",")]
    items = [split(x) for x in a.sample.split(",")]
    cpu = {}
    for w, p in items:
        for s in scales:
            r = run_isolated({"machine": "optane-4tier", "workload": w, "policy": p,
                              "seed": 0, "scale": float(s)}, 1, a.timeout)
            cpu[(w, p, s)] = r["cpu_s"] if r.get("ok") else math.nan
            print(f"{w} {p} scale {s}: " + (f"{r['cpu_s']:.1f} s CPU, {r['wall_s']:.1f} s "
                                             f"wall" if r.get("ok") else r.get("error",
                                                                                 "stopped")),
                  flush=True)
    base = scales[0]
    print(f"\nwhole reproduction (212 runs + 20 trace runs), from {a.total_cpu_min:g} CPU "
          f"min at {base}:")
    for s in scales[1:]:
        ok = [(w, p) for w, p in items if not math.isnan(cpu[(w, p, s)])
              and not math.isnan(cpu[(w, p, base)])]
        if not ok:
            print(f"  scale {s}: no sampled run finished")
            continue
        tot = sum(cpu[(w, p, s)] for w, p in ok) / sum(cpu[(w, p, base)] for w, p in ok)
        each = [cpu[(w, p, s)] / cpu[(w, p, base)] for w, p in ok]
        est = a.total_cpu_min * tot
        print(f"  scale {s}: x{tot:.1f} the CPU of {base} (per run x{min(each):.1f} .. "
              f"x{max(each):.1f}, {len(ok)} runs): about {est:.0f} CPU min, "
              f"{est / 2 / 60:.1f} h wall on 2 cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
