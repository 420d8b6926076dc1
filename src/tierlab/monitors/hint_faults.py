"""`hint-faults`: Linux's NUMA-balancing scanner (task_numa_work) and its hint faults.

Kernel rules implemented (kernel/sched/fair.c, mm/mprotect.c, Linux 5.18-6.x; checked
against the sources, see each method):

- Every scan step marks the next `scan_size` (numa_balancing_scan_size_mb, 256 MB; in a
  `--scale F` miniature F x 256 MB, `sim.scaled_bytes`) of the task's address space
  PROT_NONE (change_prot_numa) from a cursor
  (mm->numa_scan_offset); the step ends as soon as a `scan_size` range made at least one
  PTE PROT_NONE, or after 8 x `scan_size` of address space without any (virtpages), or at
  the end of the address space, where the cursor wraps and a pass (numa_scan_seq) ends.
  PTEs already PROT_NONE are skipped and keep their scan time (tiering mode records the
  scan time in the page only when it changes the PTE).
- Nodes listed in `skip_nodes` are not scanned: with numa_balancing=2 (memory tiering
  only) the top-tier nodes are skipped ("Skip scanning top tier node if normal numa
  balancing is disabled").
- Step period (p->numa_scan_period) between task_scan_min and task_scan_max:
  windows = ceil(RSS / scan_size); min = max(1000 ms / (MAX_SCAN_WINDOW 2560 MB/s /
  scan_size MB) = 100 ms, scan_period_min / windows); max = max(min, scan_period_max /
  windows). The sysctls numa_balancing_scan_period_min/max_ms (1 s / 60 s) are thus the
  time of a whole pass, floored at 2.56 GB/s of scanning. It starts at min
  (task_scan_start without a NUMA group) after numa_balancing_scan_delay_ms (1 s).
- Overhead cap (task_numa_work, task_tick_numa): a thread runs the scan only when its
  runtime passes node_stamp + period, and the thread that scanned adds 2 ticks and 32 x
  the scan's own runtime to its node_stamp ("Make sure tasks use at least 32x as much
  time to run other code than they used here, to limit NUMA PTE scanning overhead to 3%
  max"). With T busy threads taking turns, the next step is thus not before
  max(period', (period + 2 tick + 32 c) / T) after this one, c = the step's cost (its
  PTEs and TLB flush) at full scale, period' the period when it ran (numa_next_scan)
  and period the one when the tick checks (an adaptation in between counts);
  `tick` is 1/HZ (Debian's kernels: HZ=250, 4 ms). `overhead_cap=no` drops the rule.
  It binds where few threads scan much: one thread and a 256 MB step of 4.6 ms wait
  100 + 8 + 147 ms, not 100 ms.
- Adaptation (update_task_scan_period, once per pass: task_numa_placement runs it from
  the first fault task_numa_fault counts after numa_scan_seq moved, on what was counted
  before that fault): if no local and no shared faults, or a migration failed, the
  period doubles (up to max) and the next step waits a whole new period
  (mm->numa_next_scan = now + period); else with slot = ceil(period / 10),
  lr = 10 local / (local + remote), ps = 10 private / (private + shared): ps >= 7 grows
  it by max(ps - 7, 1) slots, else lr >= 7 grows it by max(lr - 7, 1) slots, else it
  shrinks by (7 - max(lr, ps)) slots; clamped to [min, max]. Which faults count, and as what, is the subscriber's business (the policy
  knows whether it migrated): `account(local=, remote=, private=, shared=, failed=)`.
  In tiering mode the kernel ignores faults on slow nodes (task_numa_fault returns
  early) and counts promoted pages as private remote faults.

Fault model: `ScheduledHintFaults` (below), exact in distribution for the rate model:
each armed page faults at its first access after the scan; faults are polled every
`poll` and handed to subscribers as (pages, fault times, latency = fault time -
scan time, now), in fault-time order. Latencies and fault times are exact whatever the
poll period; only the reaction (a migration) is delayed to the poll, by < `poll`
(default 50 ms: each poll is an engine event, and a finer poll mostly costs simulation
time; scan steps, 100 ms to 60 s apart, run at the first poll after they are due).

Costs (choices, documented here): each fault stalls the faulting thread
`machine.hint_fault_s` (1.5 us, `sim.stall`); the scanner is charged as monitor CPU,
`pte_walk_cost` per PTE slot walked (`pte_slots_walked`: every slot of a present PTE
table, holes included) plus `pte_update_cost` per PTE made PROT_NONE
(ptep_modify_prot_start/commit and the folio checks), by default the machine's
`pte_walk` (20 ns) and `pte_update` (50 ns), and each step that
changed PTEs costs one TLB flush of the range (flush_tlb_range: one shootdown,
`machine.tlb_shootdown_s`, stalling every application thread). In Linux the scan runs
in the task's own context (task_work on return to user space), so strictly it is
application time; we count it as monitor CPU so that it shows in the run record.

Assumptions where the sources are silent or the model is coarser: the workload is one
VMA spanning its address space (holes = unallocated pages: no PTE, but a slot the walk
visits in a PTE table that maps another page); migrating an armed
page does not clear its PROT_NONE (Linux restores the VMA protection on migration; the
difference is one missed fault); the NUMA-group scaling of the period (task_scan_start
with shared faults) is not modelled. vma_is_accessed (skip a VMA whose faults in the
last 4-8 s came from other threads) changes nothing for one VMA: task_numa_work forces
the scan of a skipped VMA when no other is left (vma_pids_forced).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import TierlabError
from ..field import uniq
from ..heap import trim
from ..params import parse_flag, parse_nodes
from ..units import PAGE, parse_duration, parse_size
from .base import MONITORS, Monitor
from .primitives import HintFaults
from .pte_scan import PMD_PAGES
from .source import RateSource
from ..jit import kernel
from .draws import _time_at
from ..structures import (FaultCalendar, PageBits, Scratch, SortedRun, _lower, _runs_order,
                          argsort_untied, page_dtype, push_tiered, take_through)

UNALLOC = 255  # engine.memory.UNALLOC (not imported: monitors must not import engine)
MAX_SCAN_WINDOW_MB = 2560  # kernel/sched/fair.c: never scan more than 2560 MB/s
NUMA_PERIOD_SLOTS = 10
NUMA_PERIOD_THRESHOLD = 7


# -----------------------------------------------------------------------------------
# Hint faults scheduled in work units
# -----------------------------------------------------------------------------------
#: batches stop merging at this many entries: merging is a copy of both (memory-bound),
#: and with size-tiered merging every armed page was copied log2(armed / step) times;
#: above the cap a poll searches a few more batches instead
MERGE_CAP = 1 << 21
#: merges give their freed heap pages back (`heap.trim`) only while this many pages
#: are armed (512 MiB of entries): below it the holes cost little, and trimming is
#: paid again in page faults when the heap regrows (tpp at bench_scale: 2.7 s of sys
#: per 100 simulated s with a trim after every merge of 1 M entries)
TRIM_ARMED = 1 << 25
#: the fault calendar's buckets per window and entries per block
#: (`structures.FaultCalendar`)
CAL_BUCKETS = 1024
CAL_BLOCK = 64


def _sorted_batch(wf, pages, arm) -> SortedRun:
    """A batch of armed pages sorted by the cumulative work at which they fault (keys),
    each with its arming (tag) as an index into the monitor's table of arm times (4
    bytes, not 8); equal works in input order (a stable sort,
    `structures.argsort_untied`)."""
    order, w = argsort_untied(wf)
    return SortedRun(w, pages[order], arm[order])


class ScheduledHintFaults(HintFaults):
    """`HintFaults` with the same contract (arm, poll, disarm, is_armed, faults,
    fault_seconds), scheduled in cumulative work for the statistical `RateSource`.

    Under one rate field, page p's accesses form a Poisson process in work with rate
    r_p, so its first access after arming at work W_a is at W_a + E / r_p, E ~ Exp(1)
    (exactly the base class's draw, solved once instead of integrated at every poll).
    Armed pages wait unsorted in a calendar of fault-work buckets
    (`structures.FaultCalendar`) until the work reaches their bucket, which is then
    sorted into a few batches (size-tiered merging, O(log n) batches); a poll takes
    the prefix of each batch up to the current work W(now) and maps fault works to
    times with the timeline's W^-1. When the field changes at time c, every pending
    page's remaining budget (W_f - W_c) r_old is rescheduled with its new rate (pages
    of rate 0 wait, dormant, with their budget). Cost: arm O(k), poll O(log n +
    faults) plus the sort of the buckets reached, field change O(armed). A bitmap of
    the armed pages (`structures.PageBits`, 1/8 byte a page) answers `is_armed`.
    """

    def __init__(self, source: RateSource, rng: np.random.Generator,
                 fault_cost: float | None = None, npages: int | None = None,
                 current_work=None):
        if fault_cost is None:
            super().__init__(source, rng)
        else:
            super().__init__(source, rng, fault_cost=fault_cost)
        self._tl = source.timeline
        #: optional () -> cumulative work now (the engine's `sim.work`): saves a
        #: timeline lookup per poll
        self._current_work = current_work
        n = int(npages if npages is not None else source.npages)
        self._flag = PageBits.zeros(n)
        #: page numbers in 4 bytes while they fit (5 TiB of 4 KiB pages do)
        self._pdt = page_dtype(n)
        #: the time of each arm() call; entries hold an index into it
        self._arm_t = np.zeros(1024)
        self._narm_t = 0
        self._batches: list[SortedRun] = []
        self._dormant = (np.zeros(0, dtype=self._pdt), np.zeros(0, dtype=np.uint32),
                         np.zeros(0))  # pages, arm index, E
        #: faults past the current bucket wait unsorted (see `_schedule`)
        self._cal = FaultCalendar(n, self._pdt, CAL_BUCKETS, CAL_BLOCK)
        self._field = None
        self._t_sync = None  # set at the first arm or poll
        self._pending: list = []  # faults found while syncing epochs (pages, works, arm)
        self._t_poll = None  # time of the previous poll
        self._narmed = 0
        self._range = Scratch()  # a scan step's newly armed pages

    # -- helpers ------------------------------------------------------------------
    def _rates(self, field, pages) -> np.ndarray:
        tab = getattr(self.source, "_tab", None)
        if tab is not None:
            return tab(field).page_rate(pages)
        r, w = field.rate_of(pages)
        return r + w

    @property
    def armed(self) -> int:
        return self._narmed

    def is_armed(self, pages) -> np.ndarray:
        return self._flag.get(pages)

    def _push(self, b: SortedRun) -> None:
        if push_tiered(self._batches, b, MERGE_CAP) >= MERGE_CAP // 2 \
                and self._narmed >= TRIM_ARMED:
            trim()  # the merged batches' heap holes

    def _schedule(self, pages, arm, budget, w0, field) -> None:
        """Schedule pages with remaining Exp(1) budget from work w0 under `field`.
        Faults past the calendar's current bucket wait there unsorted (most of the cold
        pages' faults, which a run often never reaches); the rest join the sorted
        batches. Pages of rate 0 wait, dormant, with their budget."""
        r = self._rates(field, pages)
        live = r > 0
        if not live.all():
            dp, da, de = self._dormant
            self._dormant = (np.concatenate((dp, pages[~live])),
                             np.concatenate((da, arm[~live])),
                             np.concatenate((de, budget[~live])))
            pages, arm, budget, r = pages[live], arm[live], budget[live], r[live]
        if pages.shape[0]:
            self._add(budget, r, w0, pages, arm)

    def _add(self, budget, r, w0, pages, arm) -> None:
        """Entries at work w0 + budget / r into the calendar or, at or before its
        current bucket, the sorted batches."""
        self._push_near(*self._cal.push(np.ascontiguousarray(budget, dtype=np.float64),
                                        np.ascontiguousarray(r, dtype=np.float64), w0,
                                        pages, arm))

    def _push_near(self, wf, p, a) -> None:
        """Entries the calendar handed back (at or before its current bucket), sorted
        into the batches."""
        if wf.shape[0]:
            self._push(_sorted_batch(wf, p, a))

    def _readd(self, wf, pages, arm) -> None:
        """Entries with their fault works again (w0 + wf / 1 is wf exactly)."""
        if wf.shape[0]:
            self._add(wf, np.ones(wf.shape[0]), 0.0, pages, arm)

    def _pop_bucket(self, j: int) -> None:
        """Bucket j sorted, as a batch of its own: every batch before it holds works
        below the bucket's, so merging it with them (`_push`) would copy it into the
        same order the poll's merge of runs gives."""
        if self._cal.cnt[j]:
            self._batches.append(_sorted_batch(*self._cal.pop(j)))

    def _advance(self, w: float) -> None:
        """Hand every calendar bucket that may hold a fault at work <= w to the sorted
        batches: the buckets up to w's; past the window, all of them and a new window
        [w, 16 w) for the entries past the old one (a run opens O(log work) windows)."""
        c = self._cal
        if not math.isfinite(w):  # inf, or NaN (past every work in numpy's search): all due
            for j in range(c.cur + 1, c.nb + 1):
                self._pop_bucket(j)
            return
        xw = c.index(w)
        if not xw < c.nb:
            for j in range(c.cur + 1, c.nb):
                self._pop_bucket(j)
            self._push_near(*c.roll(w))
            xw = c.index(w)
        while c.cur + 1 <= xw:
            c.cur += 1
            self._pop_bucket(c.cur)

    def _take_until(self, w: float) -> None:
        """Move every scheduled fault at work <= w to the pending list."""
        self._advance(w)
        self._pending += [(p, wf, a) for wf, p, a in take_through(self._batches, w)]

    def _sync(self, now: float) -> None:
        """Process field changes in (last sync, now]: faults before each change are
        collected under the old rates, the rest rescheduled with the new ones."""
        tl = self._tl
        starts, fields = tl.epoch_start, tl.fields
        if self._t_sync is None:
            k = max(int(np.searchsorted(starts, now, side="right")) - 1, 0)
            self._field, self._t_sync = fields[k], float(now)
            return
        t_sync = self._t_sync
        for k in range(len(starts)):
            s = starts[k]
            if s > now:
                break
            nxt = starts[k + 1] if k + 1 < len(starts) else math.inf
            if nxt <= t_sync:
                continue  # epoch entirely before the last sync
            f = fields[k]
            if f is self._field:
                continue
            c = max(s, t_sync)
            wc = float(tl.work_at(c))
            self._take_until(wc)
            old = self._field
            pages, wfs, arms = [], [], []
            for b in self._batches:
                w_, p_, a_ = b.live()
                wfs.append(w_)
                pages.append(p_)
                arms.append(a_)
            w_, p_, a_ = self._cal.drain()
            if w_.shape[0]:
                wfs.append(w_)
                pages.append(p_)
                arms.append(a_)
            self._batches = []
            if pages:
                p = np.concatenate(pages)
                budget = (np.concatenate(wfs) - wc) * self._rates(old, p)
                self._schedule(p, np.concatenate(arms), np.maximum(budget, 0.0), wc, f)
            dp, da, de = self._dormant
            if dp.shape[0]:
                self._dormant = (np.zeros(0, dtype=self._pdt), np.zeros(0, dtype=np.uint32),
                                 np.zeros(0))
                self._schedule(dp, da, de, wc, f)
            self._field = f
        self._t_sync = max(self._t_sync, float(now))

    # -- HintFaults API ---------------------------------------------------------------
    def _breakpoints(self):
        """The timeline's breakpoints (t, W) and the index of the last one at or before
        the previous poll: the fault works of this poll are above it, so W^-1 needs
        only the breakpoints from there on (`poll_faults`)."""
        ta, wa = self._tl.breakpoints()
        lo = 0
        if self._t_poll is not None:
            lo = max(int(np.searchsorted(ta, self._t_poll, side="right")) - 1, 0)
        return ta, wa, lo

    def _work_at(self, t: float) -> float:
        if self._current_work is not None and t >= self._tl.now:
            return float(self._current_work())
        return float(self._tl.work_at(t))

    def arm(self, pages, now: float) -> int:
        pages = np.asarray(pages, dtype=np.int64)
        if pages.shape[0] > 1 and not bool(np.all(pages[1:] > pages[:-1])):
            pages = uniq(pages, runs=True)
        pages = pages[~self._flag.get(pages)]
        if pages.shape[0] == 0:
            return 0
        self._flag.set(pages, True)
        return self._arm_flagged(pages.astype(self._pdt), now)

    def arm_range(self, start: int, end: int, node, skip, now: float) -> tuple[int, int]:
        """A scan step's `arm` of [start, end) in one pass (`scan_arm`): the
        pages on nodes not in `skip` (by node; unallocated skipped); returns (PTE slots
        walked, `pte_slots_walked`, pages armed)."""
        buf, = self._range.get((self._pdt, end - start))
        walked, n = scan_arm(node, start, end, skip, self._flag.words, UNALLOC, buf)
        if n:
            self._arm_flagged(buf[:n].copy(), now)
        return walked, n

    def _arm_flagged(self, pages, now: float) -> int:
        """Schedule the first access of pages just flagged armed (sorted, unique)."""
        n = pages.shape[0]
        now = float(now)
        self._sync(now)
        self._narmed += n
        w0 = self._work_at(now)
        if self._narm_t == self._arm_t.shape[0]:
            self._arm_t = np.concatenate((self._arm_t, np.zeros(self._narm_t)))
        self._arm_t[self._narm_t] = now
        self._cal.fit_arm(self._narm_t)
        arm = np.full(n, self._narm_t, dtype=np.uint32)
        self._narm_t += 1
        self._schedule(pages, arm, self.rng.exponential(size=n), w0, self._field)
        return n

    def disarm(self, pages) -> None:
        pages = np.asarray(pages, dtype=np.int64)
        if pages.size == 0 or not self._flag.get(pages).any():
            return
        self._flag.set(pages, False)
        self._purge()

    def disarm_range(self, start: int, end: int) -> None:
        """Drop the armed pages of [start, end) (freed) without a fault."""
        if end <= start or not self._flag.any(start, end):
            return
        self._flag.clear(start, end)
        self._purge()

    def _purge(self) -> None:
        """Remove entries whose flag was cleared."""
        keep_b = []
        n = 0
        for b in self._batches:
            w_, p_, a_ = b.live()
            k = self._flag.get(p_)
            if not k.all():
                b = SortedRun(w_[k], p_[k], a_[k])
            if len(b):
                keep_b.append(b)
                n += len(b)
        self._batches = keep_b
        w_, p_, a_ = self._cal.drain()
        k = self._flag.get(p_)
        n += int(k.sum())
        self._readd(w_[k], p_[k], a_[k])
        dp, da, de = self._dormant
        if dp.shape[0]:
            k = self._flag.get(dp)
            self._dormant = (dp[k], da[k], de[k])
            n += int(k.sum())
        pend = []
        for p_, w_, a_ in self._pending:
            k = self._flag.get(p_)
            pend.append((p_[k], w_[k], a_[k]))
            n += int(k.sum())
        self._pending = pend
        self._narmed = n

    def poll(self, now: float):
        """(pages, fault_times, latency) of faults since the last poll, by fault time."""
        now = float(now)
        self._sync(now)
        self._take_until(self._work_at(now))
        if not self._pending:
            e = np.zeros(0)
            return np.zeros(0, dtype=np.int64), e, e.copy()
        pages = np.concatenate([p for p, _, _ in self._pending])
        works = np.concatenate([w for _, w, _ in self._pending])
        arm = np.concatenate([a for _, _, a in self._pending])
        self._pending = []
        ta, wa, lo = self._breakpoints()
        out = poll_faults(pages, works, arm, self._arm_t, ta, wa, lo, now,
                          self._flag.words)
        if out is None:  # a NaN time: numpy's stable sort orders it as the kernel cannot
            times = np.minimum(np.maximum(self._tl.time_at_work(works), self._arm_t[arm]),
                               now)
            order = np.argsort(times, kind="stable")
            pages, times = pages[order].astype(np.int64), times[order]
            self._flag.set(pages, False)
            out = pages, times, np.maximum(times - self._arm_t[arm[order]], 0.0)
        self._t_poll = now
        self._narmed -= out[0].shape[0]
        self.faults += int(out[0].shape[0])
        return out


