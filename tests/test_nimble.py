"""Issue 17, item 6: `nimble` (ASPLOS'19) as a placement policy: aging of half of Linux's
LRU lists per mm_manage call, two touches to activate, hot = the slow node's active
list, cold = the fast node's inactive list, exchange (or migrate) when the fast node is
full, one call per adjacent pair on a multi-tier machine."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from tierlab import api, jit
from tierlab.engine import Simulation
from tierlab.engine.lru import ACTIVE, REFERENCED
from tierlab.errors import TierlabError
from tierlab.policies import ALLOCS, POLICIES
from tierlab.policies.nimble import LruLists, Nimble

from conftest import HotCold
from test_engine import check_invariants, simulate, small_machine


class Watched(Nimble):
    """Nimble recording, after every pass, what the tests look at."""

    def __init__(self, hot_pages=None, **kw):
        super().__init__(**kw)
        self.hot_pages = hot_pages
        self.log = []

    def mm_manage(self, now):
        super().mm_manage(now)
        mem, flags = self.sim.mem, self.sim.lru.flags
        h = self.hot_pages
        self.log.append(dict(
            now=now, used=mem.used.copy(), limit=mem.capacity - mem.wmark_low,
            exchanged=self.c["exchanged"],
            hot_fast=None if h is None else int((mem.node[h] == 0).sum()),
            active=(flags & ACTIVE) != 0, referenced=(flags & REFERENCED) != 0))


#: ~150 simulated s: a newly hot set reaches DRAM over several calls (the aging deactivates
#: half of a slow node's just-activated pages at once, so what is promoted halves per
#: two calls: 200, 100, 50, ... of 400)
LONG = 1.5e10


def run(machine, wl, policy, alloc="dram-preferred", seed=0):
    sim = Simulation(machine, wl, policy, ALLOCS.create(alloc), seed=seed)
    rec = sim.run()
    check_invariants(sim)
    return sim, rec


def hot_range(wl):
    """HotCold's phase-0 hot pages: the last `hot` pages of the first n."""
    return np.arange(wl.n - wl.hot, wl.n)


def test_two_touches_activate_and_half_of_each_list_is_scanned_per_call():
    """Everything fits DRAM; pages 1000-2999 are used, pages 0-999 never. All start on
    the inactive list, inserted together (ties go by address). Call 1 scans the older
    half (pages 0-1499): the used ones get PG_referenced only. Call 2 scans the other
    half (1500-2999), first touches again. Call 3 scans 0-1499 again: their second
    touch activates 1000-1499, and the active list's older half (1000-1249: ties by
    address) is deactivated at once, keeping PG_referenced. Unused pages are never
    referenced."""
    m = small_machine(dram_pages=8192, slow_pages=8192)
    wl = HotCold(n=3000, hot=2000, hot_frac=1.0, work=1e9)
    pol = Watched(period="1s")
    run(m, wl, pol)
    used, unused = np.arange(1000, 3000), np.arange(0, 1000)
    first, second, third = pol.log[:3]
    assert not first["active"].any()
    assert np.array_equal(np.flatnonzero(first["referenced"]), np.arange(1000, 1500))
    assert not second["active"].any()
    assert second["referenced"][used].all()
    assert np.array_equal(np.flatnonzero(third["active"]), np.arange(1250, 1500))
    assert third["referenced"][used].all()
    for s in (first, second, third):
        assert not s["referenced"][unused].any() and not s["active"][unused].any()


class Checked(Nimble):
    """Nimble checking, after every aging pass and at every do_mm_manage call, that the
    active list the pass handed over (without another look at the pages) is the list
    read afresh."""

    calls = busy = 0

    def _age(self, node, now):
        t = self._at(now)
        busy = self._lists(node).hist[1, t] > 0  # copies landed at this time
        rest = super()._age(node, now)
        fresh, n = self._lists(node).list(True)
        assert np.array_equal(rest, fresh) and n == len(rest)
        Checked.busy += int(busy)
        return rest

    def _decide(self, slow, fast, now):
        aged = self._aged.get(slow)
        if aged is not None:
            fresh, n = self._lists(slow).list(True)
            assert np.array_equal(aged, fresh) and n == len(aged)
            Checked.calls += 1
        return super()._decide(slow, fast, now)


