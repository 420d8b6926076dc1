"""Issue 16 item 7: IDT's stability on every recorded real-program trace, in both regimes:
IDT at least 0.98x `autonuma` and migrated bytes at most 10x the footprint over the run.

    .venv/bin/python benchmarks/bench_idt_traces.py [--traces gapbs-pr-g16,hpcc-randomaccess]
        [--regimes capacity,bandwidth] [--policies autonuma,idt,idt-damon,hemem,static]
        [--copies 8] [--jobs 2] [--out /tmp/bench-idt-traces]

Traces: the pagegrind recordings in <repo>/../shared/traces/*.pg (where CI has them;
skipped with a note when absent) and the small recordings in tests/data/traces/*.npz.
Each trace runs as `trace:PATH,copies=K` on `optane-4tier:dram=X,optane=Y` (path dram0 ->
dram1 -> optane0 -> optane1), with X chosen so the footprint (K copies of the trace's
touched pages) is about twice the DRAM of both nodes together, and each Optane node large
enough to hold all of it:

- capacity: capacity-bound at full bandwidth, `--scale 1`, copies = K (default 8);
- bandwidth: bandwidth-bound, `--scale 1/128`, copies = 128 x K and every capacity 128x
  larger (the miniature lays out max(1, round(copies / 128)) = K copies and runs 128 x K
  x 1/128 threads against 1/128 of the bandwidth; see src/tierlab/workloads/trace.py).

Each (trace, regime) is one `tierlab.api.compare` over the policies (baseline
`autonuma`, added if missing), `--jobs` processes. Per row: every policy's throughput over
`autonuma`, IDT's migrated bytes / footprint (both as laid out in the run), IDT's
ping-pong count, the two targets, IDT's and the row's wall time. Prints a rich table and
the line "N of M rows meet both targets"; with `--out DIR` writes DIR/idt-traces.json
(the rows, the run records and the code version: git commit, `git diff --stat`, and a
hash of the working tree's diff under src/ at start and end, since src/ may change while
this runs) and DIR/idt-traces.md (the table). Exit status 0 always: it is a benchmark.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path

from tierlab.reports import trace_regimes

REPO = Path(__file__).resolve().parents[1]
SHARED = REPO / ".." / "shared" / "traces"
LOCAL = REPO / "tests" / "data" / "traces"

POLICIES = ["autonuma", "idt", "idt-damon", "hemem", "static"]
BASELINE = "autonuma"
REGIMES = trace_regimes.REGIMES
MIN_RATIO = 0.98  # IDT throughput over autonuma, at least
MAX_MIGRATED = 10.0  # IDT migrated bytes over footprint, at most
MiB = 2**20


def find_traces() -> tuple[list[Path], list[str]]:
    """Every recorded trace (shared .pg first, then the committed .npz), and notes on
    what is missing."""
    notes = []
    shared = sorted(SHARED.glob("*.pg")) if SHARED.is_dir() else []
    if not shared:
        notes.append(f"no pagegrind traces in {SHARED.resolve()} (skipped)")
    local = sorted(LOCAL.glob("*.npz"))
    if not local:
        notes.append(f"no recordings in {LOCAL} (skipped)")
    return shared + local, notes


def rel(path: Path) -> str:
    """`path` relative to the repository root (the runs' working directory)."""
    return os.path.relpath(os.path.abspath(path), REPO)


def setup(path: Path, fp: int, regime: str, copies: int) -> dict:
    """Machine, workload spec and scale of one (trace, regime)."""
    return trace_regimes.setup(path, fp, regime, copies, root=REPO)


def git(*args) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True,
                              check=False).stdout.strip()
    except OSError:
        return ""


def version() -> dict:
    diff = git("diff", "HEAD", "--", "src")
    return {"commit": git("log", "-1", "--format=%h"), "diff_stat": git("diff", "--stat"),
            "src_diff_sha256": hashlib.sha256(diff.encode()).hexdigest()[:16]}


