"""Recorded page-level traces: the tierlab trace format, pagegrind import, `trace:PATH`.

Trace format (version 1; also in docs/trace-format.md). A numpy ``.npz`` archive with:

==============  =========================  ==============================================
name            dtype, shape               meaning
==============  =========================  ==============================================
``window_ptr``  int64, (nwindows + 1,)     CSR offsets: window i's records are
                                           ``[window_ptr[i], window_ptr[i+1])``;
                                           ``window_ptr[0] == 0``,
                                           ``window_ptr[-1] == len(pages)``
``pages``       int64, (nrecords,)         page index (virtual address >> 12), strictly
                                           increasing within a window
``reads``       uint32, (nrecords,)        loads from that page in that window
``writes``      uint32, (nrecords,)        stores to that page in that window
``page_size``   int64 scalar               4096 (the only size supported)
``window``      int64 scalar               nominal accesses per window
``version``     int64 scalar               1
``accesses``    int64, (nwindows,)         optional: accesses in each window (default:
                                           the sum of its reads + writes)
``source``      str scalar                 optional: where the trace came from
==============  =========================  ==============================================

Pages absent from a window were not touched in it. Windows are spans of *accesses*, not
of time (as pagegrind's epochs).

`trace:PATH` replays a trace (.npz, or a pagegrind ``.pg`` file directly) as a
workload. Work unit: accesses. Each window becomes one Change at the cumulative
accesses of the windows before it; its field is each touched page's counts divided by
the window's accesses (rates per access, summing to 1 when ``accesses`` is absent), and
the pages first seen in it are allocated in it, in address order. When the trace has
more windows than ``max_changes`` (default 400) consecutive windows are merged in equal
groups (their counts summed). ``loop`` replays the trace k times (allocations only in
the first pass); ``scale`` multiplies the work (scale 0.5 replays the first half,
scale 2 twice through) but cannot change a recorded footprint; ``copies`` can.

Footprint replication, ``copies`` = k (default 1): k instances of the recorded program
side by side, as on a machine k times larger. Each copy has its own pages (the
compacted span rounded up to 2 MiB plus one empty 2 MiB chunk, copy i at i times that
stride, so every copy keeps the 2 MiB offsets), makes the recorded counts in every
window and brings its own ``threads`` (the workload has k x threads). Work stays
accesses, summed over the copies: a window of A accesses is k x A units, the run
k x loop x (trace accesses), and each copy's page gets count / (k x A) per unit of
work; with k times the threads the throughput is about k times one copy's, so every
page keeps its recorded per-page rate (in accesses per second, too, while bandwidth
lasts). ``--scale F`` with k copies builds the miniature of that k-copy run:
n = max(1, round(k x F)) copies are laid out, the work is k x F x loop x (trace
accesses) and the engine runs k x F x threads, so when k x F is a whole number the n
copies replay their traces in full at the recorded per-page rates (exact miniature).
When k x F < 1 one copy replays the first k x F of its trace (k = 1 is the plain
`scale` rule above); otherwise each copy replays k x F / n of it. The rate field of a
change has n x (records of its windows) segments: copies cost memory and time in
proportion, so prefer ``--scale`` over huge k at full scale.

Address layout: page indices are made relative to the lowest touched 2 MiB chunk (2 MiB
alignment is kept, so huge-page and cache-slot mappings see the real offsets). Real
address spaces are sparse (gapbs-pr-g16.pg spans 128 GiB of virtual address for 26 MiB
touched), so with ``compact`` = ``auto`` (default; ``yes``/``no`` force it) every run of
untouched 2 MiB chunks is shrunk to a single empty chunk whenever that at least halves
the span: mappings stay separate, offsets within 2 MiB stay, empty space goes.

Defaults: 1 thread (pagegrind serialises threads), memory-level parallelism 4, 1 ns of
compute per access. pagegrind counts every data access, cache hits included, so
absolute simulated times are pessimistic; relative comparisons of placements hold.

pagegrind ``.pg`` format (docs/trace-format.md): little-endian epochs of a
32-byte header (u64 magic "PGEMPRG1", u64 epoch number, u64 nrec, u64 accesses) and
nrec records (u64 vpn, u32 reads, u32 writes). `from_pagegrind` parses it vectorised
(one numpy view per epoch), sorts each epoch by page and merges duplicate records;
truncated or corrupt files raise TierlabError with the byte offset.
"""
from __future__ import annotations