@pytest.mark.parametrize("machine, workload, period", [
    ("optane-2tier", "gups:dynamic", "5s"),
    ("dram-cxl", "gups:dynamic", "5s"),
    ("optane-4tier", "gups:hotset", "1s"),
])
def test_aging_hands_the_call_the_active_list_it_would_read(machine, workload, period):
    """Also where a pass comes right after the copies it waited for, at their time: the
    pages they moved into the active list share the pass's time with the pages it
    activates (optane-4tier, a pass a second)."""
    Checked.calls = Checked.busy = 0
    POLICIES.register("nimble-checked")(Checked)
    try:
        rec = api.run(machine=machine, workload=workload,
                      policy=f"nimble-checked:period={period}", scale=1 / 256, seed=0)
    finally:
        POLICIES._items.pop("nimble-checked", None)
    assert rec["policy_stats"]["passes"] >= 3 and Checked.calls >= 3
    if machine == "optane-4tier":
        assert Checked.busy > 0


@pytest.mark.parametrize("machine, workload, period, scale", [
    ("optane-2tier", "gups:hotset", "1s", 1 / 256),
    ("optane-4tier", "gups:hotset", "1s", 1 / 256),
    ("dram-cxl", "trace:tests/data/traces/redis-ycsb-zipfian.npz,copies=8", "0.25s", 1 / 8),
])
def test_aging_in_one_pass_is_the_same_run(machine, workload, period, scale, monkeypatch):
    """The inactive half's compiled pass (`Nimble._age_inactive`, the default where the
    lists' runs are long) and listing, drawing and aging the pages apart give the same
    run, field by field: on two and four tiers, and on a recorded trace (where short
    runs send some passes the other way)."""
    calls = {"one": 0, "apart": 0}
    orig = Nimble._age_inactive

    def counted(self, *a):
        got = orig(self, *a)
        calls["one" if got is not None else "apart"] += 1
        return got

    recs = []
    for one in (True, False):
        monkeypatch.setattr(Nimble, "_age_inactive",
                            counted if one else (lambda self, *a: None))
        rec = api.run(machine=machine, workload=workload, policy=f"nimble:period={period}",
                      scale=scale, seed=0)
        rec.pop("wall_seconds")
        recs.append(rec)
    assert recs[0] == recs[1]
    assert recs[0]["policy_stats"]["passes"] >= 3
    if jit.numba_jit():
        assert calls["one"] > 0


@pytest.mark.parametrize("machine, workload, period, scale", [
    ("optane-4tier", "gups:hotset", "1s", 1 / 256),
    ("dram-cxl", "trace:tests/data/traces/redis-ycsb-zipfian.npz,copies=8", "0.25s", 1 / 8),
])
def test_decisions_share_the_lists_until_a_page_moves(machine, workload, period, scale,
                                                       monkeypatch):
    """do_mm_manage's calls decided one after another read each node's lists from the
    counts kept since it was counted (`Nimble._lists`) and the first call the aged
    active list: the same run, field by field, as counting the lists afresh at every
    use with the aged lists for the first call only, with fewer counts or listings."""
    orig_decide, orig_counted, orig_list = Nimble._decide, Nimble._counted, LruLists.list
    work = [0]

    def counted(self, node):
        work[0] += 1
        return orig_counted(self, node)

    def listed(self, *a, **k):
        work[0] += 1
        return orig_list(self, *a, **k)

    def first_only(self, *a):
        got = orig_decide(self, *a)
        self._aged = {}
        return got

    monkeypatch.setattr(Nimble, "_counted", counted)
    monkeypatch.setattr(LruLists, "list", listed)
    orig_lists = Nimble._lists
    recs, works = [], []
    for share in (True, False):
        work[0] = 0
        monkeypatch.setattr(Nimble, "_lists",
                            orig_lists if share else (lambda self, n: self._counted(n)))
        monkeypatch.setattr(Nimble, "_decide", orig_decide if share else first_only)
        rec = api.run(machine=machine, workload=workload, policy=f"nimble:period={period}",
                      scale=scale, seed=0)
        rec.pop("wall_seconds")
        recs.append(rec)
        works.append(work[0])
    assert recs[0] == recs[1]
    assert recs[0]["policy_stats"]["passes"] >= 3
    if machine == "optane-4tier":  # three calls a pass, the bottom pair's often empty
        assert works[0] < works[1]


