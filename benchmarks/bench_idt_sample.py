"""IDT's cost per sampling interval with its full-scale 1,000-10,000 regions
(docs/model.md, Scale): one `tierlab run` of `idt` per workload in this process, timed
on the CPU clock, divided by the 10 ms samples it simulated; also the mean region count
at the end and the share of the run spent in IDT's per-sample path (`IdtRegions._tick`).
The run is profiled (cProfile) to get that share, so the times include its overhead.

    .venv/bin/python benchmarks/bench_idt_sample.py [--workloads gups:hotset,graph:pr]
        [--machine optane-4tier] [--scale 1/64] [--policy idt]
"""
from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from fractions import Fraction

from tierlab import api


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workloads", default="gups:hotset,graph:pr")
    ap.add_argument("--machine", default="optane-4tier")
    ap.add_argument("--scale", default="1/64")
    ap.add_argument("--policy", default="idt")
    a = ap.parse_args()
    scale = float(Fraction(a.scale))
    print("| workload | regions | samples | CPU s | us per sample | in the sample path |")
    print("|---|---:|---:|---:|---:|---:|")
    for w in a.workloads.split(","):
        sim = api.simulation(a.machine, w, a.policy, scale=scale)
        prof = cProfile.Profile()
        t = time.process_time()
        prof.enable()
        sim.run()
        prof.disable()
        cpu = time.process_time() - t
        mon = sim.policy.monitor
        samples = round(sim.now / mon.sample_interval)
        tick = next((v[3] for k, v in pstats.Stats(prof).stats.items()
                     if k[2] == "_tick" and k[0].endswith("idt_regions.py")), 0.0)
        print(f"| {w} | {len(mon.regions.start):,} | {samples:,} | {cpu:.1f} | "
              f"{1e6 * cpu / max(samples, 1):.0f} | {100 * tick / max(cpu, 1e-9):.0f}% |")


if __name__ == "__main__":
    main()
