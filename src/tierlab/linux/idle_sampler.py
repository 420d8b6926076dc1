"""IDT's region monitor (`idt-regions`) on a live process, through idle page tracking.

IDT's rule (HPDC'24; monitors/idt_regions.py): every sampling interval (10 ms) two
random pages per region are checked; a region's nr_accesses over an aggregation (1 s)
counts the intervals in which either page was accessed, and a region whose two pages
disagreed is split. In the simulator the monitor draws these samples from the rate
field at each aggregation; here `IdleSampler` takes them live, with the kernel's idle
page tracking (Documentation/admin-guide/mm/idle_page_tracking.rst): writing a page's
bit to /sys/kernel/mm/page_idle/bitmap marks it idle (and clears its PTE accessed
bits); reading the bit back one interval later finds it cleared if the page was
accessed since. Pages are addressed by PFN, read from /proc/PID/pagemap
(Documentation/admin-guide/mm/pagemap.rst).

Every sample tick: read the idle bits of the pages set idle at the previous tick
(accessed = bit cleared), add a|b and a^b per region, draw two new pages per region
among its present pages, set them idle. Every aggregation: the counts go to
`IdtRegions.aggregate` (age, history, Fisher merge, subscribers, disagreement split),
the placement is refreshed, the regions are fitted to the allocated pages
(`Damon._ops_update`), and the PFNs of the managed pages are re-read (also after any
migration between aggregations: never per sample). PFNs are looked up through
`KernelOps.pfns`, which on the real kernel maps a transparent huge page's subpages to
its head page (the kernel keeps the idle flag there only); bitmap reads and writes
are grouped into words by `KernelOps.idle` / `set_idle`.

Real time: the tick runs every max(sample interval, `min_sample_s`); a tick that
overruns makes the loop skip the missed ones (`LinuxSim.run_due`), and the interval a
sample covers is then longer. nr_accesses is reported in units of the monitor's
sample interval: intervals accessed x samples_per_aggr / samples taken, so IDT's
thresholds keep their meaning when fewer samples fit in an aggregation; the split
rule uses the raw disagreement count. A page the kernel migrates between two ticks is
read at its old PFN and counts as accessed once.

Cost. On the fake kernel of tests/linux/test_idle_sampler.py the sampler's own work
is about 0.04 ms per tick for 1,000 regions and 0.24 ms for 10,000. RealKernel's
bitmap calls against a regular file standing in for the bitmap (two PFNs per region
spread over 16 GiB) take 0.1 / 0.4 ms to set idle and 0.9 / 6 ms to read (one pread
per run of words: reading through gaps would make the kernel check every page in
them). The kernel's own work is not measured: page_idle_bitmap_write walks the
reverse map of each page set idle, page_idle_bitmap_read that of every page flagged
idle in each 64-page word it reads (cold pages stay flagged, so up to 64 walks per
sampled page), about a microsecond each. For 1,000 regions that is 4,000 walks per
tick at best (a few ms: the 10 ms interval holds) and up to 66,000 when the words read
are full of the target's flagged cold pages (ticks are then skipped: a tick that
overruns only delays the next); 10,000 regions want a `min_sample_s` of 100 ms or
more. This host's kernel has
no idle page tracking, nor has the test guest's Debian 6.12 kernel
(CONFIG_IDLE_PAGE_TRACKING is not set): the sampler has run on the fake kernel only;
pagemap and kpageflags (THP heads) were checked on this host.

CPU time of the sampling (not of the region bookkeeping in `aggregate`, as in the
simulator) is charged as monitor CPU.
"""
from __future__ import annotations

import time

import numpy as np

from ..interface import UNALLOC
from ..errors import TierlabError


