"""`damon-paddr`: DAMON on one node's physical address space (mm/damon/paddr.c), as the
kernel's DAMON-based tiering runs it (samples/damon/mtier.c: a context per node, its
target that node's physical range).

Everything but the address space is `damon`'s (monitors/damon.py: regions, sampling,
aggregation, merge and split, with the same kernel functions). The difference is what a
region holds: node `node`'s frames [start, end) (`Simulation.node_frames`, one layout
shared by every context), whatever pages back them. A sample picks a random frame of
the region (damon_rand) and counts it accessed when the frame holds one of the
workload's pages whose accessed bit was set since the previous sample
(damon_pa_young: the rmap walk over the folio's mappings); a free frame, another
process's idle page or memory nobody maps (damon_get_folio fails) is never found
accessed. So a region's nr_accesses is the share of its frames whose pages were used,
wherever their virtual addresses are: pages promoted away leave their frames to
whatever is demoted next (`frames.NodeFrames`), and a hot page left behind among them
sits in a region that looks cold.

Rate model: per frame the access probability 1 - exp(-rate x work) of the page it
holds (0 for others), averaged over each region by prefix sums, for each distinct
per-sample work (one value when the throughput is constant over the aggregation: one
Binomial draw a region; the field's epochs within the aggregation are summed per
sample). The layout is read (`NodeFrames.sync`) at each aggregation.

Parameters: `damon`'s, plus `node` (the node whose frames are watched) and `frames`
(the frame order: `boot`, the default, Linux right after boot, frames handed out in
address order; `random`, a machine up for a while, engine/frames.py). The Linux
backend's DAMON is the kernel's vaddr one (tierlab exec watches its workload's
address space): `damon-paddr` is a simulator model only.
"""
from __future__ import annotations

import numpy as np

from ..errors import TierlabError
from ..params import parse_choice, parse_int
from .base import MONITORS
from .damon import Damon

FRAME_ORDERS = ("boot", "random")


@MONITORS.register("damon-paddr")
class DamonPaddr(Damon):
    """DAMON (paddr) on node `node`'s frames."""

    def __init__(self, node=0, frames="boot", sample="5ms", aggr="100ms", update="1s",
                 min_nr_regions=10, max_nr_regions=1000, zero_age_reset=True,
                 name="damon-paddr"):
        super().__init__(sample=sample, aggr=aggr, update=update,
                         min_nr_regions=min_nr_regions, max_nr_regions=max_nr_regions,
                         zero_age_reset=zero_age_reset, name=name)
        self.params.update(node=node, frames=frames)
        self.node = parse_int(node, "damon-paddr node", 0)
        self.frame_order = parse_choice(frames, "damon-paddr frames", FRAME_ORDERS)
        self.frames = None
        self._rates_key, self._rates = None, None

    def attach(self, sim) -> None:
        if getattr(sim, "real", False):
            raise TierlabError("damon-paddr is a simulator model: tierlab exec and "
                               "tierlab daemon read the kernel's vaddr DAMON (damon)")
        if not 0 <= self.node < len(sim.mem.capacity):
            raise TierlabError(f"damon-paddr node {self.node}: the machine has nodes "
                               f"0-{len(sim.mem.capacity) - 1}")
        self.frames = sim.node_frames(self.frame_order)
        super().attach(sim)

    @property
    def owner(self) -> np.ndarray:
        """What each of the node's frames holds: a page number, or < 0 (NodeFrames)."""
        return self.frames.owner[self.node]

    def _read_ranges(self):
        return [(0, int(self.owner.shape[0]))]

    def _sample(self, t0: float, t1: float) -> np.ndarray:
        self.frames.sync()
        return super()._sample(t0, t1)

    def _draw_pages(self, rows) -> np.ndarray:
        """The pages held by one random frame per (region, sample); < 0: none."""
        return self.owner[super()._draw_pages(rows)]

    def _frame_rates(self, epochs):
        """The node's frames holding pages (sorted), and for each epoch's field the
        index of each such frame's page rate in that field's distinct rates; kept
        until the layout or the fields change."""
        key = (self.frames.version[self.node], tuple(id(f) for f, _ in epochs))
        if self._rates_key != key:
            owner = self.owner
            held = np.flatnonzero(owner >= 0)
            pages = owner[held]
            per = []
            for f, _ in epochs:
                r, w = f.rate_of(pages)
                per.append(np.unique(r + w, return_inverse=True))
            # the fields are kept with their ids, so that no id is reused meanwhile
            self._rates_key, self._rates = key, (held, per, [f for f, _ in epochs])
        return self._rates[:2]

    def _sample_rate(self, tl, lo, hi) -> np.ndarray:
        """nr_accesses from the frames' pages' rates (the module docstring)."""
        R = self.nr_regions
        epochs = self._rate_epochs(tl, lo, hi)
        if not epochs:
            return np.zeros(R, dtype=np.int64)
        held, per = self._frame_rates(epochs)
        work = np.stack([dw for _, dw in epochs])  # (epochs, samples)
        if np.all(np.ptp(work, axis=1) <= 1e-9 * work.max(axis=1)):
            cols, inv = work[:, :1], None  # constant throughput: one Binomial a region
        else:
            cols, inv = np.unique(work, axis=1, return_inverse=True)
        # each region's first and last held frame, and the sum over them by prefix sums
        a, b = np.searchsorted(held, self._s), np.searchsorted(held, self._e)
        q = np.empty((R, cols.shape[1]))
        cum = np.zeros(held.shape[0] + 1)
        for j in range(cols.shape[1]):
            lam = 0.0
            for k, (rates, idx) in enumerate(per):
                lam = lam + (rates * cols[k, j])[idx]
            if held.size:
                np.cumsum(-np.expm1(-lam), out=cum[1:])
            q[:, j] = (cum[b] - cum[a]) / (self._e - self._s)
        q = np.clip(q, 0.0, 1.0)
        return self._counts_from(q if inv is None else q[:, inv.ravel()])