import io
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import TierlabError
from ..field import RateField
from ..params import parse_choice, parse_flag, parse_number
from ..units import PAGE, fmt_size
from .base import WORKLOADS, Change, Workload
from ..field import uniq
from ._common import common_params, parse_scale

VERSION = 1
PG_MAGIC = 0x5047454D50524731
_PG_HDR = np.dtype([("magic", "<u8"), ("epoch", "<u8"), ("nrec", "<u8"), ("accesses", "<u8")])
_PG_REC = np.dtype([("vpn", "<u8"), ("reads", "<u4"), ("writes", "<u4")])
CHUNK = 512  # pages per 2 MiB


@dataclass
class TraceData:
    """A page-level trace in memory (see the module docstring for the fields)."""

    window_ptr: np.ndarray
    pages: np.ndarray
    reads: np.ndarray
    writes: np.ndarray
    window: int = 0
    page_size: int = PAGE
    source: str = ""
    accesses: np.ndarray | None = None

    @property
    def nwindows(self) -> int:
        return len(self.window_ptr) - 1

    @property
    def nrecords(self) -> int:
        return len(self.pages)

    def window_records(self, i: int):
        """(pages, reads, writes) of window i."""
        a, b = int(self.window_ptr[i]), int(self.window_ptr[i + 1])
        return self.pages[a:b], self.reads[a:b], self.writes[a:b]

    def counts_per_window(self) -> np.ndarray:
        """reads + writes recorded in each window (int64)."""
        c = self.reads.astype(np.int64) + self.writes.astype(np.int64)
        cs = np.concatenate(([0], np.cumsum(c)))
        return cs[self.window_ptr[1:]] - cs[self.window_ptr[:-1]]

    def window_accesses(self) -> np.ndarray:
        """Accesses in each window: `accesses` if recorded, else the counts' sum."""
        if self.accesses is not None:
            return np.asarray(self.accesses, dtype=np.int64)
        return self.counts_per_window()

    @property
    def total_accesses(self) -> int:
        return int(self.window_accesses().sum())

    def touched_pages(self) -> np.ndarray:
        return uniq(self.pages)

    def page_totals(self):
        """Touched pages (sorted) and their reads + writes over all windows (int64)."""
        return _page_totals(self.pages, self.reads, self.writes)

    def summary(self) -> dict:
        """Windows, accesses, touched pages, span, and skew (share of accesses on the
        hottest 1% / 10% of touched pages)."""
        u, per = self.page_totals()
        out = {"source": self.source, "windows": self.nwindows, "records": self.nrecords,
               "window": int(self.window), "accesses": self.total_accesses,
               "reads": int(self.reads.astype(np.int64).sum()),
               "writes": int(self.writes.astype(np.int64).sum()),
               "touched_pages": len(u), "touched": fmt_size(len(u) * PAGE)}
        if len(u):
            out["span"] = fmt_size((int(u[-1]) - int(u[0]) + 1) * PAGE)
            sk = skew(per, (0.01, 0.10))
            out["top1pct_share"], out["top10pct_share"] = sk["1%"], sk["10%"]
        return out


def skew(per_page: np.ndarray, fractions) -> dict:
    """Share of the total on the hottest `f` of pages (at least one page), for each f
    in `fractions`, keyed "1%", "10%", ..."""
    s = np.sort(np.asarray(per_page, dtype=np.float64))[::-1]
    cs = np.cumsum(s)
    out = {}
    for f in fractions:
        k = max(1, int(round(f * len(s))))
        out[f"{100 * f:g}%"] = float(cs[k - 1] / cs[-1]) if len(s) and cs[-1] > 0 else 0.0
    return out


def _page_totals(pages, reads, writes):
    order = np.argsort(pages, kind="stable")
    p = pages[order]
    c = reads.astype(np.int64)[order] + writes.astype(np.int64)[order]
    if len(p) == 0:
        return p, c
    first = np.concatenate(([True], p[1:] != p[:-1]))
    return p[first], np.add.reduceat(c, np.flatnonzero(first))


