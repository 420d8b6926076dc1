"""The policy's thread with step times (`engine.DaemonSteps`): a daemon like `tierlab
exec`'s runs its timers one after another, each taking its compute time and then its
moves page after page; the pages land as they are copied."""
from __future__ import annotations

import numpy as np
import pytest

from tierlab.engine import Simulation
from tierlab.engine.engine import DaemonSteps
from tierlab.policies import ALLOCS
from tierlab.policies.base import Policy

from conftest import HotCold
from test_engine import check_invariants, small_machine

K = 300  #: pages the first step demotes, then promotes


class Mover(Policy):
    """Its first tick demotes K pages of node 0, then promotes K of node 1's; a second
    timer every 0.5 s does nothing."""

    def attach(self, sim) -> None:
        super().attach(sim)
        self.ticks, self.halves, self.got, self.room = [], [], [], None
        sim.every(1.0, self.tick)
        sim.every(0.5, self.halves.append)

    def tick(self, now: float) -> None:
        self.ticks.append(now)
        if len(self.ticks) > 1:
            return
        mem = self.sim.mem
        self.room = int(mem.free[0] - mem.wmark_min[0])
        self.down = np.flatnonzero(mem.node == 0)[:K]
        self.up = np.flatnonzero(mem.node == 1)[:K]
        self.got = [self.sim.migrate(self.down, 1), self.sim.migrate(self.up, 0)]


def _run(daemon):
    sim = Simulation(small_machine(), HotCold(work=4e8), Mover(),
                     ALLOCS.create("dram-preferred"))
    sim.daemon = daemon
    seen = []

    def sample(now):
        seen.append((round(now, 6), int((sim.mem.node[sim.policy.down] == 1).sum()),
                     int((sim.mem.node[sim.policy.up] == 0).sum())))
    sim.every(0.25, lambda now: hasattr(sim.policy, "down") and sample(now))
    sim.run()
    assert sim.now > 4.5, "the run is too short for the test"
    check_invariants(sim)
    assert not sim._landing and sim.mem.held.sum() == 0
    return sim, dict((t, (d, u)) for t, d, u in seen)


def test_a_daemon_step_lands_its_moves_one_after_another_and_delays_its_timers():
    """compute 0.25 s, 2 ms a page: the first tick (1.0 s) demotes over [1.25, 1.85],
    promotes over [1.85, 2.45], the promotions finding the room the demotions make;
    the timers due meanwhile wait, and the tick is next due at 3.0 (LinuxSim.run_due's
    rule)."""
    sim, seen = _run(DaemonSteps({"policy": 0.25}, page_seconds=2e-3))
    p = sim.policy
    assert p.room < K and p.got == [K, K]  # more than the room there was at the call
    assert seen[1.25] == (0, 0)
    assert seen[1.5][0] == pytest.approx(125, abs=1) and seen[1.5][1] == 0
    assert seen[2.0][0] == K and seen[2.0][1] == pytest.approx(75, abs=1)
    assert seen[2.5] == (K, K)
    assert p.ticks[:3] == pytest.approx([1.0, 3.0, 4.0])
    # the 0.5 s timer (0.25 s a step too): at 0.5, due at 1.0 behind the tick, run when
    # the thread is free (2.45), due at 3.0, run after the tick there (3.25, busy to
    # 3.5: next due at 4.0, again behind the tick)
    assert p.halves[:4] == pytest.approx([0.5, 2.45, 3.25, 4.25])


def test_without_step_times_a_daemon_moves_at_once_on_time():
    sim, seen = _run(None)
    p = sim.policy
    assert p.got[0] == K and seen[1.25] == (K, p.got[1])
    assert p.ticks[:4] == pytest.approx([1.0, 2.0, 3.0, 4.0])
    assert p.halves[:4] == pytest.approx([0.5, 1.0, 1.5, 2.0])


