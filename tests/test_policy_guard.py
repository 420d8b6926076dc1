"""Issue 16, item 8, "Nothing a policy must not see": a placement or allocation policy
sees monitor observations only, never the workload's true rates (DESIGN.md, "Monitor");
the oracle (`uses_true_rates = True`) is the one declared exception.

The engine hands policies a `PolicyView` of the simulation, which refuses `timeline`,
`source`, `workload`, `true_field` (and `teleport`) to undeclared policies, while the
monitors they attach work on the simulation itself. Two kinds of test:

1. every registered policy but the oracle runs to the end on a simulation whose truth
   is poisoned for policy code: `sim.timeline`, `sim.workload`, `sim.source` and the
   source's methods (`expected`, `counts`, ... and its `timeline`) and the DRAM cache's
   `unit_rates` record and raise when the code reading them is a policy's (a method of
   a `Policy` or `AllocPolicy`, or code in `tierlab/policies/` that is not a
   `Monitor`'s). The poison sits on the simulation and the source themselves, not on
   the view, so it also catches reads that go around the view (`sim.lru.sim.timeline`,
   `sim.bits.source.expected(...)`); the tests at the end show it does.
2. crafted policies that read the truth through the view fail with the clear error;
   the oracle, and a crafted policy declaring `uses_true_rates`, still read it.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import pytest

import tierlab.policies
from tierlab.engine.engine import Simulation
from tierlab.interface import PolicyView, TrueRatesError
from tierlab.monitors.base import Monitor, backend_of
from tierlab.monitors.pebs import Pebs
from tierlab.monitors.source import RateSource
from tierlab.policies import ALLOCS, POLICIES, AllocPolicy, Policy

from conftest import HotCold
from test_engine import check_invariants, small_machine
from test_memory_mode import mm_machine

POLICY_DIR = os.path.dirname(os.path.abspath(tierlab.policies.__file__)) + os.sep
_COMPREHENSIONS = ("<listcomp>", "<dictcomp>", "<setcomp>", "<genexpr>")


class PoisonRead(AssertionError):
    """Policy code read the workload's truth."""


def _policy_reader(frame):
    """'file:line (function)' if `frame` (the code doing a read) is a policy's, else
    None. Policy code: a method of a Policy or AllocPolicy, or any code under
    tierlab/policies/ that does not belong to a Monitor (the hardware models kept
    beside their policies, e.g. tiering08.NumaScanner)."""
    f = frame
    # a comprehension reads on behalf of its enclosing function, the view on behalf of
    # the code using it (the poison does not rely on the guard it checks)
    while f is not None and (f.f_code.co_name in _COMPREHENSIONS
                             or f.f_code is PolicyView.__getattr__.__code__):
        f = f.f_back
    if f is None:
        return None
    owner = f.f_locals.get("self")
    path = os.path.abspath(f.f_code.co_filename)
    if isinstance(owner, Monitor):
        return None
    if isinstance(owner, (Policy, AllocPolicy)) or path.startswith(POLICY_DIR):
        return f"{os.path.relpath(path)}:{f.f_lineno} ({f.f_code.co_name})"
    return None


def _check(log: list, what: str, frame) -> None:
    who = _policy_reader(frame)
    if who is not None:
        log.append(f"{what} read by {who}")
        raise PoisonRead(log[-1])


def _poisoned_attr(name: str):
    """A data descriptor over the instance's own `name` that checks the reader."""
    def get(self):
        _check(self._poison_log, f"{type(self).__name__}.{name}", sys._getframe(1))
        return self.__dict__[name]

    def put(self, value):
        self.__dict__[name] = value
    return property(get, put)


def _poisoned_method(name: str):
    def method(self, *args, **kwargs):
        _check(self._poison_log, f"source.{name}()", sys._getframe(1))
        return getattr(super(PoisonedSource, self), name)(*args, **kwargs)
    method.__name__ = name
    return method


