"""Shared fixtures: small synthetic workloads built directly on the rate field."""
from __future__ import annotations

import numpy as np
import pytest

from tierlab.field import RateField
from tierlab.policies import POLICIES, Policy
from tierlab.workloads.base import Change, Workload, ranges


class HotCold(Workload):
    """n pages; `hot` pages at the end get `hot_frac` of the accesses. Optional phases
    move the hot range, grow the heap and free the first pages, to exercise every kind
    of change."""

    def __init__(self, n=4096, hot=512, hot_frac=0.9, work=2e7, threads=8, mlp=4.0,
                 compute_ns=10.0, phases=1, grow=0, free_first=0, write_frac=0.5):
        super().__init__(name="hotcold", npages=n + grow, footprint_pages=n + grow,
                         total_work=work, work_unit="updates", compute_ns=compute_ns,
                         threads=threads, mlp=mlp)
        self.n, self.hot, self.hot_frac, self.phases = n, hot, hot_frac, phases
        self.grow, self.free_first, self.write_frac = grow, free_first, write_frac

    def field(self, k, n):
        lo = (n - self.hot * (k + 1)) % (n - self.hot + 1)
        cold = 1.0 - self.hot_frac
        rf, wf = 2 * (1 - self.write_frac), 2 * self.write_frac
        return RateField.from_segments([0, lo], [n, lo + self.hot],
                                       [rf * cold / n, rf * self.hot_frac / self.hot],
                                       [wf * cold / n, wf * self.hot_frac / self.hot],
                                       self.npages)

    def changes(self):
        yield Change(0, field=self.field(0, self.n), alloc=ranges((0, self.n)))
        for k in range(1, self.phases):
            at = self.total_work * k / self.phases
            if self.grow and k == 1:
                n = self.n + self.grow
                yield Change(at, field=self.field(k, n), alloc=ranges((self.n, n)))
            else:
                yield Change(at, field=self.field(k, self.n))
        if self.free_first:
            f = self.field(0, self.n)
            keep = RateField.from_segments(f.starts.clip(self.free_first),
                                           f.ends.clip(self.free_first), f.read, f.write,
                                           self.npages)
            yield Change(self.total_work * 0.99, field=keep,
                         free=ranges((0, self.free_first)))


@POLICIES.register("test-random")
class RandomMover(Policy):
    """Test-only: migrates random pages to random nodes every 50 ms (stress)."""

    def attach(self, sim):
        super().attach(sim)
        self.rng = sim.rng_for("random-mover")
        sim.every(0.05, self.tick)

    def tick(self, now):
        sim = self.sim
        pages = self.rng.integers(0, sim.mem.npages, 300)
        sim.migrate(pages, int(self.rng.integers(sim.nnodes)),
                    sync=bool(self.rng.integers(2)))
        if self.rng.random() < 0.2:
            sim.reclaim(int(self.rng.integers(sim.nnodes)), 100)


@pytest.fixture
def hotcold():
    return HotCold
