"""Workloads: where accesses go as a function of progress (docs/model.md, "Rate field").

A workload is a fixed amount of work (``total_work`` units: updates, operations,
iterations) whose accesses follow a rate field (per page, accesses per unit of work).
It announces changes as a stream of `Change` events keyed by work done (phases, heap
growth, frees) and, optionally, by simulated time (a hot set that moves every T s).
Pages must be allocated (first touch, in the order given) before they are accessed.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from ..field import RateField
from ..registry import Registry
from ..units import PAGE, fmt_size

WORKLOADS: Registry = Registry("workload")


@dataclass
class Change:
    """What happens at a point of progress.

    at: work units done (for `Workload.changes`) or seconds (for `timed_changes`).
    field: the new rate field from then on (None: unchanged).
    alloc: int64 array (n, 2) of page ranges first touched now, in touch order.
    free: int64 array (n, 2) of page ranges released now.
    label: a phase name for reports.
    """

    at: float
    field: RateField | None = None
    alloc: np.ndarray | None = None
    free: np.ndarray | None = None
    label: str = ""


@dataclass
class Workload:
    """Base class. Subclasses set the attributes in __init__ and implement `changes`.

    Constructors take keyword parameters (the `name:key=value` spec) plus `scale`
    (multiplies every footprint size and the amount of work, keeping ratios: `--scale`)
    and `seed` (for workloads with random structure).

    Attributes:
      npages: address-space span in 4 KiB pages (allocated pages lie below it).
      footprint_pages: most pages allocated at once (checked against the machine).
      total_work: units of work in the run; `work_unit` names them.
      compute_ns: CPU time per unit of work besides memory stalls, per thread.
      threads: application threads; `mlp`: memory-level parallelism per thread
        (outstanding misses a thread overlaps; 1 for dependent pointer chasing).
      access_bytes: bytes moved per access (a cache line).
      layout_share: the share of the full-scale run's address-space layout that this
        run lays out (docs/model.md, Scale). 1 when a miniature shrinks every feature
        (hot set, stride, vertex count) by `scale`; n/k for n of a trace's k copies,
        whose features keep their recorded size. Region monitors use it.
    """

    name: str = "workload"
    npages: int = 0
    footprint_pages: int = 0
    total_work: float = 1.0
    work_unit: str = "ops"
    compute_ns: float = 10.0
    threads: int = 1
    mlp: float = 4.0
    access_bytes: int = 64
    layout_share: float = 1.0
    params: dict = field(default_factory=dict)

    def changes(self) -> Iterator[Change]:
        """Changes ordered by work done; the first, at 0, sets the initial field."""
        raise NotImplementedError

    def timed_changes(self) -> Iterator[Change]:
        """Changes ordered by simulated seconds (default: none)."""
        return iter(())

    def describe(self) -> str:
        return (f"{self.name}: {fmt_size(self.footprint_pages * PAGE)} footprint, "
                f"{self.total_work:.3g} {self.work_unit}, {self.threads} threads")


def ranges(*pairs) -> np.ndarray:
    """An (n, 2) int64 array of page ranges."""
    return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
