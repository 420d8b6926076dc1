"""`pte-scan`: linear accessed-bit scans of the workload's page tables (kstaled, MGLRU
aging walks).

A scan visits the present PTEs of an address range in order, tests and clears each
accessed bit, and reports which pages were accessed since the scanner last passed
them. Two uses:

- periodic (`period` > 0): a full pass over the address space every `period` seconds,
  done in steps of `step` seconds (kstaled-style background scanning); each step
  hands (pages, young, now) to subscribers and records the result in a packed bitmap
  (one bit per page, `young(pages)`: accessed between its last two visits);
- on demand (`walk`, `walk_node`, `test`): MGLRU's aging walk of one node (only pages on
  that node are updated: walk_pte_range skips folios of other nodes, so their bits are
  not cleared) and the eviction-time check of a few pages (folio_referenced through
  rmap).

Model: a page's bit is drawn from the source, Bernoulli(1 - exp(-Lambda)) over (last
visit, now] (`source.accessed`, one vectorised call per distinct last-visit time; the
last visits are a compact interval map, `PassTimes`-like, one per node for node walks).
We draw from the source rather than `sim.bits.test_since` because the shared bits
forget what is older than their horizon (10 s), which would hide accesses from scans
whose period is longer; the cost is the shared per-check figure `sim.bits.check_cost`
(150 ns, `PTE_CHECK_SECONDS`).

Cost with `nonleaf` (x86 sets the accessed bit of the PMD entry too;
CONFIG_ARCH_HAS_NONLEAF_PMD_YOUNG, used by MGLRU): one check per PMD entry (2 MiB) of
the range, plus one per present PTE under the PMDs that were young (a PMD is young iff a
page under it was: the leaf draws decide, so the two levels are consistent); without
it, one check per present PTE. Charged as monitor CPU.

Tractability at 28.8 M pages: a walk is O(pages in the range) numpy work with scalar
`since` per interval (~30 ms per million pages); periodic scanning spreads a pass over
period/step steps. MGLRU's aging walk with its generation update is one compiled pass
over the node's bitmap row (`age_node`, about 8 ns a page of the node).
"""
from __future__ import annotations

import numpy as np

from ..errors import TierlabError
from ..params import parse_flag
from ..units import parse_duration
from .base import MONITORS, Monitor
from ..jit import cttz, kernel
from . import draws as rate_draws
from .draws import _NO_DRAWS, _draw_pages
from ..pcg64 import _pcg_put, _pcg_take

UNALLOC = 255
PMD_PAGES = 512


class _PassMap:
    """When the scanner last passed each address: sorted boundaries, one time each."""

    def __init__(self, npages: int, t0: float = 0.0):
        self.n = int(npages)
        self.bounds = np.array([0, self.n], dtype=np.int64)
        self.times = np.array([float(t0)])

    def pieces(self, a: int, c: int):
        """[(lo, hi, time)] covering [a, c)."""
        b, t = self.bounds, self.times
        i = int(np.searchsorted(b, a, side="right")) - 1
        out = []
        while i < len(t) and b[i] < c:
            out.append((max(int(b[i]), a), min(int(b[i + 1]), c), float(t[i])))
            i += 1
        return out

    def set(self, a: int, c: int, t: float) -> None:
        a, c = max(int(a), 0), min(int(c), self.n)
        if c <= a:
            return
        b, ts = self.bounds, self.times
        i = int(np.searchsorted(b, a, side="right")) - 1
        j = int(np.searchsorted(b, c - 1, side="right")) - 1
        lb, lt = (b[: i + 1], ts[: i + 1]) if b[i] < a else (b[:i], ts[:i])
        mb, mt = ([a, c], [t, ts[j]]) if c < b[j + 1] else ([a], [t])
        bounds = np.concatenate((lb, mb, b[j + 1:]))
        times = np.concatenate((lt, mt, ts[j + 1:]))
        keep = np.concatenate(([True], times[1:] != times[:-1]))
        self.times = times[keep]
        self.bounds = np.concatenate((bounds[:-1][keep], [self.n])).astype(np.int64)


