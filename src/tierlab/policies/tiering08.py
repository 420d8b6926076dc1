"""`tiering-0.8`: Intel's Tiering-0.8 kernel patch set (NUMA-balancing promotion with
hot page selection by hint-fault latency, a promotion rate limit and kswapd demotion),
and `NumaScanner`, the small AutoNUMA page-table scanner it shares with `autotiering`.

Sources (facts; the code follows them, nothing is copied):

- Tiering-0.8 release notes / setup document of the tiering-0.8 branch, as quoted in
  public evaluation repositories ("Updates in tiering-0.8: rebased on v5.15;
  increase hot threshold quicker if too few pages pass the threshold; reset hot threshold
  if workload change is detected; batch migrate_pages(); support to decrease hot
  threshold if the pages just demoted are hot; support to promote pages asynchronously;
  support to wake up kswapd earlier to make promotion more smooth"), and its post-boot
  setup: demotion_enabled=1, numa_balancing=2, numa_balancing_rate_limit_mbps=30,
  optional numa_balancing_wake_up_kswapd_early=1, numa_balancing_scan_demoted=1,
  numa_balancing_demoted_threshold=16. The same settings appear in the MEMTIS/Chrono
  evaluation scripts and in AutoTiering's `run-bench.sh` ("Intel Tiering": rate limit 30).
- Huang Ying's memory-tiering series on lkml (RFC v2 "Rate limit NUMA migration
  throughput", Feb 2020; V10 "optimize page placement for memory tiering system",
  Nov 2021; "-V4 memory tiering: hot page selection", Jul 2022, merged in 5.18/6.1):
  promotion of slow-node pages on NUMA hint faults; a page is hot when the hint-fault
  latency (fault time - scan time) is below the hot threshold (default 1000 ms); the
  number of candidate pages is rate limited per target node in 1 s windows (count the
  candidates, stop promoting until the next second once the limit is reached); the
  threshold is re-tuned once per statistics interval (the max scan period, 60 s) by
  2/16 of the default toward matching the rate limit (>110% of the target: lower,
  <90%: raise; bounds [unit, 2 x default]); if the fast node has plenty of free memory
  any faulting page is promoted, bypassing threshold and limit; promotion fails when it
  would take the fast node below its high watermark, which wakes the fast node's kswapd
  to demote until free reaches high + PROMOTE_WATERMARK (10 MB, "ad hoc", V10
  discussion; later kernels use the low-high watermark gap, WMARK_PROMO).
- Upstream mm/mprotect.c (tiering mode): the scanner skips pages on top-tier nodes
  ("Skip scanning top tier node if normal numa balancing is disabled"); a page already
  PROT_NONE keeps the scan time recorded when it was made so. Top tier = nodes with CPUs
  (`node_is_toptier` in 5.18: N_CPU), i.e. DRAM, not CPU-less Optane/CXL.
- AutoNUMA scanner (kernel/sched/fair.c task_numa_work): every scan period it changes
  the protection of the next `numa_balancing_scan_size_mb` (256 MB) of the address
  space, counting 2 MiB ranges that had at least one PTE updated against that budget and
  skipping ranges without updates up to 8x the budget; the per-step period lies in
  [max(100 ms floor, scan_period_min / windows), max(that, scan_period_max / windows)],
  windows = RSS / scan size, period_min 1 s, period_max 60 s, first scan after
  scan_delay (1 s); the next step waits for the 3% overhead cap (32 x a step's cost
  shared by the threads, monitors/hint_faults.py `capped_gap`, task_numa_work's
  node_stamp, in 5.15 as in 6.12); once per full pass update_task_scan_period doubles
  the period when a migration failed or no faults were seen, else moves it by
  (ratio - 7)/10 of itself with ratio = 10 x max(local, private) faults / all faults
  (below 7: faster).

What Tiering-0.8 adds over upstream numa_balancing=2 (5.18-6.x) in this model: the
30 MiB/s rate limit of its setup (upstream's default, 65536 MB/s, is unlimited), the
early kswapd wake-up, the "quicker" threshold increase and the threshold drop when
just-demoted pages turn out hot. Skipping fast-node pages in the scan is upstream's
rule; we assume Tiering-0.8 (same author, same period) had it.

Defaults: hot_threshold 1 s, rate_limit 30 MiB/s, promote_wmark auto, kswapd_early
yes, scan_demoted yes with demoted_threshold 16 MiB/s, adjust_threshold yes (every
scan_period_max), enough_min 0, async_promote no, scan_size 256 MiB, scan periods
1 s-60 s, scan_delay 1 s, adapt_period yes, poll 250 ms.

Assumptions where the sources are silent (each is a parameter):

- Statistics of the threshold adjustment: the upstream rule; "increase quicker if too
  few pages pass" is modelled as a double step when fewer than half the target passed.
  "Reset if workload change is detected" is not modelled.
- "Decrease hot threshold if the pages just demoted are hot" (`scan_demoted`): pages
  demoted from a top-tier node are made PROT_NONE at demotion; when those that fault
  within the hot threshold exceed `demoted_threshold` per second (we read the knob's 16
  as MiB/s, the unit of the rate limit), the threshold drops one step at once.
- `promote_wmark` "auto": min(10 MiB, the engine's low-high watermark gap), so it stays
  proportionate on small machines (10 MiB would exceed a tiny test DRAM).
- Byte-denominated knobs (rate_limit, promote_wmark, demoted_threshold, enough_min,
  scan_size) are full-scale values; a `--scale F` miniature uses them x F
  (`sim.scaled_bytes`), as docs/model.md asks.
- Early kswapd wake (`kswapd_early`): kswapd of the target is woken when free would
  fall below high + promote watermark, before a promotion fails; it runs concurrently
  with the (rate-limited) promotions of a poll batch and keeps pace with them, so the
  batch finds room. Without it, promotions beyond free - high fail and wake kswapd.
- "Plenty of free memory" (pgdat_free_space_enough): free > high + max(enough_min,
  node/16); the kernel also has a 1 GiB floor, which dwarfs the DRAM of small test
  machines, so `enough_min` defaults to 0 here (set 1GiB for the kernel rule).
- Promotion target: the faulting CPU's node (the top node on the workload's socket);
  promotion runs in the faulting thread (`sync`, an application stall) unless
  `async_promote`. Faults are taken in the faulting thread (1.5 us stall each).
- All faults on slow-tier pages count as remote and shared (cpupid holds the scan time
  in tiering mode), so update_task_scan_period speeds up unless a promotion failed.
- Demotion: the engine's kswapd (LRU inactive tail, down the machine's demotion path).
- `NumaScanner` works in ticks of `poll` (250 ms): each tick hands over every fault
  since the last one (exact fault times and latencies; rate-limit windows follow fault
  times), then runs the scan steps due since the last tick (arming their pages at the
  tick), so a reaction is late by less than `poll`. Its faults come from the fault
  calendar the `hint-faults` monitor uses (`ScheduledHintFaults`). Before 2026-11-28
  it kept one fault generator per second of scan steps and polled those armed long
  ago less often (age / 8), which delayed reactions to faults of pages cold for a long
  time; the calendar makes a poll cost O(faults), so that shortcut is gone.
"""
from __future__ import annotations


