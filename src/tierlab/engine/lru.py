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

from ..units import PAGE
from .memory import PassTimes
from ..jit import kernel
from .pagemap import _walk, _walk_init
from ..monitors import draws as rate_draws
from ..monitors.draws import _draw_pages
from ..pcg64 import _pcg_put, _pcg_take
from ..structures import PageBits

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
        self._active = PageBits.zeros(mem.npages)
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
        active counts and bitmap: one compiled pass (`set_active`). Returns
        the number of pages considered."""
        self.changes += 1
        return set_active(self.flags, self.sim.mem.node,
                          np.asarray(pages, dtype=np.int64), on, ACTIVE,
                          ACTIVE if on else 0, _keep(on), self.nr_active,
                          None if self._active is None else self._active.words,
                          sel, sel_val)

    def active_bits(self) -> np.ndarray:
        """ACTIVE of every page as a bitmap (uint64 words), which the hands read to skip
        the other list's pages 64 at a time; clear at the start like the flags, kept
        by every change of the flag here, built again after `active_changed`."""
        if self._active is None:
            self._active = PageBits((self.flags & ACTIVE) != 0)
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
        (`lru_mark`, which activates the referenced ones as `activate` does);
        returns which were active."""
        self.changes += 1
        return lru_mark(self.flags, np.asarray(pages, dtype=np.int64), ACTIVE,
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
        move_counts(self.flags, ACTIVE, np.asarray(pages, dtype=np.int64),
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
        compiled pass (`lru_sweep`) with the same pages, bits, stream and
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
            got = lru_sweep(sim.mem.node_bits(), node, start, n, self.active_bits(),
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


# -- compiled kernels (tierlab.jit) --------------------------------------------
@kernel
def _set_active(flags, node_map, pages, on, active, setbits, keep, nr_active, row,
                use_row, sel, use_sel, sel_val):
    # LRU._set_active: the pages (with use_sel: those with sel[i] == sel_val) whose
    # ACTIVE differs from `on` (read before any change, as numpy's gather does) and
    # that are allocated change flags, count and bit; returns how many were selected.
    # The pages considered, then those that differ, are listed by branch-free passes;
    # the counts go to four interleaved lanes and a word's bits are gathered until the
    # next page's word differs (no chain through one counter or word)
    n = pages.shape[0]
    idx = np.empty(n, np.int64)
    k = 0
    if use_sel:
        for i in range(n):
            idx[k] = i
            k += sel[i] == sel_val
    else:
        for i in range(n):
            idx[i] = i
        k = n
    m = 0
    for j in range(k):
        i = idx[j]
        p = pages[i]
        idx[m] = i
        m += (((flags[p] & active) != 0) != on) and node_map[p] != 255
    one = np.uint64(1)
    lanes = np.zeros((4, nr_active.shape[0]), np.int64)
    w = -1
    acc = np.uint64(0)
    for j in range(m):
        p = pages[idx[j]]
        lanes[j & 3, node_map[p]] += 1
        flags[p] = (flags[p] | setbits) & keep
        if use_row:
            q = p >> 6
            if q != w:
                if w >= 0:
                    row[w] = row[w] | acc if on else row[w] & ~acc
                w = q
                acc = np.uint64(0)
            acc |= one << np.uint64(p & 63)
    if use_row and w >= 0:
        row[w] = row[w] | acc if on else row[w] & ~acc
    sign = 1 if on else -1
    for r in range(nr_active.shape[0]):
        nr_active[r] += sign * (lanes[0, r] + lanes[1, r] + lanes[2, r] + lanes[3, r])
    return k


def set_active(flags, node_map, pages, on: bool, active: int, setbits: int, keep: int,
               nr_active, row, sel=None, sel_val: bool = True) -> int:
    """`LRU._set_active` in two passes without temporaries: the allocated pages whose
    flag & active differs from `on` (as read before the call) get (flag | setbits) &
    keep, their node's nr_active +-1 (a page listed twice counts twice, as numpy's
    bincount did) and their bit in `row` (or None). Given `sel`, only pages[sel ==
    sel_val] are considered (a hand's referenced or idle pages, without indexing them
    out first). Returns how many pages were considered."""
    use, use_sel = row is not None, sel is not None
    return int(_set_active(flags, node_map, pages, bool(on), np.uint8(active),
                           np.uint8(setbits), np.uint8(keep), nr_active,
                           row if use else np.zeros(1, np.uint64), use,
                           sel if use_sel else np.zeros(1, np.bool_), use_sel,
                           bool(sel_val)))


@kernel
def _lru_mark(flags, pages, active, referenced, tmp, act, done, node_map, nr_active,
              row, use_row):
    # act[i]: pages[i] active; the inactive ones marked accessed: the referenced ones
    # activated as `_set_active` activates them after the marks (those allocated: ACTIVE
    # set, REFERENCED cleared, their node's count +1 and their bit in row), the others
    # made referenced. A page activated here carries `tmp` until the end, so that a
    # later listing of it reads as inactive and counts again, as it did when the
    # activations came after the loop (`set_active` counts a page listed twice twice)
    one = np.uint64(1)
    k = 0
    for i in range(pages.shape[0]):
        p = pages[i]
        f = flags[p]
        if (f & active) and not (f & tmp):
            act[i] = True
            continue
        act[i] = False
        if f & tmp:
            nr_active[node_map[p]] += 1
        elif f & referenced:
            d = node_map[p]
            if d != 255:
                flags[p] = (f | active | tmp) & ~referenced
                nr_active[d] += 1
                if use_row:
                    row[p >> 6] |= one << np.uint64(p & 63)
                done[k] = p
                k += 1
        else:
            flags[p] = f | referenced
    for j in range(k):
        flags[done[j]] &= ~tmp


def lru_mark(flags, pages, active: int, referenced: int, node_map, nr_active, row):
    """`LRU.mark_faulted` in one pass: which pages are active; of the others the
    referenced ones activated (as `set_active` activates them: the allocated ones, with
    their node's count in nr_active and their bit in `row`, or None) and the rest made
    referenced. The flag bit 0x80 (free) is borrowed during the call."""
    act = np.empty(pages.shape[0], np.bool_)
    use = row is not None
    _lru_mark(flags, pages, np.uint8(active), np.uint8(referenced), np.uint8(0x80),
              act, np.empty(pages.shape[0], np.int64), node_map, nr_active,
              row if use else np.zeros(1, np.uint64), use)
    return act


@kernel
def _move_counts(flags, mask, pages, cur, dsts, nr):
    # LRU.on_moves: the moved pages with flags & mask leave cur's count for dsts'
    for i in range(pages.shape[0]):
        if flags[pages[i]] & mask:
            nr[cur[i]] -= 1
            nr[dsts[i]] += 1


def move_counts(flags, mask: int, pages, cur, dsts, nr) -> None:
    """nr[cur[i]] -= 1, nr[dsts[i]] += 1 for the moved pages with flags & mask (the
    LRU's active counts follow a migration)."""
    _move_counts(flags, np.uint8(mask), pages, cur, dsts, nr)


@kernel
def _lru_sweep(row, npages, start, limit, sel, sel_on, bounds, times, w_tab, starts,
               soff, rate, ends, w_a, use_max, whi, multi, st, jump, pages, which, lam,
               u, ref, flags, node_map, on, active, setbits, keep, nr_active, sel_val,
               cold, res):
    # a CLOCK hand's pass and what reclaim makes of it (`LRU.sweep`), by blocks of
    # `pages`' size: the hand (`_walk`, over the node's pages whose bit in `sel` is
    # sel_on), each page's accessed bit since the hand's last pass (`_draw_pages`, as
    # `_draw_accessed` draws them), then the pages whose bit is sel_val and whose ACTIVE
    # differs from `on` changed as `_set_active` changes them (flags, count, their bit
    # in sel, which is the ACTIVE bitmap), the others listed into cold while it has
    # room. res: [hand position, addresses scanned, pages, pages whose bit is sel_val,
    # pages listed]
    s = np.empty(13, np.int64)
    tm = np.empty(1)
    _walk_init(start, limit, npages, s, tm)
    one = np.uint64(1)
    nf = np.zeros(1, np.uint8)
    prev, c = np.nan, 0.0
    nsel = 0
    ncold = 0
    while s[12] == 0:
        k = _walk(row, npages, limit, nf, np.uint8(0), np.uint8(0), False, sel, sel_on,
                  True, bounds, times, True, pages, which, s, tm)
        if k == 0:
            continue
        prev, c = _draw_pages(lam, u, pages[:k], which[:k], False, w_tab, starts, soff,
                              rate, ends, w_a, use_max, whi, multi, st, jump, ref, 0, prev,
                              c)
        for i in range(k):
            p = pages[i]
            if ref[i] == sel_val:
                nsel += 1
                f = flags[p]
                d = node_map[p]
                if (((f & active) != 0) != on) and d != 255:
                    flags[p] = (f | setbits) & keep
                    nr_active[d] += 1 if on else -1
                    b = one << np.uint64(p & 63)
                    sel[p >> 6] = (sel[p >> 6] | b) if on else (sel[p >> 6] & ~b)
            elif ncold < cold.shape[0]:
                cold[ncold] = p
                ncold += 1
    res[0], res[1], res[2], res[3], res[4] = s[0], s[3], s[5], nsel, ncold


def lru_sweep(nodebits, node: int, start: int, limit: int, sel, sel_on: bool, passes,
              w_tab, tables, rng, flags, node_map, on: bool, active: int, setbits: int,
              keep: int, nr_active, sel_val: bool, cold_max: int):
    """A CLOCK hand's pass over `node`'s pages whose bit in the ACTIVE bitmap `sel` is
    sel_on, from `start` (`NodeBits.pages_on` with a hand's `passes`), each page's
    accessed bit since the hand last passed it drawn as `draw_accessed` draws it
    (w_tab: W of each pass time, `tables`: the epochs'), and `set_active` (the pages
    whose bit is sel_val) applied as it goes, by blocks of DRAW_BLOCK pages: `LRU.sweep`
    in one pass, without an array of the pages. Returns (hand position, addresses
    scanned, pages, pages whose bit is sel_val, the first cold_max others), or None
    without numba or PCG64 (the caller scans, draws and sets apart)."""
    pcg = _pcg_take(rng)
    if pcg is None:
        return None
    b = rate_draws.DRAW_BLOCK
    res = np.zeros(5, np.int64)
    cold = np.empty(max(int(cold_max), 0), np.int64)
    _lru_sweep(nodebits.bits[node], nodebits.npages, int(start), int(limit), sel,
               bool(sel_on), passes.bounds, passes.times, w_tab, *tables,
               pcg[2], pcg[3], np.empty(b, np.int64), np.empty(b, np.int64),
               np.empty(b), np.empty(b), np.empty(b, np.bool_), flags, node_map,
               bool(on), np.uint8(active), np.uint8(setbits), np.uint8(keep),
               nr_active, bool(sel_val), cold, res)
    _pcg_put(*pcg)
    return int(res[0]), int(res[1]), int(res[2]), int(res[3]), cold[:res[4]]