def _normalise(wid, pages, reads, writes, nwin):
    """Sort records by (window, page), merge duplicates; returns CSR arrays."""
    wid = np.asarray(wid, dtype=np.int64)
    pages = np.asarray(pages, dtype=np.int64)
    reads = np.asarray(reads, dtype=np.int64)
    writes = np.asarray(writes, dtype=np.int64)
    order = np.lexsort((pages, wid))
    wid, pages, reads, writes = wid[order], pages[order], reads[order], writes[order]
    if len(pages):
        first = np.concatenate(([True], (pages[1:] != pages[:-1]) | (wid[1:] != wid[:-1])))
        if not first.all():
            idx = np.flatnonzero(first)
            reads = np.add.reduceat(reads, idx)
            writes = np.add.reduceat(writes, idx)
            wid, pages = wid[first], pages[first]
    ptr = np.searchsorted(wid, np.arange(nwin + 1), side="left").astype(np.int64)
    return ptr, pages, reads, writes


def _counts_dtype(a):
    return a.astype(np.uint32) if (len(a) == 0 or a.max() < 2 ** 32) else a.astype(np.uint64)


def write_trace(path, windows, *, window: int | None = None, source: str = "",
                accesses=None) -> TraceData:
    """Write a trace to `path` (.npz, exactly that name) and return it.

    `windows` is a TraceData, or an iterable of (pages, reads, writes) per window
    (any order; duplicate pages within a window are summed). `window` defaults to the
    largest window's access count; `accesses` optionally gives each window's total.
    """
    if isinstance(windows, TraceData):
        t = windows
        ptr, pages, reads, writes = t.window_ptr, t.pages, t.reads, t.writes
        window = t.window if window is None else window
        source = source or t.source
        accesses = t.accesses if accesses is None else accesses
        wid = np.repeat(np.arange(t.nwindows), np.diff(ptr))
        nwin = t.nwindows
    else:
        wl = list(windows)
        nwin = len(wl)
        parts = [(np.asarray(p, dtype=np.int64).ravel(), np.asarray(r).ravel(),
                  np.asarray(w).ravel()) for p, r, w in wl]
        for i, (p, r, w) in enumerate(parts):
            if not (len(p) == len(r) == len(w)):
                raise TierlabError(f"write_trace: window {i}: pages, reads and writes differ "
                                   f"in length")
        wid = np.repeat(np.arange(nwin), [len(p) for p, _, _ in parts])
        pages = np.concatenate([p for p, _, _ in parts]) if parts else np.zeros(0, np.int64)
        reads = np.concatenate([r for _, r, _ in parts]) if parts else np.zeros(0, np.int64)
        writes = np.concatenate([w for _, _, w in parts]) if parts else np.zeros(0, np.int64)
    if len(pages) and (np.min(pages) < 0 or np.min(reads) < 0 or np.min(writes) < 0):
        raise TierlabError("write_trace: pages and counts must be >= 0")
    ptr, pages, reads, writes = _normalise(wid, pages, reads, writes, nwin)
    counts = np.diff(np.concatenate(([0], np.cumsum(reads + writes))))
    cs = np.concatenate(([0], np.cumsum(counts)))
    per_win = cs[ptr[1:]] - cs[ptr[:-1]]
    if window is None:
        window = int(per_win.max()) if nwin else 0
    t = TraceData(ptr, pages, _counts_dtype(reads), _counts_dtype(writes), int(window), PAGE,
                  str(source), None if accesses is None else np.asarray(accesses, np.int64))
    if t.accesses is not None and len(t.accesses) != nwin:
        raise TierlabError(f"write_trace: accesses has {len(t.accesses)} entries for "
                           f"{nwin} windows")
    arrays = dict(window_ptr=t.window_ptr, pages=t.pages, reads=t.reads, writes=t.writes,
                  page_size=np.int64(PAGE), window=np.int64(t.window),
                  version=np.int64(VERSION), source=np.str_(t.source))
    if t.accesses is not None:
        arrays["accesses"] = t.accesses
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    Path(path).write_bytes(buf.getvalue())
    return t