import numpy as np

from ..engine.memory import UNALLOC
from ..errors import TierlabError
from ..field import uniq
from ..monitors.base import Monitor, backend_of
from ..monitors.hint_faults import capped_gap, make_hint_faults
from ..monitors.primitives import PTE_CHECK_SECONDS
from ..params import parse_flag
from ..units import PAGE, parse_duration, parse_size
from .base import POLICIES, Policy
from ..structures import PageBits, page_dtype


# -----------------------------------------------------------------------------------
# parameter helpers (spec params arrive as strings)
# -----------------------------------------------------------------------------------
def _pos_duration(value, what: str, allow_zero: bool = False) -> float:
    x = parse_duration(value, what)
    if x < 0 or (x == 0 and not allow_zero):
        raise TierlabError(f"bad {what} {value!r}: must be {'>= 0' if allow_zero else '> 0'}")
    return x


def _pos_size(value, what: str, allow_zero: bool = False) -> int:
    x = parse_size(value, what)
    if x == 0 and not allow_zero:
        raise TierlabError(f"bad {what} {value!r}: must be > 0")
    return x


def top_tier_nodes(machine) -> list[int]:
    """Linux `node_is_toptier` (5.18): nodes with CPUs. If every node has CPUs, the
    DRAM nodes."""
    top = [n for n in machine.demotion if machine.tiers[n].has_cpus]
    if len(top) == machine.nnodes:
        top = machine.fast_nodes() or machine.demotion[:1]
    return top


