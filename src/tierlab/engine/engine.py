"""The simulation engine: clock, closed-loop progress, costs and metrics.

It advances simulated time, runs components at their own periods, charges costs
(access latency, bandwidth, migration copies and TLB shootdowns, hint faults, monitoring
CPU) and records metrics (docs/architecture.md, "The path of one run"). Between two
events throughput is constant, so time advances analytically from event to event
(workload changes keyed by work or time, component timers, metric samples, the end of
the work).

Policies do not get the `Simulation` itself but its `PolicyView` (keep it narrow):
`now`, `machine`, `free(node)`, `node_of(pages)`, `migrate(pages, dst)`, `reclaim`,
`every`, `charge_cpu`, `stall`, `rng_for`, `monitors`, ... (`PolicyView.FORWARDED`);
the workload's truth (`timeline`, `source`, `workload`, `true_field`) stays behind it.
"""
from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass, field

import numpy as np

from ..errors import TierlabError
from ..interface import UNALLOC, PolicyBackend, PolicyView, timer_kind
from ..field import RateField
from ..machines import Machine
from ..monitors import AccessedBits, RateSource
from ..policies.alloc import AllocPolicy
from ..policies.base import Policy
from ..units import PAGE
from ..workloads.base import Workload
from .dram_cache import DramCache
from .frames import NodeFrames
from .lru import ACTIVE, LRU
from .memory import Memory
from .shadow import ShadowCopies
from .throughput import loaded_factor, solve_throughput
from .timeline import Timeline
from .pagemap import disjoint_ranges, range_movable, relocate_sums
from ..structures import unique_in_order


MOVERS = ("linux", "nimble")
SHADOW_TICK = 0.05  #: seconds between checks for writes to shadowed pages (NOMAD)


@dataclass
class Costs:
    """Mechanism costs (the machine's own, with their sources: docs/machines.md).

    mover: "linux" (move_pages: one copy thread per migration) or "nimble" (Nimble,
    ASPLOS'19: multi-threaded parallel copy and concurrent exchange of page pairs).
    """

    batch_pages: int = 512  #: pages per migration batch (one TLB shootdown each)
    reclaim_scan_s: float = 50e-9  #: kswapd CPU per page scanned for victims
    mover: str = "linux"
    copy_threads: int = 1  #: parallel copy threads (Nimble's default is 4)

    @classmethod
    def for_mover(cls, mover: str) -> "Costs":
        if mover not in MOVERS:
            raise TierlabError(f"unknown migration mechanism {mover!r}; valid: "
                               f"{', '.join(MOVERS)}")
        return cls(mover=mover, copy_threads=4 if mover == "nimble" else 1)


@dataclass
class Stats:
    promotions: int = 0
    demotions: int = 0
    pingpong: int = 0
    migrated_bytes: int = 0
    monitor_cpu_seconds: float = 0.0
    migration_cpu_seconds: float = 0.0
    app_stall_seconds: float = 0.0
    reclaim_pages: int = 0
    by_reason: dict = field(default_factory=dict)


@dataclass
class _Landing:
    """Pages of one synchronous move still being copied (`Simulation._land`): they land
    evenly over [t0, t1]; `landed` of them have."""
    pages: np.ndarray
    cur: np.ndarray
    dst: int
    reason: str
    t0: float
    t1: float
    landed: int = 0
    #: its frames on dst are taken from the start (`Memory.held`); a daemon's move
    #: (`DaemonSteps`) takes them as its pages land, after the moves queued before it
    reserved: bool = True


@dataclass(frozen=True)
class DaemonSteps:
    """A policy driven by one user-space thread, as `tierlab exec` drives it
    (linux/daemon.py): the timers the policy and its monitors set run one after
    another, each taking `compute[kind]` seconds (`interface.timer_kind`), then its
    moves page after page at `page_seconds` each, since move_pages(2) returns once its
    pages are moved (mm/migrate.c, do_pages_move: one page list after another); the
    pages land as they are copied. A timer due while the thread is busy runs when it
    is free and is next due one period after its last due time that has passed
    (LinuxSim.run_due: no catching up). Without it (the default) a policy's timer
    costs no time and its moves land at once. The calls `tierlab exec`'s policies make
    are modelled (`migrate`, `migrate_ranges`); other moves land at once.

    `from_linux(daemon_steps, page_seconds=None)`: calibrated from a Linux run's record
    (its `daemon_steps`): each kind's mean time of a step that moved nothing, and the
    moving steps' time beyond it per page moved. A kind whose every step moved pages
    says nothing of its steps' own time: given `page_seconds` (a page's move, measured
    elsewhere), its step is its moving steps' mean time less their pages at that cost;
    without it, 0 (all of it the pages')."""
    compute: dict
    page_seconds: float

    @classmethod
    def from_linux(cls, steps: dict, page_seconds: float | None = None) -> "DaemonSteps":
        compute, extra, pages = {}, 0.0, 0
        for kind, c in steps.items():
            idle = c["steps"] - c["moving_steps"]
            if idle:
                compute[kind] = (c["seconds"] - c["moving_seconds"]) / idle
            elif page_seconds is not None and c["moving_steps"]:
                compute[kind] = max(c["moving_seconds"] - c["pages"] * page_seconds,
                                    0.0) / c["moving_steps"]
            else:
                compute[kind] = 0.0
        for kind, c in steps.items():
            extra += c["moving_seconds"] - c["moving_steps"] * compute[kind]
            pages += c["pages"]
        return cls(compute, max(extra, 0.0) / pages if pages else 0.0)


