"""The statistical model (RateSource) against exact replay of a Poisson access stream.

DESIGN.md: "Keep an exact replay path for small traces (per access) and test that both
paths agree statistically: that test is what makes the fast model trustworthy."

One small timeline (segments of different rates, a zero-rate hole, a stall, two field
epochs), one exact Poisson stream drawn from it by `poisson_events`, and the monitor
primitives run identically on both sources. Each statistic is compared with a z score
(sum of Bernoulli/Poisson outcomes against the model's expectation, and exact against
rate) or a two-sample KS test. Seeds are fixed, so the outcome is deterministic; the
thresholds (|z| < Z_MAX = 4.5, i.e. two-sided p ~ 7e-6 per check; KS p > 1e-3) leave
room for any seed. The negative checks run the same statistics against a model whose
rates are wrong by x2 and require them to fail by a wide margin.
"""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from tierlab.engine.timeline import Timeline
from tierlab.field import RateField
from tierlab.monitors import (AccessedBits, ExactSource, HintFaults, PebsSampler,
                              RateSource, poisson_events)

Z_MAX = 4.5
KS_P = 1e-3
NPAGES = 8192
# page classes: (name, start, end)
CLASSES = [("A", 0, 1024), ("B", 1024, 3072), ("C", 3072, 4096), ("Z", 4096, 5120),
           ("D", 5120, 8192)]
# time pieces: work slope 100/s on [0, 10], stall on (10, 14], slope 200/s after;
# the field changes at t = 20
PIECES = [("f1", 0.0, 10.0), ("stall", 10.0, 14.0), ("f1b", 14.0, 20.0), ("f2", 20.0, 40.0)]
T_END = 40.0


def make_fields(scale=1.0):
    f1 = RateField([0, 1024, 3072, 5120], [1024, 3072, 4096, 8192],
                   np.array([2e-3, 4e-4, 0.0, 5e-5]) * scale,
                   np.array([1e-3, 0.0, 6e-4, 0.0]) * scale, NPAGES)
    f2 = RateField([0, 1024, 5120], [1024, 3072, 8192],
                   np.array([2e-4, 1e-3, 2e-4]) * scale,
                   np.array([0.0, 1e-3, 5e-5]) * scale, NPAGES)
    return f1, f2


def make_timeline(scale=1.0):
    f1, f2 = make_fields(scale)
    tl = Timeline(f1)
    tl.advance(10.0, 1000.0)
    tl.advance(14.0, 1000.0)   # stall: no work, no accesses
    tl.advance(20.0, 2200.0)
    tl.set_field(20.0, f2)
    tl.advance(T_END, 6200.0)
    return tl


def node_of(pages):
    """Pages below 3072 on node 0 (fast), the rest on node 1."""
    return (np.asarray(pages) >= 3072).astype(np.int64)


@pytest.fixture(scope="module")
def world():
    tl = make_timeline()
    times, pages, writes = poisson_events(tl, 0.0, T_END, np.random.default_rng(2024))
    exact = ExactSource(times, pages, writes, npages=NPAGES)
    return {"tl": tl, "exact": exact, "rate": RateSource(tl),
            "wrong": RateSource(make_timeline(scale=2.0)),  # deliberately wrong rates
            "model": RateSource(tl)}  # for expectations only (no draws)


def page_class(pages):
    out = np.empty(len(pages), dtype=object)
    for name, a, b in CLASSES:
        out[(pages >= a) & (pages < b)] = name
    return out


def piece_of(t):
    for name, a, b in PIECES:
        if a < t <= b:
            return name
    raise AssertionError(t)


def zscore(x, mean, var):
    return (x - mean) / np.sqrt(max(var, 1e-12))


