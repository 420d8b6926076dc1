"""Issue 20: estimate the wall time of the full-scale IDT reproduction (`tierlab
reproduce idt --scale 1`) on N workers from a random sample of its runs
(docs/cluster.md).

    .venv/bin/python benchmarks/bench_cluster_estimate.py [--sample 24] [--seed 0]
        [--jobs 2] [--out /tmp/bench-cluster]

Run from the repository's root (the real-trace rows read tests/data/traces). Each run
of the sample is timed in its process by CPU time (what it takes on a dedicated core,
however busy this machine is) and by wall; one JSON line per finished run goes to
OUT/sample.jsonl, and the same command continues an interrupted measurement. Prints
the estimate as JSON: the total is the number of runs times the sample's mean run (95%
interval from the sample's spread), and N one-core workers take about max(total / N,
the longest run).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict
from pathlib import Path

from tierlab import api
from tierlab.reports.reproduce import (IDT_ABLATIONS, IDT_BASELINES, IDT_TRACE_MACHINE,
                                       IDT_TRACES)

TWO_TIER = ["autonuma", "autonuma-tiering-mglru", "tpp", "damon-tiering", "idt", "oracle"]
WORKERS = (1, 2, 8, 16, 32, 64, 128)


def reproduction_jobs(scale: float) -> list:
    """The distinct runs of `reproduce idt` at `scale` (its four comparisons, as
    reports/reproduce.py's reproduce_idt and idt_real_traces call them)."""
    wl = api.SUITES["baselines"]
    jobs = (api.jobs_for(["optane-4tier"], wl, IDT_BASELINES + ["idt", "oracle"],
                         scale=scale)
            + api.jobs_for(["optane-4tier"], wl, IDT_ABLATIONS[1:] + ["autonuma"],
                           scale=scale)
            + api.jobs_for(["optane-2tier"], wl, TWO_TIER, scale=scale)
            + api.jobs_for([IDT_TRACE_MACHINE], IDT_TRACES,
                           IDT_BASELINES + ["idt", "oracle"]))
    return list(dict.fromkeys(jobs))


def timed(job) -> dict:
    """One run: its spec, CPU seconds and wall seconds."""
    cpu, wall = time.process_time(), time.perf_counter()
    api._run_job(job)
    return {"job": asdict(job), "cpu_s": time.process_time() - cpu,
            "wall_s": time.perf_counter() - wall}


def estimate(cpu: list[float], runs: int) -> dict:
    """Total and per-N walls from the sample's per-run CPU seconds."""
    k = len(cpu)
    mean = sum(cpu) / k
    sd = math.sqrt(sum((x - mean) ** 2 for x in cpu) / (k - 1)) if k > 1 else 0.0
    total = runs * mean
    half = 1.96 * runs * sd / math.sqrt(k) * math.sqrt(max(0.0, 1 - k / runs))
    longest = max(cpu)
    return {"runs": runs, "sample": k, "mean_run_s": mean, "sd_run_s": sd,
            "longest_run_s": longest, "total_s": total, "total_95_halfwidth_s": half,
            "workers": {n: {"wall_s": max(total / n, longest),
                            "range_s": [max((total - half) / n, longest),
                                        (total + half) / n + longest]}
                        for n in WORKERS}}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--out", default="/tmp/bench-cluster")
    a = ap.parse_args()
    allj = reproduction_jobs(a.scale)
    sample = random.Random(a.seed).sample(allj, min(a.sample, len(allj)))
    log = Path(a.out) / "sample.jsonl"
    log.parent.mkdir(parents=True, exist_ok=True)
    got = [json.loads(x) for x in log.read_text().splitlines()] if log.exists() else []
    done = {json.dumps(g["job"], sort_keys=True) for g in got}
    todo = [j for j in sample if json.dumps(asdict(j), sort_keys=True) not in done]
    t = time.perf_counter()
    with ProcessPoolExecutor(a.jobs) as ex, log.open("a") as f:
        for fut in as_completed([ex.submit(timed, j) for j in todo]):
            g = fut.result()
            got.append(g)
            f.write(json.dumps(g) + "\n")
            f.flush()
            print(f"[{len(got)}/{len(sample)}] {g['job']['workload'][:30]} "
                  f"{g['job']['policy']}: {g['cpu_s']:.1f} s CPU, {g['wall_s']:.1f} s wall",
                  flush=True)
    for g in sorted(got, key=lambda g: -g["cpu_s"]):
        print(f"  {g['job']['machine'][:12]:<12} {g['job']['workload'][:28]:<28} "
              f"{g['job']['policy']:<24} {g['cpu_s']:7.1f} s CPU {g['wall_s']:7.1f} s wall")
    print(json.dumps({**estimate([g["cpu_s"] for g in got], len(allj)),
                      "sample_wall_seconds": time.perf_counter() - t,
                      "load": os.getloadavg()}, indent=1))


if __name__ == "__main__":
    main()
