"""The `tierlab trace` command group: record, import, info, plot."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from ..errors import TierlabError
from ..params import argtype, parse_int
from . import record as _record

IMPORT_HELP = """\
Converts a pagegrind .pg file (tools/pagegrind; `tierlab trace record --out F.pg`) to
tierlab's .npz trace format (docs/trace-format.md): one window per pagegrind epoch,
records sorted by page with duplicates summed, each epoch's access count kept. The
.npz is smaller and loads faster; `--workload trace:F.pg` also works without importing.

example:  tierlab trace import redis.pg --out redis.npz
"""

INFO_HELP = """\
Prints what a trace holds: windows, accesses (reads, writes, write share), pages
touched and footprint, the virtual address span and the span trace:PATH replays after
compaction, pages per window, and skew: the share of recorded accesses on the hottest
1%, 10% and 20% of touched pages, counted over the whole trace. --json prints the same
as JSON (sizes in bytes, shares as fractions).

example:  tierlab trace info redis.npz --json
"""

PLOT_HELP = """\
Draws a heat map of address (rows) against time (columns, in windows), like damo's
heatmap report: the touched address space is compacted as trace:PATH replays it (each
run of unused 2 MiB chunks shrinks to one; dotted lines mark where), cut into --rows
equal bins, and windows are grouped into --cols equal bins. The colour of a cell is its
accesses per page per window on a log scale; white cells were not touched.

example:  tierlab trace plot redis.npz --out redis.png --rows 300 --size 1600x900
"""


def _npz_out(src: Path, out: str | None) -> Path:
    dst = Path(out) if out else src.with_suffix(".npz")
    if dst.is_dir():
        dst = dst / src.with_suffix(".npz").name
    if dst.exists() and dst.resolve() == src.resolve():
        raise TierlabError(f"trace import: --out {str(dst)!r} is the input file")
    if dst.suffix.lower() != ".npz":
        raise TierlabError(f"trace import: --out {str(dst)!r}: writes a tierlab trace, "
                           "whose name ends in .npz (tierlab reads a .pg file as pagegrind's "
                           "raw format)")
    if dst.is_file() and not _is_npz(dst):
        raise TierlabError(f"trace import: --out {str(dst)!r} exists and is not a tierlab "
                           "trace; remove it or choose another name")
    return dst


def _is_npz(path: Path) -> bool:
    """A file that starts as an .npz (a zip archive) does: a trace, perhaps damaged,
    that a new import may replace; anything else is someone's file."""
    try:
        with open(path, "rb") as f:
            return f.read(4) in (b"PK\x03\x04", b"PK\x05\x06")
    except OSError:
        return False


def cmd_trace_import(a) -> int:
    """Handler of `tierlab trace import`."""
    from ..units import PAGE, fmt_size
    from ..workloads.trace import PG_MAGIC, convert_pagegrind
    src = Path(a.file)
    if not src.is_file():
        raise TierlabError(f"trace import: {a.file!r}: " + ("is a directory" if src.is_dir()
                                                             else "file not found"))
    try:
        with open(src, "rb") as f:
            head = f.read(8)
    except OSError as e:
        raise TierlabError(f"trace import: cannot read {a.file!r}: {e.strerror}") from None
    if len(head) < 8 or int.from_bytes(head, "little") != PG_MAGIC:
        raise TierlabError(f"trace import: {a.file!r} is not a pagegrind .pg file (no "
                           f"PGEMPRG1 magic); `tierlab trace info` reads .npz traces")
    dst = _npz_out(src, a.out)
    try:
        dst.parent.mkdir(parents=True, exist_ok=True)
        t = convert_pagegrind(src, dst)
    except OSError as e:
        raise TierlabError(f"trace import: cannot write {str(dst)!r}: {e.strerror}") from None
    print(f"wrote {dst}: {t.nwindows} windows, {t.total_accesses:,} accesses, "
          f"{fmt_size(len(t.touched_pages()) * PAGE)} touched, "
          f"{fmt_size(dst.stat().st_size)} on disk")
    return 0