class PoisonedSource(RateSource):
    """The simulation's own `RateSource`, its class swapped for this one."""

    timeline = _poisoned_attr("timeline")


for _name in ("expected", "counts", "accessed", "samples", "first_access",
              "first_access_lazy"):
    setattr(PoisonedSource, _name, _poisoned_method(_name))


class PoisonedSimulation(Simulation):
    """A Simulation whose truth records and raises when policy code reads it."""

    timeline = _poisoned_attr("timeline")
    workload = _poisoned_attr("workload")
    source = _poisoned_attr("source")

    @property
    def true_field(self):
        _check(self._poison_log, "Simulation.true_field", sys._getframe(1))
        return Simulation.true_field.fget(self)

    def __init__(self, *args, **kwargs):
        self._poison_log = []
        super().__init__(*args, **kwargs)
        src = self.__dict__["source"]
        src._poison_log = self._poison_log
        src.__class__ = PoisonedSource  # shared with `bits`: the same object
        if self.cache is not None:
            rates = self.cache.unit_rates

            def unit_rates(*a, **k):
                _check(self._poison_log, "cache.unit_rates()", sys._getframe(1))
                return rates(*a, **k)
            self.cache.unit_rates = unit_rates


def poisoned_run(machine, workload, policy, alloc="pm-preferred", seed=1):
    pol = POLICIES.create(policy) if isinstance(policy, str) else policy
    al = ALLOCS.create(alloc) if isinstance(alloc, str) else alloc
    sim = PoisonedSimulation(machine, workload, pol, al, seed=seed)
    rec = sim.run()
    return sim, rec


def tiered_case():
    """tests/test_every_policy.py's scenario (moves, growth, frees; ~20-40 simulated s)."""
    return (small_machine(dram_pages=900, slow_pages=3000, tiers=2),
            HotCold(n=3000, hot=300, phases=3, grow=400, free_first=200, work=2e9))


def memory_mode_case():
    """2 MiB frames, 16 DRAM-cache slots, 96 units of which 12 hot (random frames put
    two hot units in one slot, so jc-dynamic remaps); a few simulated seconds."""
    m = mm_machine(cache_pages=16 * 512, pm_pages=256 * 512, frame="2MiB")
    return m, HotCold(n=96 * 512, hot=12 * 512, hot_frac=0.95, phases=2, work=6e8)


def _memory_mode(name):
    return getattr(POLICIES.get(name), "needs_dram_cache", False)


GUARDED = sorted(n for n in POLICIES.names() if not n.startswith("test-")
                 and not getattr(POLICIES.get(n), "uses_true_rates", False))
TIERED = [n for n in GUARDED if not _memory_mode(n)]
MEMORY_MODE = [n for n in GUARDED if _memory_mode(n)]


def test_the_guarded_list_is_every_policy_but_the_oracle():
    assert "oracle" not in GUARDED and "oracle" in POLICIES.names()
    assert len(TIERED) >= 15 and {"jc-static", "jc-dynamic", "linux-mm"} <= set(MEMORY_MODE)


# -----------------------------------------------------------------------------------
# 1. every policy runs with the truth poisoned for policy code
# -----------------------------------------------------------------------------------
@pytest.mark.parametrize("policy", TIERED)
def test_policy_runs_without_reading_the_truth(policy):
    m, wl = tiered_case()
    sim, rec = poisoned_run(m, wl, policy)
    assert sim._poison_log == []
    assert isinstance(sim.policy.sim, PolicyView)
    check_invariants(sim)
    assert rec["work"] == pytest.approx(wl.total_work)
    if policy != "static":
        assert rec["promotions"] > 0  # it did observe and act


