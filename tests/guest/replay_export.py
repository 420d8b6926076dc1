"""Export a tierlab trace (.npz, or pagegrind .pg) for tests/guest/replay.c.

    python tests/guest/replay_export.py TRACE OUT.rpl [--compact auto|yes|no]

The replayer gets the pages laid out exactly as the simulator's `trace:PATH` replay lays
out ONE copy (docs/trace-format.md, "Replay (`trace:PATH`)"): the page mapping and the
per-copy stride are taken from a `tierlab.workloads.trace.Trace` workload built on the
same file (`compact_map`, made relative to the lowest touched 2 MiB chunk, runs of empty
chunks shrunk with compact=auto; stride = span rounded up to 2 MiB plus one empty 2 MiB
chunk), not recomputed here.

File format (.rpl, little-endian):

    8 bytes  magic "TLRPL001"
    u64      span_pages    pages of one copy (the simulator's copy stride)
    u64      nwindows
    per window:
      u64    nrecords
      u64    window_accesses   the window's recorded accesses (TraceData.window_accesses)
      nrecords x (u32 page offset within the copy, u32 reads, u32 writes),
                                offsets strictly increasing

Records with no reads and no writes are left out: the simulator neither allocates nor
rates them (Trace keeps only `(reads > 0) | (writes > 0)` records). A page is first
touched in the first window that has a record of it, as in the simulator.

`replay_arrays` returns the same arrays, `hot_pages` the pages whose node replay.c
reports, ranked by the rule replay.c uses.
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np

MAGIC = b"TLRPL001"
_REC = np.dtype([("off", "<u4"), ("reads", "<u4"), ("writes", "<u4")])
_U32_MAX = 2 ** 32 - 1


@dataclass
class ReplayTrace:
    """One copy's replay: CSR windows of (offset, reads, writes) records."""

    span_pages: int
    window_ptr: np.ndarray       # int64, (nwindows + 1,)
    offsets: np.ndarray          # uint32, page offset within the copy
    reads: np.ndarray            # uint32
    writes: np.ndarray           # uint32
    window_accesses: np.ndarray  # int64, (nwindows,)

    @property
    def nwindows(self) -> int:
        return len(self.window_ptr) - 1

    def window(self, i: int):
        """(offsets, reads, writes) of window i."""
        a, b = int(self.window_ptr[i]), int(self.window_ptr[i + 1])
        return self.offsets[a:b], self.reads[a:b], self.writes[a:b]

    def record_windows(self) -> np.ndarray:
        """Window index of every record."""
        return np.repeat(np.arange(self.nwindows), np.diff(self.window_ptr))


def replay_arrays(path, compact: str = "auto") -> ReplayTrace:
    """Map a trace's pages as the simulator's `trace:PATH,compact=C` does for one copy
    (docs/trace-format.md "Replay"): the Trace workload's own page map and stride."""
    from tierlab.errors import TierlabError
    from tierlab.workloads.trace import Trace

    w = Trace(str(path), compact=compact)  # read_trace + compact_map, the simulator's path
    t = w.trace
    mapped = np.asarray(w._rec_map, dtype=np.int64)  # each record's page in copy 0
    span = int(w.stride)
    if span > _U32_MAX:
        raise TierlabError(f"trace {str(path)!r}: {span} pages per copy do not fit a u32 offset")
    reads = t.reads.astype(np.uint64)
    writes = t.writes.astype(np.uint64)
    if len(reads) and max(int(reads.max()), int(writes.max())) > _U32_MAX:
        raise TierlabError(f"trace {str(path)!r}: a count exceeds 2^32 - 1 (the .rpl format "
                           f"has u32 counts)")
    keep = (reads > 0) | (writes > 0)
    cs = np.concatenate(([0], np.cumsum(keep)))
    ptr = cs[np.asarray(t.window_ptr, dtype=np.int64)].astype(np.int64)
    return ReplayTrace(span, ptr, mapped[keep].astype(np.uint32), reads[keep].astype(np.uint32),
                       writes[keep].astype(np.uint32),
                       np.asarray(t.window_accesses(), dtype=np.int64))


