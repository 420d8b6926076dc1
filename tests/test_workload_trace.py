"""Trace format (write/read), pagegrind import, and trace replay."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tierlab.errors import TierlabError
from tierlab.units import PAGE
from tierlab.workloads import WORKLOADS
from tierlab.workloads.trace import (PG_MAGIC, Trace, compact_map, convert_pagegrind,
                                     from_pagegrind, read_trace, write_trace)

TRACES = Path("/work/shared/traces")
PR = TRACES / "gapbs-pr-g16.pg"
needs_traces = pytest.mark.skipif(not PR.exists(), reason="shared traces not present")


def small_windows():
    return [
        (np.array([10, 3, 11, 3]), np.array([5, 1, 0, 2]), np.array([0, 1, 7, 0])),
        (np.array([3, 2000, 2001]), np.array([4, 1, 1]), np.array([0, 0, 2])),
        (np.array([], dtype=np.int64), np.array([]), np.array([])),
        (np.array([11, 70000]), np.array([1, 1]), np.array([1, 1])),
    ]


def write_pg(path, epochs):
    """epochs: list of (epoch_no, [(vpn, r, w), ...], accesses)."""
    rec = np.dtype([("vpn", "<u8"), ("r", "<u4"), ("w", "<u4")])
    out = bytearray()
    for e, recs, acc in epochs:
        out += np.array([PG_MAGIC, e, len(recs), acc], dtype="<u8").tobytes()
        out += np.array(recs, dtype=rec).tobytes()
    Path(path).write_bytes(bytes(out))


def test_round_trip(tmp_path):
    p = tmp_path / "t.npz"
    t = write_trace(p, small_windows(), source="unit test")
    assert p.exists() and not (tmp_path / "t.npz.npz").exists()
    u = read_trace(p)
    assert u.nwindows == 4 and u.source == "unit test" and u.page_size == PAGE
    for a, b in ((t.window_ptr, u.window_ptr), (t.pages, u.pages), (t.reads, u.reads),
                 (t.writes, u.writes)):
        assert np.array_equal(a, b)
    pages, r, w = u.window_records(0)  # sorted, duplicates merged
    assert pages.tolist() == [3, 10, 11] and r.tolist() == [3, 5, 0] and w.tolist() == [1, 0, 7]
    assert u.window_records(2)[0].size == 0
    assert u.counts_per_window().tolist() == [16, 8, 0, 4]
    assert u.window == 16
    assert u.reads.dtype == np.uint32 and u.pages.dtype == np.int64
    # writing a TraceData again gives the same file content
    q = tmp_path / "u.npz"
    v = read_trace(write_trace(q, u) and q)
    assert np.array_equal(v.pages, u.pages)


def test_replay_fields_and_allocation(tmp_path):
    p = tmp_path / "t.npz"
    write_trace(p, small_windows())
    w = WORKLOADS.create(f"trace:{p}", scale=1.0, seed=0)
    ch = list(w.changes())
    assert w.work_unit == "accesses" and w.total_work == 28
    assert [c.at for c in ch] == [0, 16, 24]  # the empty window carries no work
    # field = counts / window accesses, on remapped pages (relative to the 2 MiB chunk)
    f0 = ch[0].field
    assert f0.total == pytest.approx(1.0)
    assert f0.rate_of(np.array([3]))[0][0] == pytest.approx(3 / 16)
    # pages first seen in a window are allocated there, in address order
    assert ch[0].alloc.tolist() == [[3, 4], [10, 12]]
    # chunks 0, 3 and 136 are touched: each run of empty 2 MiB chunks shrinks to one
    assert ch[1].alloc.tolist() == [[2 * 512 + 2000 % 512, 2 * 512 + 2000 % 512 + 2]]
    assert ch[2].alloc[:, 0].max() == 4 * 512 + 70000 % 512
    assert w.npages == 4 * 512 + 70000 % 512 + 1 and w.footprint_pages == 6


def test_loop_scale_and_merging(tmp_path):
    p = tmp_path / "t.npz"
    write_trace(p, [(np.array([i]), np.array([1]), np.array([1])) for i in range(50)])
    w = Trace(str(p), loop=2)
    ch = list(w.changes())
    assert w.total_work == 200 and len(ch) == 100
    assert all(c.alloc is None for c in ch[50:])
    w = Trace(str(p), max_changes=10)
    ch = list(w.changes())
    assert len(ch) == 10 and w.group == 5 and ch[1].at == 10
    assert ch[0].field.total == pytest.approx(1.0) and ch[0].field.nsegments == 5
    w = Trace(str(p), scale=0.5)
    ch = list(w.changes())
    assert w.total_work == 50 and len(ch) == 25 and w.footprint_pages == 25


def test_per_window_compresses_time_not_proportions(tmp_path):
    """per_window=N: every window with accesses lasts N per copy; fields, allocation and
    the change order are the recorded replay's."""
    p = tmp_path / "t.npz"
    write_trace(p, small_windows())
    full, short = (list(Trace(str(p), copies=2, **kw).changes())
                   for kw in ({}, {"per_window": 5}))
    assert Trace(str(p), copies=2, per_window=5).total_work == 2 * 3 * 5
    assert [c.at for c in short] == [0, 10, 20]  # the empty window still carries none
    for a, b in zip(full, short, strict=True):
        assert np.array_equal(a.field.starts, b.field.starts)
        assert np.allclose(a.field.read, b.field.read)
        assert np.allclose(a.field.write, b.field.write)
        assert (a.alloc is None and b.alloc is None) or np.array_equal(a.alloc, b.alloc)
    with pytest.raises(TierlabError, match="per_window"):
        Trace(str(p), per_window=0)