def cmd_trace_info(a) -> int:
    """Handler of `tierlab trace info`."""
    from ..workloads.trace import read_trace
    from .analysis import info_rows, trace_info
    info = trace_info(read_trace(a.file))
    info["file"] = str(a.file)
    if a.json:
        print(json.dumps(info, indent=1))
        return 0
    from rich.table import Table
    from ..console import out
    t = Table(title=str(a.file), show_header=False, title_justify="left")
    t.add_column("quantity", style="bold")
    t.add_column("value")
    for k, v in info_rows(info):
        t.add_row(k, v)
    out.print(t)
    return 0


def cmd_trace_plot(a) -> int:
    """Handler of `tierlab trace plot`."""
    from ..workloads.trace import read_trace
    from .analysis import plot_heatmap
    dst = Path(a.out) if a.out else Path(Path(a.file).name).with_suffix(".png")
    if dst.is_dir():
        dst = dst / Path(Path(a.file).name).with_suffix(".png").name
    t = read_trace(a.file)
    if not ((t.reads > 0) | (t.writes > 0)).any():
        raise TierlabError(f"trace {a.file!r}: no recorded accesses, nothing to plot")
    try:
        plot_heatmap(t, dst, rows=a.rows, cols=a.cols, compact=a.compact, size=a.size,
                     title=a.title or f"{Path(a.file).name}: {t.source}".rstrip(": "))
    except OSError as e:
        raise TierlabError(f"trace plot: cannot write {str(dst)!r}: {e.strerror}") from None
    print(f"wrote {dst}")
    return 0


def add_parser(sub) -> argparse.ArgumentParser:
    """Register `trace record|import|info|plot` on the CLI's subparsers `sub`."""
    tr = sub.add_parser("trace", help="page-level traces of real programs: record, import, "
                        "info, plot", description="Page-level traces of real programs: "
                        "record one with Valgrind (pagegrind), import pagegrind files, "
                        "inspect and plot them; replay one with --workload trace:FILE. "
                        "See docs/traces.md.")
    tsub = tr.add_subparsers(dest="trace_cmd", metavar="ACTION", required=True)
    _record.add_record_parser(tsub)

    fmt = argparse.RawDescriptionHelpFormatter
    im = tsub.add_parser("import", help="convert a pagegrind .pg file to a tierlab .npz",
                         description="Convert a pagegrind trace to tierlab's format.",
                         epilog=IMPORT_HELP, formatter_class=fmt)
    im.add_argument("file", metavar="F.pg", help="pagegrind trace")
    im.add_argument("--out", metavar="F.npz", default=None,
                    help="output file or directory (default: F.npz beside F.pg)")
    im.set_defaults(fn=cmd_trace_import)

    inf = tsub.add_parser("info", help="summary of a trace: accesses, pages, span, skew",
                          description="Summarise a trace (.npz or pagegrind .pg).",
                          epilog=INFO_HELP, formatter_class=fmt)
    inf.add_argument("file", metavar="F", help="trace file (.npz or .pg)")
    inf.add_argument("--json", action="store_true", help="print JSON instead of a table")
    inf.set_defaults(fn=cmd_trace_info)

    pl = tsub.add_parser("plot", help="heat map of address against time (PNG)",
                         description="Plot a trace (.npz or pagegrind .pg) as a heat map.",
                         epilog=PLOT_HELP, formatter_class=fmt)
    pl.add_argument("file", metavar="F", help="trace file (.npz or .pg)")
    pl.add_argument("--out", metavar="PNG", default=None,
                    help="output PNG (default: ./F.png, the trace's name)")
    pl.add_argument("--rows", type=argtype(parse_int, "--rows", lo=1, hi=1 << 16), default=256,
                    help="address bins (default: 256; at most one per page and "
                    "100000)")
    pl.add_argument("--cols", type=argtype(parse_int, "--cols", lo=1, hi=1 << 16), default=400,
                    help="time bins (default: 400; at most one per window and "
                    "100000)")
    pl.add_argument("--compact", choices=["auto", "yes", "no"], default="auto",
                    help="shrink unused address ranges as trace:PATH does (default: auto)")
    pl.add_argument("--size", default="1200x800", metavar="WxH",
                    help="image size in pixels (default: 1200x800)")
    pl.add_argument("--title", default=None, help="plot title (default: file and source)")
    pl.set_defaults(fn=cmd_trace_plot)
    return tr
