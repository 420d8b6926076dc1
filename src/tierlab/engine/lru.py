"""Linux's per-node LRU lists (2Q: active and inactive), without lists.

mm/vmscan.c keeps anonymous pages on an inactive and an active list per node. Since
Linux 5.9 a new anonymous page starts on the inactive list; reclaim scans the inactive
tail and activates pages referenced since the last scan (page_referenced), reclaims (on
a tiered machine: demotes) the rest; when the inactive list is low relative to the
active one (inactive * inactive_ratio < active, inactive_ratio = int_sqrt(10 * list GB),
1 below 1 GB), shrink_active_list deactivates from the active tail.
`mark_page_accessed` moves inactive,unreferenced -> inactive,referenced -> active.

Here list membership is a flag byte per page (ACTIVE, REFERENCED, and PROMOTE for
MULTI-CLOCK's third list) and the order inside a list is the address order of one
CLOCK hand per node and list, which sees a page as referenced when its accessed bit was
set since that hand last passed it (a compact pass-time map, `PassTimes`). Anonymous
active pages are deactivated here with a second chance (a referenced active page stays),
like the file LRU; Linux deactivates anonymous active pages unconditionally but
re-activates referenced ones on the next inactive scan, which has the same effect on
which pages end up demoted.
"""
from __future__ import annotations

import math

import numpy as np

from .. import kernels
from ..units import PAGE
from .memory import PassTimes

ACTIVE = 1
REFERENCED = 2
PROMOTE = 4  #: MULTI-CLOCK's promote list (a slow-tier page referenced while active)


def _keep(on: bool) -> np.uint8:
    """The flags a page keeps when ACTIVE is set (REFERENCED cleared) or cleared
    (REFERENCED and PROMOTE cleared too)."""
    return ~np.uint8(REFERENCED) if on else ~np.uint8(ACTIVE | PROMOTE | REFERENCED)