@MONITORS.register("pte-scan")
class PteScan(Monitor):
    """Linear accessed-bit scans of the page tables (kstaled; MGLRU aging walks): which
    pages were accessed since the last scan; CPU grows with the PTEs checked."""

    def __init__(self, period="0", step="100ms", nonleaf="1", check_cost=None):
        super().__init__(period=period, step=step, nonleaf=nonleaf)
        self.period = parse_duration(period, "pte-scan period")
        self.step = parse_duration(step, "pte-scan step")
        if self.period < 0 or self.step <= 0:
            raise TierlabError(f"bad pte-scan step {step!r}: must be > 0")
        self.nonleaf = parse_flag(nonleaf, "pte-scan nonleaf")
        self._check_cost = None if check_cost is None else parse_duration(check_cost,
                                                                          "check_cost")
        self._subs = []
        self.checks = 0
        self.cpu_seconds = 0.0
        self.walks = 0
        self.pages_scanned = 0
        self.passes = 0

    def attach(self, sim) -> None:
        super().attach(sim)
        self.rng = sim.rng_for("pte-scan")
        n = sim.mem.npages
        self._maps = {None: _PassMap(n, sim.now)}
        self.cursor = 0
        self.bitmap = None
        if self.period > 0:
            self.bitmap = np.zeros((n + 7) // 8, dtype=np.uint8)
            # pages per step, PMD aligned so that bitmap bytes are never split
            per = n * min(self.step / self.period, 1.0)
            self.chunk = max(int(-(-per // PMD_PAGES)) * PMD_PAGES, PMD_PAGES)
            sim.every(self.step, self._tick)
        sim.monitors.setdefault("pte-scan", self)

    @property
    def check_cost(self) -> float:
        return self._check_cost if self._check_cost is not None else self.sim.bits.check_cost

    def subscribe(self, fn) -> None:
        """fn(pages, young, now) after every periodic step."""
        self._subs.append(fn)

    # -- primitives ---------------------------------------------------------------------
    def _draw(self, pages, since: float, now: float) -> np.ndarray:
        if pages.shape[0] == 0 or now <= since:
            return np.zeros(pages.shape[0], dtype=bool)
        return self.sim.source.accessed_pages(pages, since, now, self.rng)

    def _charge(self, n: int) -> None:
        if n <= 0:
            return
        self.checks += int(n)
        c = n * self.check_cost
        self.cpu_seconds += c
        self.sim.charge_cpu(c, kind="monitor")

    def _walk_cost(self, pages, young, start: int, end: int) -> int:
        """Entries checked by a page-table walk of [start, end) finding `young`."""
        if not self.nonleaf:
            return int(pages.shape[0])
        pmd = pages // PMD_PAGES
        npmd = -(-end // PMD_PAGES) - start // PMD_PAGES
        if pages.shape[0] == 0:
            return int(npmd)
        per = np.bincount(pmd - pmd[0], minlength=1)
        hot = np.bincount(pmd[young] - pmd[0], minlength=per.shape[0]) > 0
        return int(npmd + per[hot[: per.shape[0]]].sum())

    def walk(self, start: int, end: int, now: float, node: int | None = None):
        """Test and clear the accessed bits of the present pages of [start, end) (only
        those on `node` when given): (pages, young)."""
        sim = self.sim
        start, end = max(int(start), 0), min(int(end), sim.mem.npages)
        seg = sim.mem.node[start:end]
        sel = seg != UNALLOC if node is None else seg == node
        pages = np.flatnonzero(sel).astype(np.int64) + start
        young = np.zeros(pages.shape[0], dtype=bool)
        pm = self._pass_map(node)
        for lo, hi, t in pm.pieces(start, end):
            a, b = np.searchsorted(pages, [lo, hi])
            if b > a:
                young[a:b] = self._draw(pages[a:b], t, now)
        self._walked(pm, start, end, now, self._walk_cost(pages, young, start, end),
                     pages.shape[0])
        return pages, young

    def _pass_map(self, node) -> _PassMap:
        """When the walks of `node` (None: every page) last passed each address."""
        pm = self._maps.get(node)
        if pm is None:
            pm = self._maps[node] = _PassMap(self.sim.mem.npages, 0.0)
        return pm

    def _walked(self, pm: _PassMap, start: int, end: int, now: float, checks: int,
                pages: int) -> None:
        """A walk's bookkeeping: [start, end) passed at `now`, its checks charged."""
        pm.set(start, end, now)
        self._charge(checks)
        self.walks += 1
        self.pages_scanned += int(pages)

    def walk_node(self, node: int, now: float):
        """MGLRU aging walk: the whole address space, updating pages on `node`."""
        return self.walk(0, self.sim.mem.npages, now, node=node)

    def age_node(self, node: int, now: float, gen, slots, rule) -> bool:
        """`walk_node` and MGLRU's generation update of the pages it finds (`rule`, as
        `mglru_age` takes it, with the `slots` bitmaps of the generations) in
        one compiled pass over the node's bitmap row, with the same bits, stream,
        charge and pass map; no array of the node's pages. False (nothing done) on
        another source than the rate field's, without numba or PCG64, or where the
        node's last walks left more than one pass time (only whole walks set them, so
        never)."""
        sim = self.sim
        if not hasattr(sim.source, "draw_tables"):
            return False
        pm = self._pass_map(node)
        if pm.times.shape[0] != 1:
            return False
        t = float(pm.times[0])
        got = None
        if now > t:
            got = sim.source.draw_tables(np.array([t]), t, now)
            if got is None:  # the chunked draws would take the stream on regardless
                return False
        w_tab, tables = got if got is not None else (None, None)
        done = mglru_age(sim.mem.node_bits(), node, w_tab, tables, self.rng, gen,
                         slots, rule, self.nonleaf, PMD_PAGES)
        if done is None:
            return False
        n, cost = done
        self._walked(pm, 0, sim.mem.npages, now, cost, n)
        return True

    def test(self, pages, since, now: float) -> np.ndarray:
        """Test-and-clear of given pages last cleared at `since` (scalar or per page),
        e.g. the rmap check of eviction candidates: one check each."""
        pages = np.asarray(pages, dtype=np.int64)
        self._charge(pages.shape[0])
        if np.ndim(since) == 0:
            return self._draw(pages, float(since), now)
        since = np.asarray(since, dtype=float)
        out = np.zeros(pages.shape[0], dtype=bool)
        for s in np.unique(since):
            m = since == s
            out[m] = self._draw(pages[m], float(s), now)
        return out

    # -- periodic scanning ------------------------------------------------------------------
    def _tick(self, now: float) -> None:
        n = self.sim.mem.npages
        a = self.cursor
        b = min(a + self.chunk, n)
        pages, young = self.walk(a, b, now)
        mask = np.zeros(b - a, dtype=bool)
        mask[pages - a] = young
        bits = np.packbits(mask)
        self.bitmap[a // 8: a // 8 + bits.shape[0]] = bits
        if b >= n:
            self.cursor = 0
            self.passes += 1
        else:
            self.cursor = b
        for fn in self._subs:
            fn(pages, young, now)

    def young(self, pages) -> np.ndarray:
        """Whether each page was found accessed at its last periodic visit."""
        if self.bitmap is None:
            raise RuntimeError("pte-scan: young() needs periodic scanning (period > 0)")
        pages = np.asarray(pages, dtype=np.int64)
        return ((self.bitmap[pages >> 3] >> (7 - (pages & 7))) & 1).astype(bool)

    def stats(self) -> dict:
        return {"pte_walks": self.walks, "pte_pages_scanned": self.pages_scanned,
                "pte_checks": self.checks, "pte_scan_cpu_seconds": self.cpu_seconds,
                "pte_passes": self.passes}


# -- compiled kernels (tierlab.jit) --------------------------------------------
@kernel
def _mglru_age(row, npages, draw, w_tab, starts, soff, rate, ends, w_a, use_max, whi,
               multi, st, jump, pages, which, lam, u, ref, gen, slots, fold, old_st,
               fold_st, tag, young_st, arrived_st, nonleaf, pmd, res):
    # MGLRU's aging walk of one node and its generation update (`PteScan.age_node`):
    # the node's pages in address order (the set bits of its bitmap row), by blocks of
    # `pages`' size, each page's accessed bit drawn as `draw_accessed` draws it (given
    # draw; else none is young and the stream is not touched), then its generation:
    # the oldest folded into the next (given fold), young -> young_st, one of another
    # node's -> arrived_st, its bit moved between the rows of `slots` (`SlotBits`).
    # res: [pages, PTE checks (`PteScan._walk_cost`)]
    nw = row.shape[0]
    b = pages.shape[0]
    one = np.uint64(1)
    cost = (npages + pmd - 1) // pmd  # a check per PMD entry, then the young PMDs' PTEs
    cur, cnt, hot = np.int64(-1), np.int64(0), False
    prev, c = np.nan, 0.0
    n = 0
    w = 0
    word = row[0] if nw > 0 else np.uint64(0)
    while True:
        k = 0
        while k < b:
            while word == 0 and w + 1 < nw:
                w += 1
                word = row[w]
            if word == 0:
                break
            pages[k] = (np.int64(w) << 6) + np.int64(cttz(word))
            k += 1
            word &= word - one
        if k == 0:
            break
        if draw:
            prev, c = _draw_pages(lam, u, pages[:k], which[:k], False, w_tab, starts, soff,
                                  rate, ends, w_a, use_max, whi, multi, st, jump, ref, 0,
                                  prev, c)
        for i in range(k):
            p = pages[i]
            y = draw and ref[i]
            g0 = gen[p]
            g = fold_st if fold and g0 == old_st else g0
            if y:
                g = young_st
            elif (g >> 2) != tag:
                g = arrived_st
            if g != g0:
                gen[p] = g
                b1 = one << np.uint64(p & 63)
                if g0 != 0:
                    slots[g0 & 3, p >> 6] &= ~b1
                slots[g & 3, p >> 6] |= b1
            q = p // pmd
            if q != cur:
                if hot:
                    cost += cnt
                cur, cnt, hot = q, 0, False
            cnt += 1
            hot = hot or y
        n += k
        if k < b:
            break
    if hot:
        cost += cnt
    res[0] = n
    res[1] = cost if nonleaf else n


def mglru_age(nodebits, node: int, w_tab, tables, rng, gen, slots, rule, nonleaf: bool,
              pmd: int):
    """MGLRU's aging walk of `node` (`PteScan.age_node`) in one compiled pass over its
    bitmap row: each page's accessed bit drawn as `draw_accessed` draws it (with
    `tables`, `RateSource.draw_tables` of the walk's one start time; None: no page is
    young and rng is not drawn), and its generation byte updated by `rule` (fold,
    oldest, folded, node tag, young, arrived: `AutoNumaTieringMglru.age`) with its bit
    in `slots` (a `SlotBits` of the generations' seq % 4). Returns
    (pages, PTE checks), or None without numba or PCG64 (the caller walks apart)."""
    pcg = _pcg_take(rng)
    if pcg is None:
        return None
    b = rate_draws.DRAW_BLOCK
    res = np.zeros(2, np.int64)
    draw = tables is not None
    if not draw:
        w_tab, tables = np.zeros(1), _NO_DRAWS[1:9]
    fold, old, folded, tag, young, arrived = rule
    _mglru_age(nodebits.bits[node], nodebits.npages, draw, w_tab, *tables,
               pcg[2], pcg[3], np.empty(b, np.int64), np.zeros(b, np.int64),
               np.empty(b), np.empty(b), np.zeros(b, np.bool_), gen,
               slots.rows, bool(fold), np.uint8(old), np.uint8(folded),
               np.uint8(tag), np.uint8(young), np.uint8(arrived), bool(nonleaf),
               np.int64(pmd), res)
    _pcg_put(*pcg)
    return int(res[0]), int(res[1])
