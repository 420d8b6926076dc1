"""`tierlab.report`: what `tierlab compare` writes beside its results.jsonl, from any
list of run records (`tierlab.compare`'s or `tierlab.run`'s)."""
from __future__ import annotations

from pathlib import Path

from ..runs import check_baseline
from .results import add_speedups


def report(records: list[dict], out, baseline: str | None = None,
           command: str | None = None) -> dict:
    """Write results.json, results.csv, the plots and report.html of `records` into
    `out` (a directory, made if missing), speedups over `baseline` (default: the first
    policy in the records) under the first allocation policy. Returns the paths
    ("json", "csv", "plots", "html"), the notes the report carries ("notes": one seed,
    bandwidth-bound cells, ties, spreads larger than a gap), the baseline's label and
    the rows over seeds (`stats.pair_rows`) its tables show."""
    from .html import write_report
    from .plots import plot_all
    from .results import write_results
    from .stats import ONE_SEED_NOTE, pair_rows, spread_notes
    from .tables import bandwidth_notes, tie_notes
    records = list(records)
    policies = list(dict.fromkeys(r["policy"] for r in records))
    allocs = list(dict.fromkeys(r["alloc"] for r in records))
    baseline = check_baseline(baseline, policies)
    add_speedups(records, baseline, alloc=allocs[0])
    # several allocation policies: every run is compared with the baseline's first
    label = baseline if len(allocs) == 1 else f"{baseline} ({allocs[0]})"
    rows = pair_rows(records)
    notes = tie_notes(records) + bandwidth_notes(records) + spread_notes(rows)
    if len({r["seed"] for r in records}) == 1:
        notes.append(f"note: {ONE_SEED_NOTE}")
    out = Path(out)
    jp, cp = write_results(records, out)
    pngs = plot_all(records, label, out)
    html = write_report(records, label, out, pngs, notes,
                        command=command or "tierlab.report(records, out)")
    return {"json": jp, "csv": cp, "plots": pngs, "html": html, "notes": notes,
            "baseline": label, "rows": rows}
