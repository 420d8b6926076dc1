"""`nimble`: Nimble page management (Yan, Lustig, Nellans, Bhattacharjee, "Nimble Page
Management for Tiered Memory Systems", ASPLOS'19) as a placement policy: Linux's
active/inactive lists pick the pages, exchange migration swaps them.

Sources (the paper, checked in its public code): the kernel is
ysarch-lab/nimble_page_management_asplos_2019 (mm/memory_manage.c: the `mm_manage`
syscall, `shrink_lists`, `do_mm_manage`, `putback_overflow_pages`,
`exchange_pages_between_nodes`), the launcher and scripts are
ysarch-lab/nimble_page_management_userspace (end_to_end_launcher/launcher.c, run_all.sh,
run_bench.sh).

Rules implemented, one `mm_manage(pid, nr_pages, slow, fast, flags)` call per pass:

- Invocation (launcher.c `mm_manage_handle`): a SIGALRM timer re-armed with
  alarm(period) before each call. `period` defaults to 5 s, the experiment scripts'
  STATS_PERIOD=5 (run_all.sh, run_bench.sh `--dumpstats_period`); the launcher's own
  default is 1 s (`dumpstats_period = 1`): `nimble:period=1s`. nr_pages is the
  launcher's `--managed_pages`, ULONG_MAX unless given (run_bench.sh never gives it):
  `nr_pages=all`; a number is a full-scale page count (x `--scale`).
- Aging, MPOL_MF_SHRINK_LISTS (run_all.sh SHRINK_PAGE_LISTS=yes; `shrink=no` turns it
  off): `shrink_lists` ages the slow node, then the fast node; on each,
  `for_each_evictable_lru` visits the inactive list, then the active list, and scans
  half of each (the list's size when its turn comes, / 2) from its tail:
  - inactive (`shrink_inactive_page_list`): page_referenced (test-and-clear of the PTE
    accessed bits) and TestClearPageReferenced; a referenced page gets PG_referenced;
    it is activated if it was already PG_referenced (or mapped by more than one PTE,
    which the simulator's private pages never are): two touches activate. Every scanned
    page goes back to the head of its list.
  - active (`shrink_active_list`): every scanned anonymous page is deactivated
    (page_referenced still clears its bits; only referenced executable file pages stay
    active, and the simulator has none). PG_referenced is left as it was, so a
    deactivated page that keeps being used is re-activated by its next reference.
- Selection and moves, MPOL_MF_MOVE (`do_mm_manage`): the memcg's limit on the fast
  node (`memory.max_at_node`, create_die_stacked_mem.sh) is here the node's capacity
  minus its low watermark (where the allocator stops taking a node, alloc.py), free =
  limit - used; nr_pages = min(nr_pages, limit). If nr_pages < free (only with an
  explicit small `nr_pages`: with `all` it never holds) the slow node's inactive and
  active lists are isolated alike (ISOLATE_HOT_AND_COLD_PAGES), else its active list
  (hot); pages come from the lists' tails, up to nr_pages. If free < hot isolated,
  (hot - free) pages are isolated from the fast node's inactive list (cold, its tail
  first). Then:
  - `mode=exchange` (launcher `--exchange_pages` = MOVE|MT|CONCUR|EXCHANGE): pairs
    (hot, cold) swap places (`sim.exchange`): no free page is needed on either node;
    cold pages left over (when free < 0) are migrated out;
  - `mode=migrate` (`--opt_migration` = MOVE|MT|CONCUR): the cold pages are migrated to
    the slow node (needs room there), then the hot pages in.
  `putback_overflow_pages`: hot pages move in while the budget (free + cold pages
  migrated out, not exchanged) exceeds two pages ("drop just one more page to avoid
  using up free space"); the rest are put back (their lists' heads).
  The default is `exchange`: it is the launcher's full set of Nimble's four
  optimisations (the `exchange-pages` scheme, the last of run_all.sh's scheme list
  "all-remote-access non-thp-migration thp-migration opt-migration exchange-pages"),
  what the paper calls Nimble; `opt-migration` is the same without exchange.
- Huge pages: the kernel exchanges only pairs from its huge-page lists
  (`exchange_pages_between_nodes(..., huge_page=true)`); isolated base pages are
  migrated out and in (`goto migrate_out`). The simulator's pages are 4 KiB, and
  `mode=exchange` treats each as one of the THP-backed pages of Nimble's runs
  (run_all.sh: vm.sysctl_enable_thp_migration=1 for every migrating scheme): every
  pair is exchanged. `mode=migrate` is also what `exchange_pages` does on base pages
  (run_bench.sh's `non-thp-exchange-pages` scheme).
- Placement of moved pages: migration keeps PG_active and PG_referenced
  (migrate_page_states), so a promoted hot page stays on the fast node's active list;
  moved and put-back pages enter at their list's head.

Model choices where the sources are silent or the simulator differs:

- List order. Linux's lists are ordered by insertion; here each page carries the time
  it last entered its list (its head), and "the tail" is the oldest (ties: lowest
  address). Per-page state: that time and the time page_referenced last cleared the
  page's accessed bits (`sim.bits.test_since_table` from then to now: the engine's bits
  look back at most 10 s), each an index into the distinct event times (2 bytes per
  page, 4 past 65,536 of them); a list is a counting sort by that index
  (`LruLists`), O(pages of the node) per pass, from each node's counts by index,
  kept through Nimble's own changes and counted again after a free, or a move or list
  change Nimble did not make (an allocator's reclaim). The inactive half's pass lists,
  checks and ages its pages in one compiled pass over the node's pages where it can
  (`LruLists.age_inactive`: the same pages, bits and stream as doing the three apart).
  The accessed-bit checks are charged as `sim.bits` counts them plus the engine's 50 ns
  per page examined (`Costs.reclaim_scan_s`), as monitor CPU of the launcher.
- More than two tiers: the syscall takes exactly one slow and one fast node
  (VM_BUG_ON(nodes_weight != 1) in `do_mm_manage`), so a multi-level machine needs one
  call per pair of nodes. Each pass makes one call per adjacent pair of the demotion
  path (`sim.machine.demotion`), from the bottom pair up: hot pages can climb several
  levels in one pass, cold pages step down one. Every node is aged once per pass (the
  kernel would age a middle node twice, once in each of its two calls).
- Kernel demotion: off (`kswapd_demotion = False`). Nimble's kernel (2018-19) predates
  Linux's demotion in reclaim (5.15), and its experiments limit the fast node with the
  memcg's max_at_node on a node with free physical memory, so reclaim never runs there:
  allocations beyond the limit fall back to the slow node (launcher `--prefer_memnode`,
  MPOL_PREFERRED|MPOL_F_MEMCG = `--alloc dram-preferred`), and only mm_manage moves pages
  down.
- The mover. The moves are the launcher's syscall, asynchronous to the application
  (`sync=False`): the engine charges their copy as background CPU, the same work for
  `--migrate linux` and `--migrate nimble` (its mover only shortens synchronous
  copies), and `sim.migrate` / `sim.exchange` move pages at once. So `--migrate` does
  not change a `nimble` run, and Nimble's mechanism is modelled here, as the syscall's
  duration: the call decides at once, then its copies land in order (exchanged pairs,
  cold pages out, hot pages in) every `COPY_TICK` (50 ms) at the rate of `mt` copy
  threads (vm.limit_mt_num = 4, run_all.sh MIGRATION_MT=4) each at the machine's
  per-thread migration bandwidth (`machine.migrate_bw`, scaled with `--scale`); an
  exchanged pair costs one page's copy time, its two copies running concurrently (the
  engine's own convention for the Nimble mover, `_charge_copy`). A SIGALRM that finds
  the syscall still copying waits and runs its pass when the copy ends (the signal is
  blocked in its own handler; `alarms_while_busy` counts them). On a multi-tier machine
  a pair's decision is taken when the previous pair's copies have landed, as sequential
  syscalls would. `mt=1` with `mode=migrate` is Linux's mechanism (one copy thread,
  migrate_pages), the baseline of the paper's migration results. Not modelled:
  batching (migration_batch_size 8-16), the even rounding and CPU cap of limit_mt_num,
  THP vs base-page copy speed.
- Not modelled: MPOL_MF_MOVE_ALL (`--move_hot_and_cold_pages`, used only when the fast
  node is unlimited), file pages, the memhog module run_bench.sh loads alongside.
"""
from __future__ import annotations

