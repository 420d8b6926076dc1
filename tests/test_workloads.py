"""Workload generators: contracts with the engine and the behaviour each one promises."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from tierlab.errors import TierlabError
from tierlab.units import PAGE
from tierlab.workloads import WORKLOADS
from tierlab.field import RateField
from tierlab.workloads._common import default_work
from tierlab.workloads.graph import Graph, compress, page_masses
from tierlab.workloads.stream import Stream
from tierlab.workloads.ycsb import fnv64, zeta

DATA = Path(__file__).parent / "data"
MASIM = Path(__file__).parents[1] / "src" / "tierlab" / "data" / "masim"
TRACES = Path("/work/shared/traces")


def make(spec, scale=1.0, seed=0):
    return WORKLOADS.create(spec, scale=scale, seed=seed)


def check_contract(w, max_changes=500):
    """Changes ordered from 0, fields inside npages and only on allocated pages,
    allocations disjoint and within the footprint. Interval arithmetic only (works for
    terabyte address spaces)."""
    changes = list(w.changes())
    assert 1 <= len(changes) <= max_changes
    assert changes[0].at == 0 and changes[0].field is not None
    ats = [c.at for c in changes]
    assert ats == sorted(ats) and ats[-1] < w.total_work
    alloc = np.zeros((0, 2), dtype=np.int64)
    total_alloc = 0
    for c in changes:
        if c.alloc is not None and len(c.alloc):
            a = np.asarray(c.alloc, dtype=np.int64)
            assert a.dtype == np.int64 and a.ndim == 2 and a.shape[1] == 2
            assert np.all(a[:, 1] > a[:, 0]) and a.min() >= 0 and a.max() <= w.npages
            allr = np.concatenate((alloc, a))
            allr = allr[np.argsort(allr[:, 0])]
            assert np.all(allr[1:, 0] >= allr[:-1, 1]), "page allocated twice"
            alloc = allr
            total_alloc += int((a[:, 1] - a[:, 0]).sum())
        f = c.field
        if f is None:
            continue
        assert f.npages == w.npages
        if f.nsegments == 0:
            continue
        assert f.starts[0] >= 0 and f.ends[-1] <= w.npages
        # merge adjacent allocated ranges, then every segment must sit inside one
        br = np.flatnonzero(alloc[1:, 0] != alloc[:-1, 1])
        ms = np.concatenate(([alloc[0, 0]], alloc[br + 1, 0]))
        me = np.concatenate((alloc[br, 1], [alloc[-1, 1]]))
        i = np.searchsorted(ms, f.starts, side="right") - 1
        assert np.all(i >= 0), "rate on a page never allocated"
        assert np.all(f.ends <= me[i]), "rate on a page never allocated"
    assert total_alloc <= w.footprint_pages <= w.npages
    assert w.total_work > 0 and w.threads >= 1 and w.mlp > 0 and w.compute_ns >= 0
    return changes


# ---------------------------------------------------------------------------------
# all workloads: contract, determinism, scale
# ---------------------------------------------------------------------------------

SMALL = [
    ("gups:uniform,size=64MiB", 1.0),
    ("gups:hotset,size=64MiB,hot=8MiB", 1.0),
    ("gups:dynamic,size=64MiB,hot=8MiB", 1.0),
    ("gups:gupspp,size=256MiB,hot=1MiB", 1.0),
    ("ycsb:a,records=20000", 1.0),
    ("ycsb:b,records=20000", 1.0),
    ("ycsb:c,records=20000", 1.0),
    ("ycsb:d,records=20000,steps=10", 1.0),
    ("ycsb:e,records=20000,steps=5,detail=512", 1.0),
    ("ycsb:f,records=20000", 1.0),
    ("ycsb:d,records=3000,record=1500,dist=zipfian,steps=4", 1.0),
    ("stream:size=96MiB", 1.0),
    ("graph:vertices=200000", 1.0),
    ("graph:vertices=200000,kernel=bc,sorted=yes", 1.0),
    (f"masim:{MASIM}/zigzag.cfg", 0.01),
    (f"masim:{MASIM}/hotcold.cfg", 0.01),
]


def test_all_registered():
    assert {"gups", "masim", "ycsb", "stream", "graph", "trace"} <= set(WORKLOADS.names())
    for name in WORKLOADS.names():
        assert WORKLOADS.describe(name)


@pytest.mark.parametrize("spec,scale", SMALL)
def test_contract(spec, scale):
    w = make(spec, scale)
    check_contract(w)
    assert w.params and w.work_unit and w.name
    for c in w.timed_changes():
        assert c.field is not None and c.field.npages == w.npages


@pytest.mark.parametrize("spec", ["gups:gupspp,size=256MiB,hot=1MiB",
                                  "ycsb:a,records=20000", "graph:vertices=300000",
                                  "gups:dynamic,size=64MiB,hot=8MiB"])
def test_deterministic_per_seed(spec):
    def fields(seed):
        w = make(spec, seed=seed)
        return [c.field for c in w.changes()] + [c.field for c in w.timed_changes()]

    a, b, c = fields(1), fields(1), fields(2)
    for x, y in zip(a, b):
        assert np.array_equal(x.starts, y.starts) and np.array_equal(x.read, y.read)
    differs = any(not (np.array_equal(x.starts, y.starts) and np.array_equal(x.read, y.read))
                  for x, y in zip(a, c))
    assert differs


@pytest.mark.parametrize("spec", ["gups:hotset,size=64MiB,hot=8MiB", "stream:size=96MiB",
                                  "ycsb:d,records=40000", "ycsb:b,records=40000",
                                  "graph:vertices=409600", f"masim:{MASIM}/zigzag.cfg",
                                  "gups:dynamic,size=64MiB,hot=8MiB"])
def test_scale_halves_footprint_and_work(spec):
    full, half = make(spec, 1.0), make(spec, 0.5)
    assert half.footprint_pages == pytest.approx(full.footprint_pages / 2, rel=0.01)
    assert half.total_work == pytest.approx(full.total_work / 2, rel=0.01)
    if hasattr(full, "move_s"):
        # time is not scaled: the miniature runs as long as the full-scale run
        assert half.move_s == pytest.approx(full.move_s)


def test_default_sizes_and_durations():
    # every default run lasts ~90 s in DRAM (the formula in default_work)
    for spec in ["gups:uniform", "gups:hotset", "stream", "ycsb:a", "ycsb:c"]:
        w = make(spec)
        per_thread = w.compute_ns + (w.changes().__next__().field.total) * 81 / w.mlp
        rate = min(w.threads / per_thread * 1e9,
                   105e9 / (64 * w.changes().__next__().field.total))
        assert 60 <= w.total_work / rate <= 120, spec
    assert make("gups:hotset").footprint_pages * PAGE == 64 << 30
    assert make("stream").footprint_pages * PAGE == 48 << 30
    assert make("ycsb:a").footprint_pages * PAGE == 64 << 30


def test_bad_values_are_one_line_errors():
    cases = ["gups:nope", "gups:hotset,size=lots", "gups:hotset,hot=80GiB",
             "gups:hotset,hot_frac=1.5", "gups:dynamic,hot=40GiB", "gups:gupspp,item=48",
             "gups:uniform,threads=0", "gups:uniform,colour=red", "ycsb:z", "ycsb:a,theta=1",
             "ycsb:a,dist=pareto", "ycsb:a,records=-5", "stream:arrays=0",
             "graph:kernel=sssp", "graph:alpha=1", "graph:sorted=maybe",
             "gups:gupspp,hot=16GiB", "masim", "trace", "masim:/nonexistent/x.cfg",
             "trace:/nonexistent/x.npz", "gups:hotset,hot_start=63GiB"]
    for spec in cases:
        with pytest.raises(TierlabError) as e:
            make(spec)
        msg = str(e.value)
        assert msg and "\n" not in msg, spec


def test_bad_variant_names_choices():
    with pytest.raises(TierlabError, match="uniform.*hotset.*dynamic.*gupspp"):
        make("gups:hot")
    with pytest.raises(TierlabError, match="a, b, c, d, e, f"):
        make("ycsb:g")


# ---------------------------------------------------------------------------------
# GUPS
# ---------------------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["uniform", "hotset", "dynamic", "gupspp"])
def test_gups_one_read_one_write_per_update(variant):
    w = make(f"gups:{variant},size=128MiB" + (",hot=4MiB" if variant != "uniform" else ""))
    f = next(w.changes()).field
    assert f.total_read == pytest.approx(1.0) and f.total_write == pytest.approx(1.0)
    c = next(w.changes())
    assert c.alloc.tolist() == [[0, w.npages]]
    assert w.work_unit == "updates"


def test_gups_hotset_gets_90_percent():
    w = make("gups:hotset,size=64MiB,hot=8MiB")
    f = next(w.changes()).field
    n, h = w.npages, 8 * 256
    assert w.hot_start == n - h  # at the end by default
    r, wr = f.range_sum(np.array([n - h]), np.array([n]))
    assert (r + wr)[0] / 2 == pytest.approx(0.9)
    rng = np.random.default_rng(0)
    s = f.sample(rng, 200_000)
    share = np.mean(s >= n - h)
    assert abs(share - 0.9) < 4 * math.sqrt(0.09 / 200_000)
    # each hot page is (0.9/h)/(0.1/(n-h)) = 63x hotter than a cold one
    hr, _ = f.rate_of(np.array([0, n - 1]))
    assert hr[1] / hr[0] == pytest.approx(0.9 / h / (0.1 / (n - h)))


def test_gups_hot_start_and_frac():
    w = make("gups:hotset,size=64MiB,hot=8MiB,hot_start=start,hot_frac=0.5")
    f = next(w.changes()).field
    assert f.range_total(np.array([0]), np.array([2048]))[0] == pytest.approx(1.0)
    w = make("gups:hotset,size=64MiB,hot=8MiB,hot_start=16MiB")
    assert w.hot_start == 4096
    f = next(w.changes()).field
    assert f.range_total(np.array([4096]), np.array([4096 + 2048]))[0] == pytest.approx(1.8)


def test_gups_dynamic_moves_disjoint():
    w = make("gups:dynamic,size=64MiB,hot=8MiB,move=150s", scale=0.5)
    assert w.move_s == pytest.approx(150.0)  # time is not scaled
    tc = list(w.timed_changes())
    assert 4 <= len(tc) <= 400
    assert [c.at for c in tc] == pytest.approx([150.0 * (i + 1) for i in range(len(tc))])
    n, h = w.npages, w.hot_pages
    prev = next(w.changes()).field
    for c in tc:
        f = c.field
        assert f.total == pytest.approx(2.0)
        hot_now = f.read > f.read.min()
        hot_prev = prev.read > prev.read.min()
        pages_now = np.concatenate([np.arange(s, e) for s, e in
                                    zip(f.starts[hot_now], f.ends[hot_now])])
        pages_prev = np.concatenate([np.arange(s, e) for s, e in
                                     zip(prev.starts[hot_prev], prev.ends[hot_prev])])
        assert len(pages_now) == h
        assert not np.intersect1d(pages_now, pages_prev).size  # disjoint
        assert f.range_total(pages_now, pages_now + 1).sum() == pytest.approx(1.8)
        prev = f
    # the hot set visits different places over time
    starts = w.hot_starts(10)
    assert len(set(starts)) == 10 and all(0 <= s < n for s in starts)


def test_gups_dynamic_wraps():
    w = make("gups:dynamic,size=64MiB,hot=24MiB", seed=3)
    starts = w.hot_starts(50)
    n, h = w.npages, w.hot_pages
    assert any(s + h > n for s in starts)  # some position wraps around the end
    wrapped = next(s for s in starts if s + h > n)
    f = w._hot_field(wrapped)
    assert f.range_total(np.array([wrapped]), np.array([n]))[0] + \
        f.range_total(np.array([0]), np.array([wrapped + h - n]))[0] == pytest.approx(1.8)


def test_gupspp_scattered_hot_items():
    w = make("gups:gupspp,size=256MiB,hot=1MiB,item=64")
    f = next(w.changes()).field
    k = (1 << 20) // 64
    assert w.hot_items == k
    hot = w.hot_page_list
    n = w.npages
    # about n(1 - exp(-k/n)) distinct pages, spread over the whole array
    assert len(hot) == pytest.approx(n * -math.expm1(-k / n), rel=0.02)
    counts = np.bincount(hot * 16 // n, minlength=16)
    assert counts.min() > 0.8 * len(hot) / 16
    # hot items get hot_frac of the updates; other items share the rest evenly
    r, wr = f.rate_of(hot)
    assert np.array_equal(r, wr)
    slots = PAGE // 64
    cold_item = 0.1 / (n * slots - k)
    floor = f.rate_of(np.setdiff1d(np.arange(n), hot)[:1])[0][0]
    assert floor == pytest.approx(cold_item * slots)
    assert r.sum() - cold_item * (slots * len(hot) - k) == pytest.approx(0.9)
    assert f.nsegments <= 2 * len(hot) + 1


def test_gupspp_bounds_hot_pages():
    with pytest.raises(TierlabError, match="max_hot_pages"):
        make("gups:gupspp,size=256MiB,hot=8MiB,max_hot_pages=1000")


def test_default_work_formula():
    # 16 threads, 2 accesses, mlp 4, 5 ns: 45.5 ns per update per thread
    w = default_work(2.0, 5.0, 16, 4.0, 90.0)
    assert w == pytest.approx(90 * 16e9 / 45.5, rel=0.01)
    # bandwidth-bound: capped at 105 GB/s
    assert default_work(1.0, 0.0, 1000, 100.0, 1.0) == pytest.approx(105e9 / 64, rel=0.01)


# ---------------------------------------------------------------------------------
# YCSB
# ---------------------------------------------------------------------------------

def test_ycsb_zeta_and_hash_match_ycsb():
    assert zeta(10_000_000_000, 0.99) == pytest.approx(26.46902820178302, rel=1e-9)
    n = np.array([1, 7, 65536, 70000, 123456])
    exact = [np.sum(np.arange(1, k + 1, dtype=float) ** -0.7) for k in n]
    assert np.allclose(zeta(n, 0.7), exact, rtol=1e-10)
    # FNV-1 64 of 0 over 8 zero bytes (Java long arithmetic, then Math.abs)
    h = 0xCBF29CE484222325
    for _ in range(8):
        h = (h * 1099511628211) % (1 << 64)
    signed = h - (1 << 64) if h >= 1 << 63 else h
    assert int(fnv64(np.array([0]))[0]) == abs(signed)


@pytest.mark.parametrize("v,reads,writes", [("a", 8, 8), ("b", 15.2, 0.8), ("c", 16, 0),
                                            ("d", 15.2, 0.8), ("f", 16, 8),
                                            ("e", 0.95 * 50.5 * 16, 0.8)])
def test_ycsb_read_write_mix(v, reads, writes):
    w = make(f"ycsb:{v},records=20000,detail=4096")
    f = next(w.changes()).field
    assert w.work_unit == "ops"
    assert f.total_read == pytest.approx(reads, rel=0.02 if v == "e" else 1e-6)
    assert f.total_write == pytest.approx(writes, rel=1e-6)
    assert w.reads_per_op == pytest.approx(reads) and w.writes_per_op == pytest.approx(writes)


def test_ycsb_scrambled_zipfian_hottest_key():
    w = make("ycsb:c,records=100000")
    f = next(w.changes()).field
    key0 = int(fnv64(np.array([0]))[0] % w.keyspace)
    page = key0 * 1024 // PAGE
    share = f.range_total(np.array([page]), np.array([page + 1]))[0] / f.total
    # rank 0 carries 1/zeta(1e10) of the requests, renormalised to keys present
    assert share >= 1 / 26.469 * 0.99
    # hot pages are scattered over the whole heap
    r, _ = f.rate_of(np.arange(w.npages))
    top = np.argsort(r)[::-1][:200]
    assert np.bincount(top * 10 // w.npages, minlength=10).min() >= 5
    # the mass of the rest is a floor: even the coldest page has some accesses
    assert r.min() > 0


def test_ycsb_latest_newest_hottest_and_moves():
    w = make("ycsb:d,records=50000,steps=5,detail=256")
    ch = check_contract(w)
    assert len(ch) == 5
    hot_pages, prev_end = [], 0
    for c in ch:
        f = c.field
        n_alloc_end = int(c.alloc[:, 1].max())
        assert int(c.alloc[:, 0].min()) == prev_end  # growth appended at the end
        prev_end = n_alloc_end
        reads = f.rate_of(np.arange(w.npages))[0]
        present = np.flatnonzero(reads)
        hottest = int(np.argmax(reads))
        assert hottest >= present.max() - 1  # the newest records are the hottest
        assert reads[present[-300:]].sum() > reads[present[:len(present) // 2]].sum()
        hot_pages.append(hottest)
    assert hot_pages == sorted(hot_pages) and hot_pages[-1] > hot_pages[0]
    assert w.footprint_pages == w.npages
    assert w.npages == math.ceil((50000 + w.inserts) * 1024 / PAGE)


def test_ycsb_uniform_override_and_records_per_page():
    w = make("ycsb:a,records=10000,dist=uniform,record=512")
    f = next(w.changes()).field
    assert f.nsegments == 1 and w.npages == 10000 * 512 // PAGE
    assert f.total_read == pytest.approx(4.0) and f.total_write == pytest.approx(4.0)


def test_ycsb_scan_spreads_forward():
    w = make("ycsb:e,records=30000,steps=2,dist=latest,detail=64")
    f = next(w.changes()).field
    reads = f.rate_of(np.arange(w.npages))[0]
    assert reads.sum() == pytest.approx(f.total_read)
    c = 30000
    present = math.ceil(c * 1024 / PAGE)
    # scans from old keys cover younger ones: no reads beyond the heap but inserts
    assert reads[present:].sum() == 0


# ---------------------------------------------------------------------------------
# stream and graph
# ---------------------------------------------------------------------------------

@pytest.mark.parametrize("k,reads,writes", [(3, 2 / 8, 1 / 8), (2, 1 / 8, 1 / 8),
                                            (1, 1 / 8, 1 / 8), (4, 3 / 8, 1 / 8)])
def test_stream_triad_rates(k, reads, writes):
    w = Stream(size="96MiB", arrays=k)
    f = next(w.changes()).field
    assert f.total_read == pytest.approx(reads) and f.total_write == pytest.approx(writes)
    assert w.work_unit == "elements"
    per = w.array_pages
    for i in range(k):  # uniform over each array
        r, wr = f.rate_of(np.array([i * per, (i + 1) * per - 1]))
        assert r[0] == r[1] and wr[0] == wr[1]
    assert w.total_work == w.sweeps * w.elements


@pytest.mark.parametrize("kernel", ["pr", "bc"])
def test_graph_totals_and_layout(kernel):
    w = Graph(vertices=300_000, kernel=kernel)
    f = next(w.changes()).field
    assert f.total == pytest.approx(w.accesses_per_edge(), rel=1e-9)
    a, b = w.arrays["edges"]
    assert b - a == math.ceil(300_000 * 16 * 4 / PAGE)
    assert f.range_total(np.array([a]), np.array([b]))[0] == pytest.approx(1 / 16)
    assert w.work_unit == "edges"


def test_graph_degree_skew():
    srt = Graph(vertices=2_000_000, sorted="yes")
    rnd = Graph(vertices=2_000_000, sorted="no")
    for w in (srt, rnd):
        a, b = w.arrays["contrib"]
        r = w.field().rate_of(np.arange(a, b))[0]
        top = np.sort(r)[::-1]
        assert top[: len(r) // 100].sum() / r.sum() > 0.2  # heavy-tailed
        if w is srt:
            assert np.all(np.diff(r[:1000]) <= 1e-15)  # hubs first, decreasing
        else:
            hot = np.argsort(r)[::-1][:100]
            assert np.bincount(hot * 4 // len(r), minlength=4).min() > 10  # scattered


def test_graph_large_random_uses_tail_model_consistently():
    import tierlab.workloads.graph as g
    V = 1 << 21

    def top1(m):
        s = np.sort(m)[::-1]
        return s[: len(s) // 100].sum()

    exact = np.mean([top1(page_masses(V, 2.0, False, np.random.default_rng(s)))
                     for s in range(3)])
    old = g.EXACT_LIMIT
    try:
        g.EXACT_LIMIT = 1 << 17
        approx = np.mean([top1(page_masses(V, 2.0, False, np.random.default_rng(s)))
                          for s in range(3)])
    finally:
        g.EXACT_LIMIT = old
    assert approx == pytest.approx(exact, rel=0.15)


def test_graph_compress_keeps_mass_and_hot_pages():
    rng = np.random.default_rng(1)
    m = rng.pareto(1.2, 100_000)
    s, e, r = compress(m, 1000, max_chunks=500)
    f = RateField.from_segments(s, e, r, np.zeros_like(r), 100_000)
    assert f.total_read == pytest.approx(m.sum())
    top = np.argsort(m)[::-1][:1000]
    assert np.allclose(f.rate_of(top)[0], m[top])
    assert f.nsegments <= 2 * 1000 + 500 + 1


# ---------------------------------------------------------------------------------
# defaults at full scale stay compact (sizes only; fields built lazily where cheap)
# ---------------------------------------------------------------------------------

def test_full_scale_fields_are_compact():
    w = make("gups:hotset")
    assert next(w.changes()).field.nsegments <= 3
    w = make("graph", scale=0.25)
    f = next(w.changes()).field
    assert f.nsegments < 200_000
    w = make("ycsb:a", scale=0.25)
    assert next(w.changes()).field.nsegments <= 2 * 65536 + 2


def test_graph_kernel_as_variant():
    from tierlab.api import make_workload
    assert make_workload("graph:bc", scale=1 / 256).params["kernel"] == "bc"
    assert make_workload("graph:kernel=pr", scale=1 / 256).params["kernel"] == "pr"