@pytest.mark.parametrize("policy", MEMORY_MODE)
def test_memory_mode_policy_runs_without_reading_the_truth(policy):
    m, wl = memory_mode_case()
    spec = policy + (":frames=random,max_moves=4" if policy == "jc-dynamic" else "")
    sim, rec = poisoned_run(m, wl, spec, alloc="dram-preferred", seed=3)
    assert sim._poison_log == []
    assert rec["work"] == pytest.approx(wl.total_work)
    if policy == "jc-dynamic":
        assert rec["policy_stats"]["remaps"] > 0


@pytest.mark.parametrize("alloc", sorted(ALLOCS.names()))
def test_allocation_policy_runs_without_reading_the_truth(alloc):
    m, wl = tiered_case()
    sim, rec = poisoned_run(m, wl, "tpp", alloc=alloc)
    assert sim._poison_log == []
    assert rec["work"] == pytest.approx(wl.total_work)


# -----------------------------------------------------------------------------------
# 2. reading the truth through the view fails clearly; the oracle still reads it
# -----------------------------------------------------------------------------------
class _Ticking(Policy):
    """Reads something every 0.5 s (`read(sim, now)`)."""

    def attach(self, sim):
        super().attach(sim)
        sim.every(0.5, self.tick)

    def tick(self, now):
        self.read(self.sim, now)


class ReadsTimeline(_Ticking):
    def read(self, sim, now):
        self.seen = sim.timeline.field.rate_of(np.arange(10))


class ReadsWorkload(Policy):
    def attach(self, sim):
        super().attach(sim)
        self.threads = sim.workload.threads


class ReadsSourceExpected(_Ticking):
    def read(self, sim, now):
        self.seen = sim.source.expected(0, sim.mem.npages, 0.0, now)


class ReadsTrueField(_Ticking):
    def read(self, sim, now):
        self.seen = sim.true_field


class Teleports(_Ticking):
    def read(self, sim, now):
        sim.teleport(np.arange(10), np.zeros(10, dtype=np.uint8))


class AllocReadsWorkload(AllocPolicy):
    def order(self, machine):
        return machine.fast_nodes() + machine.slow_nodes()

    def place(self, sim, start, end):
        self.hot = sim.workload.hot
        super().place(sim, start, end)


def _sim(policy, alloc="pm-preferred", cls=Simulation):
    m, wl = tiered_case()
    al = ALLOCS.create(alloc) if isinstance(alloc, str) else alloc
    return cls(m, wl, policy, al, seed=1)


@pytest.mark.parametrize("policy, what", [
    (ReadsTimeline, "timeline"), (ReadsWorkload, "workload"),
    (ReadsSourceExpected, "source"), (ReadsTrueField, "true_field"),
    (Teleports, "teleport")])
def test_a_policy_reading_the_truth_fails_with_a_clear_error(policy, what):
    with pytest.raises(TrueRatesError) as err:
        _sim(policy()).run()
    msg = str(err.value)
    assert f"{policy.__name__} read sim.{what}" in msg
    assert "true rates" in msg and "uses_true_rates" in msg and "oracle" in msg


def test_an_allocation_policy_reading_the_truth_fails_too():
    with pytest.raises(TrueRatesError, match="AllocReadsWorkload read sim.workload"):
        _sim(POLICIES.create("static"), alloc=AllocReadsWorkload()).run()


def test_a_policy_declaring_true_rates_reads_them():
    class Declared(ReadsTimeline):
        uses_true_rates = True

    class DeclaredSource(ReadsSourceExpected):
        uses_true_rates = True
    for cls in (Declared, DeclaredSource):
        pol = cls()
        rec = _sim(pol).run()
        assert rec["work"] > 0 and len(pol.seen) > 0


def test_the_oracle_still_runs_and_bounds_the_others():
    oracle = _sim(POLICIES.create("oracle"))
    rec = oracle.run()
    assert isinstance(oracle.policy.sim, PolicyView) and oracle.policy.sim._trusted
    assert rec["promotions"] > 0
    check_invariants(oracle)
    static = _sim(POLICIES.create("static")).run()
    assert rec["throughput"] > static["throughput"]


