"""Monitors: the registry and base class (DESIGN.md, "Monitor").

A monitor observes only what a real system can see, through the primitives of
`primitives.py` drawn from the simulation's access source (`sim.source`, `sim.bits`),
runs at its own periods (`sim.every`) and charges its CPU with
`sim.charge_cpu(seconds, "monitor")`. Policies construct the monitors they use; a
registered monitor can also run alone (`tierlab telemetry`, issue 6).
"""
from __future__ import annotations

from ..registry import Registry

MONITORS: Registry = Registry("monitor")


class Monitor:
    """Base class: `attach(sim)` once, then work from timers."""

    def __init__(self, **params):
        self.params = params

    def attach(self, sim) -> None:
        self.sim = sim

    def stats(self) -> dict:
        return {}
