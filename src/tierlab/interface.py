"""The interface policies see, below both backends (the simulator's `engine` and the
Linux backend's `linux.backend.LinuxSim`), as DAMON keeps its core apart from its
operations: `PolicyBackend`, what both give a policy alike; `PolicyView`, the guard
through which the simulator hands it over, which refuses the workload's truth
(`TrueRatesError`); the page map's mark of an unallocated page and Linux's per-node
watermarks, which both backends compute alike."""
from __future__ import annotations

import zlib

import numpy as np

from .field import range_pages

UNALLOC = 255  #: the node of a page not allocated


def watermark_pages(capacity: np.ndarray, fractions) -> tuple:
    """(min, low, high) watermarks in pages per node, from fractions of each node."""
    return tuple((capacity * f).astype(np.int64) for f in fractions)


def timer_kind(fn) -> str:
    """What a timer's work is, for a daemon's step times (`engine.DaemonSteps`, the
    Linux backend's `daemon_steps`): "monitor" for a monitor's (its object says
    `timer_kind = "monitor"`), "policy" otherwise."""
    return getattr(getattr(fn, "__self__", None), "timer_kind", "policy")


class PolicyBackend:
    """What both backends give policies alike (this engine's `Simulation` and the Linux
    backend's `linux.backend.LinuxSim`), from their `machine`, `mem`, `seed`, `scale`
    and `migrate`."""

    @property
    def nnodes(self) -> int:
        return self.machine.nnodes

    def scaled_bytes(self, nbytes: float) -> float:
        """A byte quantity of a mechanism (scan size, quota, MB/s limit) in this run's
        miniature: nbytes x scale."""
        return nbytes * self.scale

    def free(self, node: int) -> int:
        return int(self.mem.free[node])

    def capacity(self, node: int) -> int:
        return int(self.mem.capacity[node])

    def node_of(self, pages) -> np.ndarray:
        """Node of each page (255 = not allocated)."""
        return self.mem.node[np.asarray(pages, dtype=np.int64)]

    def rng_for(self, name: str) -> np.random.Generator:
        """An independent random stream per component, fixed by the run's seed."""
        return np.random.default_rng([self.seed, zlib.crc32(name.encode())])

    def migrate_range(self, start: int, end: int, dst: int, sync: bool = False,
                      reason: str = "") -> int:
        """Migrate the allocated pages of [start, end) (a region) to `dst`."""
        return self.migrate_ranges([start], [end], dst, sync, reason)

    def migrate_ranges(self, starts, ends, dst: int, sync: bool = False,
                       reason: str = "") -> int:
        """Migrate the allocated pages of regions [starts[i], ends[i]), region by region
        in the given order, to `dst`: `migrate(range_pages(starts, ends), ...)`."""
        return self.migrate(range_pages(starts, ends), dst, sync, reason)


class TrueRatesError(RuntimeError):
    """A policy reached for the workload's truth (docs/writing-a-policy.md: a policy never
    reads the workload's true rates; only the oracle declares `uses_true_rates`)."""