def _load_npz(path: str) -> TraceData:
    def bad(msg):
        return TierlabError(f"trace {path!r}: {msg}")

    try:
        z = np.load(path, allow_pickle=False)
    except Exception as e:  # not a zip / npy at all, or truncated
        raise bad(f"not a tierlab trace (.npz) or pagegrind (.pg) file, or truncated "
                  f"({type(e).__name__}: {e})") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise bad("not a tierlab trace: a .npy array, expected an .npz archive "
                  "(see docs/trace-format.md)")
    try:
        with z:
            names = set(z.files)
            missing = [k for k in ("window_ptr", "pages", "reads", "writes", "page_size",
                                   "window", "version") if k not in names]
            if missing:
                raise bad(f"not a tierlab trace: missing {', '.join(missing)} "
                          f"(see docs/trace-format.md)")
            d = {k: z[k] for k in names}
    except TierlabError:
        raise
    except Exception as e:  # corrupt members (zlib, zipfile, npy header errors)
        raise bad(f"corrupt or truncated npz ({type(e).__name__}: {e})") from None

    def scalar(k):
        a = d[k]
        if a.shape != () or a.dtype.kind not in "iu":
            raise bad(f"{k} must be an integer scalar")
        return int(a)

    version = scalar("version")
    if version != VERSION:
        raise bad(f"unsupported version {version} (this tierlab reads version {VERSION})")
    ps = scalar("page_size")
    if ps != PAGE:
        raise bad(f"page_size {ps} is not supported (only {PAGE})")
    window = scalar("window")
    if window < 0:
        raise bad(f"window {window} must be >= 0")
    arr = {}
    for k in ("window_ptr", "pages", "reads", "writes"):
        a = d[k]
        if a.ndim != 1 or a.dtype.kind not in "iu":
            raise bad(f"{k} must be a 1-D integer array (got {a.dtype} {a.shape})")
        arr[k] = a
    ptr, pages = arr["window_ptr"].astype(np.int64), arr["pages"].astype(np.int64)
    reads, writes = arr["reads"], arr["writes"]
    n = len(pages)
    if len(reads) != n or len(writes) != n:
        raise bad(f"pages, reads and writes differ in length ({n}, {len(reads)}, "
                  f"{len(writes)})")
    if len(ptr) < 1 or ptr[0] != 0 or ptr[-1] != n:
        raise bad(f"window_ptr must start at 0 and end at len(pages) = {n}")
    if np.any(np.diff(ptr) < 0):
        raise bad("window_ptr must be non-decreasing")
    if n and pages.min() < 0:
        raise bad("negative page index")
    for k, a in (("reads", reads), ("writes", writes)):
        if n and a.dtype.kind == "i" and a.min() < 0:
            raise bad(f"negative {k} count")
    if n > 1:
        inc = np.diff(pages) > 0
        boundary = np.zeros(n - 1, dtype=bool)
        b = ptr[1:-1]
        b = b[(b > 0) & (b < n)]
        boundary[b - 1] = True
        if not np.all(inc | boundary):
            i = int(np.flatnonzero(~(inc | boundary))[0])
            w = int(np.searchsorted(ptr, i, side="right") - 1)
            raise bad(f"pages not strictly increasing within window {w} "
                      f"(record {i + 1})")
    acc = None
    if "accesses" in d:
        acc = d["accesses"]
        if acc.ndim != 1 or acc.dtype.kind not in "iu" or len(acc) != len(ptr) - 1:
            raise bad(f"accesses must be an integer array of one entry per window "
                      f"({len(ptr) - 1})")
        acc = acc.astype(np.int64)
        if len(acc) and acc.min() < 0:
            raise bad("negative accesses")
    src = ""
    if "source" in d:
        s = d["source"]
        src = str(s) if s.shape == () else ""
    return TraceData(ptr, pages, reads, writes, window, PAGE, src, acc)


