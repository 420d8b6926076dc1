"""`hemem`: HeMem (Raybuck et al., "HeMem: Scalable Tiered Memory Management for Big
Data Applications and Real NVM", SOSP'21), from the paper and its public code
(webglider/hemem src/pebs.c, src/pebs.h).

Granularity: 2 MiB pages (`HP` = 512 simulated 4 KiB pages, aligned); the hot and cold
lists hold 2 MiB pages. A 2 MiB page is "in DRAM" when all its allocated 4 KiB pages
sit on the top node of the demotion path, else "in NVM" (any other node: Optane, CXL,
or remote DRAM on 4 tiers); a promotion moves the pages that are not on the top node.

Monitoring: the `pebs` monitor on HeMem's three events (fast-tier loads, slow-tier
loads, stores), `period` 10007 (the forks use 5003, 10007 or 19997), drained every
`poll` (10 ms). Per 2 MiB page, `reads` (both load events) and `writes` (stores)
sample counters. The policy sees only these samples, never the true rates.

Hot rule: reads >= `hot_reads` (8) or writes >= `hot_writes` (4) samples. A page that
turns hot goes to the tail of its tier's hot list, one that turns cold to the tail of
its cold list; new pages start on the cold list of their tier. The four FIFO lists
(DRAM/NVM x hot/cold) are kept as arrays: a page's list is (tier, hot) and its place
a global enqueue stamp (`seq`), so list operations are vectorised.

Cooling (lazy halving with a global clock): every page keeps the clock value it last
saw; when touched (a sample, the cooling cursor, the policy loop) its counters are
first shifted right by (global clock - page clock), both counters (HeMem's sampling
loop, src/pebs.c, shifts only the sampled event's counter; both are halved here, as
cooling is described for all of a page's counts). A sample is counted after the shift,
then the page is classified.
When a sample leaves a page's sampled counter above `cooling` (18 in the likeliest
original; forks 10-30) the global clock ticks. After a tick, a cursor walks each
tier's hot list from the tail, up to `cool_pages` (8,192) pages per policy round,
halving and moving cooled pages to the cold list, until it has covered the list once.
Samples of one poll are applied per page in time order, in rounds of one sample per
page (a page with more than 32 samples in a poll has them applied in 32 chunks: an
approximation of HeMem's per-sample loop).

Policy loop every `interval` (10 ms): take the NVM hot pages (write-hot ones first if
`write_first`, then FIFO), re-check them (a cooled one goes to the NVM cold list),
place each in free DRAM (above the low watermark, the allocator's headroom) or evict
the oldest DRAM cold page to NVM (the first node down the path with room); stop when
DRAM has no cold page (the blocked page goes back to the tail of the NVM hot list) or
when `budget` (10 GiB, promotions plus evictions, scaled with `sim.scaled_bytes`) is
used; then cool.

Copies: by `copy_threads` (4) parallel threads at the machine's per-thread move
bandwidth, or by a DMA engine (`copy=dma`, `dma_bw`, a documented choice: 8 GiB/s). The
policy thread is busy (no new round) until its copies end. While a 2 MiB page is
copied it is write-protected: each application thread that writes it waits for the
end of the copy; with the page's write rate W estimated from the store samples (decayed
mean over ~1 s x period) and n threads, the expected stall is n x (T - (1 -
exp(-W T / n)) / (W / n)) thread-seconds for a copy of T seconds (`sim.stall`). The
copy threads are HeMem's own, not the engine's `Costs.copy_threads` (the run's
`--migrate` mover, which only shortens synchronous copies): they set the busy time and
the write-protection window; the engine still charges the copy's CPU as its mover's
(with `copy=dma` that overstates it). The policy thread's own CPU is not charged.

Allocation: HeMem allocates DRAM first, then NVM: that is the `dram-preferred`
allocation policy (the default); others are honoured. HeMem manages its memory itself:
no kswapd demotion (`kswapd_demotion = False`); a direct reclaim of the top node (e.g.
`dram-always`) takes the oldest DRAM cold pages (`select_victims`).

Options (defaults): period=10007, poll=10ms, interval=10ms, hot_reads=8, hot_writes=4,
cooling=18, cool_pages=8192, budget=10GiB, write_first=on, copy=threads (or dma),
copy_threads=4, dma_bw=8GiB (per second), wp=on (write-protection stalls),
core=dedicated (or shared: the PEBS thread's CPU), sample_cost=300ns, busy=on (the
PEBS thread spins and holds its core, as HeMem's pebs_scan_thread loop does; off: it
costs only its samples), stores=count (store samples count toward `writes`; `stall`:
a HeMem that samples loads only, as Colloid's fork does, counts none of them, and the
store draws only stand for each page's write rate in the write-protection stall, so
that the stall a copy causes is modelled alike with and without store sampling).
"""
from __future__ import annotations