class IdleSampler:
    """Drives an `IdtRegions` monitor on a `LinuxSim` from the idle page bitmap.

    `min_sample_s`: the shortest tick (default 10 ms, IDT's interval); raise it when
    the regions are too many for the kernel to sample at the monitor's interval.
    """

    timer_kind = "monitor"  #: interface.timer_kind

    def __init__(self, sim, mon, min_sample_s: float = 0.010):
        if min_sample_s <= 0:
            raise TierlabError(f"idle sampler min_sample_s {min_sample_s}: must be > 0")
        self.sim, self.mon = sim, mon
        self.period = max(float(mon.sample_interval), float(min_sample_s))
        self.rng = sim.rng_for(mon.name + "/idle")
        self.next_aggr = 0.0
        self.samples = 0
        self.ticks = 0
        self._pfn = np.zeros(0, dtype=np.uint64)  # per page index, 0 = not present
        self._present = np.zeros(0, dtype=np.int64)  # page indices with a PFN, sorted
        self._pending = None  # (R, 2) PFNs set idle at the last tick, 0 = none
        self._pending_pages = None  # (R, 2) their page indices
        self._mig_seen = None

    def start(self) -> None:
        """Build the regions, read the PFNs, set the first pages idle, start ticking."""
        sim, mon = self.sim, self.mon
        t = time.process_time()
        now = sim.now
        mon.ops_update(now, force=True)
        self._load()
        if self._present.size == 0 and np.any(sim.mem.node != UNALLOC):
            raise TierlabError("idt-regions: /proc/PID/pagemap gives no page frame "
                               "numbers for the target's pages (they read as 0 without "
                               "CAP_SYS_ADMIN): run as root")
        self._reset_counts()
        self.next_aggr = now + mon.aggr_interval
        self._prepare()
        sim.charge_cpu(time.process_time() - t, "monitor")
        sim.every(self.period, self.tick)

    def tick(self, now: float) -> None:
        """Check the pages set idle at the last tick, aggregate when due, set new ones."""
        sim, mon = self.sim, self.mon
        t = time.process_time()
        self.ticks += 1
        self._check(now)
        if now >= self.next_aggr - self.period / 2:
            t += self._aggregate(now)
            self._rest_of_update(now)
        elif sim.stats.migrated_bytes != self._mig_seen:
            self._load()
        self._prepare()
        dt = time.process_time() - t
        mon.cpu_seconds += dt
        sim.charge_cpu(dt, "monitor")

    # -- per tick ------------------------------------------------------------------
    def _prepare(self) -> None:
        """Two pages per region, uniform among its present pages; set them idle."""
        R = self.mon.nr_regions
        if R == 0 or self._present.size == 0:
            self._pending = None
            return
        lo = np.searchsorted(self._present, self.mon._s)  # regions change per sample
        cnt = np.searchsorted(self._present, self.mon._e) - lo
        u = self.rng.random((R, 2))
        k = lo[:, None] + (u * cnt[:, None]).astype(np.int64)
        k = np.minimum(k, self._present.size - 1)
        self._pending_pages = self._present[k]
        pf = self._pfn[self._pending_pages]
        pf[cnt == 0] = 0
        live = pf[pf != 0]
        if live.size:
            self.sim.kernel.set_idle(live)
        self.mon.checks += int(live.size)
        self._pending = pf

    def _check(self, now: float) -> None:
        """Accessed = the idle bit was cleared since `_prepare`; the monitor accounts
        the interval (nr_accesses, history, ARP subscribers, splits)."""
        pf = self._pending
        if pf is None:
            return
        self._pending = None
        live = pf != 0
        acc = np.zeros(pf.shape, dtype=bool)
        if live.any():
            acc[live] = ~np.asarray(self.sim.kernel.idle(pf[live]), dtype=bool)
        self.mon.checks += int(live.sum())
        self.samples += 1
        pages = self._pending_pages
        self.mon.on_sample(acc[:, 0], acc[:, 1], pages[:, 0], pages[:, 1], now)

    # -- per aggregation -----------------------------------------------------------
    def _aggregate(self, now: float) -> float:
        """Placement read afresh, then the monitor's aggregation (merge, subscribers,
        split) on this aggregation's counts; returns the CPU time of the latter, which
        is region bookkeeping and policy work, not sampling."""
        sim, mon = self.sim, self.mon
        sim.refresh(max_age=sim.refresh_interval)
        if not (mon.nr_regions and self.samples):
            return 0.0
        nr = mon.counts_per_aggregation(self.samples)
        t = time.process_time()
        mon.aggregate(nr, now)
        return time.process_time() - t

    def _rest_of_update(self, now: float) -> None:
        mon = self.mon
        self.next_aggr += mon.aggr_interval
        if self.next_aggr <= now:
            self.next_aggr = now + mon.aggr_interval
        if now + 1e-12 >= mon._next_update:
            mon.ops_update(now)
        self._load()
        self._reset_counts()

    def _reset_counts(self) -> None:
        self.samples = 0
        self._pending = None

    def _load(self) -> None:
        """PFNs of the managed pages (/proc/PID/pagemap)."""
        sim = self.sim
        used = sim.space.used
        idx = np.flatnonzero(sim.mem.node[:used] != UNALLOC)
        pfn = np.zeros(used, dtype=np.uint64)
        if idx.size:
            pfn[idx] = np.asarray(sim.kernel.pfns(sim.space.to_va(idx)), dtype=np.uint64)
        self._pfn = pfn
        self._present = np.flatnonzero(pfn)
        self._mig_seen = sim.stats.migrated_bytes
