"""`oracle`: an upper bound. It reads the workload's true rates (the one declared
exception to "policies see monitor observations only") and, whenever the field or the
allocation changes, places the hottest pages in the fastest nodes at no cost.
"""
from __future__ import annotations

import numpy as np

from ..engine.memory import UNALLOC
from ..units import parse_duration
from .base import POLICIES, Policy


def ideal_placement(field, node: np.ndarray, order: list[int], limits: np.ndarray):
    """Desired node of every allocated page: pages sorted by true access rate (reads +
    writes per unit of work), hottest first, filling `order`'s nodes up to `limits`.

    Vectorised: the address space is cut into pieces (the field's segments and the gaps
    between them), pieces sorted by rate; a page's position in the global hot order is
    the allocated pages of hotter pieces plus its rank inside its own piece.
    Returns (pages, desired nodes) for the allocated pages.
    """
    n = len(node)
    alloc = node != UNALLOC
    cut = np.unique(np.concatenate(([0, n], field.starts, field.ends)))
    starts, ends = cut[:-1], cut[1:]
    dens = np.zeros(len(starts))
    seg = field.segment_of(starts)
    dens[seg >= 0] = field.read[seg[seg >= 0]] + field.write[seg[seg >= 0]]
    csum = np.concatenate(([0], np.cumsum(alloc, dtype=np.int64)))
    per_piece = csum[ends] - csum[starts]
    order_pieces = np.argsort(-dens, kind="stable")
    before = np.zeros(len(starts), dtype=np.int64)
    before[order_pieces] = np.concatenate(([0], np.cumsum(per_piece[order_pieces])[:-1]))
    pages = np.flatnonzero(alloc)
    # the pieces partition [0, n): a repeat gives every page its piece without a search
    piece = np.repeat(np.arange(len(starts), dtype=np.int32), ends - starts)[pages]
    g = before[piece] + (csum[pages] - csum[starts[piece]])
    bounds = np.cumsum(limits[order])
    slot = np.searchsorted(bounds, g, side="right")
    slot = np.minimum(slot, len(order) - 1)
    return pages, np.asarray(order, dtype=np.uint8)[slot]


@POLICIES.register("oracle")
class Oracle(Policy):
    """Knows the true rates; hottest pages in the fastest tiers, at no cost (upper bound)."""

    uses_true_rates = True
    free_migrations = True

    def __init__(self, interval="1s"):
        super().__init__(interval=interval)
        self.interval = parse_duration(interval, "oracle interval")
        self._seen = None

    def attach(self, sim):
        super().attach(sim)
        sim.every(self.interval, self.tick)

    def on_change(self):
        self.tick(self.sim.now)

    def tick(self, now):
        sim = self.sim
        version = (sim.field_version, sim.alloc_version)
        if version == self._seen:
            return
        self._seen = version
        m = sim.machine
        order = sorted(range(m.nnodes), key=m.read_latency_ns)
        # fill each node down to its low watermark, where kswapd stays asleep (the
        # allocator fills that far too); the slowest node takes whatever is left
        limits = (sim.mem.capacity - sim.mem.wmark_low).astype(np.int64)
        limits[order[-1]] = sim.mem.capacity[order[-1]]
        if sim.mem.allocated > limits.sum():
            limits = sim.mem.capacity.copy()
        pages, dst = ideal_placement(sim.true_field, sim.mem.node, order, limits)
        sim.teleport(pages, dst, reason="oracle")
