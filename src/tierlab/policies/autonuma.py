"""Linux NUMA balancing baselines: `autonuma` (numa_balancing=1), `autonuma-tiering`
(numa_balancing=2, memory tiering mode, Linux >= 6.1) and `autonuma-tiering-mglru`
(the same promotion with the multi-gen LRU reclaiming). IDT (HPDC'24) normalises its
results to `autonuma` and names `autonuma-tiering-mglru` the best prior system.

All three take hint faults from the `hint-faults` monitor (task_numa_work; see
monitors/hint_faults.py for the scanner's rules and costs) and migrate in the faulting
thread's context (do_numa_page -> migrate_misplaced_folio: a synchronous copy, charged
as an application stall; `fault_migrate`).

Target node: mpol_misplaced with the default policy returns the node of the faulting
CPU; the workload's threads run on `machine.cpu_socket`, so the target is that
socket's first node with CPUs on the demotion path (`cpu_node`): node 0 on every
built-in machine. Pages on other nodes with CPUs (remote DRAM of the 4-tier machine)
are promoted to it as well (see `toptier`).

Migration room (migrate_balanced_pgdat, mm/migrate.c): a misplaced page moves only if
the target keeps more than its high watermark + 1 page free afterwards, i.e. at most
free - high - 1 pages per batch of faults.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import TierlabError
from ..jit import kernel
from ..monitors.hint_faults import NumaScanner
from ..monitors.pte_scan import PteScan
from ..params import parse_flag, parse_number
from ..units import PAGE, parse_duration, parse_size
from .base import POLICIES, Policy
from ..structures import SlotBits

UNALLOC = 255


# -----------------------------------------------------------------------------------
# shared helpers (also used by tpp.py)
# -----------------------------------------------------------------------------------
def cpu_node(machine) -> int:
    """Node of the faulting CPU: the first node on the demotion path that has CPUs and
    hangs off the workload's socket (numa_node_id() of its threads)."""
    for n in machine.demotion:
        t = machine.tiers[n]
        if t.socket == machine.cpu_socket and t.has_cpus:
            return n
    for n in machine.demotion:
        if machine.tiers[n].has_cpus:
            return n
    return machine.demotion[0]


def toptier_nodes(machine, which: str) -> list[int]:
    """Top-tier nodes (node_is_toptier). "cpu": only the faulting CPU's node, so every
    other node (remote DRAM included) is a lower tier whose pages are scanned and
    promoted -- the 4-tier view of IDT (0 -> 1 -> 2 -> 3) and TPP's patch
    (node_is_toptier(node) == (node == 0)). "dram": every node with CPUs, as Linux's
    default memory tiers put all DRAM nodes in the top tier; remote DRAM pages are then
    neither scanned nor promoted."""
    which = str(which).strip().lower()
    if which == "cpu":
        return [cpu_node(machine)]
    if which == "dram":
        return [n for n in range(machine.nnodes) if machine.tiers[n].has_cpus]
    raise TierlabError(f"bad toptier {which!r}; valid: cpu, dram")


def fault_migrate(sim, pages, dst: int, reason: str) -> int:
    """Migrate pages on their hint faults, synchronously (the faulting thread copies:
    `sync=True`). Since Huang Ying's 2021 change to do_numa_page (mm/memory.c: the PTE is
    no longer made present again before migrate_misplaced_page; "the CPU cycles spent by
    TLB shooting down decreases greatly") the page migrates while its PTE is still
    PROT_NONE, which no TLB may cache, so unmapping it needs no shootdown: nothing is
    charged per page beyond the engine's cost model (the copy, one shootdown per batch).
    Each fault's thread copies its own page, so the pages land one after another over the
    stall the copies cost (`land_over_stall`), not all at the poll that delivered them."""
    pages = np.asarray(pages, dtype=np.int64)
    if pages.shape[0] == 0:
        return 0
    return sim.migrate(pages, dst, sync=True, reason=reason, land_over_stall=True)


def migrate_room(sim, dst: int) -> int:
    """Pages migrate_balanced_pgdat lets into `dst` now: free must stay > high + 1."""
    mem = sim.mem
    return max(int(mem.free[dst] - mem.wmark_high[dst]) - 1, 0)


def promo_wmark(sim, node: int) -> int:
    """WMARK_PROMO (Linux >= 6.1): high + one watermark step (high - low); kswapd
    balances a top-tier node to it in memory tiering mode."""
    mem = sim.mem
    return int(mem.wmark_high[node] + (mem.wmark_high[node] - mem.wmark_low[node]))


#: what the faulting thread made of a hint fault on a slow page (`fault_thread`)
REFUSED, ENOUGH, TOO_COLD, RATE_LIMITED, PROMOTED, NO_ROOM = 0, 1, 2, 3, 4, 5
#: the thread's state between polls and resumptions (`fault_thread`'s `st`)
_END, _T_AWAKE, _TAKEN, _NR_CAND, _RL_START, _RL_NR_CAND, _ENOUGH_LEFT = range(7)


