"""report.html: one self-contained file per comparison or reproduction (plots embedded
as data URIs, no network), with the tables' intervals and verdicts, the notes, the
exact command, and the tierlab version and source digest that made it."""
from __future__ import annotations

import base64
import datetime as _dt
import html
from pathlib import Path

from ..provenance import provenance
from ..units import fmt_size
from .stats import ONE_SEED, TEST, geomean_rows, pair_rows
from .tables import scale_text, short_name, speedup_cells, throughput_header

_CSS = """
body{font:14px/1.45 system-ui,sans-serif;margin:2em auto;max-width:1200px;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #ccc}
table{border-collapse:collapse;margin:.6em 0;font-size:13px}
th,td{padding:.25em .6em;border-bottom:1px solid #e4e4e4;text-align:right}
th{background:#f4f4f4}td.l,th.l{text-align:left}
.faster{color:#0a6b2d;font-weight:600}.slower{color:#a3161b;font-weight:600}
.note{background:#fff8e0;border-left:4px solid #e0b000;padding:.4em .8em;margin:.4em 0}
figure{margin:1em 0}img{max-width:100%;border:1px solid #ddd}
code,pre{background:#f6f6f6;padding:.1em .3em}pre{padding:.6em;overflow-x:auto}
.meta td{text-align:left}
"""

#: counts the plots that decoded (a test reads data-plots-ok from the DOM)
_SCRIPT = """
window.addEventListener('load', function () {
  var imgs = document.querySelectorAll('img.plot'), ok = 0;
  imgs.forEach(function (i) { if (i.complete && i.naturalWidth > 0) ok++; });
  document.body.setAttribute('data-plots-ok', ok + '/' + imgs.length);
});
"""


def _table(head: list[str], rows: list[list], left: int = 3) -> str:
    th = "".join(f"<th class='l'>{html.escape(h)}</th>" if i < left else
                 f"<th>{html.escape(h)}</th>" for i, h in enumerate(head))
    body = []
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            cls = ["l"] if i < left else []
            if c in ("faster", "slower"):
                cls.append(c)
            attr = f" class='{' '.join(cls)}'" if cls else ""
            cells.append(f"<td{attr}>{html.escape(str(c))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{th}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _img(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode()
    return (f"<figure><img class='plot' alt='{html.escape(Path(path).name)}' "
            f"src='data:image/png;base64,{data}'><figcaption>{html.escape(Path(path).name)}"
            "</figcaption></figure>")


def run_sources(out: Path) -> list[str]:
    """The source digests in the run keys of out/results.jsonl: the code that made the
    runs (which may predate the code writing the report)."""
    import json
    path = Path(out) / "results.jsonl"
    found = []
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            try:
                src = json.loads(line)["run_key"].get("source")
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            if src and src not in found:
                found.append(src)
    return found


def report_html(records: list[dict], baseline: str, pngs, notes, command: str,
                title: str = "tierlab comparison", sources=()) -> str:
    """The page as text. `sources`: the source digests that made the runs."""
    prov = provenance()
    made_by = ", ".join(f"<code>{html.escape(s)}</code>" for s in sources) or \
        "(not recorded)"
    rows = pair_rows(records)
    machines = list(dict.fromkeys(r["machine"] for r in records))
    nseeds = len({r["seed"] for r in records})
    parts = [f"<h1>{html.escape(title)}</h1>",
             "<table class='meta'>"
             f"<tr><th class='l'>command</th><td><code>{html.escape(command)}</code></td></tr>"
             f"<tr><th class='l'>runs made by</th><td>tierlab source {made_by}</td></tr>"
             f"<tr><th class='l'>report by</th><td>tierlab {html.escape(prov['tierlab'])}, "
             f"source <code>{prov['source']}</code></td></tr>"
             f"<tr><th class='l'>made</th><td>"
             f"{_dt.datetime.now(_dt.timezone.utc).strftime('%Y-%m-%d %H:%M UTC')}"
             f"</td></tr><tr><th class='l'>seeds</th><td>{nseeds}"
             f"{'' if nseeds > 1 else ' (' + ONE_SEED + ')'}</td></tr></table>"]
    if notes:
        parts.append("<h2>Notes</h2>" + "".join(f"<div class='note'>{html.escape(n)}</div>"
                                                for n in notes))
    for m in machines:
        mr = [r for r in rows if r["machine"] == m]
        scale = scale_text(next(r.get("scale") for r in records if r["machine"] == m))
        parts.append(f"<h2>{html.escape(m)}, scale {scale}: over seeds</h2>")
        parts.append(_table(
            ["workload", "policy", "alloc", "seeds", throughput_header(mr),
             f"speedup vs {baseline}", "verdict"],
            [[short_name(r["workload"]), r["policy"], r["alloc"], len(r["seeds"]),
              f"{r['throughput'].pm()} {r['work_unit']}/s", *speedup_cells(r, baseline)]
             for r in mr]))
        parts.append(f"<p>±, [lo, hi]: 95% interval, Student t over seeds; verdict: "
                     f"{html.escape(TEST)}.</p>")
    gm = geomean_rows(records)
    if len({r["workload"] for r in records}) > 1 and gm:
        parts.append(f"<h2>Geometric-mean speedup over {html.escape(baseline)} across "
                     "workloads</h2>")
        parts.append(_table(["machine", "alloc", "policy", "geomean speedup", "workloads",
                             "seeds"],
                            [[g["machine"], g["alloc"], g["policy"],
                              g["geomean"].text("{:.2f}x"), g["workloads"], len(g["seeds"])]
                             for g in sorted(gm, key=lambda g: (g["machine"], g["alloc"],
                                                                -g["geomean"].mean))]))
    parts.append("<h2>Plots</h2>" + "".join(_img(p) for p in pngs))
    parts.append("<h2>Every run</h2>")
    parts.append(_table(
        ["machine", "workload", "policy", "alloc", "seed", throughput_header(records),
         "speedup", "slow share", "promoted", "demoted", "migrated", "sim s"],
        [[r["machine"], short_name(r["workload"]), r["policy"], r["alloc"], r["seed"],
          f"{r['throughput']:.4g} {r.get('work_unit', 'ops')}/s",
          "-" if not r.get("speedup") else f"{r['speedup']:.3f}x",
          f"{100 * r['slow_share']:.1f}%", f"{r['promotions']:,}", f"{r['demotions']:,}",
          fmt_size(r["migrated_bytes"]), f"{r['sim_seconds']:.1f}"] for r in records],
        left=4))
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            f"<title>{html.escape(title)}</title><style>{_CSS}</style>"
            f"<script>{_SCRIPT}</script></head><body>{''.join(parts)}</body></html>")


def write_report(records, baseline, out: Path, pngs, notes, command: str,
                 title: str = "tierlab comparison") -> Path:
    """Write out/report.html; its path."""
    path = Path(out) / "report.html"
    path.write_text(report_html(records, baseline, pngs, notes, command, title,
                                run_sources(out)), encoding="utf-8")
    return path
