"""Hardware-like monitoring primitives shared by the monitors (DAMON, IDT, Telescope,
HeMem, AutoNUMA, MGLRU-style aging), on top of an `AccessSource`.

- `AccessedBits`: PTE accessed bits at every page-table level (Telescope: the page
  walker sets the bit of each level it walks, so an upper-level entry tells whether
  anything below it was touched).
- `PebsSampler`: PEBS samples on HeMem's three events (fast-tier loads, slow-tier loads,
  stores), each with its own period.
- `HintFaults`: NUMA-balancing hint faults (PROT_NONE scan, first touch faults).

Cost figures (all parameters; the defaults are documented choices, see each class):
  PTE_CHECK_SECONDS  = 150 ns per accessed-bit test/clear of one entry
  PEBS_SAMPLE_SECONDS = 300 ns per PEBS sample
  HINT_FAULT_SECONDS = 1.5 us per NUMA hint fault (charged to the app by the caller)
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..field import uniq
from .source import AccessSource, RateSource
from ..structures import sorted_find

#: pages (4 KiB) covered by one entry at each page-table level: PTE, PMD (2 MiB),
#: PUD (1 GiB), P4D/PGD (512 GiB)
LEVEL_SPAN = (1, 512, 512 ** 2, 512 ** 3)
LEVEL_NAMES = ("pte", "pmd", "pud", "p4d")

#: Cost of one accessed-bit check (walk to the entry, test, clear), in CPU seconds.
#: A choice, not a measurement: a 4-level walk whose upper levels hit in the cache plus
#: an atomic test-and-clear is a few cache misses, ~100-200 ns; we take 150 ns. No TLB
#: flush is charged (DAMON/MGLRU clear young bits without a per-page flush).
PTE_CHECK_SECONDS = 150e-9

#: Cost of one PEBS sample, in CPU seconds: ~250 ns for the PEBS assist that writes the
#: record (Akiyama & Hirofuchi, "Quantitative Evaluation of Intel PEBS Overhead for
#: Online System-Noise Analysis", ROSS'17: 200-300 ns per sample) plus ~50 ns to read
#: the record from the ring buffer and bump the page's counter (a choice).
PEBS_SAMPLE_SECONDS = 300e-9

#: Cost of one NUMA hint fault to the faulting thread: ~1-2 us (an estimate, not a
#: measurement; we take 1.5 us).
HINT_FAULT_SECONDS = 1.5e-6


def _as_idx(idx) -> np.ndarray:
    return np.atleast_1d(np.asarray(idx, dtype=np.int64))


# -----------------------------------------------------------------------------------
# Accessed bits
# -----------------------------------------------------------------------------------
class _Run:
    """One sorted run of entry records (keys unique within the run)."""

    __slots__ = ("keys", "since", "isset", "touched", "tmin", "tmax")

    def __init__(self, keys, since, isset, touched, tmin=None, tmax=None):
        self.keys, self.since, self.isset, self.touched = keys, since, isset, touched
        if tmin is None:
            tmin = float(touched.min()) if touched.size else np.inf
            tmax = float(touched.max()) if touched.size else -np.inf
        self.tmin, self.tmax = tmin, tmax

    def __len__(self):
        return self.keys.shape[0]

    def take(self, m) -> "_Run":
        return _Run(self.keys[m], self.since[m], self.isset[m], self.touched[m])

    def fresh(self, cutoff: float) -> "_Run":
        """The records touched at or after `cutoff`."""
        if self.tmin >= cutoff:
            return self
        return self.take(self.touched >= cutoff)


def _unique(idx):
    """(sorted unique keys, inverse or None when idx is already sorted and unique)."""
    if idx.shape[0] < 2 or np.all(idx[1:] > idx[:-1]):
        return idx, None
    order = np.argsort(idx, kind="stable")
    s = idx[order]
    first = np.ones(s.shape[0], dtype=bool)
    first[1:] = s[1:] != s[:-1]
    inv = np.empty(s.shape[0], dtype=np.int64)
    inv[order] = np.cumsum(first) - 1
    return s[first], inv


def _merge(newer: _Run, older: _Run, cutoff: float) -> _Run:
    """Union of two runs without records touched before `cutoff`; for keys in both,
    the newer record wins."""
    newer, older = newer.fresh(cutoff), older.fresh(cutoff)
    keys = np.concatenate((newer.keys, older.keys))
    order = np.argsort(keys, kind="stable")  # newer first among equal keys
    k = keys[order]
    first = np.ones(k.shape[0], dtype=bool)
    first[1:] = k[1:] != k[:-1]
    sel = order[first]
    cat = lambda x, y: np.concatenate((x, y))[sel]  # noqa: E731
    return _Run(k[first], cat(newer.since, older.since), cat(newer.isset, older.isset),
                cat(newer.touched, older.touched))


class _Level:
    """Sparse state of one page-table level: a few sorted runs of records, newest first.

    Each update call adds one run; runs whose records are all older than the horizon
    are dropped whole; above `max_runs` the adjacent pair with the smallest combined
    size is merged (size-tiered, so a record is re-merged O(log N) times). A monitor
    that clears and re-tests within a short horizon (DAMON) never merges at all.
    Lookups binary-search each run, newest first, for the keys not found yet.
    """

    max_runs = 8

    def __init__(self):
        self.runs: list[_Run] = []
        self.floor = 0.0  # time of the last clear_all / forgetting floor
        self.last_prune = 0.0

    def __len__(self):
        return sum(len(r) for r in self.runs)

    def lookup(self, u):
        """For sorted unique keys u: (found, since, isset) from the newest record."""
        n = u.shape[0]
        found = np.zeros(n, dtype=bool)
        since = np.full(n, -np.inf)
        isset = np.zeros(n, dtype=bool)
        todo = np.arange(n)
        q = u  # u[todo], sorted
        for run in self.runs:
            if todo.size == 0:
                break
            if len(run) == 0:
                continue
            # only the keys within the run's first and last can be in it
            lo = int(np.searchsorted(q, run.keys[0], "left"))
            hi = int(np.searchsorted(q, run.keys[-1], "right"))
            if lo == hi:
                continue
            pos, hit = sorted_find(run.keys, q[lo:hi])
            if not hit.any():
                continue
            j = todo[lo:hi][hit]
            p = pos[hit]
            found[j] = True
            since[j] = run.since[p]
            isset[j] = run.isset[p]
            keep = np.ones(todo.size, dtype=bool)
            keep[lo:hi] = ~hit
            todo, q = todo[keep], q[keep]
        return found, since, isset

    def insert(self, rec: _Run, now: float, horizon: float, max_entries: int) -> None:
        cutoff = now - horizon
        runs = [rec] + [r for r in self.runs if r.tmax >= cutoff]
        while len(runs) > self.max_runs:
            sizes = np.array([len(r) for r in runs])
            i = int(np.argmin(sizes[:-1] + sizes[1:]))
            runs[i:i + 2] = [_merge(runs[i], runs[i + 1], cutoff)]
        self.runs = runs
        if now - self.last_prune >= horizon / 2 or len(self) > max_entries:
            self.prune(now, horizon, max_entries)

    def prune(self, now: float, horizon: float, max_entries: int) -> None:
        """Drop records older than the horizon; over `max_entries`, forget the oldest and
        raise the level's floor past them (shortening the look-back of every entry)."""
        self.last_prune = now
        runs = [r.fresh(now - horizon) for r in self.runs]
        runs = [r for r in runs if len(r)]
        if sum(len(r) for r in runs) > max_entries:
            merged = runs[0]
            for r in runs[1:]:
                merged = _merge(merged, r, -np.inf)
            keep = (3 * max_entries) // 4
            if len(merged) > keep:  # merging repeated keys may already have shrunk it
                cut = np.partition(merged.touched, len(merged) - keep)[len(merged) - keep]
                self.floor = max(self.floor, float(cut))
                merged = merged.take(merged.touched > cut)
            runs = [merged] if len(merged) else []
        self.runs = runs


