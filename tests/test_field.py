"""The rate field against brute force over a per-page array."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from tierlab.field import RateField

N = 600


@st.composite
def segments(draw):
    k = draw(st.integers(0, 25))
    s = np.array(draw(st.lists(st.integers(0, N - 1), min_size=k, max_size=k)), dtype=np.int64)
    ln = np.array(draw(st.lists(st.integers(1, 80), min_size=k, max_size=k)), dtype=np.int64)
    r = np.array(draw(st.lists(st.floats(0, 10), min_size=k, max_size=k)))
    w = np.array(draw(st.lists(st.floats(0, 10), min_size=k, max_size=k)))
    return s, np.minimum(s + ln, N), r, w


def dense(s, e, v):
    out = np.zeros(N)
    for a, b, x in zip(s, e, v):
        out[a:b] += x
    return out


@settings(max_examples=150, deadline=None)
@given(seg=segments(), q=st.lists(st.tuples(st.integers(0, N), st.integers(0, N)),
                                  min_size=1, max_size=20))
def test_overlaps_add_up_and_range_sums_match(seg, q):
    s, e, r, w = seg
    f = RateField.from_segments(s, e, r, w, N)
    dr, dw = dense(s, e, r), dense(s, e, w)
    pr, pw = f.rate_of(np.arange(N))
    assert np.allclose(pr, dr, atol=1e-9) and np.allclose(pw, dw, atol=1e-9)
    a = np.array([min(x, y) for x, y in q])
    b = np.array([max(x, y) for x, y in q])
    sr, sw = f.range_sum(a, b)
    assert np.allclose(sr, [dr[x:y].sum() for x, y in zip(a, b)], atol=1e-7)
    assert np.allclose(sw, [dw[x:y].sum() for x, y in zip(a, b)], atol=1e-7)
    assert np.isclose(f.total, dr.sum() + dw.sum())


@settings(max_examples=60, deadline=None)
@given(seg=segments(), seed=st.integers(0, 100))
def test_per_node_totals_match_brute_force(seg, seed):
    s, e, r, w = seg
    f = RateField.from_segments(s, e, r, w, N)
    node = np.random.default_rng(seed).choice(np.array([0, 1, 2, 255], dtype=np.uint8), N)
    tr, tw = f.per_node_totals(node, 3)
    dr, dw = dense(s, e, r), dense(s, e, w)
    for k in range(3):
        assert np.isclose(tr[k], dr[node == k].sum()) and np.isclose(tw[k], dw[node == k].sum())


def test_per_node_totals_many_segments_path():
    """Over 512 segments the vectorised path is used; it must agree with the loop."""
    rng = np.random.default_rng(1)
    n = 50_000
    s = np.sort(rng.choice(n - 1, 3000, replace=False))
    f = RateField(s, s + 1, rng.random(3000), rng.random(3000), n)
    node = rng.integers(0, 3, n).astype(np.uint8)
    tr, tw = f.per_node_totals(node, 3)
    pr, pw = f.rate_of(np.arange(n))
    assert np.allclose(tr, [pr[node == k].sum() for k in range(3)])
    assert np.allclose(tw, [pw[node == k].sum() for k in range(3)])


def test_sample_is_proportional_to_rate():
    f = RateField([0, 100], [100, 110], [1.0, 90.0], [0.0, 0.0], 200)
    pages = f.sample(np.random.default_rng(0), 200_000, "read")
    hot = ((pages >= 100) & (pages < 110)).mean()
    # hot share of the read mass: 900 / (100 + 900) = 0.9
    assert abs(hot - 0.9) < 0.005
    assert len(f.sample(np.random.default_rng(0), 10, "write")) == 0


def test_per_node_totals_in_chunks_equals_one_pass(monkeypatch):
    """The chunked count (bounded memory for 5 TiB segments) gives the same totals as a
    direct per-page sum, whatever the chunk boundaries."""
    import tierlab.field as fieldmod
    rng = np.random.default_rng(1)
    n = 5000
    node = rng.integers(0, 3, n).astype(np.uint8)
    node[rng.random(n) < 0.1] = 255
    starts = np.sort(rng.choice(n - 50, 40, replace=False))
    ends = np.minimum(starts + rng.integers(1, 400, 40), np.append(starts[1:], n))
    keep = ends > starts
    f = RateField.from_segments(starts[keep], ends[keep], rng.random(keep.sum()),
                                rng.random(keep.sum()), n)
    want_r = np.zeros(3)
    for s, e, r in zip(f.starts, f.ends, f.read):
        for p in range(s, e):
            if node[p] < 3:
                want_r[node[p]] += r
    for chunk in (7, 64, 1 << 24):
        monkeypatch.setattr(fieldmod, "_CHUNK", chunk)
        r, _ = f.per_node_totals(node, 3)
        assert np.allclose(r, want_r)


@settings(max_examples=60, deadline=None)
@given(seg=segments(), seed=st.integers(0, 2**32 - 1))
def test_segment_of_sorted_pages_equals_the_search(seg, seed):
    """Many sorted pages take the run-length path of `segment_of`; it gives each page the
    segment a per-page search gives (or -1 in a gap)."""
    s, e, r, w = seg
    keep = np.ones(len(s), dtype=bool)
    for i in range(1, len(s)):  # disjoint, sorted segments from the drawn ones
        keep[i] = s[i] >= e[:i][keep[:i]].max(initial=0)
    f = RateField(s[keep], e[keep], r[keep], w[keep], N)
    pages = np.sort(np.random.default_rng(seed).integers(0, N, 5000))
    dense_seg = np.full(N, -1)
    for i, (a, b) in enumerate(zip(f.starts, f.ends)):
        dense_seg[a:b] = i
    assert np.array_equal(f.segment_of(pages), dense_seg[pages])