class _PlainHintFaults(HintFaults):
    """The primitive for sources other than the rate model (exact replay)."""

    def __init__(self, source, rng, fault_cost=None, npages=None):
        if fault_cost is None:
            super().__init__(source, rng)
        else:
            super().__init__(source, rng, fault_cost=fault_cost)

    def disarm_range(self, start: int, end: int) -> None:
        p = self._pages
        self.disarm(p[(p >= start) & (p < end)])

    def arm_range(self, start: int, end: int, node, skip, now: float) -> tuple[int, int]:
        """`ScheduledHintFaults.arm_range` by numpy passes and `arm`."""
        seg = node[start:end]
        cand = np.flatnonzero(~skip[seg])
        return (pte_slots_walked(seg != UNALLOC, start),
                self.arm(cand + start, now) if cand.size else 0)


def pte_slots_walked(allocated: np.ndarray, start: int) -> int:
    """PTE slots a walk of pages [start, start + len(allocated)) visits: change_pte_range
    (mm/mprotect.c) loops over every slot of a present PTE table, holes included, and
    change_pmd_range skips a PMD with no table; a table is present where its
    PMD_PAGES-page block holds an allocated page in the range (a step's range
    starts and ends on block bounds, but at the address space's end)."""
    if allocated.shape[0] == 0:
        return 0
    blocks = (np.arange(start, start + allocated.shape[0]) // PMD_PAGES)
    blocks -= blocks[0]
    slots = np.bincount(blocks)
    present = np.bincount(blocks, weights=allocated) > 0
    return int(slots[present].sum())


def make_hint_faults(source, rng, fault_cost=None, npages=None,
                     current_work=None) -> HintFaults:
    """The fastest exact hint-fault generator for `source`."""
    if isinstance(source, RateSource):
        return ScheduledHintFaults(source, rng, fault_cost, npages, current_work)
    return _PlainHintFaults(source, rng, fault_cost, npages)


#: 1/HZ: Debian's kernels are built with HZ=250
TICK_S = 0.004


def capped_gap(sim, period: float, cost: float, tick_s: float = TICK_S) -> float:
    """The time from a scan step that cost its thread `cost` seconds to the next step
    under task_numa_work's overhead cap (module docstring): max(period, `stamp_gap`)."""
    return max(period, stamp_gap(sim, period, cost, tick_s))


def stamp_gap(sim, period: float, cost: float, tick_s: float = TICK_S) -> float:
    """When, after a step that cost its thread `cost` seconds, the scanning threads'
    runtime passes its node_stamp + `period`: (period + 2 ticks + 32 cost) / threads.
    The cost is taken at full scale (a `--scale F` miniature's steps are F times
    smaller), so a miniature scans at full scale's pace; threads are the workload's real
    ones (`sim.app_threads`)."""
    full = cost / float(getattr(sim, "scale", 1.0) or 1.0)
    threads = max(int(getattr(sim, "app_threads", 1) or 1), 1)
    return (period + 2 * tick_s + 32 * full) / threads


def _cost(value, what: str) -> float | None:
    """A per-PTE cost: a duration, or "machine" (None: the machine's figure)."""
    if str(value).strip().lower() == "machine":
        return None
    x = parse_duration(value, what)
    if x < 0:
        raise TierlabError(f"bad {what} {value!r}: must be >= 0 (or machine)")
    return x


def _threads(sim) -> float:
    """The application's effective thread count (`sim.threads`: threads x scale)."""
    return float(getattr(sim, "threads", sim.workload.threads))


# -----------------------------------------------------------------------------------
# The scanner
# -----------------------------------------------------------------------------------
@MONITORS.register("hint-faults")
class NumaScanner(Monitor):
    """NUMA-balancing PTE scanner (task_numa_work): PROT_NONE 256 MB per step, hint faults
    with their latency; adaptive scan period 1-60 s per pass."""

    def __init__(self, scan_size="256MiB", scan_period_min="1s", scan_period_max="60s",
                 scan_delay="1s", poll="50ms", skip_nodes="", adapt="1",
                 pte_walk_cost="machine", pte_update_cost="machine", overhead_cap="1",
                 tick="4ms"):
        super().__init__(scan_size=scan_size, scan_period_min=scan_period_min,
                         scan_period_max=scan_period_max, scan_delay=scan_delay, poll=poll,
                         skip_nodes=skip_nodes, adapt=adapt, overhead_cap=overhead_cap,
                         tick=tick)
        self.scan_bytes = parse_size(scan_size, "numa scan_size")
        self.scan_pages = max(self.scan_bytes // PAGE, 1)
        self.period_min = parse_duration(scan_period_min, "numa scan_period_min")
        self.period_max = parse_duration(scan_period_max, "numa scan_period_max")
        self.scan_delay = parse_duration(scan_delay, "numa scan_delay")
        self.poll_s = parse_duration(poll, "numa poll")
        if self.poll_s <= 0 or self.period_min <= 0 or self.period_max < self.period_min:
            raise TierlabError(f"bad hint-faults poll={poll} scan_period_min={scan_period_min} "
                               f"scan_period_max={scan_period_max}: need poll > 0 and "
                               "0 < scan_period_min <= scan_period_max")
        self.skip_nodes = parse_nodes(skip_nodes, "hint-faults skip_nodes")
        self.adapt = parse_flag(adapt, "hint-faults adapt")
        #: None: the machine's (Machine.pte_walk_s, pte_update_s), set at attach
        self.pte_walk_cost = _cost(pte_walk_cost, "pte_walk_cost")
        self.pte_update_cost = _cost(pte_update_cost, "pte_update_cost")
        self.overhead_cap = parse_flag(overhead_cap, "hint-faults overhead_cap")
        self.tick_s = parse_duration(tick, "hint-faults tick")
        if self.tick_s < 0:
            raise TierlabError(f"bad hint-faults tick {tick!r}: must be >= 0")
        self._subs = []
        self.period = None
        self.cursor = 0
        self.seq = 0
        self.steps = 0
        self.ptes_walked = 0
        self.ptes_updated = 0
        self._count = dict(local=0.0, remote=0.0, private=0.0, shared=0.0, failed=0.0)
        self._fault_s_charged = 0.0
        self.cpu_seconds = 0.0
        self.period_history = []
        #: numa_scan_seq moved and no fault has been counted since (task_numa_placement)
        self._placement_due = False
        #: the last step's due time and cost (the overhead cap's node_stamp), or None
        #: before the first step and without the cap
        self._stamp = None

    # -- wiring ---------------------------------------------------------------------
    def attach(self, sim, skip_nodes=None) -> None:
        super().attach(sim)
        if skip_nodes is not None:
            self.skip_nodes = [int(n) for n in skip_nodes]
        # byte-denominated: a miniature (--scale F) scans F x scan_size per step, so the
        # number of windows, the periods and the per-page scan rate match full scale
        scaled = getattr(sim, "scaled_bytes", lambda b: b)
        self.scan_pages = max(int(scaled(self.scan_bytes)) // PAGE, 1)
        if self.pte_walk_cost is None:
            self.pte_walk_cost = sim.machine.pte_walk_s
        if self.pte_update_cost is None:
            self.pte_update_cost = sim.machine.pte_update_s
        self.hf = make_hint_faults(sim.source, sim.rng_for("hint-faults"),
                                   fault_cost=sim.machine.hint_fault_s, npages=sim.mem.npages,
                                   current_work=lambda: sim.work)
        self._skip = np.zeros(256, dtype=bool)
        self._skip[UNALLOC] = True
        for n in self.skip_nodes:
            self._skip[n] = True
        self.next_scan = sim.now + self.scan_delay
        sim.every(self.poll_s, self.tick)
        sim.monitors.setdefault("hint-faults", self)

    def subscribe(self, fn, every_poll: bool = False) -> None:
        """fn(pages, fault_times, latency, now) for every poll that found faults (for
        every poll, possibly with no faults, if `every_poll`)."""
        self._subs.append((fn, bool(every_poll)))

    def account(self, local=0, remote=0, private=0, shared=0, failed=0) -> None:
        """Faults counted by task_numa_fault (numa_faults_locality, private/shared) and
        failed migrations (TNF_MIGRATE_FAIL), for the scan-period adaptation; the first
        counted after a pass ended adapts the period on what was counted before it."""
        if self._placement_due and local + remote + private + shared + failed > 0:
            self._placement_due = False
            self._adapt(self.sim.now)
        c = self._count
        c["local"] += float(local)
        c["remote"] += float(remote)
        c["private"] += float(private)
        c["shared"] += float(shared)
        c["failed"] += float(failed)

    def arm(self, pages, now=None) -> int:
        """Make pages PROT_NONE outside the scan (e.g. TPP's demoted pages)."""
        return self.hf.arm(pages, self.sim.now if now is None else now)

    def disarm_range(self, start: int, end: int) -> None:
        self.hf.disarm_range(start, end)

    # -- bounds ---------------------------------------------------------------------
    def windows(self) -> int:
        """task_nr_scan_windows: RSS in scan_size units, rounded up (at least 1)."""
        rss = int(self.sim.mem.allocated) or self.scan_pages
        return max(-(-rss // self.scan_pages), 1)

    def scan_min(self) -> float:
        """task_scan_min, in seconds."""
        scan_mb = self.scan_bytes / 2**20  # full-scale MB: the floor is a ratio of the two
        nwin = max(int(MAX_SCAN_WINDOW_MB // scan_mb), 1) if scan_mb < MAX_SCAN_WINDOW_MB else 1
        floor = 1.0 / nwin
        return max(floor, self.period_min / self.windows())

    def scan_max(self) -> float:
        """task_scan_max, in seconds."""
        return max(self.scan_min(), self.period_max / self.windows())

    # -- work ---------------------------------------------------------------------------
    def tick(self, now: float) -> None:
        """Every `poll`: hand over the faults since the last poll, then run the scan
        steps that are due (task_tick_numa: now >= numa_next_scan). A step runs at the
        first poll at or after its due time (late by < `poll`); next_scan advances by
        the period from the due time, so the scan rate is kept."""
        self.deliver(now)
        while now >= self.due() - 1e-12:
            due = self.due()
            if self.period is None:
                self.period = self.scan_min()  # task_scan_start (no NUMA group)
            self.period = min(max(self.period, self.scan_min()), self.scan_max())
            cost = self.scan_step(now)
            self._stamp = (due, cost) if self.overhead_cap else None
            self.next_scan = max(due + self.period, now - self.poll_s)

    def due(self) -> float:
        """When the next step may run: at numa_next_scan, and with the overhead cap once
        the scanning threads' runtime passes the last step's node_stamp + the period now
        (`stamp_gap` with the current period)."""
        if self._stamp is None:
            return self.next_scan
        t, cost = self._stamp
        return max(self.next_scan, t + stamp_gap(self.sim, self.period, cost, self.tick_s))

    def deliver(self, now: float) -> None:
        pages, times, lat = self.hf.poll(now)
        fs = self.hf.fault_seconds
        if fs > self._fault_s_charged:
            self.sim.stall(fs - self._fault_s_charged)
            self._fault_s_charged = fs
        for fn, always in self._subs:
            if always or len(pages):
                fn(pages, times, lat, now)

    def scan_step(self, now: float) -> float:
        """One task_numa_work: PROT_NONE the next scan_size with updates (at most 8 x
        scan_size of address space), from the cursor. Returns what it cost the scanning
        thread (seconds: its PTEs and its TLB flush)."""
        sim = self.sim
        mem = sim.mem
        n = mem.npages
        node = mem.node
        skip = self._skip
        pages_budget = self.scan_pages
        virt = 8 * self.scan_pages
        pos = self.cursor
        walked = updated = flushes = 0
        while True:
            end = min(pos + pages_budget, n)
            end = min(-(-end // 512) * 512, n)  # ALIGN(start + pages, HPAGE_SIZE)
            w, new = self.hf.arm_range(pos, end, node, skip, now)
            walked += w
            virt -= end - pos
            pos = end
            if new:
                updated += new
                flushes += 1
                break
            if virt <= 0 or pos >= n:
                break
        self.steps += 1
        self.ptes_walked += walked
        self.ptes_updated += updated
        cpu = walked * self.pte_walk_cost + updated * self.pte_update_cost
        self.cpu_seconds += cpu
        if cpu > 0:
            sim.charge_cpu(cpu, kind="monitor")
        if flushes:
            sim.stall(flushes * sim.machine.tlb_shootdown_s * _threads(sim))
        if pos >= n:
            pos = 0
            self.end_pass(now)
        self.cursor = pos
        return cpu + flushes * sim.machine.tlb_shootdown_s

    def end_pass(self, now: float) -> None:
        """numa_scan_seq++: the next counted fault adapts the period (`account`)."""
        self.seq += 1
        self._placement_due = True

    def _adapt(self, now: float) -> None:
        """update_task_scan_period on the faults counted since the last adaptation."""
        c = self._count
        if not self.adapt or self.period is None:
            return
        smin, smax = self.scan_min(), self.scan_max()
        if c["local"] + c["shared"] == 0 or c["failed"]:
            self.period = min(smax, 2 * self.period)
            self.next_scan = now + self.period
        else:
            slot = math.ceil(self.period * 1000 / NUMA_PERIOD_SLOTS) / 1000
            lr = int((c["local"] * NUMA_PERIOD_SLOTS) // max(c["local"] + c["remote"], 1))
            ps = int((c["private"] * NUMA_PERIOD_SLOTS) // max(c["private"] + c["shared"], 1))
            if ps >= NUMA_PERIOD_THRESHOLD:
                diff = max(ps - NUMA_PERIOD_THRESHOLD, 1) * slot
            elif lr >= NUMA_PERIOD_THRESHOLD:
                diff = max(lr - NUMA_PERIOD_THRESHOLD, 1) * slot
            else:
                diff = -(NUMA_PERIOD_THRESHOLD - max(lr, ps)) * slot
            self.period = min(max(self.period + diff, smin), smax)
        for k in c:
            c[k] = 0.0
        self.period_history.append((float(now), float(self.period)))

    def stats(self) -> dict:
        return {
            "scan_steps": self.steps,
            "scan_passes": self.seq,
            "ptes_walked": self.ptes_walked,
            "ptes_updated": self.ptes_updated,
            "hint_faults": int(self.hf.faults),
            "armed": int(self.hf.armed),
            "scan_period_s": float(self.period) if self.period is not None else None,
            "scan_cpu_seconds": self.cpu_seconds,
        }


# -- compiled kernels (tierlab.jit) --------------------------------------------
@kernel
def _poll_faults(pages, works, arm, arm_t, ta, wa, lo, now, flag):
    # Timeline.time_at_work of each work (searching from breakpoint lo when the work is
    # above it, which finds the same segment; from the previous work's breakpoint,
    # walking up, when the works ascend: a poll's works are a few ascending runs, and
    # a bisection's branches mispredict), at least its arm time, at most now
    n = works.shape[0]
    nb = wa.shape[0]
    times = np.empty(n)
    i = 0
    for q in range(n):
        w = works[q]
        if q > 0 and w >= works[q - 1]:
            while i < nb and wa[i] < w:
                i += 1
        elif nb >= 2 and w > wa[lo]:
            i = _lower(wa, w, lo, nb)
        else:
            i = _lower(wa, w, 0, nb)
        t = _time_at(w, i, ta, wa)
        a = arm_t[arm[q]]
        if a > t:
            t = a
        if t > now:
            t = now
        if t != t:
            return pages.astype(np.int64)[:0], times[:0], times[:0], False
        times[q] = t
    order = _runs_order(times)
    p_out = np.empty(n, np.int64)
    t_out = np.empty(n)
    l_out = np.empty(n)
    one = np.uint64(1)
    for j in range(n):
        q = order[j]
        p = pages[q]
        p_out[j] = p
        t_out[j] = times[q]
        l_out[j] = max(times[q] - arm_t[arm[q]], 0.0)
        flag[p >> 6] &= ~(one << np.uint64(p & 63))
    return p_out, t_out, l_out, True


def poll_faults(pages, works, arm, arm_t, ta, wa, lo: int, now: float, flag):
    """A hint-fault poll's output in one pass (`ScheduledHintFaults.poll`): each fault's
    time from its work (the timeline's time_at_work over breakpoints ta, wa; the search
    starts at breakpoint `lo` for works above it), raised to its arm time and capped at
    `now`; then (pages, times, latency) ordered by time, equal times in input order
    (the stable sort, by merging the input's sorted runs: the batches' prefixes), and
    the pages' armed bits cleared in `flag` (a `PageBits`' words). None where a time is
    NaN (the caller sorts)."""
    if works.shape[0] == 0:
        return None
    p, t, lat, ok = _poll_faults(pages, works, arm, arm_t, ta, wa, int(lo),
                                 float(now), flag)
    return (p, t, lat) if ok else None


@kernel
def _scan_arm(node, start, end, skip, flag, unalloc, out):
    # a NUMA scan step over pages [start, end): the PTE slots walked counted (every
    # slot of each PMD_PAGES block that holds an allocated page); the pages on
    # a node not skipped and not armed yet (their bit in the bitmap `flag` clear)
    # flagged armed and listed in out, in address order; returns (walked, listed)
    walked = 0
    k = 0
    one = np.uint64(1)
    first = start
    present = False
    for p in range(start, end):
        if p > first and p % PMD_PAGES == 0:
            if present:
                walked += p - first
            first = p
            present = False
        v = node[p]
        if v != unalloc:
            present = True
        b = one << np.uint64(p & 63)
        if not skip[v] and not flag[p >> 6] & b:
            flag[p >> 6] |= b
            out[k] = p
            k += 1
    if present:
        walked += end - first
    return walked, k


def scan_arm(node, start: int, end: int, skip, flag, unalloc: int, out):
    """The pages of [start, end) a NUMA scan step makes PROT_NONE, in one pass: those
    on a node not in `skip` (indexed by node,
    `unalloc` included) and not armed yet (their bit clear in `flag`, a `PageBits`'
    words); they are flagged armed and written to `out` in address order. Returns
    (the PTE slots walked, `pte_slots_walked`, how many were written)."""
    w, k = _scan_arm(node, int(start), int(end), skip, flag, np.uint8(unalloc), out)
    return int(w), int(k)