class Simulation(PolicyBackend):
    """One run of one workload on one machine under one policy and allocation policy."""

    def __init__(self, machine: Machine, workload: Workload, policy: Policy,
                 alloc: AllocPolicy, seed: int = 0, metric_points: int = 200,
                 pingpong_window: float = 10.0, progress=None, costs: Costs | None = None,
                 max_sim_seconds: float = 1e7, scale: float = 1.0):
        self.machine = machine
        self.workload = workload
        self.policy = policy
        self.alloc = alloc
        self.seed = int(seed)
        self.costs = costs or Costs()
        self.progress = progress
        self.max_sim_seconds = max_sim_seconds
        #: `--scale F`: the machine and workload come scaled; the application's threads
        #: count F times too, so per-page rates match the full-scale run. Policies scale
        #: their byte-denominated parameters (scan sizes, quotas, MB/s limits) with
        #: `scaled_bytes`.
        self.scale = float(scale)
        self.threads = workload.threads * self.scale
        #: the application's own thread count (not x scale), as /proc shows it
        self.app_threads = workload.threads
        k = machine.nnodes
        if workload.footprint_pages > machine.capacity_pages:
            raise TierlabError(
                f"workload {workload.name} needs {workload.footprint_pages * PAGE / 2**30:.3g} GiB"
                f" but machine {machine.name} has {machine.capacity_pages * PAGE / 2**30:.3g} GiB;"
                f" use a smaller workload or a larger machine (or --scale both)")
        self.mem = Memory(machine, workload.npages, *machine.watermarks)
        #: each node's position on the demotion path (0 = top)
        self._rank = np.argsort(np.asarray(machine.demotion))
        self.stats = Stats()
        self.now = 0.0
        self.work = 0.0
        self.timeline = Timeline(RateField.empty(workload.npages))
        # per-node accesses per unit of work under the current field and placement
        self._reads = np.zeros(k)
        self._writes = np.zeros(k)
        self._lat_r = [machine.read_latency_ns(i) for i in range(k)]
        self._lat_w = [machine.write_latency_ns(i) for i in range(k)]
        self._bw_r = [t.read_bw for t in machine.tiers]
        self._bw_w = [t.write_bw for t in machine.tiers]
        self._copy = np.zeros(k)  # bytes copied recently per node, decaying with tau 1 s
        #: a co-runner's share of each node's bandwidth (machine.antagonist)
        self._antagonist = np.array([machine.antagonist.get(i, 0.0) for i in range(k)])
        self._stall_pending = 0.0
        #: synchronous moves landing page by page over the stall of the threads that
        #: copy them (`migrate(..., land_over_stall=True)`, `_land`), oldest first
        self._landing: list[_Landing] = []
        self._set_up = False  # the first change (the set-up) applied
        self._timers: list = []
        self._seq = 0
        #: the policy's thread when it has step times (`DaemonSteps`; None: free)
        self.daemon: DaemonSteps | None = None
        self._attaching = False  # the policy attaches: the timers set are the daemon's
        self._step: list | None = None  # a daemon step runs: [its clock]
        self._busy_until = 0.0
        self._epoch = np.zeros(workload.npages, dtype=np.uint8)  # demotion stamps
        self._pp_window = pingpong_window
        self._spare_cores = machine.cores_per_socket - self.threads
        self.field_version = 0
        self.alloc_version = 0
        # what the hardware exposes, shared by every consumer as in Linux (kswapd's
        # CLOCK and a DAMON-like monitor clear the same PTE accessed bits)
        self.source = RateSource(self.timeline, node_of=self.node_of)
        self.bits = AccessedBits(self.source, self.rng_for("pte-accessed-bits"),
                                 npages=workload.npages)
        self.monitors: dict = {}
        self.lru = LRU(self)
        #: memory mode: the frames under the placement and the DRAM cache's costs
        self.cache = None
        if machine.dram_cache is not None:
            self.cache = DramCache(self, machine.dram_cache,
                                   getattr(policy, "frame_allocator", "random"))
        elif getattr(policy, "needs_dram_cache", False):
            raise TierlabError(f"policy {getattr(policy, 'registered_name', policy)} needs "
                               f"a memory-mode machine (a DRAM cache), e.g. "
                               f"optane-memory-mode; {machine.name} has none")
        # metrics: cumulative accesses per node (memory mode: per DramCache.DEVICES)
        self._acc = np.zeros(2 if self.cache else k)
        #: utilisation x seconds per node while the application ran (mean_util)
        self._util_s = np.zeros(len(self._acc))
        self._util = [0.0] * len(self._acc)
        #: uncore counters per node (Colloid's CHA TOR events): demand reads inserted
        #: and their occupancy integral (reads x loaded latency, ns); `tier_counters`
        self._inserts = np.zeros(k)
        self._occupancy = np.zeros(k)
        #: and the memory controllers' write count per node; `tier_writes`
        self._wr_count = np.zeros(k)
        self._series = {"t": [], "work": [], "acc": []}
        self._metric_points = metric_points
        self._x = 0.0
        self._x_dirty = True
        self.wall_seconds = 0.0
        #: NOMAD's shadow copies and transactional migration (`engine/shadow.py`),
        #: created by the first `migrate_tpm`
        self.shadows: ShadowCopies | None = None
        #: the machine as the policy is told it (the view's `machine`): this one,
        #: unless a mirror of a real run gives what that backend's topology said
        #: (scripts/sim_vs_kernel.py: the guest's HMAT, which TCG does not keep)
        self.policy_machine = machine
        #: what the policy and the allocation policy are handed (`PolicyView`); only a
        #: policy declaring `uses_true_rates` (the oracle) sees the truth through it
        self.policy_view = PolicyView(self, policy,
                                      trusted=getattr(policy, "uses_true_rates", False))
        self.alloc_view = PolicyView(self, alloc)

    # ------------------------------------------------------------------ backend API
    @property
    def true_field(self) -> RateField:
        """The workload's true rates: for the oracle only (`uses_true_rates`)."""
        if not getattr(self.policy, "uses_true_rates", False):
            raise RuntimeError("policies may not read the true rates (oracle only)")
        return self.timeline.field

    def every(self, period: float, fn, offset: float | None = None,
              daemon: bool | None = None) -> None:
        """Call fn(now) every `period` simulated seconds (first after `offset`).
        `daemon`: it is the policy's thread's work (`DaemonSteps`); by default, a timer
        set while the policy attaches or from one of its steps is."""
        if period <= 0:
            raise ValueError("period must be > 0")
        if daemon is None:
            daemon = self._attaching or self._step is not None
        t = self.now + (period if offset is None else offset)
        self._seq += 1
        heapq.heappush(self._timers, (t, self._seq, period, fn, bool(daemon), t))

    def stall(self, thread_seconds: float) -> None:
        """The application loses `thread_seconds` of one thread's time (a fault handled
        in its context, a synchronous copy); all threads are alike, so the run is
        delayed by thread_seconds / threads (`sim.threads`, the effective count)."""
        s = thread_seconds / self.threads
        self._stall_pending += s
        self.stats.app_stall_seconds += s

    def charge_cpu(self, seconds: float, kind: str = "monitor",
                   steal: float | None = None) -> None:
        """CPU used by a background thread (kdamond, kswapd, a PEBS or policy thread).
        It steals from the application only when no core is spare: `steal` thread-
        seconds of the miniature's threads (default `seconds`; a background mover's
        busy time, counted as at full scale, steals F times it, `_mover_cpu`)."""
        if kind == "monitor":
            self.stats.monitor_cpu_seconds += seconds
        else:
            self.stats.migration_cpu_seconds += seconds
        if self._spare_cores <= 0:
            self.stall(seconds if steal is None else steal)

    def migrate(self, pages, dst: int, sync: bool = False, reason: str = "",
                land_over_stall: bool = False) -> int:
        """Move pages to node `dst` as move_pages(2) would; returns pages moved.

        Pages that are unallocated or already on `dst` are skipped; the move stops at
        the node's min watermark (allocation of the target page fails below it). Costs
        (`_charge_copy`): the copy is CPU time of the mover, or an application stall
        when `sync` (migration in the faulting thread's context); every batch of
        `batch_pages` costs one TLB shootdown, which stalls all application threads;
        the copy's traffic loads both nodes' bandwidth.

        `land_over_stall` (with `sync`): the faulting threads copy the pages one after
        another, as hint faults promote (do_numa_page -> migrate_misplaced_folio, one
        folio per fault, mm/memory.c), so each page lands when its copy is done, evenly
        over the stall the copies add, not all at the call (`_land`). Until then it
        stays on its node, its frame on `dst` is taken (`Memory.held`) and no other
        move takes it (the kernel's isolated folio).
        """
        pages, cur = self._movable(pages, dst)
        return self._migrate_movable(pages, cur, dst, sync, reason,
                                     land=sync and land_over_stall)

    def migrate_ranges(self, starts, ends, dst: int, sync: bool = False,
                       reason: str = "") -> int:
        """`migrate(range_pages(starts, ends), ...)`; for disjoint regions (IDT's) the
        movable pages are found in one pass over the regions (`pagemap.range_movable`)
        instead of listing every page, deduplicating and filtering the list."""
        starts = np.asarray(starts, dtype=np.int64)
        ends = np.asarray(ends, dtype=np.int64)
        if self._landing or self._step is not None or not disjoint_ranges(starts, ends):
            return super().migrate_ranges(starts, ends, dst, sync, reason)
        if self.shadows is not None:
            pages, cur = range_movable(self.mem.node, starts, ends, dst)
            return self._migrate_movable(pages, cur, dst, sync, reason)
        room = int(self.mem.free[dst] - self.mem.wmark_min[dst])
        if room <= 0:
            return 0
        n, sums, counts, npro, pingpong = self.mem.move_ranges(
            starts, ends, dst, room, self.lru.flags, ACTIVE, self.lru.nr_active,
            self.timeline.field, self._rank, self._epoch, self._stamp())
        if n:
            self._account(n, sums, counts, npro, pingpong, reason, True)
            self._charge_copy(n, sync, copies=1)
        return n

    def _migrate_movable(self, pages, cur, dst: int, sync: bool, reason: str,
                         land: bool = False) -> int:
        """`migrate` after `_movable`: pages (distinct, allocated, not on dst) on cur."""
        remapped = 0
        if self.shadows is not None and len(pages):
            remapped, pages, cur = self._shadow_moves(pages, cur, dst, reason)
        room = int(self.mem.free[dst] - self.mem.wmark_min[dst]) + self._pending_room(dst)
        if self.shadows is not None and len(pages) > room:
            self.shadows.reclaim(dst, len(pages) - room)
            room = int(self.mem.free[dst] - self.mem.wmark_min[dst])
        if room <= 0 or len(pages) == 0:
            return remapped
        pages, cur = pages[:room], cur[:room]
        if land and not self.policy.free_migrations:
            self._charge_copy(len(pages), True, copies=1)
            self._queue_landing(pages, cur, dst, reason)
            return remapped + len(pages)
        if self._step is not None and not sync and not self.policy.free_migrations:
            self._charge_copy(len(pages), False, copies=1)
            t0 = self._step[0]
            self._step[0] = t0 + len(pages) * self.daemon.page_seconds
            self._queue_landing(pages, cur, dst, reason, (t0, self._step[0]))
            return remapped + len(pages)
        self._relocate(pages, cur, np.full(len(pages), dst, dtype=np.uint8), reason)
        self._charge_copy(len(pages), sync, copies=1)
        return remapped + len(pages)

    def _queue_landing(self, pages, cur, dst: int, reason: str, daemon_step=None) -> None:
        """Pages whose copies were just charged as a stall land evenly from the end of
        the batches ahead of them to the end of the stall now pending; their frames on
        `dst` are held meanwhile. A daemon's move (`DaemonSteps`) lands over the
        `daemon_step` (t0, t1) it takes, its frames taken as it lands."""
        if daemon_step is not None:
            self._landing.append(_Landing(pages, cur, int(dst), reason, *daemon_step,
                                          reserved=False))
            return
        t0 = max([self.now] + [b.t1 for b in self._landing[-1:]])
        t1 = max(self.now + self._stall_pending, t0)
        self.mem.held[dst] += len(pages)
        self._landing.append(_Landing(pages, cur, int(dst), reason, t0, t1))

    def _pending_room(self, dst: int) -> int:
        """Frames on `dst` that the daemon's moves queued so far free (pages leaving it)
        less those they take (pages arriving, not held), once they have landed: a
        daemon step's later move finds the room its earlier ones made
        (`DaemonSteps`)."""
        if self._step is None:
            return 0
        n = 0
        for b in self._landing:
            n += int(np.count_nonzero(b.cur[b.landed:] == dst))
            if b.dst == dst and not b.reserved:
                n -= len(b.pages) - b.landed
        return n

    def _land(self, now: float) -> None:
        """Relocate the queued synchronous moves whose copies are done by `now`. A page
        freed or moved meanwhile (only a free or a teleport can) is dropped, and its
        held frame given back."""
        while self._landing:
            b = self._landing[0]
            n = len(b.pages)
            due = n if now >= b.t1 else 0 if now <= b.t0 else \
                int(n * (now - b.t0) / (b.t1 - b.t0))
            if due > b.landed:
                p, c = b.pages[b.landed:due], b.cur[b.landed:due]
                b.landed = due
                if b.reserved:
                    self.mem.held[b.dst] -= len(p)
                ok = self.mem.node[p] == c
                if not b.reserved:  # a page without a free frame stays (-ENOMEM)
                    room = int(self.mem.free[b.dst] - self.mem.wmark_min[b.dst])
                    ok &= np.cumsum(ok) <= max(room, 0)
                if ok.any():
                    self._relocate(p[ok], c[ok], np.full(int(ok.sum()), b.dst, np.uint8),
                                   b.reason)
            if b.landed < n:
                return
            self._landing.pop(0)

    def _in_flight(self, pages) -> np.ndarray:
        """Which of `pages` are queued to land (`_land`) and not landed yet."""
        if not self._landing:
            return np.zeros(len(pages), dtype=bool)
        return np.isin(pages, np.concatenate([b.pages[b.landed:] for b in self._landing]))

    def _movable(self, pages, dst: int):
        """The pages of a move request that can move (allocated, not on `dst`, each
        once, in the caller's order) and their nodes."""
        pages = unique_in_order(np.asarray(pages, dtype=np.int64))
        cur = self.mem.node[pages]
        keep = (cur != UNALLOC) & (cur != dst) & ~self._in_flight(pages)
        return pages[keep], cur[keep]

    def _shadow_moves(self, pages, cur, dst: int, reason: str):
        """Pages with a shadow (NOMAD): a demotion remaps them onto their shadow, with
        no copy (`demotion_unmap_and_move`: the shadow is the destination, whatever
        node was asked); any other move frees the shadow first. Returns (pages
        remapped, the pages and nodes left to copy)."""
        sh = self.shadows.take(pages)
        has = sh != UNALLOC
        if not has.any():
            return 0, pages, cur
        down = has & (self._rank[dst] > self._rank[cur])
        rp, rc, rs = pages[down], cur[down], sh[down]
        n = len(rp)
        if n:
            self.shadows.release(rs, "remap")
            self._relocate(rp, rc, rs, reason or "shadow-remap", copy=False)
            if not self.policy.free_migrations:
                self._shootdowns(n)
        self.shadows.release(sh[has & ~down], "other")
        return n, pages[~down], cur[~down]

    def migrate_tpm(self, pages, dst: int, retries: int = 10, reason: str = "") -> tuple:
        """Promote pages by NOMAD's transactional migration (`engine/shadow.py`): each
        page is copied while it stays mapped and committed only if not written during
        the copy, up to `retries` attempts; a committed page keeps its old frame as a
        shadow. Asynchronous: the copies are the mover's CPU, never an application
        stall; a batch's remap costs one TLB shootdown. Target pages come only from
        free memory above the min watermark (alloc_promote_page never reclaims).
        Returns (pages moved, pages whose every attempt aborted)."""
        pages, cur = self._movable(pages, dst)
        room = max(int(self.mem.free[dst] - self.mem.wmark_min[dst]), 0)
        pages, cur = pages[:room], cur[:room]
        if len(pages) == 0:
            return 0, 0
        if self.shadows is None:
            self.shadows = ShadowCopies(self)
            self.every(SHADOW_TICK, self._shadow_tick, daemon=False)
        self.shadows.drop(pages)
        copy_s = PAGE / (self.machine.migrate_bw / self.scale)
        ok, tries = self.shadows.tpm_outcome(pages, copy_s, int(retries))
        wasted = int(tries.sum()) - int(ok.sum())
        if wasted:  # aborted copies: traffic and mover CPU, nothing moved
            k = self.machine.nnodes
            w = (tries - ok).astype(float) * PAGE
            self._copy += np.bincount(cur, w, 256)[:k] + wasted * PAGE * np.eye(k)[dst]
            self.stats.migrated_bytes += wasted * PAGE
            if not self.policy.free_migrations:
                self._mover_cpu(wasted)
            self._x_dirty = True
        pages, cur = pages[ok], cur[ok]
        if len(pages):
            self._relocate(pages, cur, np.full(len(pages), dst, dtype=np.uint8),
                           reason or "tpm")
            self._charge_copy(len(pages), False, copies=1)
            self.shadows.add(pages, cur)
        return len(pages), int((~ok).sum())

    def shadow_frames(self) -> np.ndarray:
        """Shadow frames (NOMAD) held on each node (`mem.held`, kept at every shadow
        created or freed; `ShadowCopies.per_node` recounts them)."""
        return self.mem.held.copy()

    def _shadow_tick(self, now: float) -> None:
        """Writes to shadowed pages since the last tick: each takes a write-protect
        fault (charged as one hint fault's handling: both are minor faults that change
        one PTE) that frees the shadow; then nodes short of free memory free shadows."""
        n = self.shadows.expire_writes()
        if n:
            self.stall(n * self.machine.hint_fault_s)
        mem = self.mem
        for node in range(self.machine.nnodes):
            if mem.free[node] < mem.wmark_low[node]:
                self.shadows.reclaim(node, int(mem.wmark_high[node] - mem.free[node]))

    def exchange(self, a, b, sync: bool = False, reason: str = "exchange") -> int:
        """Swap the places of pages a[i] and b[i] (Nimble's exchange migration, also
        AutoTiering's): no free page is needed on either node. With the Nimble mover
        both copies run concurrently; with the Linux mover they run one after the
        other (as a demotion followed by a promotion would). Returns pairs swapped."""
        a = np.asarray(a, dtype=np.int64)
        b = np.asarray(b, dtype=np.int64)
        n = min(len(a), len(b))
        a, b = a[:n], b[:n]
        na, nb = self.mem.node[a], self.mem.node[b]
        ok = (na != UNALLOC) & (nb != UNALLOC) & (na != nb) & ~self._in_flight(a) \
            & ~self._in_flight(b)
        a, b, na, nb = a[ok], b[ok], na[ok], nb[ok]
        both = np.concatenate((a, b))
        if len(unique_in_order(both)) != len(both):
            raise ValueError("exchange: a page is listed twice")
        if len(a) == 0:
            return 0
        if self.shadows is not None:
            self.shadows.drop(both)
        self._relocate(both, np.concatenate((na, nb)), np.concatenate((nb, na)), reason)
        self._charge_copy(len(a), sync, copies=2)
        return len(a)

    def teleport(self, pages, dsts, reason: str = "oracle") -> int:
        """Move pages[i] to dsts[i] with no cost charged (the oracle's placement). The
        moves are counted as promotions/demotions but not as migrated bytes."""
        pages = np.asarray(pages, dtype=np.int64)
        dsts = np.asarray(dsts, dtype=np.uint8)
        if len(unique_in_order(pages)) != len(pages):
            raise ValueError("teleport: a page is listed twice")
        cur = self.mem.node[pages]
        keep = (cur != UNALLOC) & (cur != dsts) & ~self._in_flight(pages)
        pages, dsts, cur = pages[keep], dsts[keep], cur[keep]
        k = self.machine.nnodes
        used = self.mem.used - np.bincount(cur, minlength=256)[:k] \
            + np.bincount(dsts, minlength=256)[:k]
        if np.any(used > self.mem.capacity):
            raise RuntimeError("teleport over capacity")
        if self.shadows is not None:
            self.shadows.drop(pages)
        self._relocate(pages, cur, dsts, reason, copy=False)
        return len(pages)

    def reclaim(self, node: int, n: int, direct: bool = False) -> int:
        """Demote up to n pages from `node` down the demotion path (kswapd, or direct
        reclaim in the allocating thread when `direct`). Victims: the policy's choice,
        else the inactive tail of the node's LRU (`engine/lru.py`). Nothing when the
        machine's demotion_enabled is off (can_demote). Idle frames of others
        (`Memory.idle`) go before any victim."""
        lower = self.machine.lower(node) if self.machine.demotion_enabled else None
        moved = self.demote_idle(node, lower, n, direct) if lower is not None else 0
        while lower is not None and moved < n:
            want = n - moved
            victims = self.policy.select_victims(node, want)
            if victims is None:
                victims = self.lru.reclaim_victims(node, want)
            victims = np.asarray(victims, dtype=np.int64)[:want]
            if len(victims) == 0:
                break
            target = lower
            while target is not None:
                need = len(victims) - (self.mem.free[target] - self.mem.wmark_min[target])
                if need > 0:
                    self.reclaim(target, int(need) + int(self.mem.wmark_high[target]
                                                         - self.mem.wmark_min[target]))
                if self.mem.free[target] - self.mem.wmark_min[target] > 0:
                    break
                target = self.machine.lower(target)
            if target is None:
                break
            got = self.migrate(victims, target, sync=direct, reason="reclaim")
            if got == 0:
                break
            moved += got
            self.stats.reclaim_pages += got
        return moved

    def node_frames(self, order: str = "boot") -> NodeFrames:
        """The frame of its node backing each page (`frames.NodeFrames`), built at the
        first call with that frame order and shared by every later caller (a
        physical-address DAMON's contexts see one physical layout); `sync` it before
        reading."""
        got = getattr(self, "_node_frames", None)
        if got is None:
            got = self._node_frames = NodeFrames(self.mem, order,
                                                 self.rng_for("physical-frames"))
        elif got.order != order:
            raise TierlabError(f"physical frames already laid out in {got.order!r} "
                               f"order; {order!r} asked")
        return got

    def demote_idle(self, node: int, lower: int, n: int, sync: bool = False,
                    reason: str = "reclaim") -> int:
        """Demote up to n of `node`'s idle frames (`Memory.idle`: never accessed, so the
        oldest on every LRU, the multi-gen LRU's oldest generation and the inactive
        tail alike, and cold to a physical-address DAMON) to `lower`, as far as it has
        room above its min watermark: a copy like any demotion's, no rate moves."""
        mem = self.mem
        k = int(min(n, mem.idle[node], max(mem.free[lower] - mem.wmark_min[lower], 0)))
        if k <= 0:
            return 0
        for v, d in ((node, -k), (lower, k)):
            mem.idle[v] += d
            mem.held[v] += d
        counts = np.zeros((2, self.machine.nnodes), np.int64)
        counts[0, node] = counts[1, lower] = k
        self._account(k, np.zeros((4, self.machine.nnodes)), counts, 0, 0, reason, True)
        if reason == "reclaim":
            self.stats.reclaim_pages += k
        self._charge_copy(k, sync, copies=1)
        return k

    # ------------------------------------------------------------------ internals
    def _relocate(self, pages, cur, dsts, reason, copy=True):
        """Bookkeeping of a move of pages[i] from cur[i] to dsts[i]: placement, LRU
        counts, per-node rates, promotion/demotion/ping-pong counts, copy traffic."""
        self.mem.move(pages, cur, dsts)
        self.lru.on_moves(pages, cur, dsts)
        self.policy.on_moves(pages, cur, dsts)
        sums, counts, npro, pingpong = relocate_sums(
            pages, cur, dsts, self.timeline.field, self._rank, self._epoch, self._stamp())
        self._account(len(pages), sums, counts, npro, pingpong, reason, copy)

    def _account(self, n, sums, counts, npro, pingpong, reason, copy) -> None:
        """A move's per-node rates, promotion/demotion/ping-pong counts and traffic from
        `pagemap.relocate_sums` (or `relocate_ranges`)."""
        k = self.machine.nnodes
        self._reads += sums[0, :k] - sums[1, :k]
        self._writes += sums[2, :k] - sums[3, :k]
        self.stats.promotions += npro
        self.stats.demotions += n - npro
        self.stats.pingpong += pingpong
        if copy:
            self.stats.migrated_bytes += n * PAGE
            self._copy += (counts[0, :k] + counts[1, :k]) * float(PAGE)
        key = reason or "policy"
        self.stats.by_reason[key] = self.stats.by_reason.get(key, 0) + n
        self._x_dirty = True

    def _charge_copy(self, n: int, sync: bool, copies: int) -> None:
        """Costs of copying n pages `copies` times (2 for an exchange). The Linux mover
        copies with one thread; Nimble's with `copy_threads` in parallel and runs an
        exchange's two copies concurrently. CPU time is the same work either way.

        Under `--scale F` (docs/model.md) a background mover copies F times fewer pages
        at the scaled `migrate_bw` (F times the full-scale one), so it is busy as long
        as at full scale (`_mover_cpu`). A synchronous copy runs in the faulting
        threads, which are F times fewer too: it copies at the unscaled per-thread
        bandwidth. TLB shootdowns count batches of `batch_pages * F` pages, so their
        total stall is scale-free as well."""
        if self.policy.free_migrations:
            return
        c = self.costs
        if not sync:
            self._mover_cpu(copies * n)
            self._shootdowns(n)
            return
        cpu = copies * n * PAGE / (self.machine.migrate_bw / self.scale)
        wall = cpu / c.copy_threads
        if c.mover == "nimble" and copies == 2:
            wall /= 2
        self.stall(wall)
        if cpu > wall:
            self.charge_cpu(cpu - wall, kind="migration")
        self._shootdowns(n)

    def _mover_cpu(self, pages: int) -> None:
        """A background mover's CPU for copying `pages` pages: busy pages x PAGE /
        migrate_bw, as long as at full scale (`migration_cpu_seconds` is that busy
        time at any scale). When no core is spare it steals F times that from the
        miniature's F-times-fewer threads, the full-scale delay; stealing the busy time
        itself delayed a 1/F miniature 1/F times too long (MEMTIS on redis at `--scale
        1/128`: 325 s of stall against 10.8 s, throughput 0.81x static's against 0.93x)."""
        busy = pages * PAGE / self.machine.migrate_bw
        self.charge_cpu(busy, kind="migration", steal=busy * self.scale)

    def _shootdowns(self, n: int) -> None:
        """One TLB shootdown per batch of `batch_pages * scale` pages moved (scale-free
        in total): it stalls every application thread."""
        batches = n / (self.costs.batch_pages * self.scale)
        self.stall(batches * self.machine.tlb_shootdown_s * self.threads)

    def _stamp(self) -> int:
        """Demotion epoch stamp (1..255, 0 = never): a page promoted within one window
        of its demotion counts as ping-pong."""
        return int(self.now // self._pp_window) % 255 + 1

    def _place_upto(self, pos: int, end: int, node: int, room) -> int:
        """Place pages from pos toward end on node, at most `room`; returns new pos."""
        take = int(min(end - pos, max(int(room), 0)))
        if take <= 0:
            return pos
        self.mem.place_range(pos, pos + take, node)
        self.lru.on_alloc(pos, pos + take)
        r, w = self.timeline.field.range_sum(np.array([pos]), np.array([pos + take]))
        self._reads[node] += r[0]
        self._writes[node] += w[0]
        if self.cache is not None:
            self.cache.on_alloc(pos, pos + take)
        self.policy.on_alloc(pos, pos + take, node)
        self._x_dirty = True
        return pos + take

    def _apply_change(self, ch) -> None:
        if ch.free is not None:
            for s, e in np.asarray(ch.free).reshape(-1, 2):
                self.lru.on_free(int(s), int(e), self.mem.node[int(s):int(e)])
                if self.shadows is not None:
                    self.shadows.drop_range(int(s), int(e))
                self.mem.release_range(int(s), int(e))
                if self.cache is not None:
                    self.cache.on_free(int(s), int(e))
                self.policy.on_free(int(s), int(e))
            self.alloc_version += 1
        if ch.field is not None:
            self.timeline.set_field(self.now, ch.field)
            self.field_version += 1
            if self.shadows is not None:
                self.shadows.redraw()
            if self.cache is not None:
                self.cache.invalidate()
        if ch.alloc is not None:
            for s, e in np.asarray(ch.alloc).reshape(-1, 2):
                s, e = int(s), int(e)
                if self.shadows is not None:  # shadows go first under pressure
                    short = self.mem.wmark_high + (e - s) - self.mem.free
                    for node in np.flatnonzero(short > 0):
                        self.shadows.reclaim(int(node), int(short[node]))
                if np.any(self.mem.node[s:e] != UNALLOC):
                    raise RuntimeError(f"workload allocated pages [{s},{e}) twice")
                self.alloc.place(self.alloc_view, s, e)
            self.alloc_version += 1
            if self._set_up and self.machine.first_touch_s:
                # each new page faults once in a touching thread (Machine.first_touch_s)
                n = int(np.diff(np.asarray(ch.alloc).reshape(-1, 2), axis=1).sum())
                self.stall(n * self.machine.first_touch_s)
        if ch.field is not None or ch.free is not None:
            f = self.timeline.field
            self._reads, self._writes = f.totals(self.mem.range_counts(f.starts, f.ends))
        self._x_dirty = True
        self._kswapd_all()
        hook = getattr(self.policy, "on_change", None)
        if hook is not None:
            hook()

    def _kswapd_all(self, now: float | None = None) -> None:
        """kswapd: on each node below its low watermark that has a lower node, demote
        until free reaches the high watermark."""
        if not getattr(self.policy, "kswapd_demotion", True):
            return
        mem = self.mem
        for node in self.machine.demotion:
            if mem.free[node] < mem.wmark_low[node] and self.machine.lower(node) is not None:
                self.reclaim(node, int(mem.wmark_high[node] - mem.free[node]))

    def throughput(self) -> float:
        if self._x_dirty:
            w = self.workload
            if self.cache is not None:  # memory mode: (DRAM cache, slow memory)
                bg = (self._copy / 1.0) / np.asarray(self._bw_r)  # tau = 1 s
                d = self.cache.devices(self._lat_r[0], self._lat_w[0], self._bw_r[0],
                                       self._bw_w[0])
                dev = (d["reads"], d["writes"], d["lat_r"], d["lat_w"], d["bw_r"],
                       d["bw_w"], [0.0, float(bg.sum())])
                extra = d["extra_w"]
                self._x, self._util, _ = solve_throughput(
                    *dev, w.compute_ns, w.mlp, self.threads, w.access_bytes, extra)
            else:
                self._x, self._util = self.predict(self._reads, self._writes)
            self._x_dirty = False
        return self._x

    def tier_counters(self):
        """Cumulative per-node uncore counters, as Colloid reads CHA TOR inserts and
        occupancy (Little's law: occupancy / inserts = loaded read latency, ns): what
        the hardware shows, not the workload's rates."""
        return self._inserts.copy(), self._occupancy.copy()

    def tier_writes(self):
        """Cumulative line writes per node, as the memory controllers count them
        (Intel IMC CAS_COUNT.WR; on Optane the PMM write-queue inserts): the
        process's own here, what per-node counters show with nothing else running."""
        return self._wr_count.copy()

    def predict(self, reads, writes):
        """(throughput, per-node utilisation) the closed loop would reach with `reads`
        and `writes` (accesses per unit of work on each node) under this run's devices
        and background traffic (migration copies, the machine's antagonist): the
        oracle's what-if (TRUTH: it needs the workload's
        compute time)."""
        w = self.workload
        bg = (self._copy / 1.0) / np.asarray(self._bw_r) + self._antagonist  # tau = 1 s
        x, util, _ = solve_throughput(list(reads), list(writes), self._lat_r, self._lat_w,
                                      self._bw_r, self._bw_w, bg.tolist(), w.compute_ns,
                                      w.mlp, self.threads, w.access_bytes)
        return x, util

    def _advance(self, t: float, x: float) -> None:
        dt = t - self.now
        if dt <= 0:
            return
        dw = x * dt
        if self.cache is not None:
            self._acc += self.cache.advance(dw)
        else:
            self._acc += (self._reads + self._writes) * dw
        if x > 0 and len(self._util) == len(self._util_s):
            u = np.minimum(np.asarray(self._util), 0.999999)
            self._util_s += u * dt
            if self.cache is None:
                reads = self._reads * dw
                self._inserts += reads
                self._wr_count += self._writes * dw
                self._occupancy += reads * np.asarray(self._lat_r) * loaded_factor(u)
        self.work += dw
        self.now = t
        self.timeline.advance(t, self.work)
        if self._copy.any():
            self._copy *= math.exp(-dt)
            self._copy[self._copy < 1.0] = 0.0
            self._x_dirty = True

    def _record(self) -> None:
        s = self._series
        s["t"].append(self.now)
        s["work"].append(self.work)
        s["acc"].append(self._acc.copy())

    # ------------------------------------------------------------------ run
    def run(self) -> dict:
        t_wall = time.perf_counter()
        w = self.workload
        changes = iter(w.changes())
        timed = iter(w.timed_changes())
        first = next(changes, None)
        if first is None or first.at != 0:
            raise RuntimeError(f"workload {w.name} must start with a change at work 0")
        self._attaching = True
        try:
            self.policy.attach(self.policy_view)
        finally:
            self._attaching = False
        self._apply_change(first)
        self._set_up = True  # later first touches cost Machine.first_touch_s
        nxt = next(changes, None)
        nxt_t = next(timed, None)
        x0 = self.throughput()
        est = w.total_work / x0 if x0 > 0 else 1.0
        if est > self.max_sim_seconds:
            raise TierlabError(f"{w.name} would run about {est:.3g} simulated seconds at its "
                               f"starting throughput ({x0:.3g} {w.work_unit}/s), more than "
                               f"{self.max_sim_seconds:g}: check the machine's latencies and "
                               "bandwidths and the workload's work")
        metric_dt = max(est / self._metric_points, 1e-3)
        next_metric = 0.0
        self._record()
        next_metric = metric_dt
        self.every(1.0, self._kswapd_all, daemon=False)
        total = w.total_work
        while self.work < total * (1 - 1e-12):
            if self.now > self.max_sim_seconds:
                raise TierlabError(f"run exceeded {self.max_sim_seconds} simulated seconds")
            if self._landing:
                self._land(self.now)
            if self._stall_pending > 0:
                t_stop = min(self._timers[0][0] if self._timers else math.inf,
                             nxt_t.at if nxt_t is not None else math.inf, next_metric)
                s = min(self._stall_pending, max(t_stop - self.now, 0.0))
                if s > 0:
                    self._advance(self.now + s, 0.0)
                    self._stall_pending -= s
                    if self._stall_pending < 1e-15:
                        self._stall_pending = 0.0
                    continue
                # a timer is due: run it first; the stall resumes after
            x = self.throughput()
            if x <= 0:
                raise RuntimeError("throughput is zero: nothing can progress")
            cands = [self.now + (total - self.work) / x, next_metric]
            if nxt is not None:
                cands.append(self.now + max(nxt.at - self.work, 0.0) / x)
            if nxt_t is not None:
                cands.append(max(nxt_t.at, self.now))
            if self._timers:
                cands.append(max(self._timers[0][0], self.now))
            if self._landing and not self._landing[0].reserved:  # a daemon's pages land
                b = self._landing[0]
                cands.append(max(min(b.t1, max(self.now, b.t0) + (b.t1 - b.t0) / 16),
                                 self.now))
            t_next = min(cands)
            if self._stall_pending <= 0:
                self._advance(t_next, x)
            else:
                t_next = self.now
            eps = 1e-12 * max(1.0, self.now)
            while nxt is not None and nxt.at <= self.work * (1 + 1e-12) + 1e-9:
                self._apply_change(nxt)
                nxt = next(changes, None)
            while nxt_t is not None and nxt_t.at <= self.now + eps:
                self._apply_change(nxt_t)
                nxt_t = next(timed, None)
            if self._landing and self.daemon is not None:  # its timers see what landed
                self._land(self.now)
            while self._timers and self._timers[0][0] <= self.now + eps:
                self._run_timer(*heapq.heappop(self._timers), eps)
            if self.now >= next_metric - eps:
                self._record()
                next_metric = self.now + metric_dt
                if self.progress is not None:
                    self.progress(self.work / total)
        self._land(math.inf)  # a stall cut short by the end of the work
        self._record()
        if self.progress is not None:
            self.progress(1.0)
        self.wall_seconds = time.perf_counter() - t_wall
        return self.record()

    def _run_timer(self, t, seq, period, fn, daemon, phase, eps) -> None:
        """Run a due timer and set it again. The policy's thread with step times
        (`DaemonSteps`): a timer due while it is busy waits; one that ran is next due
        as LinuxSim.run_due sets it."""
        if not daemon or self.daemon is None:
            fn(self.now)
            self._seq += 1
            heapq.heappush(self._timers, (self.now + period, self._seq, period, fn,
                                          daemon, self.now + period))
            return
        if self.now < self._busy_until - eps:
            heapq.heappush(self._timers, (self._busy_until, seq, period, fn, daemon, phase))
            return
        self._step = [self.now + self.daemon.compute.get(timer_kind(fn), 0.0)]
        try:
            fn(self.now)
        finally:
            self._busy_until, self._step = self._step[0], None
        nxt = phase + period * max(1, int((self._busy_until - phase) // period) + 1)
        self._seq += 1
        heapq.heappush(self._timers, (nxt, self._seq, period, fn, daemon, nxt))

    def record(self) -> dict:
        """The run record (reports/results.py; its fields: README.md, "What is there")."""
        from ..reports.results import make_record
        return make_record(self)
