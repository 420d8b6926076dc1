"""Issue 3: the baselines suite on optane-4tier at the suite's default scale, under the
eight policies of the IDT comparison, should run "in a few minutes" on this machine.

    .venv/bin/python benchmarks/bench_suite.py [--scale 1/16] [--out /tmp/bench-suite]

Runs `tierlab compare` exactly as a user would and prints its wall time and the five
slowest runs (the per-run wall times are in the run records).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

POLICIES = ("autonuma,autonuma-tiering,autonuma-tiering-mglru,tpp,multi-clock,"
            "damon-tiering,static,oracle")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--scale", help="default: the suite's own")
    ap.add_argument("--out", default="/tmp/bench-suite")
    a = ap.parse_args()
    exe = Path(sys.executable).with_name("tierlab")
    cmd = [str(exe), "compare", "--machine", "optane-4tier", "--workloads", "@baselines",
           "--policies", POLICIES, "--baseline", "autonuma", "--out", a.out]
    if a.scale:
        cmd += ["--scale", a.scale]
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    recs = json.loads(Path(a.out, "results.json").read_text())
    recs.sort(key=lambda r: -r["wall_seconds"])
    for r in recs[:5]:
        print(f"  {r['workload']:<16} {r['policy']:<24} {r['wall_seconds']:6.1f} s")
    cpu = sum(r["wall_seconds"] for r in recs)
    print(json.dumps({"runs": len(recs), "scale": recs[0]["scale"], "wall_seconds": wall,
                      "run_seconds_total": cpu, "processes": os.cpu_count()}))


if __name__ == "__main__":
    main()
