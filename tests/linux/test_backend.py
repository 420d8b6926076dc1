"""The Linux backend on a fake process: index space, placement, migration, DAMON
bridge, and registered policies running unchanged through the daemon loop."""
from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import numpy as np
import pytest

from tierlab import api
from tierlab.engine.memory import UNALLOC
from tierlab.errors import TierlabError
from tierlab.linux.backend import AddressSpace, KernelOps, LinuxSim
from tierlab.linux.daemon import Daemon
from tierlab.policies import POLICIES
from tierlab.units import PAGE

MIB = 2**20


class Clock:
    def __init__(self):
        self.t = 100.0

    def __call__(self):
        return self.t

    def sleep(self, dt):
        self.t += dt


class FakeProcess(KernelOps):
    """A process with a hot and a cold mapping, pages on kernel nodes 0 and 2 (a gap
    in the node ids, as on real machines), and DAMON regions of 64 pages whose
    nr_accesses come from the hot range."""

    def __init__(self, clock, cap=(1200, 4000), hot=(0x7000_0000, 200),
                 cold=(0x1000_0000, 1500), cold_on_fast=800, gap_ids=(0, 2)):
        self.clock = clock
        self.ids = list(gap_ids)
        self.cap = dict(zip(self.ids, cap))
        self.maps = [(hot[0], hot[0] + hot[1] * PAGE), (cold[0], cold[0] + cold[1] * PAGE)]
        self.hot = (hot[0], hot[0] + hot[1] * PAGE)
        self.page_node: dict[int, int] = {}
        for i in range(hot[1]):
            self.page_node[hot[0] // PAGE + i] = self.ids[1]
        for i in range(cold[1]):
            self.page_node[cold[0] // PAGE + i] = self.ids[0] if i < cold_on_fast else self.ids[1]
        self.dead = False
        self.moves = 0
        self.damons = []

    def vmas(self):
        return list(self.maps)

    def query(self, va):
        return np.array([self.page_node.get(int(a) // PAGE, -14) for a in va], dtype=np.int32)

    def move(self, va, node):
        out = []
        for a in va.tolist():
            p = a // PAGE
            if p not in self.page_node:
                out.append(-14)
            elif sum(1 for v in self.page_node.values() if v == node) >= self.cap[node]:
                out.append(-12)
            else:
                self.page_node[p] = node
                self.moves += 1
                out.append(node)
        return np.array(out, dtype=np.int32)

    def free_pages(self):
        used = {n: 0 for n in self.ids}
        for v in self.page_node.values():
            used[v] += 1
        return {n: self.cap[n] - used[n] for n in self.ids}

    def alive(self):
        return not self.dead

    def damon(self, **attrs):
        d = FakeDamon(self, attrs)
        self.damons.append(d)
        return d


class FakeDamon:
    def __init__(self, proc, attrs):
        self.proc, self.attrs = proc, attrs
        self.on = False
        self.reads = 0
        self.max_nr = attrs["aggr_us"] // attrs["sample_us"]

    def start(self):
        self.on = True

    def stop(self):
        self.on = False

    def read_regions(self):
        self.reads += 1
        st, en = [], []
        for a, b in sorted(self.proc.maps):
            edges = list(range(a, b, 64 * PAGE)) + [b]
            st += edges[:-1]
            en += edges[1:]
        st, en = np.array(st), np.array(en)
        hot = (st >= self.proc.hot[0]) & (en <= self.proc.hot[1])
        nr = np.where(hot, self.max_nr, 0)
        age = np.full(len(st), self.reads)
        return SimpleNamespace(start=st, end=en, nr_accesses=nr, age=age)


def machine2(cap_pages=(1200, 4000)):
    m = api.make_machine("optane-2tier")
    tiers = [replace(t, capacity=c * PAGE) for t, c in zip(m.tiers, cap_pages)]
    return replace(m, name="fake", tiers=tiers)


def make(policy="static", **kw):
    clock = Clock()
    proc = FakeProcess(clock, **kw)
    sim = LinuxSim(machine2(), proc.ids, proc, api.make_policy(policy), clock=clock)
    return sim, proc, clock


def test_address_space_is_append_only_and_clips_ranges():
    s = AddressSpace(capacity=100)
    assert s.update([(0x2000 * PAGE, 0x2010 * PAGE), (0x1000 * PAGE, 0x1008 * PAGE)])
    assert s.used == 24
    # the first mapping grows: only the new part gets new indices
    assert s.update([(0x2000 * PAGE, 0x2014 * PAGE)])
    assert s.used == 28
    assert not s.update([(0x2000 * PAGE, 0x2014 * PAGE)])
    va = s.to_va(np.arange(28)) // PAGE
    assert len(set(va.tolist())) == 28  # a bijection onto the mapped pages
    assert set(va.tolist()) == set(range(0x1000, 0x1008)) | set(range(0x2000, 0x2014))
    # a region spanning the gap between mappings is clipped into two pieces
    a, b, which = s.ranges_to_index([0x1004 * PAGE], [0x2002 * PAGE])
    assert which.tolist() == [0, 0]
    assert sorted((b - a).tolist()) == [2, 4]
    # beyond capacity: left unmanaged, counted
    s.update([(0x9000 * PAGE, 0x9100 * PAGE)])
    assert s.unmanaged_bytes == 0x100 * PAGE and s.used == 28


def test_placement_read_and_migration_counted_in_machine_indices():
    sim, proc, _ = make()
    res = sim.mem.resident_per_node()
    assert res.tolist() == [800, 900]
    assert sim.mem.free.tolist() == [400, 3100]
    hot = np.flatnonzero(sim.space.to_va(np.arange(sim.space.used)) >= proc.hot[0])
    moved = sim.migrate(hot, 0, reason="test")
    assert moved == 200 and proc.moves == 200
    assert sim.stats.promotions == 200 and sim.stats.moves == {(1, 0): 200}
    sim.refresh()
    assert sim.mem.resident_per_node().tolist() == [1000, 700]
    # a page that is gone is reported, not moved, and no page is lost or duplicated
    del proc.page_node[next(iter(proc.page_node))]
    cold_fast = np.flatnonzero(sim.mem.node == 0)
    got = sim.migrate(cold_fast, 1)
    assert got == len(cold_fast) - 1 and sim.stats.failed == {"gone": 1}
    sim.refresh()
    assert sim.mem.resident_per_node().sum() == 1699


def test_simulator_only_monitors_refuse_clearly():
    sim, _, _ = make()
    with pytest.raises(TierlabError, match="user space cannot see"):
        api.make_policy("tpp").attach(sim)


#: the policies docs/linux.md says run for real; every other one must refuse in one line
RUN_FOR_REAL = ("static", "damon-tiering", "idt", "tierlab")


@pytest.mark.parametrize("policy", sorted(
    n for n in POLICIES.names() if not n.startswith(("test-", "idt")) and n not in
    RUN_FOR_REAL and n != "oracle" and not getattr(POLICIES.get(n), "needs_dram_cache",
                                                   False)))
def test_every_simulator_only_policy_refuses_in_one_line(policy):
    """docs/linux.md: hint-fault, LRU, PEBS and kernel-patch policies refuse with a
    one-line TierlabError, at attach or at their first tick, before moving a page (the
    oracle is refused earlier, by daemon.prepare)."""
    sim, proc, clock = make(policy)
    before = dict(proc.page_node)
    d = Daemon(sim, policy, interval=1.0, duration=30.0, echo=lambda m: None,
               sleep=clock.sleep)
    with pytest.raises(TierlabError) as e:
        d.run()
    assert "\n" not in str(e.value)
    assert proc.page_node == before


@pytest.mark.parametrize("policy", ["damon-tiering", "idt", "tierlab"])
def test_policies_run_unchanged_and_promote_the_hot_range(policy):
    sim, proc, clock = make(policy)
    lines = []
    d = Daemon(sim, policy, interval=1.0, duration=20.0, echo=lines.append,
               sleep=clock.sleep)
    rec = d.run()
    hot_pages = [p for p in proc.page_node if proc.hot[0] // PAGE <= p < proc.hot[1] // PAGE]
    on_fast = sum(proc.page_node[p] == 0 for p in hot_pages)
    assert on_fast >= 0.9 * len(hot_pages), lines
    assert rec["promotions"] >= 0.9 * len(hot_pages)
    assert rec["stop_reason"] == "duration reached"
    assert all(not dm.on for dm in proc.damons)  # kdamonds stopped
    assert len(proc.page_node) == 1700  # nothing lost
    assert any("promoted: 2->0" in ln for ln in lines)
    assert sum(proc.page_node[p] == 0 for p in proc.page_node) <= proc.cap[0]
    # the daemon's steps by kind of timer: every page moved is in one, and some steps
    # moved nothing (damon-tiering applies its schemes in the monitor's timer)
    steps = rec["daemon_steps"].values()
    assert sum(c["pages"] for c in steps) == rec["promotions"] + rec["demotions"]
    assert 0 < sum(c["moving_steps"] for c in steps) < sum(c["steps"] for c in steps)
    assert rec["daemon_steps"]["monitor"]["steps"] > 0


def test_daemon_stops_when_the_target_exits():
    sim, proc, clock = make("damon-tiering")
    lines = []

    def sleep(dt):
        clock.sleep(dt)
        if clock.t > 103.0:
            proc.dead = True

    rec = Daemon(sim, "damon-tiering", echo=lines.append, sleep=sleep).run()
    assert rec["stop_reason"] == "target exited"
    assert 2.5 < rec["sim_seconds"] < 4.0
    assert all(not dm.on for dm in proc.damons)
    assert lines[-1].startswith("stopped: target exited")


def test_idt_says_it_falls_back_to_damon():
    sim, proc, clock = make("idt")
    Daemon(sim, "idt", duration=2.0, echo=lambda m: None, sleep=clock.sleep).run()
    assert any("kernel's DAMON" in n for n in sim.notes)
    d = proc.damons[0]
    assert d.attrs["sample_us"] == 10_000 and d.attrs["aggr_us"] == 1_000_000


def test_unallocated_pages_stay_unallocated():
    sim, proc, _ = make()
    proc.maps.append((0x3000_0000, 0x3000_0000 + 50 * PAGE))  # mapped, never touched
    sim.refresh()
    assert sim.space.used == 1750
    assert int((sim.mem.node == UNALLOC).sum()) == sim.mem.npages - 1700


def test_the_kernels_watermarks_bound_moves():
    """A small node's watermarks (min_free_kbytes) are far above the simulator's 0.5%:
    the backend takes the kernel's, and does not ask moves the kernel must refuse."""
    clock = Clock()
    proc = FakeProcess(clock)
    proc.watermarks = lambda: {0: (350, 380, 410), 2: (10, 20, 30)}
    sim = LinuxSim(machine2(), proc.ids, proc, api.make_policy("static"), clock=clock)
    assert sim.mem.wmark_min.tolist() == [350, 10]
    hot = np.flatnonzero(sim.space.to_va(np.arange(sim.space.used)) >= proc.hot[0])
    assert sim.migrate(hot, 0) == 400 - 380  # free 400, low 380
    assert sim.stats.failed == {}


def test_target_exiting_during_a_kernel_call_is_a_clean_stop():
    """A process that exits between the liveness check and move_pages makes the call
    fail (EINVAL on a zombie): the daemon stops with "target exited", not an error."""
    sim, proc, clock = make("damon-tiering")
    real_query = proc.query

    def query(va):
        if clock.t > 102.5:
            proc.dead = True
            raise TierlabError("move_pages of 1 rejected: Invalid argument")
        return real_query(va)

    proc.query = query
    sim.refresh_interval = 0.0
    rec = Daemon(sim, "damon-tiering", echo=lambda m: None, sleep=clock.sleep).run()
    assert rec["stop_reason"] == "target exited"


def test_moves_keep_the_callers_priority_order_when_room_is_short():
    """Policies list pages coldest (or hottest) first; when the target has room for only
    some, those listed first move (the engine's rule), not the lowest page numbers."""
    clock = Clock()
    proc = FakeProcess(clock)
    proc.watermarks = lambda: {0: (340, 350, 380), 2: (10, 20, 30)}  # free 400: room 50
    sim = LinuxSim(machine2(), proc.ids, proc, api.make_policy("static"), clock=clock)
    hot = np.flatnonzero(sim.space.to_va(np.arange(sim.space.used)) >= proc.hot[0])
    room = int(sim.mem.free[0] - sim.mem.wmark_low[0])
    assert room == 50 < hot.size
    want = hot[::-1][:room]  # the last hot pages first
    assert sim.migrate(hot[::-1], 0) == room
    assert np.all(sim.mem.node[want] == 0)


def _both_memories(machine_name: str, n: int, rng, longest: int):
    """The simulator's Memory and a LinuxMemory holding the same random placement (runs
    of up to `longest` pages on a random node, or unallocated)."""
    from tierlab.engine.memory import Memory
    from tierlab.linux.backend import LinuxMemory
    machine = api.make_machine(machine_name)
    sim_mem = Memory(machine, n)
    live = LinuxMemory([n] * machine.nnodes, n)
    pos = 0
    while pos < n:
        end = min(n, pos + int(rng.integers(1, longest)))
        node = int(rng.integers(0, machine.nnodes + 1))
        if node < machine.nnodes:
            sim_mem.place_range(pos, end, node)
            live.node[pos:end] = node
        pos = end
    return sim_mem, live


def test_linux_memory_counts_ranges_as_the_simulator_does():
    """Policies call `sim.mem.range_counts` on either backend (damon-tiering's region
    counts): the live page map's counts are the simulator's for the same placement."""
    rng = np.random.default_rng(4)
    n = 5000
    sim_mem, live = _both_memories("optane-4tier", n, rng, 700)
    starts = rng.integers(0, n, 50)
    ends = np.minimum(starts + rng.integers(1, 3000, 50), n)
    np.testing.assert_array_equal(live.range_counts(starts, ends),
                                  sim_mem.range_counts(starts, ends))


def test_linux_memory_finds_pages_on_a_node_as_the_simulator_does():
    """`sim.mem.pages_on` (damon-tiering takes a quota-split region's first pages with
    it) gives the live page map the simulator's pages for the same placement; the
    simulator's filters are refused by name."""
    rng = np.random.default_rng(5)
    n = 4000
    sim_mem, live = _both_memories("optane-2tier", n, rng, 300)
    for start, limit, node in zip(rng.integers(0, n, 40), rng.integers(0, 2500, 40),
                                  rng.integers(0, 2, 40)):
        want = sim_mem.pages_on(int(node), int(start), int(limit))
        got = live.pages_on(int(node), int(start), int(limit))
        np.testing.assert_array_equal(got[0], want[0])
    with pytest.raises(TierlabError, match="flags"):
        live.pages_on(0, 0, 10, flags=np.zeros(n, np.uint8), mask=1)


def test_damon_tiering_splits_a_region_at_its_quota_for_real():
    """A quota smaller than a hot region: the scheme takes the region's first pages up
    to the quota (mem.pages_on) on the live backend as in the simulator (this stopped
    `tierlab exec --policy damon-tiering` in the test guest before LinuxMemory had it)."""
    sim, proc, clock = make("damon-tiering:quota=64KiB")
    lines = []
    rec = Daemon(sim, "damon-tiering:quota=64KiB", interval=1.0, duration=10.0,
                 echo=lines.append, sleep=clock.sleep).run()
    assert rec["stop_reason"] == "duration reached", lines
    assert 0 < rec["promotions"] <= 16 * 11  # 16 pages a 1 s window