def from_pagegrind(path) -> TraceData:
    """Read a pagegrind .pg file (format in docs/trace-format.md)."""
    path = str(path)
    try:
        buf = Path(path).read_bytes()
    except FileNotFoundError:
        raise TierlabError(f"trace {path!r}: file not found") from None
    except OSError as e:
        raise TierlabError(f"trace {path!r}: cannot read: {e}") from None
    if not buf:
        raise TierlabError(f"pagegrind trace {path!r}: empty file")
    size = len(buf)
    off, blocks, accesses, last_epoch, total = 0, [], [], -1, 0
    hsz, rsz = _PG_HDR.itemsize, _PG_REC.itemsize
    while off < size:
        i = len(blocks)
        if size - off < hsz:
            raise TierlabError(f"pagegrind trace {path!r}: truncated header of epoch {i} at "
                               f"byte {off} ({size - off} of {hsz} bytes)")
        h = np.frombuffer(buf, dtype=_PG_HDR, count=1, offset=off)[0]
        if int(h["magic"]) != PG_MAGIC:
            raise TierlabError(f"pagegrind trace {path!r}: bad magic at byte {off} (epoch {i}):"
                               f" not a pagegrind file, or corrupt")
        epoch, nrec, acc = int(h["epoch"]), int(h["nrec"]), int(h["accesses"])
        if epoch <= last_epoch:
            raise TierlabError(f"pagegrind trace {path!r}: epoch number {epoch} at byte {off} "
                               f"does not follow epoch {last_epoch}: corrupt")
        total += acc
        if total >= 2 ** 62:
            raise TierlabError(f"pagegrind trace {path!r}: {acc} accesses announced by epoch "
                               f"{epoch} at byte {off}: out of range (corrupt)")
        off += hsz
        if nrec > (size - off) // rsz:
            raise TierlabError(f"pagegrind trace {path!r}: truncated epoch {epoch} at byte "
                               f"{off - hsz}: {nrec} records announced, "
                               f"{(size - off) // rsz} present")
        blocks.append(np.frombuffer(buf, dtype=_PG_REC, count=nrec, offset=off))
        accesses.append(acc)
        last_epoch = epoch
        off += nrec * rsz
    recs = np.concatenate(blocks) if blocks else np.zeros(0, _PG_REC)
    wid = np.repeat(np.arange(len(blocks)), [len(b) for b in blocks])
    vpn = recs["vpn"]
    if len(vpn) and vpn.max() >= 2 ** 62:
        raise TierlabError(f"pagegrind trace {path!r}: page number out of range: corrupt")
    ptr, pages, reads, writes = _normalise(wid, vpn.astype(np.int64), recs["reads"],
                                           recs["writes"], len(blocks))
    acc = np.asarray(accesses, dtype=np.int64)
    counts = np.concatenate(([0], np.cumsum(reads + writes)))
    per_win = counts[ptr[1:]] - counts[ptr[:-1]]
    acc = np.maximum(acc, per_win)  # never fewer accesses than recorded counts
    window = int(acc.max()) if len(acc) else 0  # the epoch length N (last may be short)
    return TraceData(ptr, pages, _counts_dtype(reads), _counts_dtype(writes), window, PAGE,
                     f"pagegrind:{Path(path).name}", acc)