def assert_counted_afresh(nimble, node, kept) -> None:
    """Kept counts `kept` (columns to spare) are the node's lists counted afresh."""
    fresh = nimble._counted(node).hist
    np.testing.assert_array_equal(kept[:, :fresh.shape[1]], fresh)
    assert not kept[:, fresh.shape[1]:].any()


@pytest.mark.parametrize("machine, workload, period, scale", [
    ("optane-4tier", "gups:hotset", "1s", 1 / 256),
    ("optane-2tier", "gups:hotset", "1s", 1 / 256),
])
def test_the_aged_lists_are_the_lists_counted_again(machine, workload, period, scale,
                                                    monkeypatch):
    """The counts an aging pass leaves for the decisions (`Nimble._aged_lists`: the
    counts before the pass, less the pages it re-inserted, plus them at the pass's
    time) are the node's lists counted afresh, at every decision, on both of its
    nodes, while no page has moved since the pass (its aged active list still held)."""
    orig = Nimble._decide
    seen = [0]

    def checked(self, slow, fast, now):
        if self._aged:
            for node in (slow, fast):
                if self._kept[node]:
                    assert_counted_afresh(self, node, self._lists(node).hist)
                    seen[0] += 1
        return orig(self, slow, fast, now)

    monkeypatch.setattr(Nimble, "_decide", checked)
    api.run(machine=machine, workload=workload, policy=f"nimble:period={period}",
            scale=scale, seed=0)
    assert seen[0] > 0


class Recounted(Nimble):
    """Nimble checking, at every use, each node's kept counts against a fresh count."""

    uses = frees = 0

    def _lists(self, node):
        got = super()._lists(node)
        assert_counted_afresh(self, node, got.hist)
        Recounted.uses += 1
        return got

    def on_free(self, start, end):
        super().on_free(start, end)
        Recounted.frees += 1


@pytest.mark.parametrize("machine, workload, mode, period", [
    ("optane-2tier", "gups:hotset", "exchange", "1s"),
    ("optane-4tier", "gups:dynamic", "exchange", "1s"),
    ("optane-4tier", "gups:hotset", "migrate", "1s"),
    ("optane-2tier:dram=16MiB", "trace:tests/data/traces/redis-ycsb-zipfian.npz,copies=8",
     "exchange", "0.25s"),
])
def test_the_kept_counts_are_the_lists_counted_again(machine, workload, mode, period):
    """Each node's lists as counted once and then kept through first touches, exchanges,
    migrations and put-backs (`Nimble._lists`) are the node's lists counted afresh at
    every use, on two and four tiers, in both modes and on a recorded trace."""
    Recounted.uses = 0
    POLICIES.register("nimble-recounted")(Recounted)
    try:
        rec = api.run(machine=machine, workload=workload,
                      policy=f"nimble-recounted:period={period},mode={mode}",
                      scale=1 if workload.startswith("trace") else 1 / 256, seed=0)
    finally:
        POLICIES._items.pop("nimble-recounted", None)
    st = rec["policy_stats"]
    assert st["passes"] >= 3 and Recounted.uses >= 2 * st["passes"]
    assert st["exchanged"] + st["promoted"] + st["demoted"] > 0


def test_the_kept_counts_follow_growth_and_frees():
    """A heap that grows (first touches on a node already counted) and then frees its
    first pages (every node counted again): the kept counts stay the fresh ones."""
    Recounted.uses = Recounted.frees = 0
    m = small_machine(dram_pages=1024, slow_pages=8192)
    wl = HotCold(n=3000, hot=400, hot_frac=0.95, work=LONG, phases=4, grow=1500,
                 free_first=1000)
    run(m, wl, Recounted(period="2s"))
    assert Recounted.frees >= 1 and Recounted.uses > 10


