"""Optane memory mode (engine/dram_cache.py), physical frame allocators
(engine/frames.py) and Johnny Cache (policies/johnny_cache.py): cache-set mapping,
the hit and write-back model against an exact replay, the birthday paradox of random
frames, JC's spreading allocation, and remapping that removes a conflict."""
from __future__ import annotations

import numpy as np
import pytest

from tierlab.cli import main
from tierlab.engine.engine import Simulation
from tierlab.engine.frames import JohnnyCacheFrames, RandomFrames
from tierlab.errors import TierlabError
from tierlab.machines.machine import CacheSpec, Machine, Tier
from tierlab.policies import ALLOCS, POLICIES

from conftest import HotCold

GB = 1e9


def mm_machine(cache_pages=16, pm_pages=1024, frame="4KiB"):
    return Machine("mm", [Tier("pm", "optane", pm_pages * 4096, 305, 100, 39 * GB, 13 * GB,
                               0, False)],
                   dram_cache=CacheSpec(cache_pages * 4096, frame))


def run(machine, wl, policy="linux-mm", seed=0):
    sim = Simulation(machine, wl, POLICIES.create(policy), ALLOCS.create("dram-preferred"),
                     seed=seed)
    return sim, sim.run()


def check_frames(sim):
    """Every allocated unit has one frame, no frame twice, the allocator's per-slot
    counts match."""
    c = sim.cache
    used = np.flatnonzero(c.frame >= 0)
    pages_alloc = np.flatnonzero(sim.mem.node != 255)
    assert np.array_equal(np.unique(pages_alloc // c.fp), used)
    assert np.unique(c.frame[used]).size == used.size
    assert np.array_equal(np.bincount(c.frame[used] % c.spec.nslots,
                                      minlength=c.spec.nslots), c.allocator.count)


def replay_sets(owner, sets, writes):
    """Exact replay of a direct-mapped cache: accesses in time order, each by `owner`
    to cache set `sets`; returns (hits, write-backs) per access. A set's line is dirty
    once written since its fill; the next access by another owner evicts it."""
    order = np.argsort(sets, kind="stable")  # each set's accesses, in time order
    ow, wr, st = owner[order], writes[order], sets[order]
    same_set = np.r_[False, st[1:] == st[:-1]]
    hit = same_set & np.r_[False, ow[1:] == ow[:-1]]
    run = np.cumsum(~hit)  # a run: a fill and the hits after it
    dirty = np.bincount(run, wr) > 0
    ends = np.r_[~hit[1:] & same_set[1:], False]
    return hit.mean(), dirty[run[ends]].sum() / owner.size


def replay(slot_of_page, rates, write_frac, n, rng):
    """Poisson-merged accesses to pages spread uniformly over their 64 lines."""
    pages = rng.choice(rates.size, n, p=rates / rates.sum())
    lines = rng.integers(0, 64, n)
    writes = rng.random(n) < write_frac[pages]
    return replay_sets(pages * 64 + lines, slot_of_page[pages] * 64 + lines, writes)


def test_slot_is_frame_mod_slots_and_model_matches_exact_replay():
    m = mm_machine(cache_pages=8, pm_pages=256)
    wl = HotCold(n=40, hot=6, hot_frac=0.7, work=2e5, write_frac=0.3)
    sim, rec = run(m, wl)
    c = sim.cache
    assert c.spec.nslots == 8
    units, r, w = c.unit_rates()
    slot = c.slot_of(units)
    assert np.array_equal(slot, c.frame[units] % 8)
    model = c.model()
    tot = r.sum() + w.sum()
    hits, wbs = replay(slot, r + w, w / (r + w), 400_000, np.random.default_rng(1))
    assert (model["hit_r"] + model["hit_w"]) / tot == pytest.approx(hits, abs=0.005)
    assert model["writeback"] / tot == pytest.approx(wbs, abs=0.005)
    assert model["writeback"] > 0  # the crafted mix has dirty evictions
    check_frames(sim)


def test_a_unit_alone_in_its_slot_always_hits():
    m = mm_machine(cache_pages=64, pm_pages=256)
    sim, rec = run(m, HotCold(n=48, hot=8, work=2e5), policy="jc-static")
    assert sim.cache.model()["miss_r"] == 0 and sim.cache.model()["writeback"] == 0
    assert rec["dram_cache"]["hit_ratio"] == pytest.approx(1.0)
    assert rec["tier_access_share"] == {"dram-cache": pytest.approx(1.0),
                                        "slow-memory": pytest.approx(0.0)}


def test_random_frames_conflict_rate_is_the_birthday_paradox():
    m, n = 4096, 4096
    shared = []
    for seed in range(4):
        a = RandomFrames(8 * m, m, np.random.default_rng(seed))
        f = np.concatenate([a.alloc(k) for k in (1000, 3000, 96)])
        assert np.unique(f).size == n
        cnt = np.bincount(f % m, minlength=m)
        shared.append((cnt[f % m] > 1).mean())
    assert np.mean(shared) == pytest.approx(shared_closed(m, n, ways=8), abs=0.01)
    # with unbounded ways it is the birthday paradox's 1 - (1 - 1/m)^(n - 1)
    assert shared_closed(m, n, ways=10**7) == pytest.approx(1 - (1 - 1 / m) ** (n - 1),
                                                            abs=1e-3)


def shared_closed(m, n, ways):
    """P(another of the n - 1 units takes one of my slot's ways - 1 other frames), the
    frames drawn without replacement from the m x ways - 1 others:
    1 - C(m ways - ways, n - 1) / C(m ways - 1, n - 1)."""
    j = np.arange(n - 1)
    return 1 - np.exp(np.sum(np.log((m * ways - ways - j) / (m * ways - 1 - j))))


def test_jc_static_spreads_units_evenly_and_refills_the_emptied_slots():
    m = 512
    a = JohnnyCacheFrames(8 * m, m, np.random.default_rng(0))
    f = np.concatenate([a.alloc(k) for k in (100, 700, 481)])
    cnt = np.bincount(f % m, minlength=m)
    assert cnt.max() - cnt.min() <= 1 and np.array_equal(cnt, a.count)
    a.free(f[:50])
    before = a.count.copy()
    emptiest = np.flatnonzero(before == before.min())
    assert 0 < emptiest.size < 50
    again = a.alloc(50) % m
    assert np.isin(emptiest, again).all()  # the least contended slots are refilled first
    assert a.count.max() - a.count.min() <= 1
    with pytest.raises(TierlabError, match="out of physical frames"):
        a.alloc(8 * m)


def test_frames_survive_growth_and_frees():
    m = mm_machine(cache_pages=16, pm_pages=512, frame="4KiB")
    for pol in ("linux-mm", "jc-static", "jc-dynamic"):
        sim, rec = run(m, HotCold(n=200, hot=20, phases=3, grow=60, free_first=30,
                                  work=3e5), pol)
        check_frames(sim)


def hot_units_machine():
    """2 MiB frames, 16 slots."""
    return mm_machine(cache_pages=16 * 512, pm_pages=256 * 512, frame="2MiB")


def test_remapping_removes_conflicts_of_random_frames():
    # 96 units, 12 hot: random frames put two hot units in one slot (the birthday
    # paradox: all 12 apart in 16 slots has probability ~1%)
    wl = lambda: HotCold(n=96 * 512, hot=12 * 512, hot_frac=0.95, work=3e9)  # noqa: E731
    base_sim, base = run(hot_units_machine(), wl(), "linux-mm", seed=3)
    dyn_sim, dyn = run(hot_units_machine(), wl(), "jc-dynamic:frames=random,max_moves=4",
                       seed=3)
    assert dyn["policy_stats"]["remaps"] > 0
    assert dyn["dram_cache"]["hit_ratio"] > base["dram_cache"]["hit_ratio"] + 0.05
    assert dyn["throughput"] > base["throughput"]
    # at the end the hot units sit in distinct slots
    hot = np.arange(84, 96)
    assert np.unique(base_sim.cache.slot_of(hot)).size < 12
    assert np.unique(dyn_sim.cache.slot_of(hot)).size == 12
    check_frames(dyn_sim)


def test_memory_mode_policies_refuse_a_machine_without_a_cache(capsys):
    with pytest.raises(TierlabError, match="memory-mode machine"):
        run(Machine("flat", [Tier("d", "dram", 4096 * 512, 81, 86, 1e11, 1e11)]),
            HotCold(n=100, hot=10, work=1e4), "jc-static")
    rc = main(["run", "--machine", "optane-2tier", "--workload", "gups:hotset",
               "--policy", "linux-mm", "--scale", "1/256"])
    err = capsys.readouterr().err
    assert rc == 2 and "optane-memory-mode" in err and "Traceback" not in err
    rc = main(["run", "--machine", "optane-memory-mode:frame=1GiB", "--workload",
               "gups:hotset", "--policy", "linux-mm"])
    assert rc == 2 and "4KiB, 2MiB" in capsys.readouterr().err


class HotLines(HotCold):
    """HotCold whose hot pages put `share` of their accesses on one line each."""

    def __init__(self, share=0.8, **kw):
        super().__init__(**kw)
        self.share = share

    def line_skew(self):
        f = self.field(0, self.n)
        hot = np.arange(self.n - self.hot, self.n)
        r, w = f.rate_of(hot)
        return hot, self.share * (r + w), np.ones(hot.size)


def test_hot_lines_model_matches_exact_replay():
    """A cache of lines keeps a page's hot line even when the page shares its slot."""
    m = mm_machine(cache_pages=8, pm_pages=256)
    wl = HotLines(share=0.8, n=40, hot=10, hot_frac=0.6, work=2e5, write_frac=0.3)
    sim, rec = run(m, wl)
    c = sim.cache
    units, r, w = c.unit_rates()
    lam = r + w
    h, _ = c.hot_lines(units)
    assert (h > 0).sum() == 10
    rng = np.random.default_rng(2)
    n = 600_000
    pages = rng.choice(lam.size, n, p=lam / lam.sum())
    hot_off = rng.integers(0, 64, lam.size)  # each hot page's hot line
    on_hot = rng.random(n) < (h / lam)[pages]
    lines = np.where(on_hot, hot_off[pages], rng.integers(0, 64, n))
    # the model treats a page's hot line and its other accesses to that offset alike
    writes = rng.random(n) < (w / lam)[pages]
    slot = c.slot_of(units)
    hits, wbs = replay_sets(pages * 64 + lines, slot[pages] * 64 + lines, writes)
    model = c.model()
    tot = lam.sum()
    assert (model["hit_r"] + model["hit_w"]) / tot == pytest.approx(hits, abs=0.01)
    assert model["writeback"] / tot == pytest.approx(wbs, abs=0.01)
    plain = HotCold(n=40, hot=10, hot_frac=0.6, work=2e5, write_frac=0.3)
    flat = run(mm_machine(cache_pages=8, pm_pages=256), plain)[0].cache.model()
    assert model["hit_r"] + model["hit_w"] > flat["hit_r"] + flat["hit_w"] + 0.05 * tot


def test_sweeps_miss_whenever_a_slot_is_shared():
    m = mm_machine(cache_pages=64, pm_pages=1024)
    from tierlab.workloads.stream import Stream
    for size, want in (("256KiB", 1.0), ("512KiB", 0.0)):  # 64 or 128 pages, 64 slots
        sim, rec = run(m, Stream(size=size, arrays=2, sweeps=3), "jc-static")
        assert rec["dram_cache"]["hit_ratio"] == pytest.approx(want)


def test_ycsb_hot_records_are_hot_lines_that_a_cache_keeps():
    """YCSB's zipfian hot records (1 KiB = 16 lines) carry their point operations on
    their own lines; latest (whole hot pages) and E (scans only) have no line skew;
    memory mode keeps the hot records of a page that shares its slot."""
    from tierlab.workloads.ycsb import Ycsb
    wl = Ycsb("c", scale=1 / 1024)
    pages, hot, lines = wl.line_skew()
    r, w = wl.field_at(wl.records).rate_of(pages)
    assert np.all(hot <= r + w + 1e-12)
    assert 0.3 < hot.sum() / (wl.reads_per_op + wl.writes_per_op) < 0.7
    assert set(np.unique(lines)) <= {16.0, 32.0, 48.0, 64.0} and lines.min() == 16
    assert Ycsb("d", scale=1 / 1024).line_skew() is None
    assert Ycsb("e", scale=1 / 1024).line_skew() is None

    class PageGrained(Ycsb):
        def line_skew(self):
            return None

    m = Machine("mm", [Tier("pm", "optane", 4 << 30, 305, 100, 39 * GB, 13 * GB, 0,
                            False)], dram_cache=CacheSpec(512 << 20, "2MiB"))
    hits = {}
    for cls in (Ycsb, PageGrained):
        rec = run(m, cls("c", scale=1 / 64))[1]  # 1 GiB heap, 512 MiB cache
        hits[cls] = rec["dram_cache"]["hit_ratio"]
    assert hits[Ycsb] > hits[PageGrained] + 0.05


def test_reproduce_johnny_cache_shows_where_caching_wins_and_loses(tmp_path):
    """The reproduction at 1/2048 (about 30 s): every workload under every policy, the
    paper's conclusion beside each row, and its shape: conflict avoidance beats
    Linux's random frames on GUPS, caching beats HeMem on GUPS++'s scattered items,
    and app-direct beats caching on a stream and on a uniform set twice the cache."""
    import json

    from tierlab.reports.repro_johnny_cache import (JC_CACHE_POLICIES, JC_FLAT_POLICIES,
                                                    JC_WORKLOADS, reproduce_johnny_cache)
    path = reproduce_johnny_cache(tmp_path, 1 / 2048, [], jobs=1)
    text = path.read_text()
    for label, _, paper in JC_WORKLOADS:
        assert f"| {label} |" in text and paper in text
    assert (tmp_path / "johnny-cache.png").stat().st_size > 0
    recs = json.loads((tmp_path / "results.json").read_text())
    assert len(recs) == len(JC_WORKLOADS) * len(JC_CACHE_POLICIES + JC_FLAT_POLICIES)
    x = {(r["workload"], r["policy"]): r["speedup_over_linux_mm"] for r in recs}
    wl = {label: w for label, w, _ in JC_WORKLOADS}
    assert x[(wl["GUPS, 16 threads"], "jc-static")] > 1.2
    assert x[(wl["GUPS++"], "jc-static")] > 1.3 * x[(wl["GUPS++"], "hemem")]
    for kind in ("NAS MG-like stream", "GUPS, uniform over 2x DRAM"):
        assert x[(wl[kind], "static")] > 1.3 * x[(wl[kind], "jc-static")]
