"""Placement policies: the registry and the base class (docs/writing-a-policy.md).

A policy sees the machine through the simulation's narrow backend interface (time,
nodes and their free space, monitors, migrate, schedule) and never the workload's true
rates; the oracle is the one declared exception (`uses_true_rates = True`). The engine
enforces it: `attach` (and an allocation policy's `place`) receives an
`interface.PolicyView`, which raises `TrueRatesError` on `sim.timeline`, `sim.source`,
`sim.workload`, `sim.true_field` and `sim.teleport` unless the policy declares
`uses_true_rates`; the monitors a policy attaches with it work on the simulation
itself. Adding a policy means adding one module that registers a subclass:

    @POLICIES.register("mine")
    class Mine(Policy):
        def attach(self, sim):
            super().attach(sim)
            sim.every(1.0, self.tick)
"""
from __future__ import annotations

import numpy as np

from ..registry import Registry

POLICIES: Registry = Registry("policy")


class Policy:
    """Base class: no migration, default victim choice for reclaim."""

    #: True only for the oracle: it may read `sim.true_field` (and the rest of the
    #: truth `interface.PolicyView` hides from other policies) and `sim.teleport`.
    uses_true_rates = False
    #: kswapd demotes down the path when a node runs low (Linux with
    #: /sys/kernel/mm/numa/demotion_enabled = 1). False: a full node simply makes new
    #: allocations fall back to the next node (AutoNUMA balancing's setting).
    kswapd_demotion = True
    #: True only for the oracle: no migration in its runs costs anything (its own
    #: placement, and the reclaim an allocation policy triggers), so it bounds every
    #: policy that pays for its moves.
    free_migrations = False

    def __init__(self, **params):
        self.params = params

    def attach(self, sim) -> None:
        """Called once before the run; register periodic work with `sim.every`."""
        self.sim = sim

    def select_victims(self, node: int, n: int) -> np.ndarray | None:
        """Pages on `node` to demote when reclaim needs `n` pages; None = default LRU."""
        return None

    def on_alloc(self, start: int, end: int, node: int) -> None:
        """Pages [start, end) were first touched on `node`."""

    def on_free(self, start: int, end: int) -> None:
        """Pages [start, end) were released."""

    def on_moves(self, pages: np.ndarray, src: np.ndarray, dsts: np.ndarray) -> None:
        """pages[i] moved from node src[i] to dsts[i] (any migration, the policy's own,
        reclaim's or a promotion's), after the page map was updated."""

    def stats(self) -> dict:
        """Extra per-run metrics for the record."""
        return {}