class AccessedBits:
    """PTE accessed bits at page-table levels 0-3 (`LEVEL_SPAN`), drawn from a source.

    Entry `idx` of level L covers pages [idx * span, (idx + 1) * span), span =
    LEVEL_SPAN[L]. The hardware sets the bit of every level it walks, so an upper-level
    bit is set iff some page below was accessed since that entry was cleared: the rate
    model draws it from the range's summed rate, the exact source looks for any event in
    the range. Levels are independent state (clearing a PMD bit does not clear PTE bits).

    State is sparse, per level: sorted runs of (key, since, known-set, touched) records,
    never an array over the address space. `since` is the last clear, or the last time a
    test found the bit clear: for Poisson streams a bit found clear at t is
    indistinguishable from one cleared at t (memorylessness), so repeated tests stay
    consistent. A bit once found set stays set until cleared (no redraw).

    Bounded-memory approximation: only the last `horizon` seconds are remembered. An
    entry never cleared (or forgotten) counts as cleared at max(floor, now - horizon,
    0), and every since is clamped to that look-back; records not touched for `horizon`
    are dropped (for bits found clear this is exact under the clamp; a bit found set
    more than `horizon` ago and not tested since is forgotten and redrawn). `clear_all`
    (a full scan) sets the level's floor instead of storing every entry. If a level
    holds more than `max_entries` records, the oldest are forgotten and the floor rises
    past them. Cross-level consistency is not enforced in the rate model (a leaf found
    set does not force its PMD set over the same interval); the exact source is
    consistent by construction.

    Speed: each call is O(k log N) for k entries and N records held (a few sorted runs).
    Pick `horizon` near the longest clear-to-test gap the monitor uses: DAMON-like
    use (10k entries cleared and re-tested every 5 ms) costs ~1 ms per interval with a
    20 ms horizon but several times more with a 1 s one (millions of records); for
    that exact pattern `test_since` is stateless and as cheap as one `accessed` call.

    Cost: every entry tested/cleared counts one check of `check_cost` CPU seconds
    (`PTE_CHECK_SECONDS`); `clear_all` counts one per entry of the level over
    `npages` (or the `entries` given).
    """

    def __init__(self, source: AccessSource, rng: np.random.Generator,
                 horizon: float = 10.0, check_cost: float = PTE_CHECK_SECONDS,
                 max_entries: int = 4_000_000, npages: int | None = None):
        self.source = source
        self.rng = rng
        self.horizon = float(horizon)
        self.check_cost = float(check_cost)
        self.max_entries = int(max_entries)
        self._npages = npages
        self.levels = [_Level() for _ in LEVEL_SPAN]
        self.checks = 0
        self.cpu_seconds = 0.0

    # -- helpers ------------------------------------------------------------------
    @property
    def npages(self) -> int:
        return int(self._npages if self._npages is not None else self.source.npages)

    @staticmethod
    def span(level: int) -> int:
        return LEVEL_SPAN[level]

    def _level(self, level: int) -> _Level:
        if not 0 <= level < len(LEVEL_SPAN):
            raise ValueError(f"page-table level must be 0..{len(LEVEL_SPAN) - 1}, not {level}")
        return self.levels[level]

    def charge(self, n: int) -> None:
        """Count n entry checks (and their CPU cost)."""
        self.checks += int(n)
        self.cpu_seconds += n * self.check_cost

    def _lookback(self, lv: _Level, now: float) -> float:
        return max(lv.floor, now - self.horizon, 0.0)

    def _observe(self, level: int, u: np.ndarray, now: float):
        """Current bit values of sorted unique entries u (drawing where unknown), and
        the since values to store for those found set."""
        lv = self.levels[level]
        _, since, isset = lv.lookup(u)
        since = np.maximum(since, self._lookback(lv, now))
        res = isset.copy()
        need = np.flatnonzero(~isset)
        if need.size:
            span = LEVEL_SPAN[level]
            a = u[need] * span
            res[need] = self.source.accessed(a, a + span, since[need], now, self.rng)
        return res, since

    def _store(self, level: int, u, since, isset, now: float) -> None:
        n = u.shape[0]
        rec = _Run(u, np.broadcast_to(since, (n,)).astype(float),
                   np.broadcast_to(isset, (n,)).astype(bool), np.full(n, float(now)),
                   float(now), float(now))
        self.levels[level].insert(rec, now, self.horizon, self.max_entries)

    # -- hardware-like API ----------------------------------------------------------
    def _entries(self, level: int, idx):
        """Validate and charge a batch: (sorted unique entries, inverse) or None."""
        self._level(level)
        idx = _as_idx(idx)
        self.charge(idx.size)
        return _unique(idx) if idx.size else None

    def test(self, level: int, idx, now: float) -> np.ndarray:
        """Accessed bit of entries `idx` at time `now` (not cleared)."""
        ent = self._entries(level, idx)
        if ent is None:
            return np.zeros(0, dtype=bool)
        u, inv = ent
        res, since = self._observe(level, u, now)
        # found set: remember (stays set); found clear: equivalent to a clear at now
        self._store(level, u, np.where(res, since, now), res, now)
        return res if inv is None else res[inv]

    def test_and_clear(self, level: int, idx, now: float) -> np.ndarray:
        """Accessed bit of entries `idx` at `now`, then clear them."""
        ent = self._entries(level, idx)
        if ent is None:
            return np.zeros(0, dtype=bool)
        u, inv = ent
        res, _ = self._observe(level, u, now)
        self._store(level, u, float(now), False, now)
        return res if inv is None else res[inv]

    def clear(self, level: int, idx, now: float) -> None:
        """Clear the accessed bit of entries `idx` at time `now`."""
        self._level(level)
        idx = _as_idx(idx)
        self.charge(idx.size)
        if idx.size == 0:
            return
        u, _ = _unique(idx)
        self._store(level, u, float(now), False, now)

    def test_since(self, level: int, idx, since, now: float) -> np.ndarray:
        """Stateless clear-then-test: the bits at `now` of entries cleared at `since`
        (per entry) and not looked at in between -- DAMON's prepare/check pattern.
        Same distribution as `clear(idx, since)` then `test(idx, now)`, but stores
        nothing (use it when the entries are not revisited later). Charged two checks
        per entry (the clear and the test). The level's floor (`clear_all`) and the
        horizon clamp still apply."""
        lv = self._level(level)
        idx = _as_idx(idx)
        self.charge(2 * idx.size)
        if idx.size == 0:
            return np.zeros(0, dtype=bool)
        since = np.maximum(np.asarray(since, dtype=float), self._lookback(lv, now))
        if level == 0 and since.ndim == 0:  # one clear time (DAMON's and IDT's samples)
            return self.source.accessed_pages(idx, float(since), now, self.rng)
        span = LEVEL_SPAN[level]
        a = idx * span
        return self.source.accessed(a, a + span, since, now, self.rng)

    def test_since_table(self, idx, which, table, now: float,
                         by_page: bool = False, tmin: float | None = None,
                         discard: bool = False) -> np.ndarray | None:
        """`test_since(0, idx, table[which], now)` for pages whose clear times are few
        distinct values (a CLOCK hand's pass times, Nimble's check times); `by_page`:
        `which` is an array over all pages, read at idx. The same bits, cheaper on a
        rate source (`RateSource.accessed_table`). `tmin`: min(table[which]) if the
        caller found it in a pass of its own (saves the source one). `discard`: the
        caller clears the bits without reading them (Nimble's active scan deactivates
        every page it passes); on a rate source whose stream is PCG64 the pages' draws
        are skipped by advancing the stream one output a page (`accessed_table` draws
        one uniform double a page, one output each) and None is returned: the same
        charge and the same stream after, without the outcomes (not where the
        generator holds half of a 32-bit draw, which `advance` would drop)."""
        lv = self._level(0)
        idx = np.asarray(idx)
        self.charge(2 * idx.shape[0])
        if idx.shape[0] == 0:
            return np.zeros(0, dtype=bool)
        bg = self.rng.bit_generator if discard else None
        if discard and hasattr(self.source, "accessed_table") \
                and isinstance(bg, np.random.PCG64) and not bg.state["has_uint32"]:
            bg.advance(int(idx.shape[0]))
            return None
        lb = self._lookback(lv, now)
        tab = np.maximum(np.asarray(table, dtype=float), lb)
        if hasattr(self.source, "accessed_table"):
            if tmin is not None:  # min_i max(t_i, L) = max(min_i t_i, L)
                tmin = max(float(tmin), float(lb))
            return self.source.accessed_table(idx, which, tab, now, self.rng, by_page,
                                              tmin=tmin)
        a = _as_idx(idx)
        return self.source.accessed(a, a + 1, tab[which[a] if by_page else which], now,
                                    self.rng)

    def table_draws(self, table, now: float, tmin: float):
        """What `test_since_table` would draw with on a rate source, for a caller that
        draws in a compiled pass of its own (`lru.lru_sweep`): the source's
        `draw_tables` for clear times `table` (the least of them at or after `tmin`)
        clamped to the look-back, as test_since_table clamps them; None on another
        source, or where the source has none (the caller calls test_since_table).
        The caller charges the checks (`charge`: two a page)."""
        if not hasattr(self.source, "draw_tables"):
            return None
        lb = self._lookback(self._level(0), now)
        return self.source.draw_tables(np.maximum(np.asarray(table, dtype=float), lb),
                                       max(float(tmin), float(lb)), now)

    def clear_all(self, level: int, now: float, entries: int | None = None) -> None:
        """Clear every entry of a level (a full scan). Charged `entries` checks, by
        default one per entry over the address space (ceil(npages / span))."""
        lv = self._level(level)
        if entries is None:
            span = LEVEL_SPAN[level]
            entries = -(-self.npages // span)
        self.charge(entries)
        lv.runs = []
        lv.floor = max(lv.floor, float(now))
        lv.last_prune = float(now)

    def stored(self, level: int | None = None) -> int:
        """Records held (memory use), for one level or all."""
        if level is None:
            return sum(len(lv) for lv in self.levels)
        return len(self._level(level))


# -----------------------------------------------------------------------------------
# PEBS
# -----------------------------------------------------------------------------------
class PebsPoll(NamedTuple):
    """Samples of one poll, each a (pages, times) pair sorted by time."""

    fast_load: tuple
    slow_load: tuple
    store: tuple


class PebsSampler:
    """PEBS sampling on HeMem's three events (HeMem, SOSP'21; webglider/hemem src/pebs.c).

    Events: loads served by a fast-tier node (`fast_load`), loads served by any other
    node (`slow_load`), and all stores (`store`). Each event has its own sample period
    (one sample per `period` events): `period` is an int for all three, a 3-sequence in
    that order, or a dict by event name. HeMem's forks use 5003, 10007 and 19997; the
    default here is 5003 for the three. Loads are classified by the node the page is on
    at poll time (`node_of(pages) -> node ids`; `fast_nodes` the fast node ids), so a
    page migrated within a poll interval counts under its node at the poll.

    Rate model: every event is a thinning of its Poisson access stream, so each poll
    draws Poisson(expected events / period) samples (`AccessSource.samples`). Exact
    source: every period-th event with a random phase per poll.

    Cost: `cpu_seconds` = samples delivered x `sample_cost` (`PEBS_SAMPLE_SECONDS`,
    300 ns: the ~250 ns PEBS assist plus record handling).
    """

    EVENTS = ("fast_load", "slow_load", "store")

    def __init__(self, source: AccessSource, period=5003, node_of=None, fast_nodes=(0,),
                 rng: np.random.Generator | None = None,
                 sample_cost: float = PEBS_SAMPLE_SECONDS):
        self.source = source
        if isinstance(period, dict):
            unknown = set(period) - set(self.EVENTS)
            if unknown:
                raise ValueError(f"unknown PEBS event(s) {sorted(unknown)}; "
                                 f"valid: {', '.join(self.EVENTS)}")
            self.period = {e: int(period.get(e, 5003)) for e in self.EVENTS}
        elif np.ndim(period) == 0:
            self.period = {e: int(period) for e in self.EVENTS}
        else:
            if len(period) != 3:
                raise ValueError("period needs 3 values: fast_load, slow_load, store")
            self.period = {e: int(p) for e, p in zip(self.EVENTS, period)}
        if any(p < 1 for p in self.period.values()):
            raise ValueError("PEBS periods must be >= 1")
        self.node_of = node_of if node_of is not None else source.node_of
        if self.node_of is None:
            raise ValueError("PebsSampler needs node_of (pages -> node ids)")
        self.fast_nodes = np.asarray(sorted(set(int(n) for n in fast_nodes)), dtype=np.int64)
        self.rng = rng if rng is not None else np.random.default_rng()
        self.sample_cost = float(sample_cost)
        self.samples = {e: 0 for e in self.EVENTS}
        self.cpu_seconds = 0.0
        self.last = 0.0

    def is_fast(self, pages) -> np.ndarray:
        return np.isin(np.asarray(self.node_of(pages)), self.fast_nodes)

    def poll(self, t0: float, t1: float) -> PebsPoll:
        """Samples taken during (t0, t1], split by event."""
        src, rng = self.source, self.rng
        fast = src.samples(t0, t1, self.period["fast_load"], "read", rng, select=self.is_fast)
        slow = src.samples(t0, t1, self.period["slow_load"], "read", rng,
                           select=lambda p: ~self.is_fast(p))
        store = src.samples(t0, t1, self.period["store"], "write", rng)
        out = PebsPoll(fast, slow, store)
        n = 0
        for e, (pages, _) in zip(self.EVENTS, out):
            self.samples[e] += len(pages)
            n += len(pages)
        self.cpu_seconds += n * self.sample_cost
        self.last = max(self.last, float(t1))
        return out

    def poll_until(self, now: float) -> PebsPoll:
        """Samples since the previous poll (or time 0)."""
        return self.poll(self.last, now)


# -----------------------------------------------------------------------------------
# NUMA hint faults
# -----------------------------------------------------------------------------------
class HintFaults:
    """NUMA-balancing hint faults (AutoNUMA: Linux kernel/sched/fair.c `task_numa_work`,
    mm/memory.c `do_numa_page`).

    `arm(pages, now)`: the scanner made the pages PROT_NONE at `now`. A page already
    armed keeps its original arm time (Linux skips PTEs that are already PROT_NONE, and
    the tiering mode keeps the scan time recorded then). `poll(now)` returns every armed
    page whose first access after arming happened by `now` — once, at that access —
    and disarms it. Rate model: each page's first-access time is where its cumulative
    expected accesses since arming reach an Exp(1) threshold drawn at arm time; the
    unused budget is carried between polls, so repeated polls are consistent and each
    poll only integrates (previous poll, now].

    `latency` = fault time - arm time (AutoNUMA tiering's hot threshold compares it).
    `faults` counts faults; `fault_seconds` = faults x `fault_cost` (1.5 us each,
    `HINT_FAULT_SECONDS`) is for the caller to charge to the application.
    """

    def __init__(self, source: AccessSource, rng: np.random.Generator,
                 fault_cost: float = HINT_FAULT_SECONDS):
        self.source = source
        self.rng = rng
        self.fault_cost = float(fault_cost)
        self.faults = 0
        self._pages = np.zeros(0, dtype=np.int64)   # sorted
        self._arm = np.zeros(0)       # arm time
        self._from = 0.0  # searched up to here: one time for all, or one per page
        self._rem = np.zeros(0)       # remaining Exp(1) budget (rate model)
        #: entries whose page has faulted (rate model: budget +inf, so it never faults
        #: again) and is not yet dropped: dropping them at every poll copied every armed
        #: page's state per poll; they are dropped once they are a quarter of the
        #: entries, or before any lookup or change of the armed set
        self._dead = 0

    @property
    def fault_seconds(self) -> float:
        return self.faults * self.fault_cost

    @property
    def armed(self) -> int:
        return int(self._pages.shape[0]) - self._dead

    def _live(self) -> None:
        """Drop the faulted entries kept since the last polls."""
        if self._dead:
            self._dead = 0
            self._take(self._rem != np.inf)

    def is_armed(self, pages) -> np.ndarray:
        self._live()
        pages = _as_idx(pages)
        if self._pages.size == 0:
            return np.zeros(pages.shape, dtype=bool)
        pos = np.minimum(np.searchsorted(self._pages, pages), self._pages.size - 1)
        return self._pages[pos] == pages

    def arm(self, pages, now: float) -> int:
        """Make pages PROT_NONE at `now`; returns how many were newly armed."""
        pages = uniq(_as_idx(pages), runs=True)
        pages = pages[~self.is_armed(pages)]
        n = pages.shape[0]
        if n == 0:
            return 0
        self._insert(pages, self.rng.exponential(size=n), float(now))
        return n

    def _insert(self, pages, rem, now: float) -> None:
        """Merge sorted pages, none armed, armed at `now` with Exp(1) budgets `rem`."""
        self._live()
        n = pages.shape[0]
        if self._pages.size == 0:
            self._from = now
        keys = np.concatenate((self._pages, pages))
        # pages above every armed one (a scanner's hand moving on) are already in
        # order: the stable sort would return the identity, and the kept rates (see
        # `poll`) extend by the new pages' own
        append = self._pages.size == 0 or pages[0] > self._pages[-1]
        order = slice(None) if append else np.argsort(keys, kind="stable")
        c = getattr(self, "_rcache", None)
        if append and c and c.get("n") == self._pages.shape[0]:
            c["rate"] = np.concatenate((c["rate"], c["tab"].page_rate(pages)))
            c["n"] = keys.shape[0]
        else:
            self._rcache = None  # the armed pages change
        self._pages = keys[order]
        self._arm = np.concatenate((self._arm, np.full(n, now)))[order]
        if isinstance(self._from, np.ndarray) or self._from != now:
            old = np.broadcast_to(self._from, (keys.shape[0] - n,))
            self._from = np.concatenate((old, np.full(n, now)))[order]
        self._rem = np.concatenate((self._rem, rem))[order]

    def disarm(self, pages) -> None:
        """Drop pages without a fault (freed, or made accessible again)."""
        self._live()
        keep = ~np.isin(self._pages, _as_idx(pages))
        self._take(keep)

    def _take(self, keep) -> None:
        idx = np.flatnonzero(keep)
        self._pages, self._arm, self._rem = self._pages[idx], self._arm[idx], self._rem[idx]
        if isinstance(self._from, np.ndarray):
            self._from = self._from[idx]
        c = getattr(self, "_rcache", None)
        if c and c.get("n") == keep.shape[0]:
            c["rate"] = c["rate"][idx]
            c["n"] = self._pages.shape[0]
        elif c:
            c.clear()

    def poll(self, now: float):
        """(pages, fault_times, latency) of faults since the last poll, by fault time."""
        if self._pages.size == 0:
            e = np.zeros(0)
            return np.zeros(0, dtype=np.int64), e, e.copy()
        now = float(now)
        t0 = np.minimum(self._from, now)  # a float while every page shares it
        lazy = isinstance(self.source, RateSource)
        if lazy:  # rates kept with the armed pages
            if getattr(self, "_rcache", None) is None:
                self._rcache = {}
            hit, ftimes, rem = self.source.first_access_lazy(
                self._pages, t0, now, self._rem, cache=self._rcache, inplace=True,
                sparse=True)
        else:
            times, rem = self.source.first_access_lazy(self._pages, t0, now, self._rem)
            hit = np.flatnonzero(~np.isnan(times))
            ftimes = times[hit]
        order = np.argsort(ftimes, kind="stable")
        hit = hit[order]
        pages = self._pages[hit]
        ftimes = ftimes[order]
        latency = np.maximum(ftimes - self._arm[hit], 0.0)
        self._rem = rem
        self._from = now
        if pages.shape[0] and lazy:
            rem[hit] = np.inf
            self._dead += int(pages.shape[0])
            if 4 * self._dead > self._pages.shape[0]:
                self._live()
        elif pages.shape[0]:
            keep = np.ones(self._pages.shape[0], dtype=bool)
            keep[hit] = False
            self._take(keep)
        self.faults += int(pages.shape[0])
        return pages, ftimes, latency