@kernel
def _fault_thread(t, lat, out, j, st, fault_s, copy_s, threads, use_th, th, th_start,
                  th_period, rate_limit, room0, rate, wake):
    # fault_thread's loop from fault j; returns where it stopped (a threshold tuning due)
    end, t_a, taken = st[_END], st[_T_AWAKE], st[_TAKEN]
    nr_cand, rl_start, rl_nr_cand = st[_NR_CAND], st[_RL_START], st[_RL_NR_CAND]
    enough = st[_ENOUGH_LEFT]
    n = t.shape[0]
    while j < n:
        h = t[j] if t[j] > end else end
        cost = fault_s
        if enough > 0:
            enough -= 1
            out[j] = ENOUGH
            cost += copy_s
        elif use_th and h - th_start > th_period:
            break
        elif use_th and lat[j] + (h - t[j]) >= th:
            out[j] = TOO_COLD
        else:
            limited = False
            if use_th:
                nr_cand += 1
                if h - rl_start > 1.0:
                    rl_start = h
                    rl_nr_cand = nr_cand
                limited = nr_cand - rl_nr_cand >= rate_limit
            if limited:
                out[j] = RATE_LIMITED
            else:
                supply = room0
                if t_a >= 0.0 and h > t_a:
                    supply += math.floor(rate * (h - t_a))
                if taken < supply:
                    out[j] = PROMOTED
                    taken += 1
                    cost += copy_s
                else:
                    out[j] = NO_ROOM
                    if t_a < 0.0 and wake:
                        t_a = h
        end = h + cost / threads
        j += 1
    st[_END], st[_T_AWAKE], st[_TAKEN] = end, t_a, taken
    st[_NR_CAND], st[_RL_START], st[_RL_NR_CAND] = nr_cand, rl_start, rl_nr_cand
    st[_ENOUGH_LEFT] = enough
    return j


@dataclass
class KswapdPoll:
    """The node and kswapd as a poll's faults found them (`Kswapd.begin`): pages above
    the watermark (`room0`), free pages (`free0`), whether kswapd was asleep (`woke`: a
    failure wakes it), and since when it is awake (`t_a`, None: asleep)."""
    room0: int
    free0: int
    woke: bool
    t_a: float | None