def test_step_times_from_a_linux_record():
    """`from_linux`: a kind's mean step that moved nothing; the moving steps' time
    beyond it, per page."""
    d = DaemonSteps.from_linux({
        "policy": {"steps": 10, "seconds": 30.0, "moving_steps": 2,
                   "moving_seconds": 22.0, "pages": 4000},
        "monitor": {"steps": 100, "seconds": 10.0, "moving_steps": 0,
                    "moving_seconds": 0.0, "pages": 0}})
    assert d.compute == pytest.approx({"policy": 1.0, "monitor": 0.1})
    assert d.page_seconds == pytest.approx((22.0 - 2 * 1.0) / 4000)



def test_step_times_when_every_step_moved_pages():
    """A kind whose every step moved pages: its step is the moving steps' mean less
    their pages at a given page cost (without one, 0 and all of it the pages')."""
    steps = {"monitor": {"steps": 5, "seconds": 10.0, "moving_steps": 5,
                         "moving_seconds": 10.0, "pages": 20000}}
    d = DaemonSteps.from_linux(steps, page_seconds=1e-4)
    assert d.compute == pytest.approx({"monitor": (10.0 - 2.0) / 5})
    assert d.page_seconds == pytest.approx(1e-4)
    d0 = DaemonSteps.from_linux(steps)
    assert d0.compute == {"monitor": 0.0} and d0.page_seconds == pytest.approx(5e-4)
    # pages that took longer than the steps did: no negative step
    assert DaemonSteps.from_linux(steps, page_seconds=1e-3).compute["monitor"] == 0.0


class Watch(Policy):
    """A monitor and what its aggregations published: (time, largest nr_accesses)."""

    def __init__(self, monitor):
        super().__init__()
        self.monitor, self.seen = monitor, []

    def attach(self, sim) -> None:
        super().attach(sim)
        self.monitor.attach(sim)
        self.monitor.subscribe(lambda mon, now: self.seen.append(
            (now, int(mon._nr.max()) if mon.nr_regions else 0)))


def _watch(monitor, daemon):
    sim = Simulation(small_machine(), HotCold(work=4e8), Watch(monitor),
                     ALLOCS.create("dram-preferred"))
    sim.daemon = daemon
    sim.run()
    return sim.policy.seen


def test_idt_regions_aggregate_on_time_when_their_ticks_are_late():
    """IDT's sampling ticks at 0.35 s against a 10 ms interval and a 100 ms aggregation
    (the sampler of tierlab exec in the guest): every tick aggregates, its one sample's
    counts scaled to the 10 of an aggregation, as linux/idle_sampler.py does; on time,
    every 10th tick aggregates."""
    from tierlab.monitors.idt_regions import IdtRegions

    def mon():
        return IdtRegions(sample="10ms", aggr="100ms", min_nr_regions=10, max_nr_regions=50)
    late = _watch(mon(), DaemonSteps({"monitor": 0.35}, page_seconds=0.0))
    gaps = np.diff([0.0] + [t for t, _ in late][:5])  # each the next 10 ms tick after
    assert np.all((gaps > 0.35 - 1e-9) & (gaps < 0.36 + 1e-9)), gaps
    assert {nr for _, nr in late} <= {0, 10} and any(nr == 10 for _, nr in late)
    on_time = _watch(mon(), None)
    assert [t for t, _ in on_time][:3] == pytest.approx([0.1, 0.2, 0.3])


def test_a_late_read_of_damon_sees_its_last_aggregation_interval():
    """DAMON read by a busy daemon (the kdamond aggregates on its own in the kernel):
    the regions' counts are those of the last 100 ms, not of the seconds since the last
    read, so a region touched now and then is not counted as hot."""
    from tierlab.monitors.damon import Damon
    calls = []
    mon = Damon(min_nr_regions=10, max_nr_regions=50)
    real = mon._sample
    mon._sample = lambda t0, t1: (calls.append((t0, t1)), real(t0, t1))[1]
    _watch(mon, DaemonSteps({"monitor": 0.35}, page_seconds=0.0))
    assert calls and all(t1 - t0 == pytest.approx(0.1) for t0, t1 in calls)
    # read at 0 (the first, no sample), busy to 0.35: next due on the 100 ms grid
    assert [t1 for _, t1 in calls[:2]] == pytest.approx([0.4, 0.8])