import numpy as np

from ..engine.memory import UNALLOC
from ..errors import TierlabError
from ..monitors.pebs import Pebs, parse_core, parse_period
from ..params import parse_choice, parse_flag, parse_int
from ..units import HUGE, PAGE, parse_duration, parse_size
from .base import POLICIES, Policy
from ..jit import kernel

HP = HUGE // PAGE  #: 4 KiB pages per 2 MiB page
#: what store samples do: count toward `writes` (HeMem), or only stand for the
#: page's write rate in the write-protection stall (a HeMem that samples loads only)
STORE_RULES = ("count", "stall")
DRAM, NVM, NONE = 0, 1, 2  #: tier of a 2 MiB page
ROUNDS = 32  #: most sequential sample rounds per poll
WRITE_RATE_TAU = 1.0  #: seconds, decay of the per-page store-sample rate estimate
MAX_SHIFT = 62
COPY_MODES = ("threads", "dma")


def halve(counts, page_clock, clock):
    """Lazy cooling: counts shifted right by (clock - page_clock), per page."""
    s = np.minimum(np.asarray(clock, dtype=np.int64) - np.asarray(page_clock, dtype=np.int64),
                   MAX_SHIFT)
    return np.right_shift(np.asarray(counts, dtype=np.int64), np.maximum(s, 0))


def wp_stall(write_rate, copy_s, threads: float) -> np.ndarray:
    """Expected thread-seconds lost to write protection during copies of `copy_s`
    seconds (per page): each of `threads` threads writes the page at write_rate /
    threads (Poisson) and, once it writes, waits for the copy's end."""
    r = np.asarray(write_rate, dtype=float) / threads
    copy_s = np.asarray(copy_s, dtype=float)
    x = r * copy_s
    small = x < 1e-6
    safe = np.where(small, 1.0, r)
    per = np.where(small, r * copy_s ** 2 / 2, copy_s + np.expm1(-x) / safe)
    return threads * per