class Kswapd:
    """kswapd of one top-tier node seen from promotion: a process of bounded throughput.

    Promotions need free pages above the high watermark (migrate_balanced_pgdat); a
    failed promotion (tiering mode) or free space under `target` (TPP's check at every
    scheduler tick) wakes kswapd, which demotes until `target` is free. Its demotion is
    a page copy, so it frees at most `rate` pages per second (default migrate_bw / 4 KiB,
    1.5 GB/s x scale: one kswapd thread per node doing migrate_pages), and it runs
    concurrently with the faults: with room0 pages above the watermark at a poll and
    kswapd supplying rate x (t - t_awake) more, a fault taken at t finds a page iff
    fewer faults than that have found one (`fault_thread`). kswapd's demotions of the
    interval are then done (sim.reclaim, victims from the policy or the LRU, charged as
    kswapd CPU) before the promotions that used them (`settle`); it stays awake while
    free < target. Assumption: kswapd keeps running while a poll interval's faults
    consume what it frees (it would be re-woken at once).
    """

    def __init__(self, sim, node: int, target: int, rate: float | None = None):
        self.sim = sim
        self.node = int(node)
        self.target = int(target)
        self.rate = float(rate) if rate is not None else sim.machine.migrate_bw / PAGE
        self.awake = False
        self.since = sim.now
        self.t_prev = sim.now
        self.wakeups = 0
        self.freed = 0

    def wake(self, t: float) -> None:
        if not self.awake:
            self.awake = True
            self.since = float(t)
            self.wakeups += 1

    def wake_below_target(self) -> None:
        """TPP: kswapd is woken as soon as free < target (checked every tick)."""
        if self.sim.mem.free[self.node] < self.target:
            self.wake(self.t_prev)

    def begin(self, n_enough: int = 0) -> KswapdPoll:
        """The node and kswapd at a poll, after the `n_enough` promotions that need no
        room above the watermark."""
        free0 = int(self.sim.mem.free[self.node]) - n_enough
        room0 = max(free0 - int(self.sim.mem.wmark_high[self.node]) - 1, 0)
        return KswapdPoll(room0, free0, not self.awake, self.since if self.awake else None)

    def fault_thread(self, times, latency=None, policy=None, n_enough: int = 0,
                     wake_on_fail: bool = True) -> tuple:
        """What the faulting threads make of a poll's faults on slow pages, in time
        order: (one of REFUSED..NO_ROOM per fault, the `KswapdPoll` for `settle`). A
        thread takes its faults one after another, each in its context (do_numa_page):
        fault j is taken at h_j = max(t_j, h_(j-1) + cost_(j-1) / threads), its cost the fault
        (`hint_fault_s`) and, when it promotes, the copy (migrate_misplaced_folio), so a
        burst of faults is spread by what its promotions cost while kswapd frees room.
        The first `n_enough` promote at once (pgdat_free_space_enough). With `policy`
        (autonuma-tiering's should_numa_migrate_memory) a fault is a candidate iff its
        hint-fault latency at h_j (numa_hint_fault_latency: from the scan that armed it
        to the fault's handling, not to the access the workload's rates place it at) is
        under the threshold, tuned at h_j once a tuning period has passed
        (`_adjust_threshold`), and the candidate passes the rate limit
        (numa_promotion_rate_limit). A fault that finds no page above the watermark
        fails and, with `wake_on_fail` (tiering mode), wakes kswapd."""
        sim = self.sim
        times = np.ascontiguousarray(times, dtype=np.float64)
        n = times.shape[0]
        out = np.zeros(n, dtype=np.int8)
        poll = self.begin(n_enough)
        st = np.zeros(7)
        st[_END] = -math.inf
        st[_T_AWAKE] = -1.0 if poll.t_a is None else poll.t_a
        st[_ENOUGH_LEFT] = n_enough
        m = sim.machine
        # a faulting thread copies at the unscaled per-thread bandwidth, as the engine
        # charges its stall (`Simulation._charge_copy`): --scale F's migrate_bw is F x it
        copy_s = PAGE * float(getattr(sim, "scale", 1.0)) / m.migrate_bw
        threads = float(getattr(sim, "threads", 1.0))
        use_th = policy is not None
        lat = np.ascontiguousarray(latency if use_th else times, dtype=np.float64)
        if use_th:
            st[_NR_CAND], st[_RL_START], st[_RL_NR_CAND] = (
                policy.nr_cand, policy.rl_start, policy.rl_nr_cand)
        j = 0
        while j < n:
            tuned = use_th and policy.adjust
            th = policy.threshold() if use_th else math.inf
            j = _fault_thread(times, lat, out, j, st, m.hint_fault_s, copy_s, threads,
                              use_th, th, policy.th_start if tuned else 0.0,
                              policy.th_period if tuned else math.inf,
                              policy.rate_limit if use_th else 0, poll.room0, self.rate,
                              bool(wake_on_fail))
            if j < n:  # a threshold tuning is due at the fault j is taken
                h = max(times[j], st[_END])
                policy.nr_cand = int(st[_NR_CAND])
                policy._adjust_threshold(float(h))
        if use_th:
            policy.nr_cand, policy.rl_start, policy.rl_nr_cand = (
                int(st[_NR_CAND]), float(st[_RL_START]), int(st[_RL_NR_CAND]))
            policy.too_cold += int(np.count_nonzero(out == TOO_COLD))
            policy.rate_limited += int(np.count_nonzero(out == RATE_LIMITED))
        poll.t_a = float(st[_T_AWAKE]) if st[_T_AWAKE] >= 0.0 else None
        return out, poll

    def settle(self, pages, out, poll: KswapdPoll, now: float, reason: str):
        """After `fault_thread` (or `begin`, for a poll whose faults all were refused):
        kswapd demotes what the promotions took (no more than it could have freed since
        it woke), then the promoted pages move, the last of them failing if reclaim
        found too few victims; returns (pages moved, failed)."""
        sim, node = self.sim, self.node
        mem = sim.mem
        t_a, room0, free0 = poll.t_a, poll.room0, poll.free0
        if poll.woke and t_a is not None:
            self.wakeups += 1
        ok = out == PROMOTED
        want = int(ok.sum())
        asked = want + int(np.count_nonzero(out == NO_ROOM))
        if t_a is not None:
            credit = int(self.rate * max(now - t_a, 0.0))
            need = max(want - room0, 0)
            goal = min(max(self.target - free0 + want, need), max(credit, need))
            if goal > 0:
                self.freed += sim.reclaim(node, goal)
            room = max(int(mem.free[node] - mem.wmark_high[node]) - 1, 0)
            if room < want:  # not enough victims: the last ones fail
                ok[np.flatnonzero(ok)[room:]] = False
        moved = fault_migrate(sim, pages[ok], node, reason)
        self.awake = t_a is not None and int(mem.free[node]) < self.target
        self.since = float(now)
        self.t_prev = float(now)
        return moved, asked - moved

    def serve(self, pages, times, now: float, reason: str, wake_on_fail: bool = True):
        """Promote `pages` (faults at `times`, time-ordered) to the node as room allows
        (`fault_thread`, `settle`); returns (pages moved, failed)."""
        out, poll = self.fault_thread(times, wake_on_fail=wake_on_fail)
        return self.settle(np.asarray(pages), out, poll, now, reason)