import numpy as np

from ..engine.lru import ACTIVE, PROMOTE, REFERENCED
from ..engine.memory import BLOCK
from ..errors import TierlabError
from ..params import parse_flag, parse_int
from ..units import PAGE, parse_duration
from .base import POLICIES, Policy
from ..jit import helper, kernel
from ..monitors import draws as rate_draws
from ..monitors.draws import _NO_DRAWS, _draw_pages
from ..pcg64 import _pcg_advance, _pcg_put, _pcg_take
from ..structures import Scratch, page_dtype

#: kswapd-like CPU per page examined on a list (engine `Costs.reclaim_scan_s`)
SCAN_SECONDS = 50e-9
MODES = ("exchange", "migrate")
#: seconds between two landings of the syscall's copies (its batches land at the copy
#: rate; a choice: fine next to the 1-5 s period, cheap in engine events)
COPY_TICK = 0.05


class _Stage:
    """A step of one mm_manage call: `call` (decide for a pair of nodes), `exchange`
    (pairs a[i], b[i]), `out` (cold pages a to dst), `in` (hot pages a to dst, capped
    by putback_overflow_pages when its turn comes unless `keep` is set)."""

    def __init__(self, kind, a=None, b=None, dst=None, slow=None, fast=None, keep=None,
                 free=0, parent=None):
        self.kind, self.a, self.b, self.dst = kind, a, b, dst
        self.slow, self.fast, self.keep, self.free, self.parent = slow, fast, keep, free, \
            parent
        self.done = 0
        self.moved_out = 0


def _take_oldest(row, n: int) -> None:
    """A list's counts by insertion index (`LruLists.hist`'s row) less its n oldest
    pages (the lowest indexes first, as the list's tail is)."""
    if n:
        c = np.cumsum(row)
        k = int(np.searchsorted(c, n))
        row[:k] = 0
        row[k] = c[k] - n