@POLICIES.register("hemem")
class HeMem(Policy):
    """HeMem (SOSP'21): PEBS-sampled 2 MiB pages on hot/cold FIFO lists, lazy cooling,
    10 ms migration loop swapping NVM-hot with DRAM-cold pages."""

    kswapd_demotion = False

    def __init__(self, period=10007, poll="10ms", interval="10ms", hot_reads=8,
                 hot_writes=4, cooling=18, cool_pages=8192, budget="10GiB",
                 write_first="on", copy="threads", copy_threads=4, dma_bw="8GiB",
                 wp="on", core="dedicated", sample_cost="300ns", busy="on", stores="count"):
        super().__init__(period=period, poll=poll, interval=interval, hot_reads=hot_reads,
                         hot_writes=hot_writes, cooling=cooling, cool_pages=cool_pages,
                         budget=budget, write_first=write_first, copy=copy,
                         copy_threads=copy_threads, dma_bw=dma_bw, wp=wp, core=core,
                         sample_cost=sample_cost, busy=busy, stores=stores)
        self.period = parse_period(period, "hemem period")
        self.poll = poll
        self.interval = parse_duration(interval, "hemem interval")
        if self.interval <= 0:
            raise TierlabError(f"bad hemem interval {interval!r}: must be > 0")
        self.hot_reads = parse_int(hot_reads, "hemem hot_reads", 1)
        self.hot_writes = parse_int(hot_writes, "hemem hot_writes", 1)
        self.cooling = parse_int(cooling, "hemem cooling", 1)
        self.cool_pages = parse_int(cool_pages, "hemem cool_pages", 1)
        self.budget = parse_size(budget, "hemem budget")
        self.write_first = parse_flag(write_first, "hemem write_first")
        self.copy = str(copy).strip().lower()
        if self.copy not in COPY_MODES:
            raise TierlabError(f"bad hemem copy {copy!r}; valid: {', '.join(COPY_MODES)}")
        self.copy_threads = parse_int(copy_threads, "hemem copy_threads", 1)
        self.dma_bw = parse_size(dma_bw, "hemem dma_bw")
        if self.dma_bw <= 0:
            raise TierlabError(f"bad hemem dma_bw {dma_bw!r}: must be > 0")
        self.wp = parse_flag(wp, "hemem wp")
        self.count_stores = parse_choice(stores, "hemem stores", STORE_RULES) == "count"
        self.core = parse_core(core)
        self.monitor = Pebs(period="+".join(str(self.period[e]) for e in
                                            ("fast_load", "slow_load", "store")),
                            poll=poll, core=self.core, sample_cost=sample_cost,
                            busy=busy, name="hemem-pebs")
        self.clock = 0
        self.ticks = 0
        self.cooled = 0
        self.promoted = 0
        self.evicted = 0
        self.blocked = 0
        self.rounds = 0
        self.wp_stall_seconds = 0.0
        self.busy_seconds = 0.0
        self._busy_until = 0.0
        self._seq_next = 0
        self._stale = False
        self.need_cool = [False, False]
        self.cursor = [None, None]

    # -- setup ---------------------------------------------------------------------
    def attach(self, sim) -> None:
        super().attach(sim)
        path = list(sim.machine.demotion)
        self.top = path[0]
        self.lower = path[1:]
        self.npages = int(sim.mem.npages)
        nh = -(-self.npages // HP)
        self.reads = np.zeros(nh, dtype=np.int64)
        self.writes = np.zeros(nh, dtype=np.int64)
        self.clk = np.zeros(nh, dtype=np.int64)
        self.seq = np.zeros(nh, dtype=np.int64)
        self.hot = np.zeros(nh, dtype=bool)
        self.tier = np.full(nh, NONE, dtype=np.uint8)
        self.ntop = np.zeros(nh, dtype=np.int32)
        self.noff = np.zeros(nh, dtype=np.int32)
        self.west = np.zeros(nh)
        self.wt = np.zeros(nh)
        self._ar = np.arange(HP, dtype=np.int64)
        scale = float(sim.scaled_bytes(1.0))
        self.budget_pages = max(int(sim.scaled_bytes(self.budget)) // PAGE, HP)
        # the machine's move bandwidth is a miniature's under --scale: one 2 MiB copy
        # runs at the full-scale speed, the thread's busy time is scale-free
        if self.copy == "threads":
            self.copy_bw = sim.machine.migrate_bw * self.copy_threads
            self.page_copy_s = HUGE / (self.copy_bw / scale)
        else:
            self.copy_bw = sim.scaled_bytes(self.dma_bw)
            self.page_copy_s = HUGE / self.dma_bw
        self.app_threads = float(sim.app_threads or 1)
        self.monitor.attach(sim)
        self.monitor.subscribe(self._on_samples)
        sim.every(self.interval, self.tick)

    # -- 2 MiB page state ---------------------------------------------------------------
    def _enqueue(self, hps) -> None:
        """Put pages at the tail of their list (list = tier x hot)."""
        n = len(hps)
        if n:
            self.seq[hps] = self._seq_next + np.arange(n, dtype=np.int64)
            self._seq_next += n

    def _set_tier(self, hps, ntop, nall) -> None:
        old = self.tier[hps]
        new = np.where(nall == 0, NONE, np.where(ntop == nall, DRAM, NVM)).astype(np.uint8)
        self.ntop[hps] = ntop
        self.noff[hps] = nall - ntop
        self.tier[hps] = new
        born = hps[(old == NONE) & (new != NONE)]
        gone = hps[(new == NONE) & (old != NONE)]
        for h in (born, gone):
            self.reads[h] = 0
            self.writes[h] = 0
            self.clk[h] = self.clock
            self.hot[h] = False
            self.west[h] = 0.0
        self._enqueue(born)

    def _refresh_range(self, h0: int, h1: int) -> None:
        """Re-derive the tier of 2 MiB pages [h0, h1) from the page map (chunked)."""
        node = self.sim.mem.node
        step = 1 << 15
        for a in range(h0, h1, step):
            b = min(a + step, h1)
            seg = node[a * HP:min(b * HP, self.npages)]
            if seg.shape[0] < (b - a) * HP:
                seg = np.concatenate((seg, np.full((b - a) * HP - seg.shape[0], UNALLOC,
                                                   dtype=np.uint8)))
            seg = seg.reshape(b - a, HP)
            ntop = np.count_nonzero(seg == self.top, axis=1)
            nall = np.count_nonzero(seg != UNALLOC, axis=1)
            self._set_tier(np.arange(a, b, dtype=np.int64), ntop, nall)

    def _refresh(self, hps) -> None:
        """Re-derive the tier of the given 2 MiB pages."""
        hps = np.unique(np.asarray(hps, dtype=np.int64))
        node = self.sim.mem.node
        for a in range(0, len(hps), 4096):
            h = hps[a:a + 4096]
            idx = h[:, None] * HP + self._ar
            nd = np.where(idx < self.npages, node[np.minimum(idx, self.npages - 1)], UNALLOC)
            self._set_tier(h, np.count_nonzero(nd == self.top, axis=1),
                           np.count_nonzero(nd != UNALLOC, axis=1))

    def _pages(self, hps, on_top: bool) -> np.ndarray:
        """The allocated 4 KiB pages of `hps` that are (or are not) on the top node,
        page by page in the order of `hps`."""
        if len(hps) == 0:
            return np.zeros(0, dtype=np.int64)
        idx = (np.asarray(hps, dtype=np.int64)[:, None] * HP + self._ar).ravel()
        idx = idx[idx < self.npages]
        nd = self.sim.mem.node[idx]
        sel = (nd == self.top) if on_top else ((nd != self.top) & (nd != UNALLOC))
        return idx[sel]

    def is_hot(self, reads, writes) -> np.ndarray:
        """HeMem's hot rule (SOSP'21; src/pebs.h): reads >= 8 or writes >= 4 samples."""
        return (np.asarray(reads) >= self.hot_reads) | (np.asarray(writes) >= self.hot_writes)

    def _halve(self, hps):
        """Apply the pending halvings of `hps` (lazy cooling); returns (reads, writes)."""
        return halve_at(self.reads, self.writes, self.clk, hps, self.clock, MAX_SHIFT)

    def _tick_clock(self, n: int) -> None:
        if n > 0:
            self.clock += int(n)
            self.ticks += int(n)
            self.need_cool = [True, True]

    def touch(self, hps, dreads, dwrites) -> None:
        """One sample round on distinct pages `hps`: halve lazily, add the samples,
        move pages whose class changed to the tail of the other list, and tick the
        global clock once per page whose sampled counter exceeds `cooling`."""
        hps = np.asarray(hps, dtype=np.int64)
        dreads = np.asarray(dreads, dtype=np.int64)
        dwrites = np.asarray(dwrites, dtype=np.int64)
        r, w = self._halve(hps)
        r = r + dreads
        w = w + dwrites
        self.reads[hps] = r
        self.writes[hps] = w
        now_hot = self.is_hot(r, w)
        flip = now_hot != self.hot[hps]
        self.hot[hps[flip]] = now_hot[flip]
        self._enqueue(hps[flip])
        over = ((dreads > 0) & (r > self.cooling)) | ((dwrites > 0) & (w > self.cooling))
        self._tick_clock(int(np.count_nonzero(over)))

    # -- samples ---------------------------------------------------------------------
    def _on_samples(self, batch, now: float) -> None:
        if len(batch) == 0:
            return
        hp = batch.sample_pages // HP
        isw = batch.sample_events == 2
        keep = self.tier[hp] != NONE
        hp, isw = hp[keep], isw[keep]
        if hp.size == 0:
            return
        self._note_writes(hp[isw], now)
        if not self.count_stores:  # stores=stall: for the write-protection stall only
            hp, isw = hp[~isw], isw[~isw]
            if hp.size == 0:
                return
        o = np.argsort(hp, kind="stable")  # per page, in time order
        h, w = hp[o], isw[o]
        n = h.shape[0]
        first = np.ones(n, dtype=bool)
        first[1:] = h[1:] != h[:-1]
        starts = np.flatnonzero(first)
        gid = np.cumsum(first) - 1
        k = np.diff(np.append(starts, n))[gid]
        rank = np.arange(n) - starts[gid]
        chunk = np.where(k > ROUNDS, rank * ROUNDS // np.maximum(k, 1), rank)
        o2 = np.lexsort((h, chunk))
        ch, h, w = chunk[o2], h[o2], w[o2]
        bounds = np.searchsorted(ch, np.arange(int(ch[-1]) + 2))
        for j in range(int(ch[-1]) + 1):
            hh, ww = h[bounds[j]:bounds[j + 1]], w[bounds[j]:bounds[j + 1]]
            f = np.ones(hh.shape[0], dtype=bool)
            f[1:] = hh[1:] != hh[:-1]
            g = np.cumsum(f) - 1
            dw = np.bincount(g, weights=ww).astype(np.int64)
            dr = np.bincount(g) - dw
            self.touch(hh[f], dr, dw)

    def _note_writes(self, hps, now: float) -> None:
        """Decayed store-sample rate per page (samples/s), for write-protection stalls."""
        if hps.size == 0:
            return
        u, c = np.unique(hps, return_counts=True)
        decay = np.exp(-(now - self.wt[u]) / WRITE_RATE_TAU)
        self.west[u] = self.west[u] * decay + c / WRITE_RATE_TAU
        self.wt[u] = now

    def write_rate(self, hps, now: float) -> np.ndarray:
        """Estimated stores per second to each page (store samples x period)."""
        return self.west[hps] * np.exp(-(now - self.wt[hps]) / WRITE_RATE_TAU) \
            * self.period["store"]

    # -- policy thread ---------------------------------------------------------------
    def tick(self, now: float) -> None:
        """One round of HeMem's policy thread: migrate, then cool (unless still busy
        copying the previous round's pages)."""
        if self._stale:
            self._stale = False
            self._refresh_range(0, self.tier.shape[0])
        if now + 1e-12 < self._busy_until:
            return
        self.rounds += 1
        self._migrate(now)
        self.cool(DRAM)
        self.cool(NVM)

    def cool(self, tier: int) -> int:
        """partial_cool: walk up to `cool_pages` pages of the tier's hot list from the
        tail, halving lazily; cooled pages go to the cold list. Returns pages cooled."""
        if not self.need_cool[tier]:
            return 0
        if self.cursor[tier] is None:
            self.cursor[tier] = self._seq_next
        cand = np.flatnonzero(self.hot & (self.tier == tier) & (self.seq < self.cursor[tier]))
        done = cand.size <= self.cool_pages
        if not done:
            cand = cand[np.argpartition(-self.seq[cand], self.cool_pages - 1)[:self.cool_pages]]
        cand = cand[np.argsort(-self.seq[cand], kind="stable")]  # tail first
        low = int(self.seq[cand].min()) if cand.size else 0
        r, w = self._halve(cand)
        cooled = cand[~self.is_hot(r, w)]
        self.hot[cooled] = False
        self._enqueue(cooled)
        self.cooled += int(cooled.size)
        if done:
            self.need_cool[tier] = False
            self.cursor[tier] = None
        else:
            self.cursor[tier] = low
        return int(cooled.size)

    def _migrate(self, now: float) -> None:
        sim = self.sim
        mem = sim.mem
        cand = np.flatnonzero(self.hot & (self.tier == NVM))
        if cand.size == 0:
            return
        r, w = self._halve(cand)
        still = self.is_hot(r, w)
        cooled = cand[~still]
        self.hot[cooled] = False
        self._enqueue(cooled[np.argsort(self.seq[cooled], kind="stable")])
        cand, w = cand[still], w[still]
        if cand.size == 0:
            return
        light = (w < self.hot_writes) if self.write_first else np.zeros(cand.size, bool)
        cand = cand[np.lexsort((self.seq[cand], light))]
        vict = np.flatnonzero(~self.hot & (self.tier == DRAM))
        vict = vict[np.argsort(self.seq[vict], kind="stable")]  # oldest first
        room = max(int(mem.free[self.top] - mem.wmark_low[self.top]), 0)
        nvm_room = sum(max(int(mem.free[n] - mem.wmark_min[n]), 0) for n in self.lower)
        need = np.cumsum(self.noff[cand].astype(np.int64))
        freed = np.concatenate(([0], np.cumsum(self.ntop[vict].astype(np.int64))))
        nv = np.searchsorted(freed, need - room, side="left")
        fits = nv < freed.shape[0]
        nvc = np.minimum(nv, freed.shape[0] - 1)
        total = need + freed[nvc]
        before = np.concatenate(([0], total[:-1]))
        ok = fits & (freed[nvc] <= nvm_room) & (before < self.budget_pages)
        n = int(np.argmin(ok)) if not ok.all() else int(ok.size)
        if n < cand.size and not fits[n]:
            self.blocked += 1  # DRAM has no cold page: back to the NVM hot list's tail
            self._enqueue(cand[n:n + 1])
        if n == 0:
            return
        self._apply(cand[:n], vict[:int(nv[n - 1])], now)

    def _apply(self, prom, ev, now: float) -> None:
        """Move 2 MiB pages: `ev` down (to the first lower node with room), then `prom`
        to the top node; re-list them, keep the copy thread busy for the copies and
        charge the write-protection stalls."""
        sim = self.sim
        moved_ev = 0
        epages = self._pages(ev, on_top=True)
        for node in self.lower:
            if moved_ev >= epages.size:
                break
            moved_ev += sim.migrate(epages[moved_ev:], node, reason="hemem-evict")
        ppages = self._pages(prom, on_top=False)
        moved_pr = sim.migrate(ppages, self.top, reason="hemem-promote")
        self._refresh(np.concatenate((ev, prom)))
        went_up = prom[self.tier[prom] == DRAM]
        went_down = ev[self.tier[ev] == NVM]
        self._enqueue(went_down)
        self._enqueue(went_up)
        self.promoted += int(went_up.size)
        self.evicted += int(went_down.size)
        nbytes = (moved_ev + moved_pr) * PAGE
        if nbytes:
            busy = nbytes / self.copy_bw
            self._busy_until = now + busy
            self.busy_seconds += busy
        if self.wp and nbytes:
            copied = np.concatenate((ev, prom))
            pages = np.concatenate((self.noff[ev], self.ntop[prom])).astype(float)
            stall = wp_stall(self.write_rate(copied, now), self.page_copy_s * pages / HP,
                             self.app_threads)
            total_stall = float(stall.sum())
            if total_stall > 0:
                self.wp_stall_seconds += total_stall
                sim.stall(total_stall)

    # -- reclaim and allocation hooks -------------------------------------------------
    def select_victims(self, node: int, n: int):
        """Direct reclaim of the top node takes the oldest DRAM cold pages."""
        if node != getattr(self, "top", None) or n <= 0:
            return None
        vict = np.flatnonzero(~self.hot & (self.tier == DRAM))
        if vict.size == 0:
            return None
        vict = vict[np.argsort(self.seq[vict], kind="stable")]
        k = int(np.searchsorted(np.cumsum(self.ntop[vict]), n)) + 1
        self._stale = True
        return self._pages(vict[:k], on_top=True)[:n]

    def on_alloc(self, start: int, end: int, node: int) -> None:
        if hasattr(self, "tier") and end > start:
            self._refresh_range(start // HP, (end - 1) // HP + 1)

    def on_free(self, start: int, end: int) -> None:
        if hasattr(self, "tier") and end > start:
            self._refresh_range(start // HP, (end - 1) // HP + 1)

    def stats(self) -> dict:
        tiers = getattr(self, "tier", np.zeros(0, dtype=np.uint8))
        hot = getattr(self, "hot", np.zeros(0, dtype=bool))
        return {"monitor": self.monitor.stats(), "clock_ticks": int(self.ticks),
                "cooled": int(self.cooled), "promoted_2m": int(self.promoted),
                "evicted_2m": int(self.evicted), "blocked_rounds": int(self.blocked),
                "rounds": int(self.rounds), "busy_seconds": float(self.busy_seconds),
                "wp_stall_thread_seconds": float(self.wp_stall_seconds),
                "hot_dram_2m": int(np.count_nonzero(hot & (tiers == DRAM))),
                "hot_nvm_2m": int(np.count_nonzero(hot & (tiers == NVM)))}


# -- compiled kernels (tierlab.jit) --------------------------------------------
@kernel
def _halve_at(reads, writes, clk, hps, clock, max_shift):
    # HeMem's lazy cooling of pages hps: counts >> min(max(clock - clk, 0), max_shift),
    # written back with clk = clock; returns the cooled (reads, writes)
    n = hps.shape[0]
    r = np.empty(n, np.int64)
    w = np.empty(n, np.int64)
    for i in range(n):
        h = hps[i]
        s = min(clock - clk[h], max_shift)
        if s < 0:
            s = 0
        a = reads[h] >> s
        b = writes[h] >> s
        reads[h] = a
        writes[h] = b
        clk[h] = clock
        r[i] = a
        w[i] = b
    return r, w


def halve_at(reads, writes, clk, hps, clock: int, max_shift: int):
    """HeMem's lazy cooling of `hps` in one pass (int64 arrays, updated in place):
    returns the cooled (reads, writes), as `hemem.halve` of each, written back."""
    return _halve_at(reads, writes, clk, np.asarray(hps, dtype=np.int64),
                     np.int64(clock), np.int64(max_shift))