def cpu_node(machine) -> int:
    """The node of the workload's CPUs: the first node with CPUs on its socket."""
    for n in machine.demotion:
        t = machine.tiers[n]
        if t.has_cpus and t.socket == machine.cpu_socket:
            return n
    return machine.demotion[0]


# -----------------------------------------------------------------------------------
# AutoNUMA scanner
# -----------------------------------------------------------------------------------
class _Lazy:
    """PROT_NONE pages of `lazy` nodes made so at one time `t_arm`: only whether they
    were touched by the next scan matters (their faults migrate nothing), so no fault
    time is simulated. Pages in 4 bytes while they fit, the time once per window."""

    __slots__ = ("pages", "t_arm", "lo", "hi")

    def __init__(self, pages, t_arm: float):
        self.pages, self.t_arm = pages, t_arm
        self.lo, self.hi = int(pages[0]), int(pages[-1]) + 1


class NumaScanner(Monitor):
    """A minimal AutoNUMA page-table scanner (task_numa_work) feeding NUMA hint faults.

    A monitor (it models what the MMU and the kernel's fault path see, drawn from the
    access source), kept beside the policies that use it: it works on the simulation
    itself (`backend_of`), not on the policy's view of it.

    Its faults come from the shared fault calendar (`monitors.hint_faults.
    make_hint_faults`: `ScheduledHintFaults` under the rate model), as the
    `hint-faults` monitor's do, so a poll costs O(log armed + faults) and every tick
    hands over every fault up to now; whether a page is PROT_NONE is its flag there
    (lazy pages: a bool per page of their own). See the module docstring for the kernel
    rules it follows and its simplifications. Written for `tiering-0.8` and
    `autotiering`; the shared `hint-faults` monitor may replace it later.

    `scan_size` is the full-scale byte budget of a step (256 MB); the run's miniature
    scans `sim.scaled_bytes(scan_size)` per step, and the 100 ms floor (the kernel's
    2560 MB/s cap) is computed at full scale, so the miniature scans the same fraction
    of its memory per second.

    `eligible`: nodes whose pages are made PROT_NONE (tiering mode: the slow ones;
    AutoNUMA: all). `lazy`: eligible nodes whose faults never migrate anything (the
    CPU's own node): their pages are armed too, but whether each was touched is only
    resolved when the scanner comes back to it (an accessed test over the armed
    interval, the same Bernoulli as "its first access happened"), and their fault
    stalls are charged then -- equivalent for a policy that only needs the per-scan
    touched bit of those pages, and far cheaper. A page of a lazy node that migrated
    meanwhile counts as touched (migration installs an accessible PTE).
    `on_scan(pages, was_armed, now)`: called for the eligible pages of each scanned
    range before they are re-armed (AutoTiering's access history: a page still
    PROT_NONE was not accessed since the last scan). `tick(now)` runs the due scan step
    and polls; it returns the faults seen on non-lazy pages (pages, fault times,
    latencies), sorted by fault time. Hint faults and the scan itself (task_numa_work
    runs in the task's context) are charged as application stalls: `fault_cost` per
    fault, 150 ns per PTE examined and one TLB flush per step that armed pages.
    """

    MAX_SCAN_WINDOW_MB = 2560  #: kernel MAX_SCAN_WINDOW (MB/s cap of the scan rate)
    BLOCK = 512  #: 2 MiB PMD range, the unit counted against the scan budget

    def __init__(self, sim, name: str, eligible, *, scan_size: int = 256 << 20,
                 period_min: float = 1.0, period_max: float = 60.0, scan_delay: float = 1.0,
                 poll: float = 0.25, adapt: bool = True, on_scan=None, lazy=(),
                 pte_cost: float = PTE_CHECK_SECONDS, overhead_cap: bool = True):
        sim = backend_of(sim)
        self.sim = sim
        self.rng = sim.rng_for(name)
        self.rng_lazy = sim.rng_for(name + "/lazy")
        self.eligible = np.zeros(256, dtype=bool)
        self.eligible[[int(n) for n in eligible]] = True
        self.eligible[UNALLOC] = False
        self.lazy = np.zeros(256, dtype=bool)
        self.lazy[[int(n) for n in lazy]] = True
        self.lazy &= self.eligible
        # a byte budget: scaled with --scale (the rate cap too, so the floor is not)
        self.scan_pages = max(1, int(sim.scaled_bytes(scan_size)) // PAGE)
        self.virt_pages = 8 * self.scan_pages
        mb = max(1, int(scan_size) >> 20)
        self.floor = 1.0 / max(1, self.MAX_SCAN_WINDOW_MB // mb)
        self.period_min, self.period_max = float(period_min), float(period_max)
        self.poll_period = float(poll)
        self.adapt = bool(adapt)
        self.overhead_cap = bool(overhead_cap)
        self.on_scan = on_scan
        self.pte_cost = float(pte_cost)
        self.fault_cost = float(sim.machine.hint_fault_s)
        self.hand = 0
        self.period = None  # per-step period, set at the first step
        self.next_step = float(scan_delay)
        self.hf = make_hint_faults(sim.source, self.rng, fault_cost=self.fault_cost,
                                   npages=sim.mem.npages, current_work=lambda: sim.work)
        self.lazy_windows: list[_Lazy] = []
        #: lazy pages made PROT_NONE, a bit each (the others' bit is the fault
        #: generator's); None without lazy nodes
        self.lazy_armed = PageBits.zeros(sim.mem.npages) if self.lazy.any() else None
        self._lazy_dt = page_dtype(sim.mem.npages)
        self._pass = {"faults": 0, "local": 0, "failed": 0}
        # totals
        self.faults = 0
        self.lazy_faults = 0
        self.armed_pages = 0
        self.scanned_pages = 0
        self.steps = 0
        self.passes = 0

    # -- period (task_scan_min / task_scan_max) -----------------------------------
    def bounds(self) -> tuple[float, float]:
        rss = max(int(self.sim.mem.allocated), 1)
        windows = -(-rss // self.scan_pages)
        smin = max(self.floor, self.period_min / windows)
        smax = max(smin, self.period_max / windows)
        return smin, smax

    def report(self, local: int = 0, failed: int = 0) -> None:
        """The policy's view of the faults it handled: local ones (page already on the
        CPU's node) and failed migrations, for update_task_scan_period."""
        self._pass["local"] += int(local)
        self._pass["failed"] += int(failed)

    def _end_pass(self) -> None:
        """update_task_scan_period, once per full pass (numa_scan_seq)."""
        self.passes += 1
        st = self._pass
        smin, smax = self.bounds()
        p = self.period
        if self.adapt and p is not None:
            if st["faults"] == 0 or st["failed"] > 0:
                p = min(smax, 2 * p)
            else:
                slot = p / 10
                ratio = (10 * st["local"]) // st["faults"]  # private faults: assumed 0
                diff = max(ratio - 7, 1) * slot if ratio >= 7 else -(7 - ratio) * slot
                p = p + diff
            self.period = min(max(p, smin), smax)
        self._pass = {"faults": 0, "local": 0, "failed": 0}

    # -- arming -------------------------------------------------------------------
    def is_armed(self, pages) -> np.ndarray:
        """Whether each page is PROT_NONE, as of the last poll (lazy pages: of their
        last resolution)."""
        pages = np.asarray(pages, dtype=np.int64)
        out = self.hf.is_armed(pages)
        if self.lazy_armed is not None:
            out |= self.lazy_armed.get(pages)
        return out

    def arm(self, pages, now: float) -> int:
        """Make sorted unique `pages` PROT_NONE now; pages already armed keep their
        earlier scan time."""
        pages = np.asarray(pages, dtype=np.int64)
        if len(pages) == 0:
            return 0
        pages = pages[~self.is_armed(pages)]
        if len(pages) == 0:
            return 0
        n = len(pages)
        lazy = self.lazy[self.sim.mem.node[pages]]
        if lazy.any():
            lp = pages[lazy]
            self.lazy_armed.set(lp, True)
            self.lazy_windows.append(_Lazy(lp.astype(self._lazy_dt), float(now)))
            pages = pages[~lazy]
        if len(pages):
            self.hf.arm(pages, now)
        self.armed_pages += n
        return n

    def disarm_range(self, start: int, end: int) -> None:
        """Pages [start, end) were freed."""
        self.hf.disarm_range(start, end)
        if not self.lazy_windows:
            return
        self.lazy_armed.clear(start, end)
        for lw in self.lazy_windows:
            lw.pages = lw.pages[(lw.pages < start) | (lw.pages >= end)]
        self.lazy_windows = [_Lazy(lw.pages, lw.t_arm) for lw in self.lazy_windows
                             if len(lw.pages)]

    def _resolve_lazy(self, start: int, end: int, now: float) -> None:
        """Lazy pages in [start, end): touched since armed (their hint fault fired) or
        migrated -> no longer PROT_NONE; the others stay armed with their scan time."""
        sim = self.sim
        keep_windows = []
        for lw in self.lazy_windows:
            if not (lw.lo < end and lw.hi > start):
                keep_windows.append(lw)
                continue
            inr = (lw.pages >= start) & (lw.pages < end)
            p = lw.pages[inr]
            still = self.lazy[sim.mem.node[p]]
            touched = np.zeros(len(p), dtype=bool)
            if still.any():
                q = p[still].astype(np.int64)
                touched[still] = sim.source.accessed(q, q + 1, np.full(q.shape[0], lw.t_arm),
                                                     now, self.rng_lazy)
            gone = ~still | touched
            self.lazy_armed.set(p[gone], False)
            k = int(touched.sum())
            if k:
                self.lazy_faults += k
                self.faults += k
                self._pass["faults"] += k
                self._pass["local"] += k
                sim.stall(k * self.fault_cost)
            keep = ~inr
            keep[np.flatnonzero(inr)[~gone]] = True
            if keep.any():
                keep_windows.append(_Lazy(lw.pages[keep], lw.t_arm))
        self.lazy_windows = keep_windows

    def _step(self, now: float) -> float:
        """One scan step; returns what it cost the scanning thread (seconds)."""
        sim = self.sim
        mem = sim.mem
        n = mem.npages
        smin, smax = self.bounds()
        if self.period is None:
            self.period = min(max(self.next_step, smin), smax)  # scan_delay, clamped
        if self.hand >= n:
            self.hand = 0
            self._end_pass()
        start = self.hand
        end = min(n, start + self.virt_pages)
        if self.lazy_windows:
            self._resolve_lazy(start, end, now)
        idx, armed, new, end = self._scan_range(start, end)
        if self.on_scan is not None and len(idx):
            self.on_scan(idx, armed, now)
        fresh = idx[new]
        flush = sim.machine.tlb_shootdown_s if len(fresh) else 0.0
        if len(fresh):
            self.arm(fresh, now)
            sim.stall(flush * sim.threads)
        walk = len(idx) * self.pte_cost
        if len(idx):
            sim.stall(walk)
        self.scanned_pages += len(idx)
        self.steps += 1
        self.hand = end
        return walk + flush

    def _scan_range(self, start: int, end: int):
        """The eligible pages a step walks from `start` (with whether each is armed, and
        not), and where the step ends: at `end` (8 x scan_size), or at the end of the
        2 MiB range that brought the ranges with PTEs to change past the scan_size
        budget. Read in pieces of 2 x scan_size, cut at 2 MiB boundaries, so a step
        stops reading once a range beyond the budget is found."""
        mem = self.sim.mem
        B = self.BLOCK
        limit = -(-self.scan_pages // B)
        step = max(2 * self.scan_pages, B)
        parts, blocks, nblocks = [], [], 0
        lo = start
        while lo < end:
            hi = min(end, max((lo + step) // B * B, lo + 1))
            idx = np.flatnonzero(self.eligible[mem.node[lo:hi]]) + lo
            armed = self.is_armed(idx)
            new = ~armed
            parts.append((idx, armed, new))
            if new.any():
                b = idx[new] // B  # sorted: unique without a hash or a sort
                b = b[np.concatenate(([True], b[1:] != b[:-1]))]
                blocks.append(b)
                nblocks += b.shape[0]
                if nblocks > limit:
                    break
            lo = hi
        if not parts:  # an empty range
            return np.zeros(0, np.int64), np.zeros(0, bool), np.zeros(0, bool), end
        idx, armed, new = (x[0] if len(x) == 1 else np.concatenate(x) for x in zip(*parts))
        if nblocks > limit:
            end = int(np.concatenate(blocks)[limit - 1] + 1) * B
            keep = idx < end
            idx, armed, new = idx[keep], armed[keep], new[keep]
        return idx, armed, new, end

    # -- faults ---------------------------------------------------------------------
    def tick(self, now: float):
        """Hand over every fault up to now (pages, fault times, latencies, by fault
        time), then run the scan steps due."""
        pages, times, lat = self.hf.poll(now)
        k = len(pages)
        if k:
            self.faults += k
            self._pass["faults"] += k
            self.sim.stall(k * self.fault_cost)
        eps = 1e-9 * max(1.0, now)
        while now + eps >= self.next_step:  # every step due since the last tick, now
            due = self.next_step
            cost = self._step(now)
            self.next_step = due + (capped_gap(self.sim, self.period, cost)
                                    if self.overhead_cap else self.period)
        return pages, times, lat

    def stats(self) -> dict:
        return {"hint_faults": int(self.faults), "lazy_faults": int(self.lazy_faults),
                "scanned_pages": int(self.scanned_pages),
                "armed_pages": int(self.armed_pages), "scan_steps": int(self.steps),
                "scan_passes": int(self.passes),
                "scan_step_period_s": float(self.period or 0.0)}


def rate_limit_window(times, counted, limit: float, state: list, window: float = 1.0):
    """numa_promotion_rate_limit over faults sorted by time: each `counted` fault adds
    one candidate to the count of its `window`-second window (aligned windows; the
    kernel restarts its window at the first fault after a second has passed); a fault is
    allowed while its window's count, itself included, stays within `limit`. `state` =
    [window id, count] carried between calls. Returns the allowed mask."""
    times = np.asarray(times, dtype=float)
    counted = np.asarray(counted, dtype=bool)
    ok = np.zeros(len(times), dtype=bool)
    if not counted.any():
        return ok
    idx = np.flatnonzero(counted)
    wid = np.floor(times[idx] / window).astype(np.int64)
    first = np.concatenate(([True], wid[1:] != wid[:-1]))
    grp_start = np.maximum.accumulate(np.where(first, np.arange(len(wid)), 0))
    count = np.arange(len(wid)) - grp_start + 1
    carry = np.where(wid == state[0], state[1], 0)
    count = count + carry
    ok[idx] = count <= limit
    state[0], state[1] = int(wid[-1]), int(count[-1])
    return ok


# -----------------------------------------------------------------------------------
# Tiering-0.8
# -----------------------------------------------------------------------------------
@POLICIES.register("tiering-0.8")
class Tiering08(Policy):
    """Intel Tiering-0.8: hint-fault-latency hot pages promoted, rate limited; kswapd demotes."""

    def __init__(self, hot_threshold="1s", rate_limit="30MiB", promote_wmark="auto",
                 kswapd_early="yes", scan_demoted="yes", demoted_threshold="16MiB",
                 adjust_threshold="yes", enough_min="0", async_promote="no",
                 scan_size="256MiB", scan_period_min="1s", scan_period_max="60s",
                 scan_delay="1s", adapt_period="yes", poll="250ms", overhead_cap="yes"):
        super().__init__(hot_threshold=hot_threshold, rate_limit=rate_limit,
                         promote_wmark=promote_wmark, kswapd_early=kswapd_early,
                         scan_demoted=scan_demoted, demoted_threshold=demoted_threshold,
                         adjust_threshold=adjust_threshold, enough_min=enough_min,
                         async_promote=async_promote, scan_size=scan_size,
                         scan_period_min=scan_period_min, scan_period_max=scan_period_max,
                         scan_delay=scan_delay, adapt_period=adapt_period, poll=poll,
                         overhead_cap=overhead_cap)
        self.overhead_cap = parse_flag(overhead_cap, "tiering-0.8 overhead_cap")
        self.ref_th = _pos_duration(hot_threshold, "tiering-0.8 hot_threshold")
        self.rate_limit = _pos_size(rate_limit, "tiering-0.8 rate_limit (bytes/s)",
                                    allow_zero=True)
        if str(promote_wmark).strip().lower() == "auto":
            self.promote_wmark_bytes = None  # min(10 MiB, the low-high watermark gap)
        else:
            self.promote_wmark_bytes = _pos_size(promote_wmark, "tiering-0.8 promote_wmark",
                                                 allow_zero=True)
        self.kswapd_early = parse_flag(kswapd_early, "tiering-0.8 kswapd_early")
        self.scan_demoted = parse_flag(scan_demoted, "tiering-0.8 scan_demoted")
        self.demoted_threshold = _pos_size(demoted_threshold,
                                           "tiering-0.8 demoted_threshold (bytes/s)")
        self.adjust = parse_flag(adjust_threshold, "tiering-0.8 adjust_threshold")
        self.enough_min = _pos_size(enough_min, "tiering-0.8 enough_min", allow_zero=True)
        self.sync = not parse_flag(async_promote, "tiering-0.8 async_promote")
        self.scan_size = _pos_size(scan_size, "tiering-0.8 scan_size")
        self.scan_period_min = _pos_duration(scan_period_min, "tiering-0.8 scan_period_min")
        self.scan_period_max = _pos_duration(scan_period_max, "tiering-0.8 scan_period_max")
        if self.scan_period_max < self.scan_period_min:
            raise TierlabError("tiering-0.8: scan_period_max must be >= scan_period_min")
        self.scan_delay = _pos_duration(scan_delay, "tiering-0.8 scan_delay", allow_zero=True)
        self.adapt_period = parse_flag(adapt_period, "tiering-0.8 adapt_period")
        self.poll = _pos_duration(poll, "tiering-0.8 poll")

    # -- setup ----------------------------------------------------------------------
    def attach(self, sim):
        super().attach(sim)
        m = sim.machine
        self.top = top_tier_nodes(m)
        self.is_top = np.zeros(256, dtype=bool)
        self.is_top[self.top] = True
        self.target = cpu_node(m)
        t = self.target
        if self.promote_wmark_bytes is None:
            gap = int(sim.mem.wmark_high[t] - sim.mem.wmark_low[t])
            self.promote_wmark = min(int(sim.scaled_bytes(10 << 20)) // PAGE, gap)
        else:
            self.promote_wmark = int(sim.scaled_bytes(self.promote_wmark_bytes)) // PAGE
        slow = [n for n in range(m.nnodes) if not self.is_top[n]]
        self.scanner = NumaScanner(sim, "tiering-0.8/scan", slow, scan_size=self.scan_size,
                                   period_min=self.scan_period_min,
                                   period_max=self.scan_period_max,
                                   scan_delay=self.scan_delay, poll=self.poll,
                                   adapt=self.adapt_period, overhead_cap=self.overhead_cap)
        self.th = self.ref_th
        self.unit = self.ref_th * 2 / 16
        # byte-denominated knobs are full-scale values: the miniature's are x scale
        self.limit_pages = sim.scaled_bytes(self.rate_limit) / PAGE  # candidates/s
        self.dem_limit_pages = sim.scaled_bytes(self.demoted_threshold) / PAGE
        self.enough_pages = int(sim.scaled_bytes(self.enough_min)) // PAGE
        self._rl = [-1, 0]
        self._dem_rl = [-1, 0]
        self.next_adjust = self.scan_period_max
        self.cand_interval = 0
        self._demoted: list = []  # (pages, time) demoted from top-tier nodes
        self._recent_dem = (np.zeros(0, dtype=np.int64), np.zeros(0))
        self.counts = {"candidates": 0, "rate_limited": 0, "not_hot": 0, "promoted": 0,
                       "promote_failed": 0, "enough_free": 0, "kswapd_wakeups": 0,
                       "demoted_hot": 0, "threshold_drops_demoted": 0}
        sim.every(self.poll, self.tick)

    def on_free(self, start, end):
        self.scanner.disarm_range(start, end)

    def select_victims(self, node, n):
        """The LRU's choice (the engine default); pages demoted from a top-tier node are
        remembered for `scan_demoted`."""
        victims = self.sim.lru.reclaim_victims(node, n)
        if self.scan_demoted and self.is_top[node] and len(victims):
            self._demoted.append(victims)
        return victims

    # -- helpers ----------------------------------------------------------------------
    def _free(self, node) -> int:
        return int(self.sim.mem.free[node])

    def _kswapd(self, node: int, goal: int) -> None:
        """Wake kswapd of `node` to demote until free reaches `goal` pages; a kswapd
        round reclaims at least max(high watermark, SWAP_CLUSTER_MAX) pages
        (mm/vmscan.c kswapd_shrink_node), which gives promotions some slack."""
        need = goal - self._free(node)
        if need > 0 and self.sim.machine.lower(node) is not None:
            self.counts["kswapd_wakeups"] += 1
            self.sim.reclaim(node, max(int(need), int(self.sim.mem.wmark_high[node]), 32))

    def _enough_free(self) -> bool:
        """pgdat_free_space_enough: free > high + max(enough_min, node/16)."""
        mem = self.sim.mem
        t = self.target
        enough = max(self.enough_pages, int(mem.capacity[t]) >> 4)
        return self._free(t) > int(mem.wmark_high[t]) + enough

    def _arm_demoted(self, now: float) -> None:
        if not self._demoted:
            return
        pages = uniq(np.concatenate(self._demoted), runs=True)
        self._demoted = []
        pages = pages[~self.is_top[self.sim.node_of(pages)]]
        if len(pages):
            self.scanner.arm(pages, now)
            old_p, old_t = self._recent_dem
            keep = old_t >= now - 2 * self.ref_th
            p = np.concatenate((old_p[keep], pages))
            t = np.concatenate((old_t[keep], np.full(len(pages), now)))
            u, first = np.unique(p[::-1], return_index=True)
            self._recent_dem = (u, t[::-1][first])

    # -- the fault path (should_numa_migrate_memory + migrate_misplaced_page) ---------
    def tick(self, now):
        if self.scan_demoted:
            self._arm_demoted(now)
        pages, times, lat = self.scanner.tick(now)
        if len(pages):
            self._handle(pages, times, lat, now)

    def _handle(self, pages, times, lat, now):
        sim = self.sim
        node = sim.node_of(pages)
        slow = (node != UNALLOC) & ~self.is_top[node]
        pages, times, lat = pages[slow], times[slow], lat[slow]
        if len(pages) == 0:
            return
        c = self.counts
        if self._enough_free():
            cand = np.ones(len(pages), dtype=bool)
            c["enough_free"] += len(pages)
        else:
            if self.adjust and now + 1e-9 >= self.next_adjust:
                self._adjust_threshold()
                self.next_adjust = now + self.scan_period_max
            hot = lat < self.th
            c["not_hot"] += int((~hot).sum())
            c["candidates"] += int(hot.sum())
            self.cand_interval += int(hot.sum())
            ok = rate_limit_window(times, hot, self.limit_pages, self._rl)
            c["rate_limited"] += int((hot & ~ok).sum())
            cand = ok
            if self.scan_demoted and len(self._recent_dem[0]):
                self._check_demoted(pages[hot], times[hot], lat[hot])
        todo = pages[cand]
        if len(todo) == 0:
            return
        mem = sim.mem
        t = self.target
        high = int(mem.wmark_high[t])
        if self.kswapd_early and self._free(t) < high + self.promote_wmark + len(todo):
            # woken below high + promote watermark, kswapd demotes concurrently with the
            # promotions of this batch and keeps pace with them (they are rate limited)
            self._kswapd(t, high + self.promote_wmark + len(todo))
        room = max(self._free(t) - high, 0)
        moved = sim.migrate(todo[:room], t, sync=self.sync, reason="promote") if room else 0
        failed = len(todo) - moved
        c["promoted"] += moved
        c["promote_failed"] += failed
        if failed:
            self._kswapd(t, high + self.promote_wmark)  # migrate_balanced_pgdat failed
        self.scanner.report(local=0, failed=failed)

    def _check_demoted(self, pages, times, lat):
        """Hot faults of pages demoted recently: above `demoted_threshold` per second,
        lower the hot threshold one step (our reading of numa_balancing_scan_demoted)."""
        dp, dt = self._recent_dem
        pos = np.minimum(np.searchsorted(dp, pages), len(dp) - 1)
        hit = (dp[pos] == pages) & (times >= dt[pos])
        if not hit.any():
            return
        self.counts["demoted_hot"] += int(hit.sum())
        ok = rate_limit_window(times, hit, self.dem_limit_pages, self._dem_rl)
        if (hit & ~ok).any():
            self.th = max(self.th - self.unit, self.unit)
            self.counts["threshold_drops_demoted"] += 1
            self._dem_rl[1] = 0

    def _adjust_threshold(self):
        """numa_promotion_adjust_threshold, once per statistics interval."""
        ref = self.limit_pages * self.scan_period_max
        cand = self.cand_interval
        self.cand_interval = 0
        if ref <= 0:
            return
        if cand > ref * 11 / 10:
            self.th = max(self.th - self.unit, self.unit)
        elif cand < ref * 9 / 10:
            steps = 2 if cand < ref / 2 else 1
            self.th = min(self.th + steps * self.unit, 2 * self.ref_th)

    def stats(self):
        out = {k: int(v) for k, v in self.counts.items()}
        out["hot_threshold_s"] = float(self.th)
        out.update(self.scanner.stats())
        return out
