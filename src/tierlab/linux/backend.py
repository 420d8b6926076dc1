"""The real backend: the simulation's policy interface on a live Linux process.

A policy written for the simulator (`engine/engine.py`: `now`, `machine`, `mem`,
`node_of`, `migrate`, `every`, `charge_cpu`, `stall`, `rng_for`, `scaled_bytes`) runs
here unchanged against a real process: pages are the target's anonymous writable
memory, laid out as a dense page index space (`AddressSpace`), placement is read with
move_pages(2) in query mode, migration is move_pages(2), and the DAMON monitor reads
the kernel's own DAMON (sysfs, vaddr) instead of sampling a rate field.

The kernel is reached through `KernelOps` so that the whole backend can also run on
a fake process in tests (tests/linux/test_backend.py).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from ..interface import UNALLOC, PolicyBackend, timer_kind, watermark_pages
from ..structures import unique_in_order
from ..errors import TierlabError
from ..field import range_node_counts
from ..units import PAGE


class KernelOps:
    """What the backend needs from the kernel, for one target process.

    `vmas()` -> [(start, end)] byte ranges of the anonymous writable mappings;
    `query(va)` -> node id per page (negative errno where not present);
    `move(va, node)` -> status per page (node id on success, negative errno);
    `free_pages()` -> free pages per node id; `alive()`; `damon(**attrs)` -> an
    object with `start()`, `read_regions()`, `stop()`, `alive()` (linux/damon_sysfs.py).
    With `idle_page_tracking` (Documentation/admin-guide/mm/idle_page_tracking.rst):
    `pfns(va)` -> the PFN whose idle bit stands for each page (0 where not present),
    `set_idle(pfns)` marks pages idle, `idle(pfns)` -> bool per PFN, still idle
    (linux/idle_sampler.py).
    """

    def vmas(self) -> list[tuple[int, int]]:
        raise NotImplementedError

    def query(self, va: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def move(self, va: np.ndarray, node: int) -> np.ndarray:
        raise NotImplementedError

    def free_pages(self) -> dict[int, int]:
        raise NotImplementedError

    def alive(self) -> bool:
        raise NotImplementedError

    def watermarks(self) -> dict[int, tuple[int, int, int]] | None:
        """The kernel's (min, low, high) watermarks per node id, in pages; None to keep
        the simulator's fractions."""
        return None

    def damon(self, **attrs):
        raise TierlabError("DAMON is not available on this kernel")

    idle_page_tracking = False

    def pfns(self, va: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def set_idle(self, pfns: np.ndarray) -> None:
        raise NotImplementedError

    def idle(self, pfns: np.ndarray) -> np.ndarray:
        raise NotImplementedError


class AddressSpace:
    """A dense page index space over the target's anonymous writable mappings.

    Append-only: a mapping seen for the first time (or the part of a grown one not yet
    covered) gets the next free index range, and indices are never reused, so arrays a
    policy sized at attach time stay valid while the process maps and unmaps memory.
    The space holds `capacity` pages (by default the machine's RAM: more cannot be
    resident); mappings beyond it are left unmanaged and counted in `unmanaged_bytes`.
    """

    def __init__(self, capacity: int):
        self.capacity = int(capacity)
        self.va = np.zeros(0, dtype=np.int64)  # start address of each slot
        self.ix = np.zeros(0, dtype=np.int64)  # first index of each slot
        self.n = np.zeros(0, dtype=np.int64)  # pages in each slot
        self.used = 0
        self.unmanaged_bytes = 0

    def update(self, vmas) -> bool:
        """Give index ranges to the parts of `vmas` no slot covers; True if any."""
        added = False
        for start, end in sorted(vmas):
            for a, b in self._uncovered(int(start) // PAGE, int(end) // PAGE):
                n = b - a
                if self.used + n > self.capacity:
                    self.unmanaged_bytes += n * PAGE
                    continue
                k = int(np.searchsorted(self.va, a))
                self.va = np.insert(self.va, k, a)
                self.ix = np.insert(self.ix, k, self.used)
                self.n = np.insert(self.n, k, n)
                self.used += n
                added = True
        return added

    def _uncovered(self, a: int, b: int):
        """Page-number sub-ranges of [a, b) that no slot covers."""
        out, cur = [], a
        k = max(int(np.searchsorted(self.va, a, side="right")) - 1, 0)
        while cur < b and k < len(self.va):
            s, e = int(self.va[k]), int(self.va[k] + self.n[k])
            if e <= cur:
                k += 1
                continue
            if s >= b:
                break
            if s > cur:
                out.append((cur, s))
            cur = max(cur, e)
            k += 1
        if cur < b:
            out.append((cur, b))
        return out

    def to_va(self, idx) -> np.ndarray:
        """Virtual address (bytes) of each page index."""
        idx = np.asarray(idx, dtype=np.int64)
        order = np.argsort(self.ix)
        ix, va = self.ix[order], self.va[order]
        k = np.searchsorted(ix, idx, side="right") - 1
        return ((va[k] + (idx - ix[k])) * PAGE).astype(np.uint64)

    def ranges_to_index(self, start_va, end_va):
        """Byte ranges [start_va, end_va) -> index ranges, clipped to the slots; one
        range may give several pieces. Returns (starts, ends, which input range)."""
        s = np.asarray(start_va, dtype=np.int64) // PAGE
        e = -(-np.asarray(end_va, dtype=np.int64) // PAGE)
        if len(self.va) == 0 or len(s) == 0:
            z = np.zeros(0, dtype=np.int64)
            return z, z, z
        slot_e = self.va + self.n
        lo = np.searchsorted(slot_e, s, side="right")  # first slot ending after s
        hi = np.searchsorted(self.va, e, side="left")  # slots starting before e
        cnt = np.maximum(hi - lo, 0)
        which = np.repeat(np.arange(len(s)), cnt)
        slot = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(cnt.sum())
        a = np.maximum(s[which], self.va[slot])
        b = np.minimum(e[which], slot_e[slot])
        keep = b > a
        a, b, which, slot = a[keep], b[keep], which[keep], slot[keep]
        return self.ix[slot] + (a - self.va[slot]), self.ix[slot] + (b - self.va[slot]), which

    def all_indices(self) -> np.ndarray:
        return np.arange(self.used, dtype=np.int64)


class LinuxMemory:
    """`sim.mem` for a real process: placement per page index (refreshed with
    move_pages(2) in query mode), per-node capacity and free pages (the whole node's,
    as the kernel's watermarks see them) and the machine's watermark fractions until the
    kernel's own replace them (`LinuxSim`)."""

    def __init__(self, capacity_pages, npages: int, watermarks=(0.005, 0.01, 0.015)):
        self.npages = int(npages)
        self.node = np.full(self.npages, UNALLOC, dtype=np.uint8)
        self.capacity = np.asarray(capacity_pages, dtype=np.int64)
        self.free = self.capacity.copy()
        self.wmark_min, self.wmark_low, self.wmark_high = watermark_pages(self.capacity,
                                                                          watermarks)

    @property
    def used(self) -> np.ndarray:
        return self.capacity - self.free

    @property
    def allocated(self) -> int:
        return int(np.count_nonzero(self.node != UNALLOC))

    def resident_per_node(self) -> np.ndarray:
        return np.bincount(self.node, minlength=256)[: len(self.capacity)]

    def range_counts(self, starts, ends) -> np.ndarray:
        """`Memory.range_counts`: pages of each node (n x nnodes) in each [starts[i],
        ends[i]), read from the page map (no per-block counts here)."""
        return range_node_counts(self.node, np.asarray(starts, dtype=np.int64),
                                 np.asarray(ends, dtype=np.int64),
                                 len(self.capacity))[:, :-1]

    def pages_on(self, node: int, start: int, limit: int, flags=None, mask: int = 0,
                 value: int = 0, sel=None, sel_on: bool = True, passes=None):
        """`Memory.pages_on` without its filters (the simulator's per-page flags, bitmaps
        and pass times do not exist here): up to `limit` pages on `node` from `start`,
        wrapping; (pages, next hand position, addresses scanned)."""
        if flags is not None or sel is not None or passes is not None:
            raise TierlabError("the Linux backend keeps no per-page flags, bitmaps or "
                               "pass times to filter pages by")
        n, start, limit = self.npages, int(start) % max(self.npages, 1), max(int(limit), 0)
        hit = np.flatnonzero(self.node[start:] == node)[:limit] + start
        scanned = int(hit[-1]) - start + 1 if hit.size else n - start
        if hit.size < limit:
            wrap = np.flatnonzero(self.node[:start] == node)[:limit - hit.size]
            hit = np.concatenate((hit, wrap))
            scanned = n - start + (int(wrap[-1]) + 1 if wrap.size else start)
        nxt = (int(hit[-1]) + 1) % max(n, 1) if hit.size else start
        return hit.astype(np.int64), nxt, scanned


@dataclass
class LinuxStats:
    """Counters of what the backend did (the same names as the simulator's `Stats`)."""

    promotions: int = 0
    demotions: int = 0
    pingpong: int = 0
    migrated_bytes: int = 0
    monitor_cpu_seconds: float = 0.0
    migration_cpu_seconds: float = 0.0
    app_stall_seconds: float = 0.0
    reclaim_pages: int = 0
    by_reason: dict = field(default_factory=dict)
    failed: dict = field(default_factory=dict)
    #: (from node, to node) -> pages, in machine node indices
    moves: dict = field(default_factory=dict)


class LinuxSim(PolicyBackend):
    """The backend interface of `engine.Simulation`, for a live process.

    Machine node i is kernel node `node_ids[i]`; policies only ever see machine
    indices. Time is real (seconds since `start`), timers run from `run_due()`, which
    the daemon loop calls. Policies that need what only the simulator can see (hint
    faults, PTE accessed bits of single pages, the true rates) fail at attach with a
    clear message naming the monitor.
    """

    real = True

    def __init__(self, machine, node_ids, kernel: KernelOps, policy, seed: int = 0,
                 npages: int | None = None, bw_limit: float | None = None,
                 clock=time.monotonic):
        self.machine = machine
        self.node_ids = [int(n) for n in node_ids]
        self._index_of = {n: i for i, n in enumerate(self.node_ids)}
        self.kernel = kernel
        self.policy = policy
        self.seed = int(seed)
        self.scale = 1.0
        self.clock = clock
        self.t0 = clock()
        cap = np.array([t.capacity_pages for t in machine.tiers], dtype=np.int64)
        self.space = AddressSpace(npages if npages is not None else int(cap.sum()))
        self.mem = LinuxMemory(cap, self.space.capacity, machine.watermarks)
        self.stats = LinuxStats()
        self.bw_limit = bw_limit
        self.monitors: dict = {}
        self._timers: list = []
        #: the daemon's steps by kind of timer (`interface.timer_kind`): steps, seconds,
        #: steps that moved pages, their seconds, pages moved (`run_due`)
        self.daemon_steps: dict = {}
        self._seq = 0
        self.threads = 1.0
        self.app_threads = 1  #: `Simulation.app_threads` (the application's threads)
        self._damons: list = []
        self.notes: list[str] = []
        self.echo = None  #: callable(str) for notes, set by the daemon
        #: seconds between two full readings of placement (move_pages queries of every
        #: page) during monitoring; the daemon's report always reads afresh
        self.refresh_interval = 1.0
        self._refreshed = -1e9
        wm = kernel.watermarks()
        if wm:
            # the kernel's own: on small nodes min_free_kbytes makes them several percent
            # of the node, far above the simulator's 0.5/1/1.5% (a move below min fails)
            for i, n in enumerate(self.node_ids):
                self.mem.wmark_min[i], self.mem.wmark_low[i], self.mem.wmark_high[i] = wm[n]
        self.refresh()

    # -- the policy-facing interface -------------------------------------------------
    @property
    def now(self) -> float:
        return self.clock() - self.t0

    def every(self, period: float, fn, offset: float | None = None) -> None:
        if period <= 0:
            raise ValueError("period must be > 0")
        self._seq += 1
        t = self.now + (period if offset is None else offset)
        self._timers.append([t, self._seq, float(period), fn])

    def stall(self, thread_seconds: float) -> None:
        """Nothing to charge: the real application pays its own stalls."""

    def charge_cpu(self, seconds: float, kind: str = "monitor") -> None:
        if kind == "monitor":
            self.stats.monitor_cpu_seconds += seconds
        else:
            self.stats.migration_cpu_seconds += seconds

    def reclaim(self, node: int, n: int, direct: bool = False) -> int:
        """The kernel's kswapd reclaims (and demotes, with demotion_enabled) on its own."""
        return 0

    def migrate(self, pages, dst: int, sync: bool = False, reason: str = "",
                land_over_stall: bool = False) -> int:
        """move_pages(2) of the given page indices to machine node `dst`; returns pages
        the kernel reports moved, at most the node's free pages above its low
        watermark (a real page lands when its copy is done: `land_over_stall` is the
        simulator's model of that). Pages not present or already on dst are skipped; the
        kernel's per-page status (busy, no memory, gone) is counted in
        `stats.failed`; placement is updated from the returned status."""
        pages = unique_in_order(np.asarray(pages, dtype=np.int64))  # callers list by priority
        if pages.size == 0:
            return 0
        cur = self.mem.node[pages]
        keep = (cur != UNALLOC) & (cur != dst)
        pages, cur = pages[keep], cur[keep]
        # the page allocator's fast path wants free above `low` for a migration target
        # (__GFP_THISNODE: no fallback); below it the kernel mostly answers -ENOMEM
        room = int(self.mem.free[dst] - self.mem.wmark_low[dst])
        if room <= 0 or pages.size == 0:
            return 0
        pages, cur = pages[:room], cur[:room]
        t = time.process_time()
        status = np.asarray(self.kernel.move(self.space.to_va(pages), self.node_ids[dst]))
        self.stats.migration_cpu_seconds += time.process_time() - t
        ok = status == self.node_ids[dst]
        for code in np.unique(status[~ok]).tolist():
            name = _ERRNO_NAMES.get(-code, f"node{code}" if code >= 0 else f"errno{-code}")
            self.stats.failed[name] = self.stats.failed.get(name, 0) + int((status == code).sum())
        gone = status < 0
        gone &= np.isin(-status, (2, 14))  # ENOENT, EFAULT: no longer mapped
        self.mem.node[pages[gone]] = UNALLOC
        moved, src = pages[ok], cur[ok]
        n = int(moved.size)
        if n:
            self.mem.node[moved] = dst
            k = self.nnodes
            delta = np.bincount(src, minlength=256)[:k]
            self.mem.free += delta
            self.mem.free[dst] -= n
            rank = np.argsort(np.asarray(self.machine.demotion))
            up = int((rank[src] > rank[dst]).sum())
            self.stats.promotions += up
            self.stats.demotions += n - up
            self.stats.migrated_bytes += n * PAGE
            self.stats.by_reason[reason] = self.stats.by_reason.get(reason, 0) + n
            for s in np.flatnonzero(delta).tolist():
                key = (int(s), int(dst))
                self.stats.moves[key] = self.stats.moves.get(key, 0) + int(delta[s])
        return n

    # -- what the simulator has and the kernel does not --------------------------------
    @property
    def source(self):
        raise TierlabError("this policy's monitor samples single pages' accessed bits or "
                           "hint faults, which user space cannot see on Linux; policies "
                           "that run for real use the damon or idt-regions monitors")

    bits = source
    true_field = source

    @property
    def lru(self):
        raise TierlabError("this policy drives the simulator's LRU lists; on Linux the "
                           "kernel's reclaim does that (run it as the kernel's own "
                           "tiering: numa_balancing=2)")

    # -- the daemon's side ---------------------------------------------------------------
    def refresh(self, max_age: float = 0.0) -> None:
        """Re-read the target's mappings, every managed page's node, and free memory,
        unless the last reading is younger than `max_age` seconds (this backend's own
        moves keep `mem` current in between; the kernel's are seen at the next one)."""
        if max_age > 0 and self.now - self._refreshed < max_age:
            return
        self._refreshed = self.now
        self.space.update(self.kernel.vmas())
        idx = self.space.all_indices()
        node = np.full(self.mem.npages, UNALLOC, dtype=np.uint8)
        if idx.size:
            st = np.asarray(self.kernel.query(self.space.to_va(idx)))
            ok = st >= 0
            lut = np.full(max(self.node_ids) + 1, UNALLOC, dtype=np.uint8)
            lut[self.node_ids] = np.arange(len(self.node_ids), dtype=np.uint8)
            node[idx[ok]] = lut[np.minimum(st[ok], len(lut) - 1)]
        self.mem.node = node
        free = self.kernel.free_pages()
        self.mem.free = np.array([free.get(n, 0) for n in self.node_ids], dtype=np.int64)

    def attach_damon(self, mon) -> None:
        """Run `mon` (a `monitors.damon.Damon`) on the kernel's DAMON: a kdamond with
        the monitor's intervals and region limits watches the target (vaddr), and every
        aggregation interval its regions, mapped into the page index space, are
        published to the monitor's subscribers as the simulated DAMON would.

        IDT's own monitor (`idt-regions`) on a kernel with idle page tracking samples
        its pages itself instead (linux/idle_sampler.py), with no kdamond."""
        from ..monitors.idt_regions import IdtRegions
        if getattr(self.kernel, "idle_page_tracking", False) and isinstance(mon, IdtRegions):
            from .idle_sampler import IdleSampler
            IdleSampler(self, mon).start()
            self.monitors.setdefault(mon.name, mon)
            return
        if isinstance(mon, IdtRegions):  # tierlab's monitor (IDT's own swaps to damon)
            # the kernel's DAMON checks one page a region each sample
            mon.pages_per_sample = 1
            self.note(f"{mon.name}: IDT's region monitor needs idle page tracking "
                      "(/sys/kernel/mm/page_idle/bitmap), not available here; its regions "
                      "come from the kernel's DAMON with the same intervals")
        d = self.kernel.damon(sample_us=round(mon.sample_interval * 1e6),
                              aggr_us=round(mon.aggr_interval * 1e6),
                              update_us=round(mon.update_interval * 1e6),
                              min_nr_regions=mon.min_nr_regions,
                              max_nr_regions=mon.max_nr_regions)
        d.start()
        self._damons.append(d)
        bridge = _DamonBridge(self, mon, d)
        self.monitors.setdefault(mon.name, mon)
        self.every(mon.aggr_interval, bridge.tick)

    def note(self, msg: str) -> None:
        """A one-line message for the user (a fallback taken, a limit hit)."""
        self.notes.append(msg)
        if self.echo is not None:
            self.echo(msg)

    def close(self) -> None:
        """Stop every kdamond this backend started (idempotent)."""
        while self._damons:
            self._damons.pop().stop()

    def next_due(self) -> float:
        return min((t[0] for t in self._timers), default=float("inf"))

    def run_due(self) -> int:
        """Run every timer that is due, once each, in time order; returns how many ran.
        A timer whose work took longer than its period is next due one period after it
        finished (real time does not wait: no catching up, no starving the loop)."""
        now = self.now
        due = sorted((x for x in self._timers if x[0] <= now), key=lambda x: (x[0], x[1]))
        for timer in due:
            t, _, period, fn = timer
            start, moved = self.now, self.stats.promotions + self.stats.demotions
            fn(start)
            after = self.now
            timer[0] = t + period * max(1, int((after - t) // period) + 1)
            self._count_step(timer_kind(fn), after - start,
                             self.stats.promotions + self.stats.demotions - moved)
        return len(due)

    def _count_step(self, kind: str, seconds: float, pages: int) -> None:
        """One timer's run in `daemon_steps` (what `engine.DaemonSteps` is calibrated
        from: a step's own time, and the time and pages of those that moved any)."""
        c = self.daemon_steps.setdefault(kind, {"steps": 0, "seconds": 0.0,
                                                "moving_steps": 0, "moving_seconds": 0.0,
                                                "pages": 0})
        c["steps"] += 1
        c["seconds"] += seconds
        if pages:
            c["moving_steps"] += 1
            c["moving_seconds"] += seconds
            c["pages"] += int(pages)


_ERRNO_NAMES = {2: "gone", 14: "gone", 16: "busy", 12: "nomem", 13: "denied",
                22: "invalid", 19: "no-node"}


class _DamonBridge:
    """Kernel DAMON regions -> a `Damon` monitor's regions, in page indices.

    DAMON's vaddr regions span the gaps between mappings; each is clipped to the
    managed mappings (one kernel region can become several). The kernel's `age`
    cannot be reset from user space, so a policy's `reset_age` (IDT zeroes the age of
    a region it moved) is kept here: pages whose region was reset report
    min(kernel age, aggregations since the reset).
    """

    timer_kind = "monitor"  #: interface.timer_kind

    def __init__(self, sim: LinuxSim, mon, damon):
        self.sim, self.mon, self.damon = sim, mon, damon
        self.reset_at = np.full(sim.mem.npages, -(1 << 30), dtype=np.int32)
        self.published_age = None

    def tick(self, now: float) -> None:
        sim, mon = self.sim, self.mon
        t = time.process_time()
        self._note_resets()
        sim.refresh(max_age=sim.refresh_interval)
        r = self.damon.read_regions()
        s, e, which = sim.space.ranges_to_index(r.start, r.end)
        order = np.argsort(s, kind="stable")
        s, e, which = s[order], e[order], which[order]
        nr = np.minimum(np.asarray(r.nr_accesses, dtype=np.int64)[which],
                        mon.max_nr_accesses)
        age = np.asarray(r.age, dtype=np.int64)[which]
        count = mon.nr_aggregations + 1
        if s.size:
            since = count - self.reset_at[(s + e - 1) // 2].astype(np.int64)
            age = np.minimum(age, since)
        mon.set_regions(s, e, nr, age)
        mon.nr_aggregations = count
        self.published_age = (s, e, age.copy())
        sim.charge_cpu(time.process_time() - t, "monitor")
        mon._publish(now)

    def _note_resets(self) -> None:
        """Regions whose age the policy zeroed since the last publication."""
        if self.published_age is None:
            return
        s, e, age = self.published_age
        cur_s, cur_age = self.mon._s, self.mon._age
        if len(cur_s) != len(s) or not np.array_equal(cur_s, s):
            return
        hit = np.flatnonzero((cur_age == 0) & (age > 0))
        for j in hit.tolist():
            self.reset_at[s[j]:e[j]] = self.mon.nr_aggregations