def test_copy_threads_no_shares_the_threads(tmp_path):
    """copy_threads=no: k copies share the workload's threads (one replayer thread
    interleaving them) instead of bringing their own; the replay itself is the same."""
    p = tmp_path / "t.npz"
    write_trace(p, small_windows())
    own, shared = (Trace(str(p), copies=3, threads=2, copy_threads=c) for c in ("yes", "no"))
    assert (own.threads, shared.threads) == (6, 2)
    assert shared.params["copy_threads"] == "no" and "copy_threads" not in own.params
    assert own.total_work == shared.total_work
    for a, b in zip(own.changes(), shared.changes(), strict=True):
        assert a.at == b.at and np.array_equal(a.field.read, b.field.read)
    with pytest.raises(TierlabError, match="copy_threads"):
        Trace(str(p), copies=3, copy_threads="some")


def test_compact_map():
    t = np.array([5, 6, 600, 10 ** 7, 10 ** 7 + 1])
    m, n = compact_map(t, "auto")
    assert m.tolist() == [5, 6, 600, 3 * 512 + 10 ** 7 % 512, 3 * 512 + 10 ** 7 % 512 + 1]
    m2, n2 = compact_map(t, "no")
    assert m2.tolist() == t.tolist() and n2 == 10 ** 7 + 2
    dense = np.arange(100, 5000)
    m3, _ = compact_map(dense, "auto")
    assert np.array_equal(m3, dense)


@needs_traces
def test_gapbs_pagegrind_matches_readme():
    t = read_trace(PR)
    s = t.summary()
    # README: 267 M accesses, 6.6 k pages touched, top 1% / 10% share 0.56-0.59 / 0.68-0.70
    assert s["accesses"] == int(t.reads.astype(np.int64).sum() + t.writes.astype(np.int64).sum())
    assert abs(s["accesses"] - 267e6) < 0.5e6
    assert abs(s["touched_pages"] - 6600) < 50
    assert 0.54 <= s["top1pct_share"] <= 0.60 and 0.67 <= s["top10pct_share"] <= 0.71
    assert t.window == 10_000_000
    w = WORKLOADS.create(f"trace:{PR}", scale=1.0, seed=0)
    assert w.total_work == s["accesses"] and w.footprint_pages == s["touched_pages"]
    assert w.npages < 20_000  # compacted from a 128 GiB span
    ch = list(w.changes())
    assert len(ch) == t.nwindows
    assert sum(int((c.alloc[:, 1] - c.alloc[:, 0]).sum()) for c in ch
               if c.alloc is not None) == s["touched_pages"]


@needs_traces
def test_convert_pagegrind(tmp_path):
    dst = tmp_path / "pr.npz"
    a = convert_pagegrind(PR, dst)
    b = read_trace(dst)
    assert np.array_equal(a.pages, b.pages) and np.array_equal(a.accesses, b.accesses)
    assert b.source == "pagegrind:gapbs-pr-g16.pg"