class PolicyView:
    """What a placement or allocation policy gets instead of the `Simulation`: the
    backend interface (time, nodes and their free space, monitors, migrate, schedule;
    docs/writing-a-policy.md, "The backend interface"), forwarded to the simulation, and
    nothing that holds the workload's truth.

    Why a view and not checks on the `Simulation`: the engine and the monitors must keep
    reading the truth (monitors model the hardware: accessed bits, PEBS, hint faults,
    all drawn from `sim.source`), and they are handed the same object the policy holds
    (`self.monitor.attach(sim)` inside `Policy.attach`). A check on `Simulation` would
    have to guess who is asking (stack inspection: slow and fragile); a separate object
    says it by construction, costs one `__getattr__` per policy access (per timer
    tick, not per page) and needs no change in any policy that stays within the
    interface. Monitors get the simulation back from the view (`monitors.base.
    backend_of`: `Monitor.attach` and every subclass's `attach` unwrap it), and so do
    other hardware models that live beside their policy (`tiering08.NumaScanner`).

    - `FORWARDED`: the interface, read through to the simulation (so `now`, `work`,
      the versions are always current); methods are the simulation's bound methods.
    - `TRUTH` (`timeline`, `source`, `workload`, `true_field`, and `teleport`, a
      free placement only an upper bound may use): `TrueRatesError` unless the policy
      declares `uses_true_rates` (the oracle). The application's thread count, the one
      fact policies took from the workload, is `app_threads`.
    - anything else: AttributeError naming the interface (so `getattr(sim, "real",
      False)` and the like still work: the simulator is not the real backend).
    The view is read-only. It is a guard against a policy reading the truth by
    mistake, not a sandbox: Python cannot stop deliberate digging (`sim.lru.sim`, a
    monitor's `sim`); tests/test_policy_guard.py also catches such reads from policy
    code in every registered policy. The Linux backend (`linux.backend.LinuxSim`) has
    no truth to hide and is handed to policies directly.
    """

    FORWARDED = frozenset((
        # state
        "now", "work", "machine", "mem", "seed", "scale", "threads", "app_threads",
        "nnodes", "monitors", "stats", "field_version", "alloc_version",
        # mechanisms the kernel gives a tiering policy: LRU lists, PTE accessed bits,
        # the physical frames of a DRAM cache (memory mode) and of each node
        "lru", "bits", "cache", "node_frames",
        # actions and scheduling
        "free", "capacity", "node_of", "rng_for", "scaled_bytes", "migrate",
        "tier_counters", "tier_writes", "migrate_tpm", "shadow_frames",
        "migrate_range", "migrate_ranges", "exchange", "reclaim", "demote_idle", "every",
        "charge_cpu", "stall",
        # allocation policies place first touches with it
        "_place_upto",
        # the Linux backend's (absent here: AttributeError, as getattr expects)
        "real", "kernel", "note",
    ))
    TRUTH = frozenset(("timeline", "source", "workload", "true_field", "teleport",
                       "predict"))

    __slots__ = ("_guarded_backend", "_trusted", "_owner")

    def __init__(self, backend, owner=None, trusted: bool = False):
        object.__setattr__(self, "_guarded_backend", backend)
        object.__setattr__(self, "_trusted", bool(trusted))
        name = getattr(owner, "registered_name", None) or type(owner).__name__
        object.__setattr__(self, "_owner", name if owner is not None else "policy")

    def __getattr__(self, name: str):
        if name in PolicyView.__slots__ or name.startswith("__"):
            raise AttributeError(name)  # an unset slot (copy, pickle): no recursion
        if name == "machine":  # as the policy is told it (`Simulation.policy_machine`)
            b = self._guarded_backend
            return getattr(b, "policy_machine", None) or b.machine
        if name in PolicyView.FORWARDED or (self._trusted and name in PolicyView.TRUTH):
            return getattr(self._guarded_backend, name)
        if name in PolicyView.TRUTH:
            hint = {"workload": "; the application's thread count is sim.app_threads",
                    "teleport": "; move pages with sim.migrate or sim.exchange"}
            raise TrueRatesError(
                f"{self._owner} read sim.{name}: a policy sees monitor observations "
                f"only, never the workload's true rates (only a policy declaring "
                f"uses_true_rates = True, the oracle, may); observe accesses through a "
                f"monitor (tierlab.monitors){hint.get(name, '')}")
        raise AttributeError(
            f"sim.{name} is not part of the backend interface policies see; it has: "
            f"{', '.join(sorted(PolicyView.FORWARDED))}")

    def __setattr__(self, name, value):
        raise AttributeError(f"the policy's view of the simulation is read-only "
                             f"(sim.{name} = ...)")

    def __dir__(self):
        return sorted(PolicyView.FORWARDED | (PolicyView.TRUTH if self._trusted else set()))

    def __repr__(self) -> str:
        return f"<PolicyView of {self._guarded_backend!r} for {self._owner}>"