# -----------------------------------------------------------------------------------
# accessed bits: leaf and PMD level, test_and_clear every window
# -----------------------------------------------------------------------------------
def run_bits(src, level, dt, seed, model):
    """test_and_clear all entries of `level` every dt; per (entry class, time piece):
    observed sets, and the model's expected sets and variance for the true rates."""
    span = AccessedBits.span(level)
    idx = np.arange(NPAGES // span)
    ab = AccessedBits(src, np.random.default_rng(seed), horizon=100.0)
    ab.clear_all(level, 0.0)
    cls = page_class(idx * span)
    obs, mean, var = {}, {}, {}
    ts = np.arange(1, int(round(T_END / dt)) + 1) * dt
    for t0, t1 in zip(np.concatenate(([0.0], ts[:-1])), ts):
        bits = ab.test_and_clear(level, idx, t1)
        lam = sum(model.expected(idx * span, (idx + 1) * span, t0, t1))
        p = -np.expm1(-lam)
        piece = piece_of(0.5 * (t0 + t1))
        for c in np.unique(cls):
            m = cls == c
            k = (c, piece)
            obs[k] = obs.get(k, 0) + int(bits[m].sum())
            mean[k] = mean.get(k, 0.0) + float(p[m].sum())
            var[k] = var.get(k, 0.0) + float((p[m] * (1 - p[m])).sum())
    return obs, mean, var


@pytest.mark.parametrize("level,dt", [(0, 0.5), (1, 0.02)])
def test_accessed_bits_agree(world, level, dt):
    model = world["model"]
    ex, me, va = run_bits(world["exact"], level, dt, 1, model)
    ra, _, _ = run_bits(world["rate"], level, dt, 2, model)
    checked = 0
    for k in me:
        if me[k] == 0:  # zero-rate classes and the stall: never set, in both
            assert ex[k] == 0 and ra[k] == 0, k
            continue
        assert abs(zscore(ex[k], me[k], va[k])) < Z_MAX, (k, ex[k], me[k])
        assert abs(zscore(ra[k], me[k], va[k])) < Z_MAX, (k, ra[k], me[k])
        assert abs(zscore(ex[k] - ra[k], 0.0, 2 * va[k])) < Z_MAX, (k, ex[k], ra[k])
        checked += 1
    assert checked >= 8
    assert ex[("A", "stall")] == 0 and ra[("A", "stall")] == 0


def test_accessed_bits_detect_wrong_rate(world):
    """Same statistic, model with x2 rates: the exact stream must reject it."""
    model = world["model"]
    ex, me, va = run_bits(world["exact"], 0, 0.5, 1, model)
    wr, _, _ = run_bits(world["wrong"], 0, 0.5, 3, model)
    zs = [zscore(ex[k] - wr[k], 0.0, 2 * va[k]) for k in me if me[k] > 0]
    assert max(abs(z) for z in zs) > 3 * Z_MAX


def test_accessed_bits_without_clear(world):
    """Repeated tests without clearing (found-clear == cleared-now, found-set sticks):
    the marginal P(set at t) is 1 - exp(-Lambda(5, t)) after a full clear at t = 5."""
    model = world["model"]
    idx = np.arange(NPAGES)
    cls = page_class(idx)
    times = [6.0, 9.0, 12.0, 16.0, 21.0, 30.0, 39.0]
    res = {}
    for name, seed in (("exact", 4), ("rate", 5)):
        ab = AccessedBits(world[name], np.random.default_rng(seed), horizon=100.0)
        ab.clear_all(0, 5.0)
        prev = np.zeros(NPAGES, dtype=bool)
        for t in times:
            bits = ab.test(0, idx, t)
            assert np.all(bits[prev]), "a bit found set must stay set until cleared"
            prev = bits
            res[(name, t)] = bits
    for t in times:
        p = -np.expm1(-sum(model.expected(idx, idx + 1, 5.0, t)))
        for c, _, _ in CLASSES:
            m = cls == c
            mean, var = p[m].sum(), (p[m] * (1 - p[m])).sum()
            for name in ("exact", "rate"):
                x = res[(name, t)][m].sum()
                if mean == 0:
                    assert x == 0
                else:
                    assert abs(zscore(x, mean, var)) < Z_MAX, (name, t, c, x, mean)


# -----------------------------------------------------------------------------------
# PEBS samples per event and page class
# -----------------------------------------------------------------------------------
PERIODS = {"fast_load": 3, "slow_load": 2, "store": 5}


def run_pebs(src, seed):
    pb = PebsSampler(src, period=PERIODS, node_of=node_of, fast_nodes={0},
                     rng=np.random.default_rng(seed))
    counts, times = {}, {}
    edges = np.linspace(0.0, T_END, 81)
    for t0, t1 in zip(edges[:-1], edges[1:]):
        out = pb.poll(t0, t1)
        for ev, (pages, ts) in zip(PebsSampler.EVENTS, out):
            assert np.all((ts > t0) & (ts <= t1))
            if ev == "fast_load":
                assert np.all(node_of(pages) == 0)
            if ev == "slow_load":
                assert np.all(node_of(pages) == 1)
            for c in page_class(pages):
                counts[(ev, c)] = counts.get((ev, c), 0) + 1
            times.setdefault(ev, []).append(ts)
    return counts, {ev: np.concatenate(v) for ev, v in times.items()}, pb


def pebs_expected(model):
    """Expected samples per (event, class): expected events / period."""
    exp = {}
    for c, a, b in CLASSES:
        r, w = model.expected([a], [b], 0.0, T_END)
        fast = node_of([a])[0] == 0
        exp[("fast_load" if fast else "slow_load", c)] = r[0] / PERIODS[
            "fast_load" if fast else "slow_load"]
        exp[("store", c)] = w[0] / PERIODS["store"]
    return exp


def test_pebs_agree(world):
    exp = pebs_expected(world["model"])
    ce, te, pbe = run_pebs(world["exact"], 11)
    cr, tr, pbr = run_pebs(world["rate"], 12)
    assert pbr.cpu_seconds == pytest.approx(sum(cr.values()) * pbr.sample_cost)
    checked = 0
    for k, m in exp.items():
        x, y = ce.get(k, 0), cr.get(k, 0)
        if m == 0:
            assert x == 0 and y == 0, k
            continue
        # Poisson variance for the rate model; the exact every-Nth counter is less
        # dispersed, so these bounds are conservative for it
        assert abs(zscore(x, m, m)) < Z_MAX, (k, x, m)
        assert abs(zscore(y, m, m)) < Z_MAX, (k, y, m)
        assert abs(zscore(x - y, 0, 2 * m)) < Z_MAX, (k, x, y)
        checked += 1
    assert checked >= 7
    # sample times spread according to work done (none in the stall)
    for ev in PebsSampler.EVENTS:
        assert not np.any((te[ev] > 10.0) & (te[ev] <= 14.0))
        assert not np.any((tr[ev] > 10.0) & (tr[ev] <= 14.0))
        assert stats.ks_2samp(te[ev], tr[ev]).pvalue > KS_P, ev


def test_pebs_detects_wrong_rate(world):
    exp = pebs_expected(world["model"])
    ce, te, _ = run_pebs(world["exact"], 11)
    cw, tw, _ = run_pebs(world["wrong"], 13)
    zs = [zscore(ce.get(k, 0) - cw.get(k, 0), 0, 2 * m) for k, m in exp.items() if m > 0]
    assert max(abs(z) for z in zs) > 3 * Z_MAX


# -----------------------------------------------------------------------------------
# hint faults: latency distributions (KS) and fault fractions
# -----------------------------------------------------------------------------------
SCANS = [1.0, 8.0, 12.0, 18.0, 26.0, 33.0]  # the scanner arms every page at these times


def run_hint_faults(src, seed):
    hf = HintFaults(src, np.random.default_rng(seed))
    pages = np.arange(NPAGES)
    out = {c: [] for c, _, _ in CLASSES}
    nfaults = 0
    polls = np.linspace(0.0, T_END, 161)[1:]
    scans = list(SCANS)
    for t in polls:
        while scans and scans[0] <= t:
            s = scans.pop(0)
            p, ft, lat = hf.poll(s)     # faults up to the scan, then arm
            nfaults += len(p)
            for c, l in zip(page_class(p), lat):
                out[c].append(l)
            hf.arm(pages, s)
        p, ft, lat = hf.poll(t)
        assert len(np.unique(p)) == len(p)
        assert np.all(lat >= 0) and np.all(ft <= t)
        nfaults += len(p)
        for c, l in zip(page_class(p), lat):
            out[c].append(l)
    assert hf.faults == nfaults
    return {c: np.asarray(v) for c, v in out.items()}


def test_hint_faults_agree(world):
    le = run_hint_faults(world["exact"], 21)
    lr = run_hint_faults(world["rate"], 22)
    assert len(le["Z"]) == 0 and len(lr["Z"]) == 0  # zero-rate pages never fault
    for c in ("A", "B", "C", "D"):
        n_e, n_r = len(le[c]), len(lr[c])
        assert n_e > 200 and n_r > 200, c
        # fault counts: compare as Poisson-ish counts
        assert abs(zscore(n_e - n_r, 0, n_e + n_r)) < Z_MAX, (c, n_e, n_r)
        p = stats.ks_2samp(le[c], lr[c]).pvalue
        assert p > KS_P, (c, p)


def test_hint_faults_detect_wrong_rate(world):
    le = run_hint_faults(world["exact"], 21)
    lw = run_hint_faults(world["wrong"], 23)
    ps = [stats.ks_2samp(le[c], lw[c]).pvalue for c in ("A", "B", "D")]
    assert min(ps) < 1e-6


# -----------------------------------------------------------------------------------
# counts and first access
# -----------------------------------------------------------------------------------
def test_counts_agree(world):
    model = world["model"]
    rng = np.random.default_rng(31)
    edges = np.linspace(0.0, T_END, 21)
    a = np.array([c[1] for c in CLASSES])
    b = np.array([c[2] for c in CLASSES])
    for src_name in ("exact", "rate"):
        for t0, t1 in zip(edges[:-1], edges[1:]):
            r, w = world[src_name].counts(a, b, t0, t1, rng)
            er, ew = model.expected(a, b, t0, t1)
            for x, m in zip(np.concatenate((r, w)), np.concatenate((er, ew))):
                if m == 0:
                    assert x == 0
                else:
                    assert abs(zscore(x, m, m)) < Z_MAX, (src_name, t0, x, m)
    # per-entry t0 (several distinct starts) matches the scalar path on the exact log
    t0s = np.array([0.0, 3.0, 12.0, 25.0, 0.0])
    r, w = world["exact"].counts(a, b, t0s, 30.0)
    for i in range(len(a)):
        r1, w1 = world["exact"].counts(a[i:i + 1], b[i:i + 1], t0s[i], 30.0)
        assert r[i] == r1[0] and w[i] == w1[0]


def test_first_access_agree(world):
    """Direct first_access (fresh Exp(1) per call in the rate model), per class, KS."""
    pages = np.arange(NPAGES)
    rng = np.random.default_rng(41)
    for t0 in (0.5, 11.0, 19.0):
        fe = world["exact"].first_access(pages, t0, T_END, rng)
        fr = world["rate"].first_access(pages, t0, T_END, rng)
        fw = world["wrong"].first_access(pages, t0, T_END, rng)
        for c, a, b in CLASSES:
            e, r = fe[a:b], fr[a:b]
            e, r = e[~np.isnan(e)], r[~np.isnan(r)]
            if c == "Z":
                assert len(e) == 0 and len(r) == 0
                continue
            assert np.all(e > t0) and np.all(r > t0)
            assert stats.ks_2samp(e, r).pvalue > KS_P, (t0, c)
        wa = fw[:1024]
        assert stats.ks_2samp(fe[:1024][~np.isnan(fe[:1024])],
                              wa[~np.isnan(wa)]).pvalue < 1e-6