def row_of(trace: str, regime: str, s: dict, fp_laid: int | None, recs: list[dict],
           policies: list[str], wall: float, error: str | None) -> dict:
    by = {r["policy"]: r for r in recs}
    row = {"trace": trace, "regime": regime, "machine": s["machine"],
           "workload": s["workload"], "scale": s["scale"], "copies": s["copies"],
           "footprint_bytes": fp_laid, "wall_seconds": wall, "error": error,
           "ratio": {p: by[p].get("speedup") if p in by else None for p in policies}}
    idt = by.get("idt")
    if idt:
        fpb = idt["footprint_bytes"]
        row["footprint_bytes"] = fpb
        row["idt_migrated_bytes"] = idt["migrated_bytes"]
        row["idt_migrated_over_footprint"] = idt["migrated_bytes"] / fpb if fpb else None
        row["idt_pingpong"] = idt["pingpong"]
        row["idt_wall_seconds"] = idt["wall_seconds"]
        r = row["ratio"].get("idt")
        m = row["idt_migrated_over_footprint"]
        row["meets_ratio"] = r is not None and r >= MIN_RATIO
        row["meets_migrated"] = m is not None and m <= MAX_MIGRATED
    else:
        row.update(idt_migrated_bytes=None, idt_migrated_over_footprint=None,
                   idt_pingpong=None, idt_wall_seconds=None, meets_ratio=None,
                   meets_migrated=None)
    row["meets_both"] = bool(row["meets_ratio"] and row["meets_migrated"])
    return row


def _yn(v) -> str:
    return "-" if v is None else ("yes" if v else "NO")


def _num(v, fmt="{:.3f}") -> str:
    return "-" if v is None else fmt.format(v)


def columns(policies: list[str]) -> list[str]:
    """Policy columns hold throughput / that of the baseline."""
    return (["trace", "regime", "copies", "DRAM/node", "footprint"]
            + [p for p in policies if p != BASELINE]
            + ["idt migr/fp", "idt pingpong", f">={MIN_RATIO}x", f"<={MAX_MIGRATED:g}x",
               "idt wall s", "row wall s"])


def cells(row: dict, policies: list[str]) -> list[str]:
    fp = row.get("footprint_bytes")
    m = row["machine"]
    dram = m.split("dram=")[1].split(",")[0] if "dram=" in m else "-"
    out = [row["trace"], row["regime"], str(row["copies"]), dram,
           "-" if fp is None else f"{fp / MiB:.0f}MiB"]
    out += [_num(row["ratio"].get(p)) for p in policies if p != BASELINE]
    out += [_num(row.get("idt_migrated_over_footprint"), "{:.2f}"),
            _num(row.get("idt_pingpong"), "{:,}"), _yn(row.get("meets_ratio")),
            _yn(row.get("meets_migrated")), _num(row.get("idt_wall_seconds"), "{:.1f}"),
            f"{row['wall_seconds']:.1f}"]
    return out


def markdown(rows: list[dict], policies: list[str]) -> str:
    cols = columns(policies)
    lines = ["| " + " | ".join(cols) + " |",
             "|" + "|".join("---" if i < 2 else "---:" for i in range(len(cols))) + "|"]
    for r in rows:
        c = cells(r, policies)
        if r["error"]:
            c[-1] += " (error)"
        lines.append("| " + " | ".join(c) + " |")
    return "\n".join(lines) + "\n"