class LRU:
    """Active/inactive lists of every node; `sim.lru` of every simulation."""

    def __init__(self, sim):
        self.sim = sim
        mem = sim.mem
        k = sim.machine.nnodes
        self.flags = np.zeros(mem.npages, dtype=np.uint8)
        self.nr_active = np.zeros(k, dtype=np.int64)
        self._hand = {}  # (node, active) -> address
        self._passes = {(n, a): PassTimes(mem.npages) for n in range(k) for a in (0, 1)}
        # ACTIVE as a bitmap: every page starts inactive (flags 0), so it starts clear
        self._active = kernels.PageBits.zeros(mem.npages)
        self.scanned = 0
        #: calls of the methods here that change pages' flags (activations,
        #: deactivations, marks, sweeps): a policy that keeps its own view of the lists
        #: (Nimble's counts) learns from it that someone else changed them
        self.changes = 0

    # -- membership ---------------------------------------------------------------
    def nr_inactive(self, node: int) -> int:
        return int(self.sim.mem.used[node] - self.nr_active[node])

    def is_active(self, pages) -> np.ndarray:
        return (self.flags[np.asarray(pages, dtype=np.int64)] & ACTIVE) != 0

    def _set_active(self, pages, on: bool, sel=None, sel_val: bool = True) -> int:
        """ACTIVE on or off (REFERENCED cleared; PROMOTE too when deactivated) for the
        allocated pages that differ (given `sel`: of pages[sel == sel_val]), with the
        active counts and bitmap: one compiled pass (`kernels.set_active`). Returns
        the number of pages considered."""
        self.changes += 1
        return kernels.set_active(self.flags, self.sim.mem.node,
                                  np.asarray(pages, dtype=np.int64), on, ACTIVE,
                                  ACTIVE if on else 0, _keep(on), self.nr_active,
                                  None if self._active is None else self._active.words,
                                  sel, sel_val)

    def active_bits(self) -> np.ndarray:
        """ACTIVE of every page as a bitmap (uint64 words), which the hands read to skip
        the other list's pages 64 at a time; clear at the start like the flags, kept
        by every change of the flag here, built again after `active_changed`."""
        if self._active is None:
            self._active = kernels.PageBits((self.flags & ACTIVE) != 0)
        return self._active.words

    def active_changed(self) -> None:
        """A caller set ACTIVE in `flags` itself (Nimble's list kernels): the bitmap
        the hands read is built again at the next scan."""
        self._active = None

    def activate(self, pages) -> None:
        self._set_active(pages, True)

    def deactivate(self, pages) -> None:
        self._set_active(pages, False)

    def mark_accessed(self, pages) -> np.ndarray:
        """mark_page_accessed: inactive,unreferenced -> referenced; inactive,referenced
        -> active. Returns which of `pages` were active before the call."""
        pages = np.asarray(pages, dtype=np.int64)
        self.changes += 1
        f = self.flags[pages]
        was_active = (f & ACTIVE) != 0
        second = ~was_active & ((f & REFERENCED) != 0)
        self.activate(pages[second])
        first = pages[~was_active & ~second]
        self.flags[first] |= REFERENCED
        return was_active

    def mark_faulted(self, pages) -> np.ndarray:
        """`is_active(pages)`, then `mark_accessed` of the inactive ones (a hint fault
        on a page TPP does not promote), in one compiled pass over `pages`
        (`kernels.lru_mark`, which activates the referenced ones as `activate` does);
        returns which were active."""
        self.changes += 1
        return kernels.lru_mark(self.flags, np.asarray(pages, dtype=np.int64), ACTIVE,
                                REFERENCED, self.sim.mem.node, self.nr_active,
                                None if self._active is None else self._active.words)

    # -- engine hooks ---------------------------------------------------------------
    def on_alloc(self, start: int, end: int) -> None:
        """New anonymous pages start inactive (Linux >= 5.9)."""
        self.flags[start:end] = 0
        if self._active is not None:
            self._active.clear(start, end)

    def on_moves(self, pages, src, dsts) -> None:
        """Migration keeps a page's LRU state; move its active count with it."""
        kernels.move_counts(self.flags, ACTIVE, np.asarray(pages, dtype=np.int64),
                            np.asarray(src, dtype=np.uint8), np.asarray(dsts, dtype=np.uint8),
                            self.nr_active)

    def on_free(self, start: int, end: int, nodes: np.ndarray) -> None:
        act = (self.flags[start:end] & ACTIVE) != 0
        if act.any():
            k = len(self.nr_active)
            self.nr_active -= np.bincount(nodes[act], minlength=256)[:k]
        self.flags[start:end] = 0
        if self._active is not None:
            self._active.clear(start, end)

    # -- scanning -----------------------------------------------------------------
    def scan(self, node: int, active: bool, n: int):
        """Advance the CLOCK hand of one list over up to n of its pages; returns
        (pages, referenced): whether each was accessed since this hand last passed it.
        The caller decides what to do with them (activate, deactivate, reclaim,
        promote); the accessed-bit checks and the scan are charged to kswapd's CPU."""
        sim = self.sim
        key = (node, int(active))
        start = self._hand.get(key, 0)
        passes = self._passes[key]
        pages, hand, scanned, (which, tmin) = sim.mem.pages_on(
            node, start, n, sel=self.active_bits(), sel_on=active, passes=passes)
        cpu0 = sim.bits.cpu_seconds
        ref = sim.bits.test_since_table(pages, which, passes.times, sim.now, tmin=tmin)
        self._passed(key, start, hand, scanned, len(pages), cpu0)
        return pages, ref

    def _passed(self, key, start: int, hand: int, scanned: int, npg: int,
                cpu0: float) -> None:
        """A hand's pass is over: its position, its pass time over the addresses it
        swept, and kswapd's CPU for them and for the accessed-bit checks (those the
        bits have counted since cpu0)."""
        sim = self.sim
        self._hand[key] = hand
        self._passes[key].set_swept(start, scanned, sim.now)
        sim.charge_cpu(scanned * sim.costs.reclaim_scan_s + sim.bits.cpu_seconds - cpu0,
                       kind="migration")
        self.scanned += npg

    def sweep(self, node: int, active: bool, n: int, cold_max: int = 0):
        """`scan` of one list and what reclaim makes of it: on the active list the idle
        pages deactivated, on the inactive list the referenced pages activated and the
        first `cold_max` idle ones listed (shrink_active_list, shrink_inactive_list).
        Returns (pages scanned, pages deactivated or activated as `_set_active` counts
        them, the idle pages listed). On a rate source with numpy's PCG64 stream, one
        compiled pass (`kernels.lru_sweep`) with the same pages, bits, stream and
        charges as scan and `_set_active` one after the other, which it falls back to."""
        sim = self.sim
        self.changes += 1
        key = (node, int(active))
        passes = self._passes[key]
        on = not active
        draws = sim.bits.table_draws(passes.times, sim.now, float(passes.times.min()))
        if draws is not None:
            start = self._hand.get(key, 0)
            cpu0 = sim.bits.cpu_seconds
            got = kernels.lru_sweep(sim.mem.node_bits(), node, start, n, self.active_bits(),
                                    active, passes, *draws, sim.bits.rng, self.flags,
                                    sim.mem.node, on, ACTIVE, ACTIVE if on else 0,
                                    _keep(on), self.nr_active, on, cold_max)
            if got is not None:
                hand, scanned, npg, nsel, cold = got
                sim.bits.charge(2 * npg)
                self._passed(key, start, hand, scanned, npg, cpu0)
                return npg, nsel, cold
        pages, ref = self.scan(node, active, n)
        nsel = self._set_active(pages, on, sel=ref, sel_val=on)
        return len(pages), nsel, pages[~ref][:cold_max]

    def _ratio(self, node: int) -> int:
        # the list size in full-scale GB: a miniature keeps the full-scale ratio
        gb = self.sim.mem.used[node] * PAGE / 2**30 / self.sim.scale
        return max(int(math.isqrt(int(10 * gb))), 1) if gb >= 1 else 1

    def inactive_is_low(self, node: int) -> bool:
        """mm/vmscan.c inactive_is_low: inactive * ratio < active, ratio =
        int_sqrt(10 * GB of the lists), at least 1."""
        return self.nr_inactive(node) * self._ratio(node) < self.nr_active[node]

    def inactive_deficit(self, node: int) -> int:
        """Pages to deactivate to bring the lists back to inactive:active = 1:ratio."""
        target = int(self.sim.mem.used[node]) // (self._ratio(node) + 1)
        return max(target - self.nr_inactive(node), 0)

    def reclaim_victims(self, node: int, n: int, grow: bool = False) -> np.ndarray:
        """shrink_lruvec in short: balance the lists, then take unreferenced pages from
        the inactive tail (referenced ones are activated). Scan batches are 2 x (wanted
        - found) pages; with `grow` they start there and double while a batch yields too
        few (under half its size) victims, which spares hundreds of batches when nearly
        every page is referenced (small scaled runs of hot workloads: kswapd of the
        AutoNUMA and TPP policies); the pages chosen follow the same rules."""
        victims, got, looked = [], 0, 0
        limit = 2 * int(self.sim.mem.used[node]) + 64
        size, asize = max(2 * n, 64), max(n, 32)
        while got < n and looked < limit:
            if self.inactive_is_low(node) or self.nr_inactive(node) == 0:
                # shrink_active_list refills the inactive list towards its target size
                deficit = self.inactive_deficit(node)
                want = max(asize, deficit) if grow else max(n - got, deficit, 32)
                npg, idle, _ = self.sweep(node, True, want)
                looked += npg
                if grow and idle < asize // 2:
                    asize *= 2
                if self.nr_inactive(node) == 0:
                    if npg == 0:
                        break
                    continue
            npg, _, cold = self.sweep(node, False, size if grow else max(2 * (n - got), 64),
                                      n - got)
            looked += npg
            if npg == 0:
                continue
            victims.append(cold)
            got += len(cold)
            if grow and 2 * len(cold) < size // 2:
                size *= 2
        return np.concatenate(victims) if victims else np.zeros(0, dtype=np.int64)