def _is_pagegrind(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(8)
    except OSError:
        return False
    return len(head) == 8 and int.from_bytes(head, "little") == PG_MAGIC


def read_trace(path) -> TraceData:
    """Read a trace: tierlab .npz, or pagegrind .pg (detected by its magic)."""
    path = str(path)
    p = Path(path)
    if not p.exists():
        raise TierlabError(f"trace {path!r}: file not found")
    if p.is_dir():
        raise TierlabError(f"trace {path!r}: is a directory")
    if _is_pagegrind(path) or path.endswith(".pg"):
        return from_pagegrind(path)
    return _load_npz(path)


def convert_pagegrind(src_pg, dst_npz) -> TraceData:
    """Convert a pagegrind .pg file to the tierlab .npz trace format."""
    return write_trace(dst_npz, from_pagegrind(src_pg))


def compact_map(touched: np.ndarray, compact: str = "auto"):
    """Mapping of sorted unique page numbers to workload page indices.

    Returns (new_pages for `touched`, npages). See the module docstring.
    """
    touched = np.asarray(touched, dtype=np.int64)
    if len(touched) == 0:
        return touched, 1
    base = (int(touched[0]) // CHUNK) * CHUNK
    plain = touched - base
    chunks = uniq(touched // CHUNK)
    gaps = np.minimum(np.diff(chunks), 2)
    newc = np.concatenate(([0], np.cumsum(gaps)))
    idx = np.searchsorted(chunks, touched // CHUNK)
    packed = newc[idx] * CHUNK + touched % CHUNK
    span_plain, span_packed = int(plain[-1]) + 1, int(packed[-1]) + 1
    use = compact == "yes" or (compact == "auto" and 2 * span_packed <= span_plain)
    return (packed, span_packed) if use else (plain, span_plain)


def _runs(pages: np.ndarray) -> np.ndarray:
    """(n, 2) ranges of consecutive runs in sorted unique pages."""
    if len(pages) == 0:
        return np.zeros((0, 2), dtype=np.int64)
    br = np.flatnonzero(np.diff(pages) != 1)
    starts = np.concatenate(([pages[0]], pages[br + 1]))
    ends = np.concatenate((pages[br] + 1, [pages[-1] + 1]))
    return np.stack([starts, ends], axis=1).astype(np.int64)


@WORKLOADS.register("trace")
class Trace(Workload):
    """trace:PATH — replay a recorded page-level trace (.npz tierlab format or pagegrind .pg).

    Parameters: loop, threads (per copy), compute_ns, mlp, compact, max_changes,
    copies (footprint replication; see the module docstring for its rules with scale),
    per_window: the accesses each copy replays of every window that has any (default:
    the recorded ones), each window's proportions kept; a time-compressed replay, as the
    guest's replayer runs (tests/guest/replay.c); and copy_threads (yes|no): no = the
    copies share `threads` instead of bringing them each, as that replayer's one thread
    interleaves its copies (each page is then touched k times less often per second).
    """

    def __init__(self, path=None, loop=1, threads=1, compute_ns=1.0, mlp=4.0,
                 compact="auto", max_changes=400, copies=1, per_window=None, scale=1.0,
                 seed=0, copy_threads="yes"):
        super().__init__()
        if path is None or not str(path).strip():
            raise TierlabError("trace needs a file: trace:PATH (.npz or pagegrind .pg)")
        scale = parse_scale(scale)
        self.threads, self.compute_ns, self.mlp = common_params(threads, compute_ns, mlp,
                                                                what="trace")
        loops = parse_number(loop, "trace loop", lo=1, integer=True)
        compact = parse_choice(compact, "trace compact", ("auto", "yes", "no"))
        maxc = parse_number(max_changes, "trace max_changes", lo=1, integer=True)
        ncopies = parse_number(copies, "trace copies", lo=1, integer=True)
        copy_threads = parse_flag(copy_threads, "trace copy_threads")
        path = str(path).strip()
        t = read_trace(path)
        self.trace = t
        self.name = f"trace:{Path(path).name}"
        self.work_unit = "accesses"
        acc = t.window_accesses().astype(np.float64)
        rec_acc = acc  # a field's denominators: the recorded accesses
        if per_window is not None:
            per_window = parse_number(per_window, "trace per_window", lo=1, integer=True)
            acc = np.where(acc > 0, float(per_window), 0.0)
        total = float(acc.sum())
        if total <= 0:
            raise TierlabError(f"trace {path!r}: no accesses")
        # Page mapping.
        touched = t.touched_pages()
        mapped, span = compact_map(touched, compact)
        self._touched, self._mapped = touched, mapped
        # Copies: k at full scale, n laid out in this (possibly scaled) run.
        eff = ncopies * scale
        self.copies = max(1, int(math.floor(eff + 0.5)))
        self.layout_share = self.copies / ncopies
        self.stride = (-(-span // CHUNK) + 1) * CHUNK
        self.npages = (self.copies - 1) * self.stride + span
        if copy_threads:
            self.threads *= ncopies
        # Window groups so that loops x groups <= max_changes.
        nwin = t.nwindows
        per_pass = max(1, maxc // loops)
        g = max(1, math.ceil(nwin / per_pass))
        self.group = g
        gstart = np.arange(0, nwin, g)
        self._gptr = t.window_ptr[np.append(gstart, nwin)]
        gacc = np.add.reduceat(acc, gstart) if nwin else np.zeros(0)
        self._gacc = gacc
        self._grec = np.add.reduceat(rec_acc, gstart) if nwin else np.zeros(0)
        self._gat = np.concatenate(([0.0], np.cumsum(gacc)[:-1]))
        self.trace_accesses = total
        self.total_work = loops * eff * total
        # First group touching each page -> allocation per group.
        grp_of_rec = np.repeat(np.arange(len(gstart)),
                               np.diff(self._gptr)) if nwin else np.zeros(0, np.int64)
        rec_map = mapped[np.searchsorted(touched, t.pages)]
        counted = (t.reads > 0) | (t.writes > 0)
        order = np.lexsort((grp_of_rec[counted], rec_map[counted]))
        rp, rg = rec_map[counted][order], grp_of_rec[counted][order]
        first = np.concatenate(([True], rp[1:] != rp[:-1])) if len(rp) else rp.astype(bool)
        fp, fg = rp[first], rg[first]
        o2 = np.lexsort((fp, fg))
        self._alloc_pages, self._alloc_grp = fp[o2], fg[o2]
        self._rec_map = rec_map
        in_work = (self.copies * self._gat[fg] < self.total_work if len(fg)
                   else np.zeros(0, bool))
        self.footprint_pages = self.copies * int(np.count_nonzero(in_work))
        self.params = {"path": path, "loop": loops, "threads": self.threads,
                       "windows": nwin, "windows_per_change": g,
                       "touched": fmt_size(self.copies * len(touched) * PAGE),
                       "span": fmt_size(self.npages * PAGE), "accesses": self.total_work}
        if per_window is not None:
            self.params["per_window"] = per_window
        if ncopies != 1:
            self.params["copies"] = ncopies
            self.params["copies_laid_out"] = self.copies
            if not copy_threads:
                self.params["copy_threads"] = "no"

    def _group_field(self, j: int) -> RateField:
        a, b = int(self._gptr[j]), int(self._gptr[j + 1])
        t = self.trace
        pages = self._rec_map[a:b]
        r = t.reads[a:b].astype(np.float64)
        w = t.writes[a:b].astype(np.float64)
        if self.group > 1:
            pages, r, w = _sum_by_page(pages, r, w)
        tot = self._grec[j] * self.copies
        keep = (r > 0) | (w > 0)
        pages, r, w = pages[keep], r[keep], w[keep]
        if self.copies > 1:
            pages = self._replicate(pages)
            r, w = np.tile(r, self.copies), np.tile(w, self.copies)
        return RateField(pages, pages + 1, r / tot, w / tot, self.npages)

    def _replicate(self, pages: np.ndarray) -> np.ndarray:
        """Sorted pages of copy 0 -> the same pages in every copy, in address order."""
        off = np.arange(self.copies, dtype=np.int64)[:, None] * self.stride
        return (pages[None, :] + off).ravel()

    def changes(self):
        ngroups = len(self._gacc)
        bounds = np.searchsorted(self._alloc_grp, np.arange(ngroups + 1))
        per_pass = self.copies * self.trace_accesses
        passes = math.ceil(self.total_work / per_pass - 1e-12)
        for k in range(passes):
            for j in range(ngroups):
                at = k * per_pass + self.copies * float(self._gat[j])
                if at >= self.total_work:
                    return
                if self._gacc[j] <= 0:
                    continue
                alloc = None
                if k == 0:
                    newp = self._alloc_pages[bounds[j]:bounds[j + 1]]
                    if len(newp):
                        alloc = _runs(self._replicate(np.sort(newp)))
                yield Change(at, field=self._group_field(j), alloc=alloc,
                             label=f"pass {k} window {j * self.group}")


def _sum_by_page(pages, r, w):
    order = np.argsort(pages, kind="stable")
    p = pages[order]
    first = np.concatenate(([True], p[1:] != p[:-1])) if len(p) else p.astype(bool)
    idx = np.flatnonzero(first)
    return p[first], np.add.reduceat(r[order], idx), np.add.reduceat(w[order], idx)