@pytest.mark.parametrize("alloc", sorted(ALLOCS.names()))
@pytest.mark.parametrize("tiers", [2, 4])
def test_the_kept_counts_follow_every_allocator(alloc, tiers):
    """Under every allocation policy, on two and four tiers: where the allocator itself
    reclaims (dram-always demotes to make room, its LRU sweeps changing pages' lists),
    the moves and list changes Nimble did not make drop its counts, and the lists it
    reads are still the fresh ones (as test_every_policy's scenario, which crashed on
    counts kept through them)."""
    Recounted.uses = 0
    m = small_machine(dram_pages=900, slow_pages=3000, tiers=tiers)
    wl = HotCold(n=3000, hot=300, phases=3, grow=400, free_first=200, work=2e9)
    run(m, wl, Recounted(period="1s"), alloc=alloc, seed=1)
    assert Recounted.uses > 10


def test_hot_set_in_the_slow_tier_is_exchanged_in_when_fast_is_full():
    """DRAM is full (dram-preferred fills it to the low watermark) and the hot set sits
    in Optane: it is promoted by exchange with cold DRAM pages, the fast node never
    goes over the memcg-like limit, and a stable hot set is moved once (no ping-pong:
    about one exchange per hot page, 2 pages copied each)."""
    m = small_machine(dram_pages=1024, slow_pages=8192)
    wl = HotCold(n=4000, hot=400, hot_frac=1.0, work=LONG)  # ~150 simulated s
    hot = hot_range(wl)
    pol = Watched(hot_pages=hot)
    sim, rec = run(m, wl, pol)
    assert all(s["used"][0] <= s["limit"][0] for s in pol.log)
    assert pol.log[0]["used"][0] == pol.log[0]["limit"][0]  # full: no free room
    st = rec["policy_stats"]
    assert st["promoted"] == 0 and st["demoted"] == 0
    assert (sim.mem.node[hot] == 0).all()
    assert st["exchanged"] == len(hot) and rec["pingpong"] == 0
    assert rec["migrated_bytes"] == 2 * len(hot) * 4096
    # once the hot set is in, nothing moves: the last passes exchange nothing
    assert pol.log[-1]["exchanged"] == pol.log[-3]["exchanged"]
    static = simulate(m, HotCold(n=4000, hot=400, hot_frac=1.0, work=LONG), "static")[1]
    assert rec["throughput"] > 1.3 * static["throughput"]


def test_free_room_is_filled_by_migration_without_demotion():
    """pm-preferred: the hot set starts in Optane and DRAM is empty: hot pages migrate in,
    nothing is exchanged or demoted."""
    m = small_machine(dram_pages=1024, slow_pages=8192)
    wl = HotCold(n=4000, hot=400, hot_frac=1.0, work=LONG)
    sim, rec = run(m, wl, Nimble(), alloc="pm-preferred")
    st = rec["policy_stats"]
    assert st["exchanged"] == 0 and st["demoted"] == 0 and rec["demotions"] == 0
    assert st["promoted"] >= 400 and (sim.mem.node[hot_range(wl)] == 0).all()


def test_exchange_needs_no_free_room_where_migration_is_stuck():
    """Both tiers full: `mode=migrate` cannot migrate cold pages out (the slow node is at
    its min watermark), so nothing is promoted; `mode=exchange` swaps pairs anyway."""
    m = small_machine(dram_pages=1024, slow_pages=3000)
    n = 1024 + 3000 - 10
    out = {}
    for mode in ("exchange", "migrate"):
        wl = HotCold(n=n, hot=300, hot_frac=1.0, work=LONG)
        sim, rec = run(m, wl, Nimble(mode=mode))
        out[mode] = (rec, int((sim.mem.node[hot_range(wl)] == 0).sum()))
    # (the allocator's last pages dip into DRAM below its watermarks: 10 start there)
    assert out["exchange"][1] == 300 and out["exchange"][0]["policy_stats"]["exchanged"] >= 290
    assert out["migrate"][1] < 30 and out["migrate"][0]["policy_stats"]["exchanged"] == 0
    assert out["exchange"][0]["throughput"] > 1.3 * out["migrate"][0]["throughput"]


