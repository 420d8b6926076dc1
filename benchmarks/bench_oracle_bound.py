"""Issue 17, item 1, at full breadth: no registered placement policy beats `oracle` on the
@baselines suite, on a capacity-bound and a bandwidth-bound miniature, over seeds.

    .venv/bin/python benchmarks/bench_oracle_bound.py [--seeds 0,1] [--scale 1/64]
        [--policies P1,P2] [--workloads W1,W2] [--jobs N | --cluster ADDR] [--out DIR]

Regimes (both `optane-4tier`, the suite's machine): "capacity", as the suite runs
(footprints beyond both DRAM nodes), and "bandwidth", the same with a co-runner holding
80% of dram0's bandwidth (`antagonist=dram0@80%`), so that filling dram0 is not the
best placement. Every run is compared with the oracle's run of the same workload,
regime and seed; tolerance 0.5% (tests/test_oracle.py: a policy may fill DRAM between
the min and low watermarks, where the oracle stops). Prints the violations (none
expected), each policy's closest approach, and exits 1 on a violation. `make test` runs
the same property on a small machine (tests/test_oracle.py); this is the full grid.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections import defaultdict
from fractions import Fraction

import tierlab
from tierlab.api import SUITES
from tierlab.policies import POLICIES

REGIMES = {"capacity": "optane-4tier",
           "bandwidth": "optane-4tier:antagonist=dram0@80%"}
TOLERANCE = 1.005


def placement_policies():
    return sorted(n for n in POLICIES.names() if not n.startswith("test-")
                  and not getattr(POLICIES.get(n), "needs_dram_cache", False))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--scale", default="1/64")
    ap.add_argument("--policies", help="default: every registered placement policy")
    ap.add_argument("--workloads", help="default: the @baselines suite")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--cluster", help="a Dask scheduler address or local:N (docs/cluster.md)")
    ap.add_argument("--out", help="stream run records to DIR/results.jsonl (resumable)")
    a = ap.parse_args()
    pols = a.policies.split(",") if a.policies else placement_policies()
    if "oracle" not in pols:
        pols.append("oracle")
    wls = a.workloads.split(",") if a.workloads else SUITES["baselines"]
    seeds = [int(s) for s in a.seeds.split(",")]
    scale = float(Fraction(a.scale))
    best = {}
    runs = defaultdict(list)
    for regime, machine in REGIMES.items():
        out = f"{a.out}/{regime}" if a.out else None
        recs = tierlab.compare(machines=[machine], workloads=wls, policies=pols,
                               seeds=seeds, scale=scale, jobs=a.jobs, cluster=a.cluster,
                               out=out,
                               resume=bool(out) and os.path.exists(f"{out}/results.jsonl"))
        for r in recs:
            key = (regime, r["workload"], r["seed"])
            if r["policy"] == "oracle":
                best[key] = r["throughput"]
            else:
                runs[key].append(r)
    bad, closest = [], {}
    for key, recs in runs.items():
        for r in recs:
            ratio = r["throughput"] / best[key]
            if ratio > TOLERANCE:
                bad.append((ratio, key, r["policy"]))
            if ratio > closest.get(r["policy"], (0,))[0]:
                closest[r["policy"]] = (ratio, key)
    n = sum(len(v) for v in runs.values())
    print(f"{n} runs against the oracle ({len(best)} oracle runs), "
          f"{len(pols) - 1} policies x {len(wls)} workloads x {len(REGIMES)} regimes x "
          f"{len(seeds)} seeds at scale {a.scale}")
    print("closest approach to the oracle, per policy (throughput / oracle's):")
    for p, (ratio, (regime, wl, seed)) in sorted(closest.items(), key=lambda x: -x[1][0]):
        print(f"  {p:<24} {ratio:6.3f}  {wl} ({regime}, seed {seed})")
    for ratio, (regime, wl, seed), p in sorted(bad, reverse=True):
        print(f"VIOLATION: {p} reaches {ratio:.3f}x the oracle on {wl} ({regime}, seed {seed})")
    print("no policy beats the oracle" if not bad else f"{len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