def lru_victims(sim, node: int, n: int) -> np.ndarray:
    """kswapd's victims: the 2Q LRU's reclaim (`engine/lru.py` reclaim_victims), with
    scan batches that grow while they yield too few."""
    return sim.lru.reclaim_victims(node, n, grow=True)


class NumaBalancingBase(Policy):
    """Shared wiring: the scanner, its hint faults, freeing, statistics."""

    #: nodes the scanner skips: "none" (numa_balancing=1) or "top" (tiering modes)
    skip = "top"
    #: on_faults also on polls without faults (kswapd progress)
    every_poll = False

    def __init__(self, scan_size="256MiB", scan_period_min="1s", scan_period_max="60s",
                 scan_delay="1s", poll="50ms", toptier="cpu", overhead_cap="yes", **params):
        super().__init__(scan_size=scan_size, scan_period_min=scan_period_min,
                         scan_period_max=scan_period_max, scan_delay=scan_delay, poll=poll,
                         toptier=toptier, overhead_cap=overhead_cap, **params)
        self.scanner = NumaScanner(scan_size=scan_size, scan_period_min=scan_period_min,
                                   scan_period_max=scan_period_max, scan_delay=scan_delay,
                                   poll=poll, overhead_cap=overhead_cap)
        self.toptier = str(toptier)
        if self.toptier.strip().lower() not in ("cpu", "dram"):
            raise TierlabError(f"bad toptier {toptier!r}; valid: cpu, dram")
        self.promoted = 0
        self.promote_failed = 0

    def attach(self, sim):
        super().attach(sim)
        m = sim.machine
        self.dst = cpu_node(m)
        self.top = toptier_nodes(m, self.toptier)
        self.top_mask = np.zeros(256, dtype=bool)
        self.top_mask[self.top] = True
        skip = self.top if self.skip == "top" else []
        self.scanner.attach(sim, skip_nodes=skip)
        self.scanner.subscribe(self.on_faults, every_poll=self.every_poll)

    def on_faults(self, pages, times, latency, now):
        raise NotImplementedError

    def on_free(self, start, end):
        self.scanner.disarm_range(start, end)

    def _split_shared(self, n: float):
        """(private, shared) of n faults: a fault is private when the faulting thread
        is the page's last one (cpupid_match_pid). Assumption: threads touch pages
        alike, so 1/threads of the faults are private."""
        th = max(self.sim.app_threads, 1)  # the real threads, not x scale
        return n / th, n - n / th

    def stats(self):
        d = self.scanner.stats()
        d.update(promoted=self.promoted, promote_failed=self.promote_failed)
        return d


# -----------------------------------------------------------------------------------
# numa_balancing = 1
# -----------------------------------------------------------------------------------
@POLICIES.register("autonuma")
class AutoNuma(NumaBalancingBase):
    """AutoNUMA balancing (numa_balancing=1): not tier-aware, hint faults migrate pages to
    the faulting CPU's node while it has room; no demotion (IDT's normalising baseline).

    Rules (kernel/sched/fair.c should_numa_migrate_memory, mm/migrate.c):
    - every node is scanned (NUMA_BALANCING_NORMAL); with a single-threaded task the
      pages already on its node are skipped (change_prot_numa's target_node);
    - a fault on a page off the CPU node migrates it there (sync) if
      migrate_balanced_pgdat allows (free > high + 1 after the move), else it fails;
    - two-stage filter: a page moves only if the previous fault on it came from the same
      node (cpupid_to_nid(last_cpupid) == dst), and a never-faulted page (last_cpupid
      unset) passes. With one CPU socket every fault comes from the same node, so the
      filter never rejects: `two_fault=kernel` (default) migrates on the first fault.
      `two_fault=strict` reads the filter as "second fault" (as papers describe it): a
      page moves only on a fault after an earlier one (a bit per page);
    - the numa_group placement tests pass trivially: the source node has no faulting CPU;
    - demotion is off (`kswapd_demotion = False`): a full DRAM node stays full and new
      allocations fall to the next node; promotions stop once the CPU node is at its
      high watermark.
    Scan-period accounting: every fault counts; local = page already on the CPU node;
    private = 1/threads of them (`_split_shared`); failed migrations double the period.
    """

    kswapd_demotion = False
    skip = "none"

    def __init__(self, scan_size="256MiB", scan_period_min="1s", scan_period_max="60s",
                 scan_delay="1s", poll="50ms", two_fault="kernel", overhead_cap="yes"):
        super().__init__(scan_size=scan_size, scan_period_min=scan_period_min,
                         scan_period_max=scan_period_max, scan_delay=scan_delay, poll=poll,
                         toptier="cpu", two_fault=two_fault, overhead_cap=overhead_cap)
        self.two_fault = str(two_fault).strip().lower()
        if self.two_fault not in ("kernel", "strict"):
            raise TierlabError(f"bad two_fault {two_fault!r}; valid: kernel, strict")
        self.seen = None

    def attach(self, sim):
        if sim.app_threads <= 1:
            self.skip = "top"  # target_node: skip PTEs already on the task's node
        super().attach(sim)
        if self.two_fault == "strict":
            self.seen = np.zeros(sim.mem.npages, dtype=bool)

    def on_faults(self, pages, times, latency, now):
        sim = self.sim
        nodes = sim.node_of(pages)
        alloc = nodes != UNALLOC
        local = alloc & (nodes == self.dst)
        cand = pages[alloc & ~local]
        if self.seen is not None:
            ok = self.seen[cand]
            self.seen[pages] = True
            cand = cand[ok]
        moved = fault_migrate(sim, cand[: migrate_room(sim, self.dst)], self.dst, "numa")
        failed = cand.shape[0] - moved
        self.promoted += moved
        self.promote_failed += failed
        n = float(alloc.sum())
        nl = float(local.sum())
        priv, shared = self._split_shared(n)
        self.scanner.account(local=nl, remote=n - nl, private=priv, shared=shared,
                             failed=failed)