def test_pagegrind_small_and_errors(tmp_path):
    p = tmp_path / "x.pg"
    write_pg(p, [(0, [(7, 1, 2), (5, 3, 0), (7, 1, 0)], 10), (1, [(9, 0, 4)], 4)])
    t = from_pagegrind(p)
    assert t.pages.tolist() == [5, 7, 9] and t.reads.tolist() == [3, 2, 0]
    assert t.accesses.tolist() == [10, 4]
    w = Trace(str(p))
    assert w.total_work == 14
    # rates are per access of the window: 10 accesses, 7 recorded
    assert next(w.changes()).field.total == pytest.approx(0.7)
    raw = p.read_bytes()
    cut = tmp_path / "cut.pg"
    cut.write_bytes(raw[:-5])
    with pytest.raises(TierlabError, match="truncated epoch 1"):
        read_trace(cut)
    cut.write_bytes(raw[:40])
    with pytest.raises(TierlabError, match="truncated"):
        read_trace(cut)
    bad = bytearray(raw)
    bad[80] ^= 0xFF  # second header's magic (after 32 + 3 x 16 bytes)
    cut.write_bytes(bytes(bad))
    with pytest.raises(TierlabError, match="bad magic at byte 80"):
        read_trace(cut)
    write_pg(cut, [(3, [(1, 1, 1)], 2), (2, [(1, 1, 1)], 2)])
    with pytest.raises(TierlabError, match="epoch number"):
        read_trace(cut)
    cut.write_bytes(b"")
    with pytest.raises(TierlabError, match="empty"):
        read_trace(cut)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(1, 16 * 3 + 32 * 2 - 1), flip=st.integers(0, 111))
def test_fuzz_damaged_pagegrind(tmp_path, cut, flip):
    p = tmp_path / "f.pg"
    write_pg(p, [(0, [(7, 1, 2), (5, 3, 0)], 6), (1, [(9, 0, 4)], 4)])
    raw = bytearray(p.read_bytes())
    raw[flip] ^= 0x5A
    p.write_bytes(bytes(raw[:cut]))
    try:
        t = read_trace(p)
    except TierlabError as e:
        assert "\n" not in str(e)
        return
    assert t.nwindows >= 1


def _npz(tmp_path, **arrays):
    base = dict(window_ptr=np.array([0, 2]), pages=np.array([1, 2]),
                reads=np.array([1, 1], np.uint32), writes=np.array([0, 1], np.uint32),
                page_size=np.int64(4096), window=np.int64(3), version=np.int64(1))
    base.update(arrays)
    base = {k: v for k, v in base.items() if v is not None}
    p = tmp_path / "m.npz"
    with open(p, "wb") as f:
        np.savez(f, **base)
    return p


@pytest.mark.parametrize("change,needle", [
    (dict(pages=None), "missing pages"),
    (dict(version=np.int64(2)), "unsupported version 2"),
    (dict(page_size=np.int64(2 << 20)), "page_size"),
    (dict(pages=np.array([2, 1])), "not strictly increasing within window 0"),
    (dict(window_ptr=np.array([0, 1])), "window_ptr"),
    (dict(reads=np.array([1])), "differ in length"),
    (dict(reads=np.array([1, -1])), "negative reads"),
    (dict(pages=np.array([1.0, 2.0])), "integer"),
    (dict(accesses=np.array([1, 2])), "accesses"),
])
def test_malformed_npz(tmp_path, change, needle):
    p = _npz(tmp_path, **change)
    with pytest.raises(TierlabError) as e:
        read_trace(p)
    assert needle in str(e.value) and str(p) in str(e.value)


def test_truncated_and_garbage_npz(tmp_path):
    p = tmp_path / "t.npz"
    write_trace(p, small_windows())
    raw = p.read_bytes()
    for n in (10, len(raw) // 2, len(raw) - 3):
        p.write_bytes(raw[:n])
        with pytest.raises(TierlabError, match="t.npz"):
            read_trace(p)
    p.write_bytes(b"hello, world" * 10)
    with pytest.raises(TierlabError, match="not a tierlab trace"):
        read_trace(p)
    q = tmp_path / "a.npy"
    np.save(q, np.arange(3))
    with pytest.raises(TierlabError, match="npy"):
        read_trace(q)
    with pytest.raises(TierlabError, match="not found"):
        WORKLOADS.create(f"trace:{tmp_path}/missing.npz")
    with pytest.raises(TierlabError, match="directory"):
        read_trace(tmp_path)
