"""Monitors: the registry and base class (docs/architecture.md, "The path of one run").

A monitor observes only what a real system can see, through the primitives of
`primitives.py` drawn from the simulation's access source (`sim.source`, `sim.bits`),
runs at its own periods (`sim.every`) and charges its CPU with
`sim.charge_cpu(seconds, "monitor")`. Policies construct the monitors they use; a
registered monitor can also run alone (`tierlab telemetry`).

A policy hands its monitors the view of the simulation it was given
(`interface.PolicyView`, which hides the workload's truth from policy code); a monitor
models hardware and must read that truth, so `attach` always receives the simulation
itself (`backend_of`): `Monitor.attach` unwraps the view, and so does every subclass's
own `attach` (wrapped once, at class creation, by `__init_subclass__`), before its body
runs.
"""
from __future__ import annotations

import functools

from ..registry import Registry

MONITORS: Registry = Registry("monitor")


def backend_of(sim):
    """The backend behind a policy's `interface.PolicyView` (or `sim` itself): for monitors
    and the other hardware models a policy builds, which must read the access source."""
    return getattr(sim, "_guarded_backend", sim)


def _unwrapping(attach):
    @functools.wraps(attach)
    def wrapper(self, sim, *args, **kwargs):
        return attach(self, backend_of(sim), *args, **kwargs)
    wrapper._unwraps_view = True
    return wrapper


class Monitor:
    """Base class: `attach(sim)` once, then work from timers."""

    #: its timers' work, for a daemon's step times (`interface.timer_kind`)
    timer_kind = "monitor"

    #: keys tierlab sets when a policy builds its monitor, not a user's
    internal_params = ("name", "target")

    def __init__(self, **params):
        self.params = params

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        attach = cls.__dict__.get("attach")
        if callable(attach) and not getattr(attach, "_unwraps_view", False):
            cls.attach = _unwrapping(attach)

    def attach(self, sim) -> None:
        self.sim = backend_of(sim)

    def stats(self) -> dict:
        return {}
