"""What a page-level trace looks like: summary numbers (`trace_info`) and an
address-against-time heat map (`heatmap`, `plot_heatmap`), vectorised with numpy.

Skew is the share of recorded accesses (reads + writes summed over the whole trace) that
falls on the hottest 1%, 10% and 20% of touched pages (at least one page each). The
heat map bins the address space, compacted as `trace:PATH` replays it
(`tierlab.workloads.trace.compact_map`), into rows and windows into columns, and shows
accesses per page per window on a log colour scale, as damo's heatmap report does.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import TierlabError
from ..field import uniq
from ..units import PAGE, fmt_size
from ..workloads.trace import CHUNK, TraceData, compact_map, skew

SKEW_FRACTIONS = (0.01, 0.10, 0.20)
COMPACT = ("auto", "yes", "no")
MAX_BINS = 100_000  #: most rows or columns of a heat map


def _mappings(touched: np.ndarray) -> int:
    """Runs of touched 2 MiB chunks separated by at least one untouched chunk."""
    if len(touched) == 0:
        return 0
    chunks = uniq(touched // CHUNK)
    return int(np.count_nonzero(np.diff(chunks) > 1)) + 1


def trace_info(t: TraceData) -> dict:
    """Summary of a trace: sizes in bytes, counts, write share and skew (JSON-ready)."""
    pages, per = t.page_totals()
    reads = int(t.reads.astype(np.int64).sum())
    writes = int(t.writes.astype(np.int64).sum())
    recorded = reads + writes
    acc = t.window_accesses()
    per_win = np.diff(t.window_ptr)
    _, span_replayed = compact_map(pages, "auto")
    info = {
        "source": t.source,
        "windows": t.nwindows,
        "window": int(t.window),
        "records": t.nrecords,
        "accesses": int(acc.sum()),
        "reads": reads,
        "writes": writes,
        "unattributed": int(acc.sum()) - recorded,
        "write_share": writes / recorded if recorded else 0.0,
        "pages": len(pages),
        "footprint_bytes": len(pages) * PAGE,
        "span_bytes": (int(pages[-1]) - int(pages[0]) + 1) * PAGE if len(pages) else 0,
        "replayed_span_bytes": span_replayed * PAGE if len(pages) else 0,
        "mappings": _mappings(pages),
        "lowest_address": int(pages[0]) * PAGE if len(pages) else None,
        "pages_per_window_mean": float(per_win.mean()) if len(per_win) else 0.0,
        "pages_per_window_max": int(per_win.max()) if len(per_win) else 0,
        "skew": skew(per, SKEW_FRACTIONS),
        "hottest_page_share": float(per.max() / recorded) if recorded else 0.0,
    }
    return info


def info_rows(info: dict) -> list[tuple[str, str]]:
    """(quantity, value) rows of `trace_info` for a table."""
    def n(x):
        return f"{x:,}"

    sk = ", ".join(f"{k} {100 * v:.1f}%" for k, v in info["skew"].items())
    rows = [("source", info["source"] or "-"),
            ("windows", f"{n(info['windows'])} of {n(info['window'])} accesses"),
            ("accesses", n(info["accesses"])),
            ("reads / writes", f"{n(info['reads'])} / {n(info['writes'])}"),
            ("write share", f"{100 * info['write_share']:.1f}%"),
            ("pages touched", n(info["pages"])),
            ("footprint", fmt_size(info["footprint_bytes"])),
            ("virtual span", f"{fmt_size(info['span_bytes'])} in {info['mappings']} "
             f"mapping(s) of touched 2 MiB chunks"),
            ("replayed span", f"{fmt_size(info['replayed_span_bytes'])} (trace:PATH, "
             f"compact=auto)"),
            ("pages per window", f"{info['pages_per_window_mean']:,.0f} mean, "
             f"{n(info['pages_per_window_max'])} max"),
            ("skew (hottest pages)", sk),
            ("hottest page", f"{100 * info['hottest_page_share']:.2f}% of accesses")]
    if info["unattributed"]:
        rows.insert(4, ("not attributed to pages", n(info["unattributed"])))
    return rows


def heatmap(t: TraceData, rows: int = 256, cols: int = 400, compact: str = "auto"):
    """Accesses per page per window in address bins x window bins.

    Returns (m, row_edges, col_edges, gaps): m is (rows', cols') float64 with
    rows' = min(rows, span) and cols' = min(cols, windows); row_edges (rows' + 1) are
    page offsets in the (compacted) replayed address space, col_edges (cols' + 1)
    window indices; gaps are the page offsets where compaction removed unused address
    space. Cells are sums of reads + writes divided by pages x windows of the cell.
    """
    if compact not in COMPACT:
        raise TierlabError(f"bad compact {compact!r}; valid: {', '.join(COMPACT)}")
    for what, v in (("rows", rows), ("cols", cols)):
        if int(v) != v or not 1 <= v <= MAX_BINS:
            raise TierlabError(f"bad {what} {v!r}: must be a whole number from 1 to "
                               f"{MAX_BINS}")
    touched = t.touched_pages()
    if len(touched) == 0 or t.nwindows == 0:
        raise TierlabError("trace has no recorded accesses: nothing to plot")
    mapped, span = compact_map(touched, compact)
    nwin = t.nwindows
    rows, cols = min(int(rows), span), min(int(cols), nwin)
    # ceil(i x n / bins) in Python integers: span x rows can exceed 2^63
    row_edges = np.array([-(-i * span // rows) for i in range(rows + 1)], dtype=np.int64)
    col_edges = np.array([-(-i * nwin // cols) for i in range(cols + 1)], dtype=np.int64)
    rec_page = mapped[np.searchsorted(touched, t.pages)]
    row = np.searchsorted(row_edges, rec_page, side="right") - 1
    wid = np.repeat(np.arange(nwin, dtype=np.int64), np.diff(t.window_ptr))
    col = np.searchsorted(col_edges, wid, side="right") - 1
    counts = t.reads.astype(np.float64) + t.writes.astype(np.float64)
    m = np.bincount(row * cols + col, weights=counts, minlength=rows * cols)
    m = m.reshape(rows, cols) / np.outer(np.diff(row_edges), np.diff(col_edges))
    gaps = np.zeros(0, dtype=np.int64)
    if span < int(touched[-1]) - (int(touched[0]) // CHUNK) * CHUNK + 1:
        chunks = uniq(touched // CHUNK)
        d = np.diff(chunks)
        newc = np.concatenate(([0], np.cumsum(np.minimum(d, 2))))
        gaps = (newc[1:][d > 2] - 1) * CHUNK
    return m, row_edges, col_edges, gaps


def _size(text: str) -> tuple[int, int]:
    try:
        w, h = (int(x) for x in str(text).lower().split("x"))
    except ValueError:
        w = h = 0
    if not (64 <= w <= 20000 and 64 <= h <= 20000):
        raise TierlabError(f"bad size {text!r}: expected WIDTHxHEIGHT in pixels, e.g. "
                           f"1200x800 (each 64..20000)")
    return w, h


def plot_heatmap(t: TraceData, out, rows: int = 256, cols: int = 400,
                 compact: str = "auto", size: str = "1200x800", title: str = "") -> Path:
    """Write the heat map as a PNG of exactly `size` pixels; returns its path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.colors import LogNorm

    w, h = _size(size)
    m, re_, ce, gaps = heatmap(t, rows, cols, compact)
    dpi = 100
    fig, ax = plt.subplots(figsize=(w / dpi, h / dpi), dpi=dpi)
    pos = m[m > 0]
    mm = np.ma.masked_less_equal(m, 0)
    cmap = matplotlib.colormaps["inferno"].with_extremes(bad="white")
    mib = re_ * (PAGE / 2 ** 20)
    norm = LogNorm(vmin=float(pos.min()), vmax=float(max(pos.max(), pos.min() * 10)))
    q = ax.pcolormesh(ce, mib, mm, cmap=cmap, norm=norm, shading="flat")
    if 0 < len(gaps) <= 200:
        for g in gaps * (PAGE / 2 ** 20):
            ax.axhline(g, color="0.6", lw=0.4, ls=":")
    fig.colorbar(q, ax=ax, label="accesses per page per window")
    nominal = f" of {t.window:,} accesses" if t.window else ""
    ax.set_xlabel(f"window{nominal} ({t.nwindows:,} windows)")
    what = {"no": "address offset (MiB)"}.get(compact, "address offset, compacted (MiB)")
    if len(gaps):
        what += f"; {len(gaps)} unused range(s) removed (dotted)"
    ax.set_ylabel(what)
    title = title or t.source or "trace"
    room = max(20, int(w / 7.5))  # characters that fit at 10 pt
    ax.set_title(title if len(title) <= room else title[:room - 1] + "\u2026", fontsize=10)
    fig.subplots_adjust(left=0.08, right=0.98, bottom=0.09, top=0.93)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=dpi, format="png")
    plt.close(fig)
    return out
