"""Allocation policies (HPDC'23 poster, inside MULTI-CLOCK): where a first touch goes.

- dram-preferred: DRAM until full, then PM (what every tiering system does);
- dram-always: always DRAM; when full, demote cold pages to make room;
- pm-preferred: PM until full, then DRAM;
- pm-always: always PM (falls back to DRAM only when every PM node is full, where
  Linux would OOM; we keep the run going and say so in the docstring).
With more than two tiers "DRAM" means the DRAM nodes in demotion-path order (local
DRAM, then remote DRAM) and "PM" the others in path order.
"""
from __future__ import annotations

from ..errors import TierlabError
from ..registry import Registry

ALLOCS: Registry = Registry("allocation policy")


class AllocPolicy:
    """Place a range of first-touched pages; subclasses choose the node order."""

    #: demote cold pages from the first node to make room instead of falling through
    always = False
    #: fall back to the other nodes once the preferred ones are full
    fallback = True

    def order(self, machine) -> list[int]:
        raise NotImplementedError

    def place(self, sim, start: int, end: int) -> None:
        """Place pages [start, end) node by node, in this policy's order."""
        mem = sim.mem
        order = self.order(sim.machine)
        pos = start
        for node in order:
            pos = sim._place_upto(pos, end, node, mem.free[node] - mem.wmark_low[node])
            if self.always:
                while pos < end:
                    need = end - pos
                    got = sim.reclaim(node, need, direct=True)
                    room = mem.free[node] - mem.wmark_low[node]
                    if got <= 0 and room <= 0:
                        break
                    pos = sim._place_upto(pos, end, node, room)
            if pos >= end:
                return
        # every preferred node is at its low watermark: dip to min, then to full,
        # first on the preferred nodes, then (if allowed) anywhere down the path
        everywhere = order + [n for n in sim.machine.demotion if n not in order]
        for floor in (mem.wmark_min, 0 * mem.wmark_min):
            for node in (everywhere if self.fallback else order):
                pos = sim._place_upto(pos, end, node, mem.free[node] - floor[node])
                if pos >= end:
                    return
        if pos < end:
            raise TierlabError(
                f"out of memory: {end - pos} pages did not fit on {sim.machine.name} "
                f"(footprint larger than the machine?)")


@ALLOCS.register("dram-preferred")
class DramPreferred(AllocPolicy):
    """DRAM until full, then PM (Linux default with a CPU-less slow node)."""

    def order(self, machine):
        return machine.fast_nodes() + machine.slow_nodes()


@ALLOCS.register("dram-always")
class DramAlways(AllocPolicy):
    """Always DRAM; when full, demote cold pages (direct reclaim) to make room."""

    always = True

    def order(self, machine):
        return machine.fast_nodes()[:1] + machine.fast_nodes()[1:] + machine.slow_nodes()


@ALLOCS.register("pm-preferred")
class PmPreferred(AllocPolicy):
    """PM until full, then DRAM."""

    def order(self, machine):
        return (machine.slow_nodes() or machine.demotion[-1:]) + machine.fast_nodes()


@ALLOCS.register("pm-always")
class PmAlways(AllocPolicy):
    """Always PM; DRAM only once every PM node is full (where Linux would OOM)."""

    def order(self, machine):
        return machine.slow_nodes() or machine.demotion[-1:]
