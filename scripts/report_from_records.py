"""Write a reproduction's report again from the run records of an earlier sweep, with
this tree's report code and no run made: `tierlab reproduce`'s own command line, its
`api.compare` calls answered from DIR/results.jsonl (every run they ask for must be
there, at seeds 0-2).

    .venv/bin/python scripts/report_from_records.py RUNS_DIR reproduce idt --out DIR
    .venv/bin/python scripts/report_from_records.py RUNS_DIR reproduce idt --sensitivity \\
        --out DIR
    .venv/bin/python scripts/report_from_records.py RUNS_DIR,LATER_DIR reproduce beyond \\
        --out DIR

With several directories (comma-separated), a run of a later one replaces the run of
an earlier one with the same machine, workload, policy, allocation and seed.

docs/idt-repro and docs/idt-sensitivity were written this way from the runs made at
173c68a (docs/idt.md); docs/beyond from those made at 585dc76 with `tierlab`'s made
again at 8c48595 (`reproduce beyond --policies tierlab`; docs/own-policy.md).
report.html names the source digest of the code that made the runs (their run keys).
"""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path

from tierlab import api, cli
from tierlab.reports import html
from tierlab.reports.results import add_speedups

SEEDS = 3


def main() -> int:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    by_key: dict = {}
    made_by: list = []
    for d in sys.argv[1].split(","):
        src = Path(d) / "results.jsonl"
        if not src.is_file():
            sys.exit(f"report_from_records: no run records at {src}")
        for line in src.open():
            r = json.loads(line)
            by_key[r["machine"], r["workload"], r["policy"], r["alloc"], r["seed"]] = r
            made = r.get("run_key", {}).get("source")  # html.run_sources, in this pass
            if made and made not in made_by:
                made_by.append(made)
    runs = list(by_key.values())

    def from_records(machines, workloads, policies, allocs=("dram-preferred",),
                     seeds=None, scale=None, baseline=None, **kw):
        ms, ws, ps = set(map(str, machines)), set(map(str, workloads)), set(map(str, policies))
        recs = [copy.deepcopy(r) for r in runs if r["machine"] in ms and r["workload"] in ws
                and r["policy"] in ps and r["alloc"] in allocs]
        want = len(ms) * len(ws) * len(ps) * len(allocs) * SEEDS
        if len(recs) != want:
            sys.exit(f"report_from_records: {len(recs)} of the {want} runs asked for are in "
                     f"{sys.argv[1]}/results.jsonl")
        add_speedups(recs, baseline or policies[0], alloc=allocs[0])
        return recs

    api.compare = from_records
    html.run_sources = lambda out: made_by  # report.html names the code that made the runs
    return cli.main(sys.argv[2:])


if __name__ == "__main__":
    sys.exit(main())
