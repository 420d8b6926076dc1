"""Run records for identity checks (issue 18: a speed-up must leave every record as it
was, or the change is explained and the reproductions re-run).

    .venv/bin/python benchmarks/records.py run OUT.json POLICY [--runs 0,2,5]
    .venv/bin/python benchmarks/records.py compare BEFORE.json AFTER.json

`run` puts eight scenarios through `tierlab.run` and writes their records, keyed by
scenario index. The scenarios are bench_memsim's and bench_scale's (20 simulated s),
GUPS hot set on optane-4tier at 1/128, GUPS uniform on optane-2tier at 1/64, and a
dynamic GUPS at 1/16. The rest are the shared gapbs-pr and redis traces at copies=8 on
the capacity-bound machines of `reports.trace_regimes`, and redis at copies=1024 with
`--scale 1/128` (bandwidth-bound). For the tree before a change, run the same script
with PYTHONPATH on a `git worktree` of it. `compare` prints every field that differs,
except `wall_seconds`, and exits 1 if any does.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
#: the shared traces beside the checkout (../shared/traces), or --traces DIR
TRACES = HERE.parent.parent / "shared" / "traces"


def scenarios(policy: str, traces: Path = TRACES) -> list[dict]:
    import bench_memsim
    import bench_scale
    pr, redis = traces / "gapbs-pr-g16.pg", traces / "redis-ycsb-zipf.pg"
    return [
        bench_memsim.kwargs(policy, 1, 0),
        bench_scale.kwargs(policy, 20, 0),
        dict(machine="optane-4tier", policy=policy, seed=1, workload="gups:hotset",
             scale=1 / 128),
        dict(machine="optane-2tier", policy=policy, seed=2, workload="gups:uniform",
             scale=1 / 64),
        dict(machine="optane-4tier:dram=52MiB,optane=512MiB", policy=policy, seed=0,
             workload=f"trace:{pr},copies=8", scale=1.0),
        dict(machine="optane-4tier:dram=373MiB,optane=2GiB", policy=policy, seed=0,
             workload=f"trace:{redis},copies=8", scale=1.0),
        dict(machine="optane-4tier", policy=policy, seed=0,
             workload=f"trace:{redis},copies=1024", scale=1 / 128),
        dict(machine="optane-4tier", policy=policy, seed=3,
             workload="gups:dynamic,size=64GiB,hot=8GiB,move=20s", scale=1 / 16),
    ]


def run(out: str, policy: str, runs: str | None, traces: Path) -> int:
    import tierlab
    todo = scenarios(policy, traces)
    pick = [int(x) for x in runs.split(",")] if runs else range(len(todo))
    got = {}
    for i in pick:
        c0 = time.process_time()
        rec = tierlab.run(**todo[i])
        rec.pop("wall_seconds", None)
        got[str(i)] = rec
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
        print(f"{policy} scenario {i}: {time.process_time() - c0:.1f} s CPU "
              f"(process peak RSS {rss:.2f} GiB)", flush=True)
    Path(out).write_text(json.dumps(got, default=str, sort_keys=True))
    return 0


def compare(a_path: str, b_path: str) -> int:
    a, b = (json.loads(Path(p).read_text()) for p in (a_path, b_path))
    diffs = []

    def walk(x, y, where):
        if isinstance(x, dict) and isinstance(y, dict):
            for k in sorted(set(x) | set(y)):
                if k != "wall_seconds":
                    walk(x.get(k), y.get(k), f"{where}.{k}")
        elif x != y:
            diffs.append(f"{where}: {str(x)[:80]} != {str(y)[:80]}")

    both = sorted(set(a) & set(b), key=int)
    for k in both:
        walk(a[k], b[k], f"scenario {k}")
    print("\n".join(diffs[:40]))
    print(f"compared {len(both)} runs: {len(diffs)} differing fields")
    return 1 if diffs else 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run", help="write the records of the scenarios")
    r.add_argument("out")
    r.add_argument("policy")
    r.add_argument("--runs", help="scenario indexes, comma-separated (default: all 8)")
    r.add_argument("--traces", type=Path, default=TRACES,
                   help=f"the shared traces' directory (default: {TRACES})")
    c = sub.add_parser("compare", help="the fields that differ between two record files")
    c.add_argument("before")
    c.add_argument("after")
    a = ap.parse_args()
    if a.cmd == "run":
        return run(a.out, a.policy, a.runs, a.traces)
    return compare(a.before, a.after)


if __name__ == "__main__":
    sys.exit(main())