@POLICIES.register("nimble")
class Nimble(Policy):
    """Nimble (ASPLOS'19): mm_manage every 5 s ages half of Linux's LRU lists, then
    exchanges the slow node's active pages with the fast node's inactive ones."""

    #: Nimble's kernel has no demotion in reclaim; only mm_manage moves pages down
    kswapd_demotion = False

    def __init__(self, period="5s", mode="exchange", nr_pages="all", shrink="yes",
                 mt="4"):
        super().__init__(period=period, mode=mode, nr_pages=nr_pages, shrink=shrink,
                         mt=mt)
        self.period = parse_duration(period, "nimble period")
        if self.period <= 0:
            raise TierlabError(f"bad nimble period {period!r}: must be > 0")
        self.mode = str(mode).strip().lower()
        if self.mode not in MODES:
            raise TierlabError(f"bad nimble mode {mode!r}; valid: {', '.join(MODES)}")
        v = str(nr_pages).strip().lower()
        self.nr_pages = None if v in ("all", "max") else parse_int(nr_pages, "nimble nr_pages", 1,
                                                                   2 ** 52)
        self.shrink = parse_flag(shrink, "nimble shrink")
        self.mt = parse_int(mt, "nimble mt (copy threads)", 1, 64)
        self._scratch = Scratch()  # the aged lists' pages, kept between passes

    # -- setup ----------------------------------------------------------------------
    def attach(self, sim):
        if getattr(sim, "real", False):
            raise TierlabError(
                "nimble needs the mm_manage syscall of Nimble's patched kernel "
                "(ysarch-lab/nimble_page_management_asplos_2019) and the kernel's LRU "
                "lists: it runs only in the simulator")
        super().attach(sim)
        n = int(sim.mem.npages)
        self.path = list(sim.machine.demotion)
        #: when each page last entered its LRU list (its head), and when its accessed
        #: bits were last cleared by page_referenced
        #: (as indexes into `times`, the distinct event times so far: 2 bytes per page
        #: instead of 8, and the stable sort by insertion a radix sort)
        self.inserted = np.zeros(n, dtype=np.uint16)
        self.checked = np.zeros(n, dtype=np.uint16)
        self.times = [0.0]
        #: the syscall's work left: decisions and copies, FIFO (`_Stage`)
        self.queue: list = []
        #: node -> its active list after the last aging pass, while no page has moved
        #: or been re-inserted since, for the decisions of the calls queued after it
        self._aged: dict = {}
        #: each node's lists' page counts by insertion index (`LruLists.hist` as
        #: _hist[node], columns for at least every time so far), kept through every
        #: change Nimble makes (first touches, moves, put-backs, aging passes) since the
        #: node was counted (`_kept`), and the address-order stretches that count found
        k = sim.machine.nnodes
        self._hist = np.zeros((k, 2, 1024), np.int64)
        self._kept = np.zeros(k, np.bool_)
        self._runs = np.zeros(k, np.int64)
        #: the engine's pages moved and LRU changes as Nimble last saw them: any other
        #: (the allocator's reclaim under dram-always) drops the kept counts
        self._seen = self._others()
        self.pending = False  # a SIGALRM arrived while the syscall was copying
        self.credit = 0.0  # copy time carried over between copier ticks
        self.c = {k: 0 for k in (
            "passes", "alarms_while_busy", "scanned", "activated", "deactivated",
            "hot_isolated", "cold_isolated", "exchanged", "promoted", "demoted",
            "put_back")}
        self.copy_seconds = 0.0
        self.hot_last = 0
        self.cold_last = 0
        sim.every(self.period, self.mm_manage)
        sim.every(COPY_TICK, self._copy_tick)

    def on_alloc(self, start, end, node):
        """lru_cache_add: a first-touched page enters its inactive list's head, its
        accessed bit set by the touch (cleared 'at' allocation)."""
        self._check_others()
        t = self._at(self.sim.now)
        if t:  # at index 0 the pages' entries are still the zeros of attach
            self.inserted[start:end] = t
            self.checked[start:end] = t
        if self._kept[node]:
            self._room()[node, 0, t] += end - start

    def on_free(self, start, end):
        """The freed pages' places in the lists went with their node: every node is
        counted afresh at its next use."""
        self._kept[:] = False

    def _at(self, now: float) -> int:
        """The index of time `now` in `times` (event times never decrease); past 2^16
        distinct times the per-page indexes widen to 4 bytes."""
        if now != self.times[-1]:
            self.times.append(float(now))
            if len(self.times) > 2 ** 16 and self.inserted.dtype == np.uint16:
                self.inserted = self.inserted.astype(np.uint32)
                self.checked = self.checked.astype(np.uint32)
        return len(self.times) - 1

    # -- the lists ------------------------------------------------------------------
    def _counted(self, node: int) -> LruLists:
        """The node's two lists, tail (oldest insertion) first, counted afresh
        (`LruLists`: a counting sort by insertion index, equal indexes in address
        order)."""
        mem = self.sim.mem
        return LruLists(mem.node, node, mem.blocks[:, node], BLOCK, self.sim.lru.flags,
                        ACTIVE, self.inserted, len(self.times))

    def _lists(self, node: int) -> LruLists:
        """`_counted`, from the counts kept since the node was last counted (`_hist`):
        the count, a pass over the node's pages, was a fifth of Nimble's time at
        bench_scale (one per node and pass, and one per call after copies landed)."""
        self._check_others()
        h = self._room()
        mem = self.sim.mem
        if not self._kept[node]:
            got = self._counted(node)
            h[node] = 0
            h[node, :, :got.hist.shape[1]] = got.hist
            self._kept[node], self._runs[node] = True, got.runs
        return LruLists(mem.node, node, mem.blocks[:, node], BLOCK, self.sim.lru.flags,
                        ACTIVE, self.inserted, h.shape[2], hist=h[node],
                        runs=int(self._runs[node]))

    def _room(self) -> np.ndarray:
        """The kept counts with a column for every time so far (doubling; the lists
        made before a new time are not read after it)."""
        h = self._hist
        if h.shape[2] < len(self.times):
            g = np.zeros(h.shape[:2] + (max(len(self.times), 2 * h.shape[2]),), np.int64)
            g[:, :, :h.shape[2]] = h
            self._hist = h = g
        return h

    def _recount(self, pages, sign: int) -> None:
        """The kept counts less (sign -1) or plus (+1) the pages at their places as they
        are (node, list, insertion index): around a move or re-insertion of distinct
        pages (`list_counts`)."""
        if sign < 0:
            self._check_others()
        if len(pages) and self._kept.any():
            list_counts(self._room(), self._kept, pages, self.sim.mem.node,
                        self.sim.lru.flags, ACTIVE, self.inserted, sign)

    def _others(self) -> tuple:
        """(pages the engine has moved, calls that changed LRU flags) so far."""
        st = self.sim.stats
        return int(st.promotions + st.demotions), self.sim.lru.changes

    def _check_others(self, moved: int = 0) -> None:
        """Every kept count dropped if the engine moved pages, or changed their LRU
        flags, since Nimble last looked, besides the `moved` of its own move just
        made."""
        now = self._others()
        if now != (self._seen[0] + moved, self._seen[1]):
            self._kept[:] = False
        self._seen = now

    def _referenced(self, pages, now, first=None, discard=False) -> np.ndarray | None:
        """page_referenced: were the accessed bits set since they were last cleared?
        (The caller clears them: the checked time becomes now.) `first`: the least
        checked index of the pages, if the caller has it (`times` ascend, so its time
        is the earliest). `discard`: the caller does not read the answer (the active
        scan deactivates every page): the check is charged and its draws used up
        (`AccessedBits.test_since_table`)."""
        tmin = None if first is None or len(pages) == 0 else self.times[int(first)]
        return self.sim.bits.test_since_table(pages, self.checked, self.times, now,
                                              by_page=True, tmin=tmin, discard=discard)

    def _age_inactive(self, lists: LruLists, n_scan: int, n_take: int, now: float,
                      t: int):
        """The inactive half's pass in one compiled pass (`LruLists.age_inactive`): the
        same pages, bits and changes as listing them, `_referenced` and
        `nimble_inactive`; None where the bits' source or generator has no such pass
        (the caller does the three)."""
        bits = self.sim.bits
        # the earliest check time bounds every page's (the look-back clamps it): an
        # earlier bound adds only epochs that add nothing (`RateSource.draw_tables`)
        draws = bits.table_draws(self.times, now, self.times[0]) if n_scan else None
        if draws is None:
            return None
        got = lists.age_inactive(n_scan, n_take, self.checked, REFERENCED, t, draws,
                                 bits.rng, scratch=self._scratch)
        if got is not None:
            bits.charge(2 * n_scan)
        return got

    def _age(self, node: int, now: float):
        """shrink_lists_node_memcg: half the inactive list, then half the active list.
        Inactive: referenced twice -> active, referenced once -> PG_referenced, else
        cleared; active: every page deactivated, PG_referenced as it was (anonymous
        pages); both re-inserted at the head and their accessed bits cleared.

        Returns the node's active list after the pass, tail first, for the
        do_mm_manage call that follows at once (its hot pages when the node is the
        slow one): the pass knows it without another look at the node's pages."""
        sim = self.sim
        lru = sim.lru
        cpu0 = sim.bits.cpu_seconds
        t = self._at(now)  # no page moves while the lists age
        lists = self._lists(node)
        n_in, n_act = lists.lengths()
        # active pages inserted now (copies that landed at this time): the last of the
        # list, with the pages the pass activates among them in address order
        n_now = int(lists.hist[1, t])
        n_scan, n_take = n_in // 2, n_act
        # up and act live only in this pass (what outlives it is copied)
        got = self._age_inactive(lists, n_scan, n_take, now, t)
        if got is None:
            (scan, act), first = lists.first(n_scan, n_take, track=self.checked,
                                             scratch=self._scratch)
            ref = self._referenced(scan, now, first[0])
            up = scan[nimble_inactive(scan, ref, lru.flags, self.inserted, self.checked,
                                      t, ACTIVE, REFERENCED)]
        else:
            up, act = got
        lru.nr_active[node] += len(up)
        lists.hist[1, t] += len(up)
        # the activated pages, inserted now, follow the older active pages in address
        # order (the one pass lists them so already; apart they come in list order)
        up_a = up if got is not None else np.sort(up)
        if n_now == 0:
            active = np.concatenate((act, up_a))
        else:
            k = n_act - n_now
            active = np.concatenate((act[:k], np.sort(np.concatenate((act[k:], up_a)))))
        dscan = active[: len(active) // 2]
        self._referenced(dscan, now, discard=True)
        nimble_active(dscan, lru.flags, self.inserted, self.checked, t, ACTIVE | PROMOTE)
        lru.nr_active[node] -= len(dscan)
        lru.active_changed()
        self._aged_lists(lists, t, n_scan, len(up), len(dscan))
        n = n_scan + len(dscan)
        self.c["scanned"] += n
        self.c["activated"] += len(up)
        self.c["deactivated"] += len(dscan)
        sim.charge_cpu(sim.bits.cpu_seconds - cpu0 + n * SCAN_SECONDS, kind="monitor")
        return active[len(dscan):]

    @staticmethod
    def _aged_lists(lists: LruLists, t: int, n_scan: int, n_up: int,
                    n_down: int) -> None:
        """The node's counts (kept, `_hist`) carried through its aging pass, from their
        values before it with the n_up activated pages already counted on the active
        list at t: the n_scan oldest inactive pages re-inserted at t (less those n_up),
        then the n_down oldest active pages inserted at t on the inactive one, so no
        one counts the node again."""
        h = lists.hist
        _take_oldest(h[0], n_scan)
        h[0, t] += n_scan - n_up
        _take_oldest(h[1], n_down)
        h[0, t] += n_down

    # -- mm_manage --------------------------------------------------------------------
    def mm_manage(self, now: float) -> None:
        """One SIGALRM: age every node, then queue one do_mm_manage per adjacent pair
        of the demotion path, bottom pair first. If the previous call is still copying,
        the signal waits (SIGALRM does not queue): the pass runs when the copy ends."""
        if self.queue:
            self.c["alarms_while_busy"] += 1
            self.pending = True
            return
        self.pending = False
        self.c["passes"] += 1
        self._aged = {}
        if self.shrink:
            for node in reversed(self.path):
                if self.sim.mem.used[node]:
                    self._aged[node] = self._age(node, now)
        self.hot_last = self.cold_last = 0
        self.queue = [_Stage("call", slow=self.path[i + 1], fast=self.path[i])
                      for i in range(len(self.path) - 2, -1, -1)]
        self._copy(now, 0.0)

    def _copy_tick(self, now: float) -> None:
        if self.queue:
            self._copy(now, COPY_TICK)
            if not self.queue and self.pending:
                self.mm_manage(now)

    def _copy(self, now: float, seconds: float) -> None:
        """Run the queued syscall work: decisions at once, copies at the mover's rate
        (`seconds` more of copy time; what a tick cannot copy carries over)."""
        sim = self.sim
        c = self.c
        self.credit += seconds
        per_page = PAGE / (self.mt * sim.machine.migrate_bw)
        if seconds:  # a copier tick: pages may have moved since the last call
            self._aged = {}
        while self.queue:
            st = self.queue[0]
            if st.kind == "call":
                self.queue.pop(0)
                self.queue[:0] = self._decide(st.slow, st.fast, now)
                continue
            self._aged = {}  # put-backs and copies change the lists
            if st.kind == "in" and st.keep is None:
                # putback_overflow_pages, once the cold pages have gone out
                free = st.free
                if free < 0 and -free > st.parent.moved_out:
                    free = 0
                keep = max(min(free + st.parent.moved_out - 2, len(st.a)), 0)
                st.keep = keep
                self._put_back(st.a[keep:], now)
                st.a = st.a[:keep]
            if st.done >= len(st.a):
                self.queue.pop(0)
                continue
            n = min(len(st.a) - st.done, int(self.credit / per_page + 1e-9))
            if n <= 0:
                break
            a = st.a[st.done: st.done + n]
            self._recount(a, -1)
            if st.kind == "exchange":
                b = st.b[st.done: st.done + n]
                self._recount(b, -1)
                got = sim.exchange(a, b, reason="exchange")
                self._check_others(2 * got)
                self.inserted[b] = self._at(now)
                self._recount(b, 1)
                c["exchanged"] += got
            elif st.kind == "out":
                got = sim.migrate(a, st.dst, reason="demote")
                self._check_others(got)
                st.moved_out += got
                c["demoted"] += got
            else:
                got = sim.migrate(a, st.dst, reason="promote")
                self._check_others(got)
                c["promoted"] += got
                c["put_back"] += n - got
            self.inserted[a] = self._at(now)
            self._recount(a, 1)
            self.credit -= n * per_page
            self.copy_seconds += n * per_page
            st.done += n
            if st.done >= len(st.a):
                self.queue.pop(0)
        if not self.queue:
            self.credit = 0.0

    def _put_back(self, pages, now: float) -> None:
        """putback_lru_page: back to the head of their list."""
        self._recount(pages, -1)
        self.inserted[pages] = self._at(now)
        self._recount(pages, 1)
        self.c["put_back"] += len(pages)

    def _limit(self, node: int) -> int:
        mem = self.sim.mem
        return int(mem.capacity[node] - mem.wmark_low[node])

    def _decide(self, slow: int, fast: int, now: float) -> list:
        """do_mm_manage(from=slow, to=fast): isolate, then the copy stages in order
        (exchange pairs, cold pages out, hot pages in)."""
        sim = self.sim
        c = self.c
        limit = self._limit(fast)
        free = limit - int(sim.mem.used[fast])
        nr = limit if self.nr_pages is None else min(
            limit, max(int(round(self.nr_pages * sim.scale)), 1))
        # the active list the aging pass left, while no page has moved since
        hot_list = self._aged.get(slow)
        if hot_list is None:
            hot_list, _ = self._lists(slow).list(True)
        # of the fast node's inactive list only its length (its pages less its active
        # ones, as the LRU counts them) and, when the hot pages do not fit, the coldest
        # few are used: the list is read only then (the bottom pair's fast node, whose
        # slow node is often empty, is the largest)
        n_cold = int(sim.mem.used[fast] - sim.lru.nr_active[fast])
        self.hot_last += len(hot_list)
        self.cold_last += n_cold
        if 0 < free and nr < free:
            # ISOLATE_HOT_AND_COLD_PAGES: up to nr from the inactive list, then up to nr
            # more from the active one (isolate_pages_from_lru_list stops early only
            # once more than nr are taken)
            hot = np.concatenate((self._lists(slow).list(False)[0][:nr], hot_list[:nr]))
        else:
            hot = hot_list[:nr]
        c["hot_isolated"] += len(hot)
        if len(hot) == 0:
            return []
        if free >= len(hot):
            return [_Stage("in", a=hot, dst=fast, keep=len(hot))]
        cold = self._lists(fast).first(min(len(hot) - free, n_cold), 0)[0]
        c["cold_isolated"] += len(cold)
        stages = []
        if self.mode == "exchange":
            pairs = min(len(hot), len(cold))
            if pairs:
                stages.append(_Stage("exchange", a=hot[:pairs], b=cold[:pairs]))
            hot, cold = hot[pairs:], cold[pairs:]
        out = _Stage("out", a=cold, dst=slow)
        stages += [out, _Stage("in", a=hot, dst=fast, free=free, parent=out)]
        return stages

    def stats(self):
        out = {k: int(v) for k, v in self.c.items()}
        out.update(hot_list_last=int(self.hot_last), cold_list_last=int(self.cold_last),
                   copy_seconds=float(self.copy_seconds))
        return out


# -- compiled kernels (tierlab.jit) --------------------------------------------
@kernel
def _list_hist(node_map, node, blocks, block, flags, mask, inserted, ntimes, nruns):
    # (nruns[0]: the runs counted, address-order stretches of the node's pages of one
    # list and index)
    n = node_map.shape[0]
    hist = np.zeros((2, ntimes), np.int64)
    flat = hist.reshape(2 * ntimes)
    # a run of pages of one list and index is counted in a register, added at its end:
    # an increment in memory per page waits on the one before (store to load)
    cur, run = 0, 0
    for b in range(blocks.shape[0]):
        nb = blocks[b]
        if nb == 0:
            continue
        lo, hi = b * block, min((b + 1) * block, n)
        full = nb == hi - lo  # every page of the block is the node's
        for p in range(lo, hi):
            if full or node_map[p] == node:
                key = (ntimes if (flags[p] & mask) != 0 else 0) + inserted[p]
                if key == cur:
                    run += 1
                else:
                    flat[cur] += run
                    nruns[0] += 1 if run else 0
                    cur, run = key, 1
    flat[cur] += run
    nruns[0] += 1 if run else 0
    return hist


@helper
def _list_bounds(hist, take, pos, end):
    # per list k and index u (at k * ntimes + u): where its next page goes in the
    # list's output (pos) and where its part ends (end): all its pages below the index
    # reached by the list's first take[k] pages, the first ones in address order at
    # that index, none above; returns take's sum
    ntimes = hist.shape[1]
    left = 0
    for k in range(2):
        m = take[k]
        left += m
        s = 0
        for u in range(ntimes):
            if s >= m:
                break
            pos[k * ntimes + u] = s
            s = min(s + hist[k, u], m)
            end[k * ntimes + u] = s
    return left


@helper(inline=True)
def _inactive_rule(f, ref, active, referenced):
    # shrink_inactive_page_list on a page of flags f, referenced (ref) or not: two
    # touches activate (returns the new flags and whether it was activated)
    if ref:
        act = (f & referenced) != 0
        return (f | referenced | (active if act else 0)), act
    return f & ~referenced, False


@helper
def _nimble_flush(buf, m, lam, u, ref, checked, w_tab, starts, soff, rate, ends, w_a,
                  use_max, whi, multi, rs, jump, prev, c, flags, inserted, t, mask,
                  referenced, up, nup):
    # `_list_emit`'s m buffered pages of one index: their bits drawn from its
    # stream state rs (`_draw_pages`, as `_draw_accessed` draws them), then
    # `nimble_inactive`'s rule; returns (prev, c, pages activated so far)
    prev, c = _draw_pages(lam, u, buf[:m], checked, True, w_tab, starts, soff, rate, ends,
                          w_a, use_max, whi, multi, rs, jump, ref, 0, prev, c)
    for i in range(m):
        p = buf[i]
        f, act = _inactive_rule(flags[p], ref[i], mask, referenced)
        if act:
            up[nup] = p
            nup += 1
        flags[p] = f
        inserted[p] = t
        checked[p] = t
    return prev, c, nup


@kernel
def _list_emit(node_map, node, blocks, block, flags, mask, inserted, hist, take, out0,
               out1, track, use_track, mins, draw, referenced, checked, up, t, w_tab,
               starts, soff, rate, ends, w_a, use_max, whi, multi, st, jump, bh, bl, buf,
               lam, u, ref):
    # the first take[k] pages of list k (list order: insertion index, then address)
    # into out0[:take[0]] and out1[:take[1]], with min(track) of each list's in mins
    # if use_track; or, with `draw`, Nimble's aging of list 0's (`Nimble._age`: the
    # accessed bits of `AccessedBits.test_since_table` and `nimble_inactive`) in the
    # same pass instead of listing them: each page's bit drawn as `_draw_accessed`
    # draws it at its place in the list (an index's pages draw on from the stream
    # state where its part of the list starts, kept in bh, bl), in blocks of pages of
    # one index up to buf's size (`_nimble_flush`), then the rule applied, the
    # activated pages into up in address order, and st left take[0] steps on. Returns
    # how many were activated, -1 where the node has fewer pages than hist promised.
    n = node_map.shape[0]
    ntimes = hist.shape[1]
    pos = np.zeros(2 * ntimes, np.int64)
    end = np.zeros(2 * ntimes, np.int64)
    left = _list_bounds(hist, take, pos, end)
    if draw:
        for v in range(ntimes):
            if end[v] > pos[v]:
                bh[v], bl[v] = _pcg_advance(st[0], st[1], pos[v], jump)
        st[0], st[1] = _pcg_advance(st[0], st[1], take[0], jump)
    if left == 0:
        return 0
    rs = np.empty(2, np.uint64)
    # the current run's list and index (cur), place (q) and end (e) in registers,
    # written back when the run ends (a place kept in memory per page waits on the
    # store before it); as mn0, mn1 for mins; the pages buffered (m) are of one
    # index (bk), drawn from its stream state (rs) before a page of another index is
    # buffered
    cur = 0
    q, e = pos[0], end[0]
    mn0, mn1 = mins[0], mins[1]
    bk = 0
    rs[0], rs[1] = bh[0], bl[0]
    prev, c = np.nan, 0.0
    nup, m = 0, 0
    for b in range(blocks.shape[0]):
        nb = blocks[b]
        if nb == 0:
            continue
        a0, a1 = b * block, min((b + 1) * block, n)
        full = nb == a1 - a0
        for p in range(a0, a1):
            if full or node_map[p] == node:
                key = (ntimes if (flags[p] & mask) != 0 else 0) + inserted[p]
                if key != cur:
                    pos[cur] = q
                    cur = key
                    q, e = pos[key], end[key]
                if q < e:
                    if key >= ntimes:
                        out1[q] = p
                        if use_track and track[p] < mn1:
                            mn1 = track[p]
                    elif not draw:
                        out0[q] = p
                        if use_track and track[p] < mn0:
                            mn0 = track[p]
                    else:
                        if key != bk:
                            if m:
                                prev, c, nup = _nimble_flush(
                                    buf, m, lam, u, ref, checked, w_tab, starts, soff,
                                    rate, ends, w_a, use_max, whi, multi, rs, jump, prev, c,
                                    flags, inserted, t, mask, referenced, up, nup)
                                m = 0
                            bh[bk], bl[bk] = rs[0], rs[1]
                            bk = key
                            rs[0], rs[1] = bh[bk], bl[bk]
                        buf[m] = p
                        m += 1
                        if m == buf.shape[0]:
                            prev, c, nup = _nimble_flush(
                                buf, m, lam, u, ref, checked, w_tab, starts, soff, rate,
                                ends, w_a, use_max, whi, multi, rs, jump, prev, c, flags,
                                inserted, t, mask, referenced, up, nup)
                            m = 0
                    q += 1
                    left -= 1
        if left == 0:
            break
    if m:
        prev, c, nup = _nimble_flush(buf, m, lam, u, ref, checked, w_tab, starts, soff,
                                     rate, ends, w_a, use_max, whi, multi, rs, jump, prev,
                                     c, flags, inserted, t, mask, referenced, up, nup)
    mins[0], mins[1] = mn0, mn1
    return nup if left == 0 else -1  # -1: fewer pages than the counts promised


def _list_counts_numpy(pages, node_map, flags, mask, inserted, hist, kept, sign):
    d = node_map[pages]
    ok = d != 255
    ok[ok] = kept[d[ok]]
    p, d = pages[ok], d[ok]
    np.add.at(hist, (d, ((flags[p] & mask) != 0).astype(np.int64), inserted[p]), sign)


@kernel(numpy=_list_counts_numpy)
def _list_counts(pages, node_map, flags, mask, inserted, hist, kept, sign):
    # hist[node, list, index] += sign for each page on a node kept (list 1: flags & mask
    # set; index: its insertion index)
    for i in range(pages.shape[0]):
        p = pages[i]
        d = node_map[p]
        if d != 255 and kept[d]:
            hist[d, 1 if flags[p] & mask else 0, inserted[p]] += sign


def list_counts(hist, kept, pages, node_map, flags, mask: int, inserted, sign: int) -> None:
    """Kept LRU list counts (`LruLists.hist` of each node, as hist[node]) less (sign -1)
    or plus (+1) `pages` at their places (node, list: flags & mask set, insertion
    index), on the nodes where `kept` is set: the counts follow pages that move or
    are re-inserted without a count of every page."""
    _list_counts(np.asarray(pages, dtype=np.int64), node_map, flags,
                 np.uint8(mask), inserted, hist, kept, np.int64(sign))


@kernel
def _nimble_inactive(scan, ref, flags, inserted, checked, now, active, referenced):
    up = np.zeros(scan.shape[0], np.bool_)
    for i in range(scan.shape[0]):
        p = scan[i]
        flags[p], up[i] = _inactive_rule(flags[p], ref[i], active, referenced)
        inserted[p] = now
        checked[p] = now
    return up


@kernel
def _nimble_active(dscan, flags, inserted, checked, now, clear):
    for i in range(dscan.shape[0]):
        p = dscan[i]
        flags[p] &= ~clear
        inserted[p] = now
        checked[p] = now


def nimble_inactive(scan, ref, flags, inserted, checked, now: int, active: int,
                    referenced: int) -> np.ndarray:
    """Nimble's inactive-list pass over `scan` after page_referenced gave `ref`:
    referenced twice -> active (PG_referenced kept), referenced once -> PG_referenced,
    else cleared; insertion and check indexes -> now. Returns which were activated."""
    return _nimble_inactive(scan, ref, flags, inserted, checked,
                            inserted.dtype.type(now), np.uint8(active),
                            np.uint8(referenced))


def nimble_active(dscan, flags, inserted, checked, now: int, clear: int) -> None:
    """Nimble's active-list pass: every page of `dscan` deactivated (flags & ~clear,
    PG_referenced as it was), insertion and check indexes -> now."""
    _nimble_active(dscan, flags, inserted, checked, inserted.dtype.type(now),
                   np.uint8(clear))


#: `LruLists.age_inactive`'s least mean run of the lists' pages (one list and index in
#: address order): a page drawn after one of another index ends a block of draws, a
#: call of some 30 arguments (at 8, about what listing and drawing apart cost a page)
RUN_MIN = 8


class LruLists:
    """The two LRU lists of one node (flags & mask == 0 or == mask), tail first: pages
    ordered by their insertion index (`inserted`, < ntimes), equal indexes by address,
    as `pages[np.argsort(inserted[pages], kind="stable")]` orders the node's pages in
    address order. A counting sort: one pass over the blocks holding the node's pages
    (`blocks`: its page count per `block` pages) counts both lists by index, one more
    emits the first pages of either or both; no per-page temporaries. Given `hist`
    (the counts, kept by the caller through every change since a count), the counting
    pass is skipped and `runs` is the caller's estimate of the stretches."""

    def __init__(self, node_map, node: int, blocks, block: int, flags, mask: int,
                 inserted, ntimes: int, hist=None, runs: int = 0):
        self.args = (node_map, np.uint8(node), np.ascontiguousarray(blocks), int(block),
                     flags, np.uint8(mask))
        self.mask, self.inserted = int(mask), inserted
        # page numbers in 4 bytes while they fit (5 TiB of 4 KiB pages do)
        self._pdt = page_dtype(node_map.shape[0])
        if hist is not None:  # the counts kept by the caller (at least ntimes indexes)
            self.hist, self.runs = hist, int(runs)
            return
        nruns = np.zeros(1, np.int64)
        #: each list's pages by insertion index (list 0: the mask clear)
        self.hist = _list_hist(*self.args, inserted, int(ntimes), nruns)
        #: address-order stretches of the node's pages of one list and index
        self.runs = int(nruns[0])

    def lengths(self):
        """(inactive, active): the lists' lengths (the mask clear, set)."""
        return int(self.hist[0].sum()), int(self.hist[1].sum())

    def first(self, n_clear: int, n_set: int, track=None, scratch=None):
        """The first n_clear pages of the list with the mask clear and the first n_set
        of the one with it set, in one pass (int32 page numbers below 2^31 pages).
        Given `track` (an integer array over all pages), also min(track[pages]) of
        each list's pages from the same pass (the dtype's max if none). Given
        `scratch` (a `Scratch`), the pages are written into its two arrays, kept
        between calls, and the results are views of them, valid until its next use:
        a fresh array of a list's pages is a fresh mapping, faulted in a page at a
        time at every pass (Nimble at bench_memsim: 438 k of its 957 k page faults)."""
        use = track is not None
        tr = track if use else np.zeros(1, np.uint8)
        mins = np.full(2, np.iinfo(tr.dtype).max, tr.dtype)
        outs = (Scratch() if scratch is None else scratch).get((self._pdt, n_clear),
                                                               (self._pdt, n_set))
        self._emit(n_clear, n_set, *outs, tr, use, mins, False, 0, self.inserted,
                   outs[0], 0, *_NO_DRAWS, 1)
        return (outs, mins) if use else outs

    def _emit(self, n_clear, n_set, out0, out1, track, use_track, mins, draw, referenced,
              checked, up, t, w_tab, starts, soff, rate, ends, w_a, use_max, whi, multi,
              st, jump, nb):
        """`_list_emit` with its buffers (nb entries: DRAW_BLOCK where it draws)."""
        nt = self.hist.shape[1] if draw else 1
        got = _list_emit(
            *self.args, self.inserted, self.hist,
            np.array([n_clear, n_set], dtype=np.int64), out0, out1, track, bool(use_track),
            mins, bool(draw), np.uint8(referenced), checked, up, int(t), w_tab, starts,
            soff, rate, ends, w_a, use_max, whi, bool(multi), st, jump,
            np.zeros(nt, np.uint64), np.zeros(nt, np.uint64), np.empty(nb, self._pdt),
            np.empty(nb), np.empty(nb), np.empty(nb, np.bool_))
        if got < 0:
            raise RuntimeError(f"LRU lists of node {int(self.args[1])}: their counts "
                               "promise more pages than the node holds")
        return got

    def age_inactive(self, n_clear: int, n_set: int, checked, referenced: int, t: int,
                     draws, rng, scratch=None):
        """Nimble's aging of the first n_clear pages of the list with the mask clear
        (`Nimble._age`) in one pass (`_list_emit`), as the listing (`first`), the
        draws of `AccessedBits.test_since_table` (`draws`: its `table_draws` for the
        check times `checked` indexes) and `nimble_inactive` would age them, with the
        same bits and rng's stream left where they leave it, but no array of the pages.
        Returns (the activated pages in address order, the first n_set pages of the
        list with the mask set), views of `scratch`'s arrays if given; None without
        numba, where rng's bit generator is not PCG64, or where the lists' runs are
        short (under RUN_MIN pages on average), and the caller ages apart."""
        if self.runs * RUN_MIN > int(self.hist.sum()):
            return None
        pcg = _pcg_take(rng)
        if pcg is None:
            return None
        up, out1 = (Scratch() if scratch is None else scratch).get((self._pdt, n_clear),
                                                                   (self._pdt, n_set))
        w_tab, tables = draws
        mins = np.zeros(2, np.uint8)
        nup = self._emit(n_clear, n_set, up, out1, mins, False, mins, True, referenced,
                         checked, up, t, w_tab, *tables, pcg[2], pcg[3],
                         rate_draws.DRAW_BLOCK)
        _pcg_put(*pcg)
        return up[:nup], out1

    def list(self, on: bool, half: bool = False):
        """(pages, the list's length): the list with the mask set (`on`) or clear;
        with `half` only its older half (the first len // 2)."""
        total = self.lengths()[int(on)]
        m = total // 2 if half else total
        return self.first(0 if on else m, m if on else 0)[int(on)], total
