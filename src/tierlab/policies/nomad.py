"""`nomad`: NOMAD, non-exclusive memory tiering via transactional page migration (Xiang et
al., OSDI'24), from the paper, checked against its public code,
lingfenghsiang/Nomad (src/implementation_patches/nomad.patch, src/nomad_module/
async_promote_main.c, src/linux-5.13-rc6/mm/memory.c).

Base system: TPP (`policies/tpp.py`, NOMAD's tpp.patch): NUMA-balancing hint faults on
slow-tier pages only, kswapd demoting the inactive LRU tail of the top node down to the
demotion watermark (`demote_scale_factor`, default 200 = 2% as in the patch; NOMAD's and
TPP's experiment scripts set 1000, pass `demote_scale_factor=1000` to match them).

What NOMAD changes (the kernel mechanisms are in `engine/shadow.py`, this module drives
them):
- No migration in the fault handler (do_numa_page hunk: `queue_page_fault`, then
  `out_map`). The fault is recorded in a look-back list and the PTE made present again,
  young (`pte_mkyoung` in 5.13's out_map). At every later hint fault the entries are
  re-checked (`decide_queue_page`): young and active -> queued for promotion; young and
  inactive -> `mark_page_accessed`. The module never clears the young bit (its TODO), so
  within the look-back window every entry is young: an entry for an active page is queued
  at the next fault, a referenced one at the second, an unreferenced one at the third
  (two `mark_page_accessed` make it active). Entries whose page left the slow tier are
  dropped; the 20-entry distance rule (`PG_FAULT_LOOKBACK_DIST`) drops only entries that
  are not young, so it never fires here.
- The promotion queue: a 512-entry ring (`PROMOTE_QUEUE_LEN`), de-duplicated
  (`PagePromQueued`); a request finding it full is dropped. A workqueue worker drains it
  with transactional migration (`sim.migrate_tpm`, up to 10 attempts per page, targets
  from free memory only: `alloc_promote_page` never reclaims). Modelled per hint-fault
  poll as a fluid queue: of a poll's requests at most the ring plus what the worker copies
  during the poll (its copy bandwidth, `migrate_bw`) are accepted; the ring scales with
  `--scale` as the fault stream does. The copies run off the application's critical path
  (mover CPU), unlike TPP's synchronous promotion in the faulting thread.
- Shadow copies: a committed promotion keeps the slow-tier frame (engine/shadow.py); a
  demotion of a still-clean page is a remap onto it. kswapd's demotion throughput (TPP's
  `Kswapd`, one copy thread) is raised accordingly: pages cost a copy only when they have
  no shadow, so with a fraction s of the top node shadowed it frees rate / (1 - s) pages
  per second (at most 20x, an assumption: a remap still walks the rmap).
Huge pages: TPM and shadowing are for base pages (nomad.patch mm/migrate.c,
async_promote_main.c); tierlab's pages are 4 KiB.
Linux backend: not runnable (NOMAD is a kernel patch and module).
"""
from __future__ import annotations

import numpy as np

from ..engine.lru import REFERENCED
from ..params import parse_number
from .autonuma import UNALLOC
from .base import POLICIES
from .tpp import Tpp
from ..structures import unique_in_order

PROMOTE_QUEUE_LEN = 1 << 9  #: async_promote_main.c
NEED_ACTIVE, NEED_REFERENCED, NEED_COLD = 1, 2, 3  #: later faults until queued
MAX_REMAP_SPEEDUP = 20.0


@POLICIES.register("nomad")
class Nomad(Tpp):
    """NOMAD (OSDI'24): TPP's hint faults and kswapd, promotion queued from a look-back
    list and done by asynchronous transactional migration that keeps a shadow copy, so
    demoting a clean page is a remap."""

    def __init__(self, retries="10", queue=str(PROMOTE_QUEUE_LEN), **params):
        super().__init__(**params)
        self.params.update(retries=retries, queue=queue)
        self.retries = int(parse_number(retries, "nomad retries", lo=1, integer=True))
        self.queue = int(parse_number(queue, "nomad queue", lo=1, integer=True))
        self._lb_pages = np.zeros(0, dtype=np.int64)  # look-back entries not yet decided
        self._lb_due = np.zeros(0, dtype=np.int64)  # fault index at which each is queued
        self._nfaults = 0
        self.queued = 0
        self.queue_full = 0
        self.tpm_moved = 0
        self.tpm_failed = 0

    def attach(self, sim):
        super().attach(sim)
        self.ring = max(1, int(round(self.queue * sim.scale)))
        self.base_rate = self.kswapd.rate
        self._t_last = sim.now

    def promote_faulted(self, p, t, now):
        """Look-back decisions for this poll's slow-tier faults, then the worker's
        transactional promotions; returns (pages moved, requests not promoted)."""
        sim = self.sim
        n = p.shape[0]
        lru = sim.lru
        act = lru.is_active(p)
        ref = (lru.flags[p] & REFERENCED) != 0
        need = np.where(act, NEED_ACTIVE, np.where(ref, NEED_REFERENCED, NEED_COLD))
        pages = np.concatenate((self._lb_pages, p))
        due = np.concatenate((self._lb_due, self._nfaults + np.arange(n) + need))
        self._nfaults += n
        on_slow = sim.node_of(pages)
        keep = (on_slow != UNALLOC) & ~self.top_mask[on_slow]
        pages, due = pages[keep], due[keep]
        ready = due < self._nfaults
        self._lb_pages, self._lb_due = pages[~ready], due[~ready]
        # PagePromQueued: each page queued once, at its first request (a pass over a
        # bitset of pages, not np.unique's sort)
        req = unique_in_order(pages[ready][np.argsort(due[ready], kind="stable")])
        for _ in range(2):  # mark_page_accessed until active, as the re-checks do
            self.marked += int((~lru.mark_faulted(req)).sum())
        self.kswapd.wake_below_target()
        self._kswapd_rate()
        self.kswapd.serve(np.zeros(0, dtype=np.int64), np.zeros(0), now, "promote")
        dt = max(now - self._t_last, 0.0)
        self._t_last = now
        cap = self.ring + int(self.base_rate * dt)
        if req.shape[0] > cap:
            self.queue_full += int(req.shape[0] - cap)
            req = req[:cap]
        if not self.may_promote() or req.shape[0] == 0:
            return 0, 0
        self.queued += int(req.shape[0])
        moved, failed = sim.migrate_tpm(req, self.dst, retries=self.retries,
                                        reason="promote")
        self.tpm_moved += moved
        self.tpm_failed += failed
        return moved, int(req.shape[0] - moved)

    def _kswapd_rate(self) -> None:
        """kswapd frees shadowed pages by remapping: rate / (1 - shadowed share)."""
        used = max(int(self.sim.mem.used[self.dst]), 1)
        s = min(float(self.sim.shadow_frames().sum()) / used, 1.0)
        self.kswapd.rate = self.base_rate / max(1.0 - s, 1.0 / MAX_REMAP_SPEEDUP)

    def stats(self):
        d = super().stats()
        d.update(nomad_queued=int(self.queued), nomad_queue_full=int(self.queue_full),
                 nomad_tpm_moved=int(self.tpm_moved), nomad_tpm_failed=int(self.tpm_failed),
                 lookback_pending=int(self._lb_pages.shape[0]))
        return d