def test_migrate_mode_demotes_cold_then_promotes_hot():
    m = small_machine(dram_pages=1024, slow_pages=8192)
    wl = HotCold(n=4000, hot=400, hot_frac=1.0, work=LONG)
    sim, rec = run(m, wl, Nimble(mode="migrate"))
    st = rec["policy_stats"]
    assert st["exchanged"] == 0 and st["demoted"] >= 400 and st["promoted"] >= 390
    assert (sim.mem.node[hot_range(wl)] == 0).mean() >= 0.97


def test_four_tiers_hot_pages_climb_the_demotion_path():
    """optane-4tier-like: dram0, dram1, optane0, optane1; the hot set starts on optane0
    and ends on dram0 (one call per adjacent pair, bottom pair first); no node goes
    over its limit."""
    m = small_machine(dram_pages=600, slow_pages=4000, tiers=4)
    wl = HotCold(n=3000, hot=300, hot_frac=1.0, work=LONG)
    hot = hot_range(wl)
    pol = Watched(hot_pages=hot)
    sim, rec = run(m, wl, pol)
    assert set(np.unique(sim.mem.node[hot]).tolist()) == {0}
    assert all((s["used"] <= s["limit"]).all() for s in pol.log)


def test_nr_pages_bounds_each_call():
    m = small_machine(dram_pages=1024, slow_pages=8192)
    wl = HotCold(n=4000, hot=400, hot_frac=1.0, work=4e9)
    rec = run(m, wl, Nimble(nr_pages="50"))[1]
    st = rec["policy_stats"]
    assert 0 < st["hot_isolated"] <= 50 * st["passes"]


def test_more_copy_threads_land_the_hot_set_sooner():
    """A machine whose migration bandwidth makes a call's copies last seconds: the
    copies land progressively, SIGALRMs find the syscall busy (more with 1 copy thread
    than with 4), and 4 threads get the hot set of each phase in sooner."""
    m = replace(small_machine(dram_pages=1024, slow_pages=8192), migrate_bw=2e5)
    recs = {}
    for mt in ("1", "4"):
        wl = HotCold(n=4000, hot=400, hot_frac=1.0, phases=4, work=LONG)
        recs[mt] = run(m, wl, Nimble(mt=mt, period="1s"))[1]
    busy = {k: r["policy_stats"]["alarms_while_busy"] for k, r in recs.items()}
    assert busy["1"] > busy["4"] and busy["1"] > 0
    assert recs["4"]["throughput"] > 1.03 * recs["1"]["throughput"]
    copy = {k: r["policy_stats"]["copy_seconds"] for k, r in recs.items()}
    assert copy["1"] > 3 * copy["4"]


def test_the_runs_migrate_option_does_not_change_a_nimble_run():
    """Nimble's moves are the launcher's syscall, asynchronous to the application: the
    engine charges their copy as background CPU, the same for both movers."""
    recs = []
    for mover in ("linux", "nimble"):
        sim = api.simulation(small_machine(), HotCold(n=4000, hot=400, hot_frac=1.0,
                                                      work=2e9), "nimble", seed=3,
                             migrate=mover)
        rec = sim.run()
        rec.pop("wall_seconds")
        recs.append(rec)
    assert recs[0] == recs[1]


def test_same_seed_same_run():
    a, b = (simulate(small_machine(), HotCold(phases=3), "nimble", seed=5)[1]
            for _ in range(2))
    for r in (a, b):
        r.pop("wall_seconds")
    assert a == b


@pytest.mark.parametrize("spec, message", [
    ("nimble:period=0", "period"), ("nimble:period=soon", "period"),
    ("nimble:mode=swap", "mode"), ("nimble:nr_pages=0", "nr_pages"),
    ("nimble:nr_pages=lots", "nr_pages"), ("nimble:shrink=maybe", "shrink"),
    ("nimble:mt=0", "mt"), ("nimble:mt=65", "mt"), ("nimble:mt=four", "mt"),
])
def test_bad_parameters_are_one_line_errors(spec, message):
    with pytest.raises(TierlabError, match=message) as e:
        api.make_policy(spec)
    assert "\n" not in str(e.value)


def test_refuses_the_linux_backend():
    class Real:
        real = True
    with pytest.raises(TierlabError, match="mm_manage"):
        POLICIES.create("nimble").attach(Real())