# -----------------------------------------------------------------------------------
# numa_balancing = 2 (memory tiering)
# -----------------------------------------------------------------------------------
@POLICIES.register("autonuma-tiering")
class AutoNumaTiering(NumaBalancingBase):
    """AutoNUMA memory tiering (numa_balancing=2, Linux >= 6.1): promote slow-tier pages
    whose hint-fault latency is under the hot threshold (1 s, auto-tuned), rate limited;
    kswapd demotes through the 2Q LRU.

    Rules (kernel/sched/fair.c should_numa_migrate_memory and helpers, checked):
    - only pages off the top tier are scanned (top tier: `toptier`, default "cpu");
    - pgdat_free_space_enough(dst): free > WMARK_PROMO + max(`enough_floor`, node / 16)
      promotes any faulting page and resets the threshold (nbp_threshold = 0);
    - else numa_promotion_adjust_threshold, then latency (fault - scan time) >= th
      rejects; th = nbp_threshold or `hot_threshold` (sysctl numa_balancing_hot_threshold
      _ms, 1000 ms);
    - numa_promotion_rate_limit: every page past the threshold is a candidate
      (PGPROMOTE_CANDIDATE); a 1 s window starts at the first candidate more than 1 s
      after the window's start; once the window holds `rate_limit_mbps` worth of
      candidates (numa_balancing_promote_rate_limit_MBps, default 65536 MB/s) the rest
      of the window is rejected;
    - threshold auto-tuning (numa_promotion_adjust_threshold), evaluated at a fault more
      than scan_period_max (60 s) after the last tuning: ref = rate limit x 60 s of
      candidates; unit = 2 x hot_threshold / 16 (125 ms); more than 1.1 ref candidates
      since the last tuning lowers th by a unit (not below a unit), fewer than 0.9 ref
      raises it by a unit (not above 2 x hot_threshold). With the default limit the
      reference is never reached, so th climbs to 2 s: that is the kernel's behaviour;
    - migrate_misplaced_folio: the candidate moves if migrate_balanced_pgdat allows
      (free > high + 1); else it fails and, in tiering mode, kswapd is woken on the
      target, which demotes until WMARK_PROMO = high + (high - low) is free;
    - demotion: kswapd reclaim (engine default: victims from the 2Q LRU, next node down
      the path), `kswapd_demotion = True`.
    Scan-period accounting (task_numa_fault): faults on slow nodes are not counted;
    promoted pages count as private remote faults (their cpupid field held the scan
    time), so a pass with promotions doubles the period, one without leaves it.

    Byte-denominated parameters (`rate_limit_mbps`, `enough_floor`, the scan size) are
    full-scale figures; a `--scale F` miniature applies F x them (`sim.scaled_bytes`).
    """

    every_poll = True

    def __init__(self, hot_threshold="1000ms", rate_limit_mbps="65536", adjust="1",
                 enough_floor="1GiB", toptier="cpu", scan_size="256MiB",
                 scan_period_min="1s", scan_period_max="60s", scan_delay="1s", poll="50ms",
                 overhead_cap="yes"):
        super().__init__(scan_size=scan_size, scan_period_min=scan_period_min,
                         scan_period_max=scan_period_max, scan_delay=scan_delay, poll=poll,
                         toptier=toptier, overhead_cap=overhead_cap,
                         hot_threshold=hot_threshold,
                         rate_limit_mbps=rate_limit_mbps, adjust=adjust,
                         enough_floor=enough_floor)
        self.hot_threshold = parse_duration(hot_threshold, "hot_threshold")
        mbps = parse_number(rate_limit_mbps, "autonuma-tiering rate_limit_mbps (MB/s)",
                            lo=0.0, hi=1e9, lo_open=True)
        if self.hot_threshold <= 0:
            raise TierlabError(f"bad autonuma-tiering hot_threshold {hot_threshold!r}: "
                               "must be > 0")
        self.rate_limit_bytes = mbps * 2**20  # per second, full scale
        self.rate_limit = max(int(self.rate_limit_bytes // PAGE), 1)  # set in attach
        self.adjust = parse_flag(adjust, "autonuma-tiering adjust")
        self.enough_floor_bytes = parse_size(enough_floor, "enough_floor")
        self.enough_floor = self.enough_floor_bytes // PAGE
        self.th_period = parse_duration(scan_period_max, "scan_period_max")
        # per target node state (one target: the CPU node)
        self.nbp_threshold = 0.0
        self.nr_cand = 0
        self.rl_start = 0.0
        self.rl_nr_cand = 0
        self.th_start = 0.0
        self.th_nr_cand = 0
        self.rate_limited = 0
        self.too_cold = 0
        self.threshold_history = []

    def select_victims(self, node, n):
        """kswapd's victims from the 2Q LRU (`lru_victims`, the engine's rules)."""
        return lru_victims(self.sim, node, n)

    def attach(self, sim):
        super().attach(sim)
        scaled = getattr(sim, "scaled_bytes", lambda b: b)  # --scale F: bytes x F
        self.rate_limit = max(int(scaled(self.rate_limit_bytes) // PAGE), 1)
        self.enough_floor = int(scaled(self.enough_floor_bytes) // PAGE)
        self.th_start = sim.now  # reset_memory_tiering when the mode is enabled
        self.rl_start = sim.now
        self.kswapd = Kswapd(sim, self.dst, promo_wmark(sim, self.dst))

    # -- kernel pieces ----------------------------------------------------------------
    def enough_mark(self) -> int:
        cap = int(self.sim.mem.capacity[self.dst])
        return promo_wmark(self.sim, self.dst) + max(self.enough_floor, cap >> 4)

    def threshold(self) -> float:
        return self.nbp_threshold or self.hot_threshold

    def _adjust_threshold(self, t: float) -> None:
        if not self.adjust or t - self.th_start <= self.th_period:
            return
        self.th_start = t
        ref = self.rate_limit * self.th_period
        diff = self.nr_cand - self.th_nr_cand
        unit = self.hot_threshold * 2 / 16
        th = self.threshold()
        if diff > ref * 1.1:
            th = max(th - unit, unit)
        elif diff < ref * 0.9:
            th = min(th + unit, 2 * self.hot_threshold)
        self.th_nr_cand = self.nr_cand
        self.nbp_threshold = th
        self.threshold_history.append((float(t), float(th)))

    def fault_thread(self, times, latency) -> tuple:
        """should_numa_migrate_memory and migrate_misplaced_folio over a poll's faults on
        slow pages, as the faulting threads take them (`Kswapd.fault_thread`: what each
        fault did, and the poll for `Kswapd.settle`): while the node has free space
        enough the threshold resets and the faults promote."""
        n_enough = min(times.shape[0],
                       max(int(self.sim.mem.free[self.dst]) - self.enough_mark(), 0))
        if n_enough:
            self.nbp_threshold = 0.0
        return self.kswapd.fault_thread(times, latency, self, n_enough,
                                        self.kswapd_demotion)

    def on_faults(self, pages, times, latency, now):
        sim = self.sim
        nodes = sim.node_of(pages)
        slow = (nodes != UNALLOC) & ~self.top_mask[nodes]
        p, t, lat = pages[slow], times[slow], latency[slow]
        out, poll = self.fault_thread(t, lat)
        moved = fault_migrate(sim, p[out == ENOUGH], self.dst, "promote")
        got, failed = self.kswapd.settle(p, out, poll, now, "promote")
        moved += got
        self.promoted += moved
        self.promote_failed += failed
        if moved:
            self.scanner.account(remote=moved, private=moved)

    def stats(self):
        d = super().stats()
        d.update(hot_threshold_s=float(self.threshold()), promote_candidates=int(self.nr_cand),
                 rate_limited=int(self.rate_limited), too_cold=int(self.too_cold),
                 kswapd_wakeups=int(self.kswapd.wakeups),
                 kswapd_promo_freed=int(self.kswapd.freed))
        return d


# -----------------------------------------------------------------------------------
# numa_balancing = 2 with the multi-gen LRU
# -----------------------------------------------------------------------------------
MAX_NR_GENS = 4
MIN_NR_GENS = 2


@POLICIES.register("autonuma-tiering-mglru")
class AutoNumaTieringMglru(AutoNumaTiering):
    """AutoNUMA tiering promotion with MGLRU reclaim (Linux >= 6.1, lru_gen enabled):
    demotion victims come from the oldest generation; aging walks the page tables.

    MGLRU rules (mm/vmscan.c lru_gen, include/linux/mm_inline.h):
    - per node a window of generations [min_seq, max_seq], at most MAX_NR_GENS = 4 and
      at least MIN_NR_GENS = 2; a page's generation is stored as seq % 4 (here with its
      node in one byte per page: (node + 1) << 2 | seq % 4, 0 = none);
    - pages faulted in join the youngest generation (folio_add_lru marks pages added in
      a fault active; lru_gen_add_folio puts active pages in max_seq);
    - aging (try_to_inc_max_seq) runs when eviction finds only MIN_NR_GENS generations,
      or MIN_NR_GENS + 1 of which the youngest holds over half the node's pages or the
      oldest under a quarter (should_run_aging, on `nr_pages`, lrugen->nr_pages; kswapd's
      priority is below DEF_PRIORITY, set_initial_priority); it walks the page tables
      (`pte-scan`, with the non-leaf PMD accessed bits) and moves pages of this node whose
      accessed bit is set to max_seq, then opens a new youngest generation (max_seq + 1);
      with 4 generations already, the oldest is first folded into the next (inc_min_seq);
    - eviction (evict_folios) takes pages of the oldest generation (min_seq); a page
      whose PTE was accessed since the last walk (folio_referenced / look-around) moves
      to the youngest generation, the others are reclaimed, i.e. demoted; when the
      oldest generation is empty, min_seq advances.
    - a page arriving by migration joins its new node at max_seq if it was active on the
      old one (its generation max_seq or max_seq - 1 there: lru_gen_del_folio keeps
      PG_active when not reclaiming), else at max_seq - 1 (inactive anon,
      lru_gen_add_folio); reclaim's victims are isolated without a generation, so they
      arrive inactive (`on_moves`). A victim whose demotion failed stays on its node
      without a generation until the next walk gives it max_seq - 1 (the kernel puts a
      rejected folio in max_seq).
    Simplifications: anon pages only (no file/anon split, no tiers/refault feedback,
    no PID controller); eviction scans the oldest generation in address order from a
    per-node hand (over a bitmap per seq % 4, `slots`, so it reads only that
    generation's words); the accessed test at eviction counts accesses since the
    node's last walk.
    """

    def attach(self, sim):
        super().attach(sim)
        k = sim.machine.nnodes
        self.gen = np.zeros(sim.mem.npages, dtype=np.uint8)
        #: the generations' seq % 4 as four bitmaps, moved with every write to `gen`:
        #: eviction's hand reads only the oldest generation's words
        self.slots = SlotBits(sim.mem.npages, MAX_NR_GENS)
        self.max_seq = np.full(k, MIN_NR_GENS + 1, dtype=np.int64)
        self.min_seq = np.zeros(k, dtype=np.int64)
        self.last_walk = np.full(k, sim.now)
        self.hand = np.zeros(k, dtype=np.int64)
        #: lrugen->nr_pages: each node's pages by generation slot (seq % 4)
        self.nr_pages = np.zeros((k, MAX_NR_GENS), dtype=np.int64)
        self.walker = PteScan(period="0")
        self.walker.attach(sim)
        self.agings = 0
        self.evict_checked = 0

    @staticmethod
    def stamp(node: int, seq: int) -> int:
        return ((node + 1) << 2) | (int(seq) & 3)

    def nr_gens(self, node: int) -> int:
        return int(self.max_seq[node] - self.min_seq[node] + 1)

    def on_alloc(self, start, end, node):
        self.gen[start:end] = self.stamp(node, self.max_seq[node])
        self.slots.fill(start, end, self.max_seq[node] & 3)
        self.nr_pages[node, self.max_seq[node] & 3] += end - start

    def on_free(self, start, end):
        super().on_free(start, end)
        self._uncount(self.gen[start:end])
        self.gen[start:end] = 0
        self.slots.fill(start, end, None)

    def _uncount(self, stamps) -> None:
        """Take pages with these generation bytes out of `nr_pages`."""
        k = self.nr_pages.shape[0]
        c = np.bincount(stamps, minlength=4 * (k + 1))[4: 4 * (k + 1)]
        self.nr_pages -= c.reshape(k, MAX_NR_GENS)

    def on_moves(self, pages, src, dsts):
        """A migrated folio joins its new node's max_seq if it was active on the old one
        (lru_gen_del_folio keeps PG_active for gens max_seq and max_seq - 1 when not
        reclaiming; lru_gen_add_folio), else max_seq - 1 (anon); reclaim's victims,
        isolated with their generation cleared, are inactive."""
        super().on_moves(pages, src, dsts)
        old = self.gen[pages]
        self._uncount(old)
        on_src = (old >> 2) == src.astype(np.int64) + 1
        mx_src = self.max_seq[src]
        slot = (old & 3).astype(np.int64)
        active = on_src & ((slot == mx_src & 3) | (slot == (mx_src - 1) & 3))
        seq = self.max_seq[dsts] - (~active)
        new = (((dsts.astype(np.int64) + 1) << 2) | (seq & 3)).astype(np.uint8)
        self.gen[pages] = new
        self._move_slots(pages, old, new)
        k = self.nr_pages.shape[0]
        self.nr_pages += np.bincount(dsts.astype(np.int64) * MAX_NR_GENS + (seq & 3),
                                     minlength=k * MAX_NR_GENS).reshape(k, MAX_NR_GENS)

    def _move_slots(self, pages, old, new) -> None:
        """The slot bits of pages whose generation byte went from `old` to `new`."""
        for s in range(MAX_NR_GENS):
            self.slots.move(pages[(old != 0) & (old & 3 == s)], s, None)
            self.slots.move(pages[(new != 0) & (new & 3 == s)], None, s)

    def recount(self, node: int) -> None:
        """`nr_pages` of `node` from the slot bitmaps and the node's page bitmap."""
        row = self.sim.mem.node_bits().bits[node]
        for s in range(MAX_NR_GENS):
            self.nr_pages[node, s] = int(np.bitwise_count(self.slots.rows[s] & row).sum())

    def should_run_aging(self, node: int) -> bool:
        """should_run_aging: with MIN_NR_GENS generations eviction stalls; with one
        more, age when the youngest holds over 1/MIN_NR_GENS of the pages or the
        oldest under 1/(MIN_NR_GENS + 2) (kswapd's priority, from set_initial_priority,
        is below DEF_PRIORITY unless the inactive pages exceed 4096x its target)."""
        gens = self.nr_gens(node)
        if gens <= MIN_NR_GENS:
            return True
        if gens > MIN_NR_GENS + 1:
            return False
        nr = self.nr_pages[node]
        total = int(nr.sum())
        young = int(nr[self.max_seq[node] & 3])
        old = int(nr[self.min_seq[node] & 3])
        return young * MIN_NR_GENS > total or old * (MIN_NR_GENS + 2) < total

    def age(self, node: int) -> None:
        """try_to_inc_max_seq: walk, move accessed pages to max_seq, open a new gen."""
        sim = self.sim
        now = sim.now
        fold = self.nr_gens(node) >= MAX_NR_GENS  # inc_min_seq: fold the oldest gen
        mn, mx = self.min_seq[node], self.max_seq[node]
        rule = (fold, self.stamp(node, mn), self.stamp(node, mn + 1), node + 1,
                self.stamp(node, mx), self.stamp(node, mx - 1))
        if not self.walker.age_node(node, now, self.gen, self.slots, rule):
            pages, young = self.walker.walk_node(node, now)
            old = self.gen[pages]
            cur = np.where(old == rule[1], np.uint8(rule[2]), old) if fold else old
            mism = (cur >> 2) != rule[3]
            new = np.where(young, np.uint8(rule[4]), np.where(mism, np.uint8(rule[5]), cur))
            self.gen[pages] = new
            ch = old != new
            self._move_slots(pages[ch], old[ch], new[ch])
        if fold:
            self.min_seq[node] += 1
        self.max_seq[node] += 1
        self.last_walk[node] = now
        self.agings += 1
        self.recount(node)

    def select_victims(self, node, n):
        """evict_folios: unreferenced pages of the oldest generation."""
        sim = self.sim
        mem = sim.mem
        victims, got = [], 0
        tries = 0
        size = max(2 * n, 64)  # doubles while batches yield too few victims
        while got < n and tries < 64:
            tries += 1
            if self.should_run_aging(node):
                self.age(node)
            want = max(size, 2 * (n - got))
            value = self.stamp(node, self.min_seq[node])
            oldest = self.min_seq[node] & 3
            cand, hand, scanned = mem.pages_on(node, int(self.hand[node]), want, self.gen,
                                               0x1F, value, self.slots.rows[oldest])
            self.hand[node] = hand
            if cand.shape[0] == 0:
                if scanned < mem.npages:
                    continue
                # the oldest generation is empty
                if self.nr_gens(node) > MIN_NR_GENS:
                    self.min_seq[node] += 1
                else:
                    self.age(node)
                continue
            young = self.walker.test(cand, float(self.last_walk[node]), sim.now)
            self.evict_checked += cand.shape[0]
            self.gen[cand[young]] = self.stamp(node, self.max_seq[node])
            self.slots.move(cand[young], oldest, self.max_seq[node] & 3)
            cold = cand[~young][: n - got]
            # isolated for reclaim: no generation (inactive on arrival, `on_moves`)
            self.gen[cold] = 0
            self.slots.move(cold, oldest, None)
            nr = self.nr_pages[node]
            nr[oldest] -= int(young.sum()) + cold.shape[0]
            nr[self.max_seq[node] & 3] += int(young.sum())
            victims.append(cold)
            got += cold.shape[0]
            if 4 * cold.shape[0] < cand.shape[0]:
                size *= 2
        return np.concatenate(victims) if victims else np.zeros(0, dtype=np.int64)

    def stats(self):
        d = super().stats()
        d.update(mglru_agings=int(self.agings), mglru_evict_checked=int(self.evict_checked))
        d.update(self.walker.stats())
        return d