def write_rpl(rt: ReplayTrace, out) -> None:
    """Write `rt` in the .rpl format (module docstring)."""
    rec = np.empty(len(rt.offsets), dtype=_REC)
    rec["off"], rec["reads"], rec["writes"] = rt.offsets, rt.reads, rt.writes
    n = np.diff(rt.window_ptr)
    with open(out, "wb") as f:
        f.write(MAGIC)
        f.write(np.array([rt.span_pages, rt.nwindows], dtype="<u8").tobytes())
        for i in range(rt.nwindows):  # one header per window; the records go as one block
            f.write(np.array([n[i], rt.window_accesses[i]], dtype="<u8").tobytes())
            f.write(rec[rt.window_ptr[i]:rt.window_ptr[i + 1]].tobytes())


def read_rpl(path) -> ReplayTrace:
    """Read an .rpl file (module docstring); ValueError names the byte offset of a defect."""
    buf = Path(path).read_bytes()
    if len(buf) < 24 or buf[:8] != MAGIC:
        raise ValueError(f"{path}: bad magic or short header at byte 0")
    span, nwin = (int(x) for x in np.frombuffer(buf, "<u8", 2, 8))
    off, ptr, acc, blocks = 24, [0], [], []
    for i in range(nwin):
        if len(buf) - off < 16:
            raise ValueError(f"{path}: truncated header of window {i} at byte {off}")
        nrec, a = (int(x) for x in np.frombuffer(buf, "<u8", 2, off))
        off += 16
        if nrec > (len(buf) - off) // _REC.itemsize:
            raise ValueError(f"{path}: truncated records of window {i} at byte {off}")
        blocks.append(np.frombuffer(buf, _REC, nrec, off))
        off += nrec * _REC.itemsize
        ptr.append(ptr[-1] + nrec)
        acc.append(a)
    if off != len(buf):
        raise ValueError(f"{path}: trailing bytes at byte {off}")
    rec = np.concatenate(blocks) if blocks else np.zeros(0, _REC)
    return ReplayTrace(span, np.asarray(ptr, np.int64), rec["off"].copy(), rec["reads"].copy(),
                       rec["writes"].copy(), np.asarray(acc, np.int64))


def first_touch(rt: ReplayTrace, copies: int = 1):
    """(pages, windows): every page's first touch in replay order, pages counted from the
    mapping base (copy c at c x span_pages). Per docs/trace-format.md a page is allocated in
    the first window showing it, in address order: in each window copy 0's new pages
    ascending, then copy 1's (Trace._replicate of the sorted new pages)."""
    off = rt.offsets.astype(np.int64)
    win = rt.record_windows()
    order = np.lexsort((win, off))
    o, w = off[order], win[order]
    first = np.concatenate(([True], o[1:] != o[:-1])) if len(o) else o.astype(bool)
    fo, fw = o[first], w[first]                       # sorted by offset
    k = np.arange(copies, dtype=np.int64)
    pages = (k[:, None] * rt.span_pages + fo[None, :]).ravel()   # copy-major
    wins = np.tile(fw, copies)
    o2 = np.lexsort((pages, wins))                    # window, then address
    return pages[o2], wins[o2]


def hot_pages(rt: ReplayTrace, copies: int, h: int) -> np.ndarray:
    """The `h` pages (from the mapping base) replay.c reports the node of: most reads +
    writes over the whole trace first, then lower page offset, then lower copy."""
    off = rt.offsets.astype(np.int64)
    cnt = rt.reads.astype(np.int64) + rt.writes.astype(np.int64)
    u, inv = np.unique(off, return_inverse=True)
    tot = np.bincount(inv, weights=cnt, minlength=len(u)).astype(np.int64)
    rank = np.lexsort((u, -tot))
    top = u[rank][:-(-h // copies)]                   # enough pages for h over the copies
    pages = top[:, None] + np.arange(copies, dtype=np.int64)[None, :] * rt.span_pages
    return pages.ravel()[:h]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Export a trace for tests/guest/replay.c (.rpl)")
    ap.add_argument("trace", help="tierlab .npz trace or pagegrind .pg file")
    ap.add_argument("out", help="output .rpl file")
    ap.add_argument("--compact", default="auto", choices=("auto", "yes", "no"),
                    help="as trace:PATH,compact=... (default auto)")
    a = ap.parse_args(argv)
    from tierlab.errors import TierlabError
    try:
        rt = replay_arrays(a.trace, a.compact)
    except TierlabError as e:
        print(f"replay_export: {e}", file=sys.stderr)
        return 2
    write_rpl(rt, a.out)
    print(f"{a.out}: {rt.nwindows} windows, {len(rt.offsets)} records, "
          f"{rt.span_pages} pages per copy")
    return 0


if __name__ == "__main__":
    sys.exit(main())