def print_table(rows: list[dict], policies: list[str], title: str) -> None:
    from rich.console import Console
    from rich.table import Table
    t = Table(title=title, caption=f"policy columns: throughput / {BASELINE}; idt migr/fp: "
              "IDT's migrated bytes / footprint over the run")
    for i, c in enumerate(columns(policies)):
        t.add_column(c, justify="left" if i < 2 else "right", no_wrap=i < 2)
    for r in rows:
        style = None if r["meets_both"] else "red"
        t.add_row(*cells(r, policies), style=style)
    Console(width=max(220, Console().width)).print(t)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", help="comma-separated trace names (file stems, e.g. "
                    "gapbs-pr-g16,rocksdb-dbbench); default: all")
    ap.add_argument("--regimes", default="capacity,bandwidth",
                    help="comma-separated: capacity (scale 1), bandwidth (scale 1/128)")
    ap.add_argument("--policies", default=",".join(POLICIES),
                    help=f"comma-separated; {BASELINE} (the baseline) is always run")
    ap.add_argument("--copies", type=int, default=8,
                    help="copies at full scale in the capacity regime (x128 in the "
                         "bandwidth regime; default 8)")
    ap.add_argument("--jobs", type=int, default=2, help="parallel processes (default 2)")
    ap.add_argument("--out", help="write idt-traces.json and idt-traces.md here")
    a = ap.parse_args()
    out = Path(a.out).resolve() if a.out else None
    os.chdir(REPO)  # trace paths in the workload specs are relative to the repository
    sys.path.insert(0, str(REPO / "src"))
    from tierlab import api

    regimes = [x.strip() for x in a.regimes.split(",") if x.strip()]
    bad = [x for x in regimes if x not in REGIMES]
    if bad:
        ap.error(f"unknown regime(s) {', '.join(bad)}; valid: {', '.join(REGIMES)}")
    policies = [p.strip() for p in a.policies.split(",") if p.strip()]
    if BASELINE not in policies:
        policies.insert(0, BASELINE)
    # longest runs first, so the last worker is not left alone with an IDT run
    order = sorted(policies, key=lambda p: (not p.startswith("idt"), p == "static"))
    paths, notes = find_traces()
    if a.traces:
        want = [x.strip() for x in a.traces.split(",") if x.strip()]
        known = {p.stem: p for p in paths}
        missing = [w for w in want if w not in known]
        if missing:
            notes.append(f"unknown or absent trace(s) {', '.join(missing)}; present: "
                         f"{', '.join(known)}")
        paths = [known[w] for w in want if w in known]
    for n in notes:
        print(f"note: {n}", file=sys.stderr)

    v0 = version()
    print(f"tierlab at {v0['commit']}, src diff {v0['src_diff_sha256']}"
          f"{' (uncommitted changes)' if v0['diff_stat'] else ''}", file=sys.stderr)
    t_all = time.perf_counter()
    rows, records = [], []
    for path in paths:
        try:
            fp = trace_regimes.footprint_bytes(path)
        except Exception as e:  # a broken trace is a row, not a crash
            for regime in regimes:
                rows.append(row_of(path.stem, regime, {"machine": "-", "workload": rel(path),
                                   "scale": REGIMES[regime], "copies": "-"}, None, [],
                                   policies, 0.0, f"footprint: {e}"))
            continue
        for regime in regimes:
            s = setup(path, fp, regime, a.copies)
            print(f"[{path.stem} / {regime}] {s['workload']} on {s['machine']} at scale "
                  f"{s['scale']:g} ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            err, recs = None, []
            try:
                recs = api.compare([s["machine"]], [s["workload"]], order,
                                   scale=s["scale"], baseline=BASELINE, jobs=a.jobs)
            except Exception as e:
                err = f"{type(e).__name__}: {e}"
                traceback.print_exc()
            wall = time.perf_counter() - t
            row = row_of(path.stem, regime, s, None, recs, policies, wall, err)
            rows.append(row)
            for r in recs:
                r["trace"], r["regime"] = path.stem, regime
            records.extend(recs)
            print(f"  {wall:.1f} s; idt/{BASELINE} {_num(row['ratio'].get('idt'))}, "
                  f"migrated/footprint {_num(row.get('idt_migrated_over_footprint'), '{:.2f}')}"
                  f", both targets: {_yn(row['meets_both'])}", file=sys.stderr, flush=True)
    v1 = version()
    wall_all = time.perf_counter() - t_all

    ok = sum(r["meets_both"] for r in rows)
    summary = f"{ok} of {len(rows)} rows meet both targets"
    title = (f"IDT on recorded traces: >= {MIN_RATIO}x {BASELINE} and migrated <= "
             f"{MAX_MIGRATED:g}x footprint (tierlab {v0['commit']})")
    if rows:
        print_table(rows, policies, title)
    if v1["src_diff_sha256"] != v0["src_diff_sha256"] or v1["commit"] != v0["commit"]:
        print("warning: src/ changed while the benchmark ran (commit or working-tree "
              "diff differs between start and end); runs may mix versions", file=sys.stderr)
    print(f"total wall {wall_all:.0f} s")
    print(summary)
    if out:
        out.mkdir(parents=True, exist_ok=True)
        meta = {"version_start": v0, "version_end": v1, "copies": a.copies,
                "regimes": {r: REGIMES[r] for r in regimes}, "policies": policies,
                "baseline": BASELINE, "targets": {"min_ratio": MIN_RATIO,
                                                  "max_migrated_over_footprint": MAX_MIGRATED},
                "jobs": a.jobs, "wall_seconds": wall_all, "summary": summary,
                "notes": notes, "argv": sys.argv}
        (out / "idt-traces.json").write_text(json.dumps(
            {"meta": meta, "rows": rows, "records": records}, indent=1))
        md = (f"# {title}\n\nPolicy columns: throughput / {BASELINE}; idt migr/fp: IDT's "
              f"migrated bytes / footprint over the run.\n\n{markdown(rows, policies)}\n"
              f"{summary}\n\n"
              f"Commit {v0['commit']}; machines and workloads per row in idt-traces.json.\n")
        (out / "idt-traces.md").write_text(md)
        print(f"wrote {out / 'idt-traces.json'} and {out / 'idt-traces.md'}")
    return 0


if __name__ == "__main__":
    try:
        main()
    except Exception:  # a benchmark: report, but exit 0 (usage errors still exit 2)
        traceback.print_exc()
    sys.exit(0)