def test_the_view_is_the_narrow_interface():
    sim = _sim(POLICIES.create("static"))
    view = sim.policy_view
    assert view.mem is sim.mem and view.machine is sim.machine and view.now == sim.now
    assert view.app_threads == 8 and view.threads == sim.threads and view.nnodes == 2
    assert view.free(0) == sim.free(0)
    assert getattr(view, "real", False) is False  # the simulator, not the Linux backend
    with pytest.raises(AttributeError, match="not part of the backend interface"):
        view.throughput()
    with pytest.raises(AttributeError, match="read-only"):
        view.now = 5.0
    assert backend_of(view) is sim and backend_of(sim) is sim
    assert "timeline" not in dir(view) and "migrate" in dir(view)


def test_monitors_attached_through_the_view_work_on_the_simulation():
    class WithPebs(Policy):
        def attach(self, sim):
            super().attach(sim)
            self.monitor = Pebs(period=10007, name="guard-pebs")
            self.monitor.attach(sim)  # the view: the monitor unwraps it
            self.batches = 0
            self.monitor.subscribe(self.on_samples)

        def on_samples(self, batch, now):
            self.batches += 1

    pol = WithPebs()
    sim = _sim(pol, cls=PoisonedSimulation)
    sim.run()
    assert isinstance(pol.sim, PolicyView) and pol.monitor.sim is sim
    assert pol.batches > 0 and sim._poison_log == []


# -----------------------------------------------------------------------------------
# the poison of part 1 is not blind: reads around the view are caught
# -----------------------------------------------------------------------------------
class DigsThroughLru(_Ticking):
    def read(self, sim, now):
        self.seen = sim.lru.sim.timeline.field


class DigsThroughBits(_Ticking):
    def read(self, sim, now):
        self.seen = sim.bits.source.expected(0, sim.mem.npages, 0.0, now)


class DigsThroughAMonitor(_Ticking):
    def attach(self, sim):
        super().attach(sim)
        self.monitor = Pebs(period=10007, name="dig-pebs")
        self.monitor.attach(sim)

    def read(self, sim, now):
        self.seen = self.monitor.sim.workload.threads


@pytest.mark.parametrize("policy, what", [
    (DigsThroughLru, "PoisonedSimulation.timeline"),
    (DigsThroughBits, "source.expected()"),
    (DigsThroughAMonitor, "PoisonedSimulation.workload")])
def test_the_poison_catches_reads_around_the_view(policy, what):
    sim = _sim(policy(), cls=PoisonedSimulation)
    with pytest.raises(PoisonRead):
        sim.run()
    assert len(sim._poison_log) == 1 and sim._poison_log[0].startswith(what)
    assert "test_policy_guard.py" in sim._poison_log[0]


def test_the_poison_tells_policy_code_from_monitors_and_the_engine():
    sim = _sim(POLICIES.create("static"), cls=PoisonedSimulation)
    real = sim.__dict__["timeline"]
    assert sim.timeline is real  # this test's module level: not policy code
    # code of a module under tierlab/policies/ (a policy helper) is policy code ...
    code = compile("def helper(sim):\n    return sim.timeline\n",
                   os.path.join(POLICY_DIR, "helper.py"), "exec")
    ns = {}
    exec(code, ns)
    with pytest.raises(PoisonRead, match="helper.py"):
        ns["helper"](sim)

    # ... unless it is a Monitor's (hardware models kept beside their policy)
    class Beside(Monitor):
        pass
    code = compile("def method(self, sim):\n    return sim.source.expected(0, 10, 0, 1)\n",
                   os.path.join(POLICY_DIR, "beside.py"), "exec")
    exec(code, ns)
    Beside.method = ns["method"]
    reads, writes = Beside().method(sim)
    assert reads.shape == (1,)
    assert len(sim._poison_log) == 1  # the helper's read only
