"""`tpp`: TPP, Transparent Page Placement for CXL-enabled tiered memory (Al Maruf et
al., ASPLOS'23), as its kernel patches implement it (Hasan Al Maruf, "[PATCH 0/5]
Transparent Page Placement for Tiered-Memory", linux-mm, Nov 2021; checked):

- Patch 2 (NUMA balancing for tiered memory): only pages off the top tier are scanned
  (node_is_toptier(node) is `node == 0` in the patch: here `toptier=cpu`, the faulting
  CPU's node) and should_numa_migrate_memory accepts every fault on a non-top-tier page
  (no hot threshold, no rate limit, no two-fault filter).
- Patch 5 (active LRU-based promotion): do_numa_page promotes a non-top-tier page only
  if it is on the active LRU; otherwise it calls mark_page_accessed and does not
  migrate. With Linux's mark_page_accessed (`sim.lru.mark_accessed`) an inactive,
  unreferenced page becomes referenced, an inactive referenced one active, so a page
  demoted or allocated cold is promoted on its third fault (second if already
  referenced); the paper's summary ("the next fault promotes") skips PG_referenced.
- Promotion target: the faulting CPU's node (mpol_misplaced), if migrate_balanced_pgdat
  allows (free > high + 1 after the move); else the migration fails.
- Patch 3 (decoupled allocation and reclamation): allocation keeps the usual
  watermarks, while kswapd on a top-tier node is woken whenever free < WMARK_DEMOTE
  (at allocations and at every scheduler load-balance tick, check_toptier_balanced) and
  demotes until free >= WMARK_DEMOTE = max(demote_scale_factor / 10000 x node,
  2 x high), at most the node (demote_scale_factor default 200, i.e. 2%). With the
  engine's watermarks (high = 1.5%), the 2 x high clamp gives 3% by default. Here the
  check runs at every hint-fault poll (50 ms), and kswapd demotes at most its copy
  throughput (`autonuma.Kswapd`, 1.5 GB/s), concurrently with the promotions.
  Victims: the 2Q LRU's inactive tail (engine default), demoted down the path.
- Patch 1: a demoted page is mapped PROT_NONE when its migration completes
  (remove_migration_pte for PG_demoted pages), so its next access is a hint fault:
  here demoted pages are armed at the next poll (`arm_demoted`).
Scan-period accounting (the patches' base kernel counts every fault in task_numa_fault):
faults on slow pages are remote, 1/threads private; failed promotions double the period.
Works on any number of tiers: every non-top-tier node (remote DRAM, CXL, Optane) is
scanned and promotes to the CPU node; lower nodes keep the engine's kswapd (low ->
high watermark) and demote further down the path.
"""
from __future__ import annotations

import numpy as np

from ..params import parse_flag, parse_int
from .autonuma import UNALLOC, Kswapd, NumaBalancingBase, lru_victims
from .base import POLICIES


@POLICIES.register("tpp")
class Tpp(NumaBalancingBase):
    """TPP (ASPLOS'23): kswapd demotes to a 2% demotion watermark decoupled from
    allocation; hint faults promote slow-tier pages that are on the active LRU."""

    every_poll = True

    def __init__(self, demote_scale_factor="200", arm_demoted="1",
                 toptier="cpu", scan_size="256MiB", scan_period_min="1s",
                 scan_period_max="60s", scan_delay="1s", poll="50ms", overhead_cap="yes"):
        super().__init__(scan_size=scan_size, scan_period_min=scan_period_min,
                         scan_period_max=scan_period_max, scan_delay=scan_delay, poll=poll,
                         toptier=toptier, overhead_cap=overhead_cap,
                         demote_scale_factor=demote_scale_factor,
                         arm_demoted=arm_demoted)
        self.demote_scale_factor = parse_int(
            demote_scale_factor, "tpp demote_scale_factor (parts of 10,000)", 1, 10000)
        self.arm_demoted = parse_flag(arm_demoted, "tpp arm_demoted")
        self._demoted = []
        self.marked = 0
        self.demoted_armed = 0

    def attach(self, sim):
        super().attach(sim)
        mem = sim.mem
        cap = mem.capacity
        wm = np.maximum(cap * self.demote_scale_factor // 10000, 2 * mem.wmark_high)
        self.demote_wmark = np.minimum(wm, cap).astype(np.int64)
        self.kswapd = Kswapd(sim, self.dst, int(self.demote_wmark[self.dst]))

    def select_victims(self, node, n):
        """The 2Q LRU's victims (engine default), remembered to be made PROT_NONE."""
        v = lru_victims(self.sim, node, n)
        if self.arm_demoted and len(v):
            self._demoted.append(v)
        return v

    def _arm_pending(self):
        if not self._demoted:
            return
        v = np.concatenate(self._demoted)
        self._demoted = []
        nodes = self.sim.node_of(v)
        v = v[(nodes != UNALLOC) & ~self.top_mask[nodes]]
        if v.shape[0]:
            self.demoted_armed += self.scanner.arm(v)

    def on_faults(self, pages, times, latency, now):
        sim = self.sim
        nodes = sim.node_of(pages)
        alloc = nodes != UNALLOC
        slow = alloc & ~self.top_mask[nodes]
        moved, failed = self.promote_faulted(pages[slow], times[slow], now)
        self.promoted += moved
        self.promote_failed += failed
        self._arm_pending()
        n = float(alloc.sum())
        nl = float((alloc & ~slow).sum())
        priv, shared = self._split_shared(n)
        if n or failed:
            self.scanner.account(local=nl, remote=n - nl, private=priv, shared=shared,
                                 failed=failed)

    def promote_faulted(self, p, t, now):
        """Patch 5: a fault promotes its page if it is on the active LRU, else marks it
        accessed; returns (pages moved, promotions failed)."""
        act = self.sim.lru.mark_faulted(p)
        self.marked += int((~act).sum())
        self.kswapd.wake_below_target()
        act &= self.may_promote()
        return self.kswapd.serve(p[act], t[act], now, "promote")

    def may_promote(self) -> bool:
        """Whether hint faults may promote now (always here; Colloid refuses while the
        default tier's loaded latency is the higher)."""
        return True

    def stats(self):
        d = super().stats()
        d.update(marked_accessed=int(self.marked), demoted_armed=int(self.demoted_armed),
                 kswapd_wakeups=int(self.kswapd.wakeups),
                 kswapd_demoted=int(self.kswapd.freed))
        return d
