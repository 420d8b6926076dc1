"""`multi-clock`: MULTI-CLOCK (Maruf, Ghosh, Bhimani, Campello, Rudoff, Rangaswami,
"MULTI-CLOCK: Dynamic Tiering for Hybrid Memory Systems", HPCA'22), the tiering system
that also hosts the HPDC'23 allocation-policy study (the `--alloc` dimension).

Facts (the paper): MULTI-CLOCK extends Linux's two-list CLOCK (active/inactive) with a
third "promote" list on the lower-tier nodes; page selection uses both recency and
frequency: a lower-tier page that is referenced while it is already on the active list
joins the promote list; a kernel thread `kpromoted` per node runs every second (or when
woken) and migrates the pages of the promote list to the upper tier; upper-tier (DRAM)
inactive pages are demoted to the lower tier on reclaim (the Linux demotion path,
kswapd). Up to 3.5x (352%) average throughput over the state of the art. A related
kernel patch (Keith Busch, "mm: add new lru for page promotion") follows the same rule:
an active page referenced again on a node with a promotion target moves to a
promotion-candidate list, promoted when that node is scanned later.

Model (`engine/lru.py` gives the 2Q lists: list membership is a flag byte, `PROMOTE`
marks the promote list; a CLOCK hand per node and list sees a page as referenced when
its accessed bit was set since the hand last passed it):

- Every `period` (1 s) kpromoted, for every node below the top of the demotion path:
  scans up to `budget` pages of the node's active list -- referenced ones join the
  promote list -- and of its inactive list -- referenced ones are activated (Linux's
  page_referenced rule for mapped anonymous pages); then it drains the promote list:
  every page is migrated to the first node on the path above it with room (the top
  DRAM node first, then the next ones down to the node just above the page's), and the
  list is emptied (pages that could not move go back to the active list, as Linux puts
  back pages whose migration failed).
- Room: a node takes pages while free stays above its low watermark. If the top node
  lacks room and `make_room` is on, kpromoted first has the top node reclaim (demote
  its inactive, unreferenced pages, the engine's LRU reclaim) enough for the promote
  list plus the gap to the high watermark -- the promotion's allocation triggers
  reclaim, which on a tiered kernel demotes. kswapd demotion stays on (the engine's,
  LRU victims).
- Scan budget (the sources do not give kpromoted's): per pass and per list, a CLOCK
  sweep over `scan` (100%) of the list, at least `scan_min` (4 MiB) and at most
  `scan_max` (256 MiB = 65,536 pages, as much as one AutoNUMA scan step; ~25 ms of
  accessed-bit checks per list), so a larger list takes several passes per revolution.
  Both are full-scale sizes: a `--scale F` miniature scans them x F. The scans are charged
  to background CPU by the LRU (accessed-bit checks, 50 ns per page examined).
- Multi-tier (the paper is two-tier per socket): every node below the top of the
  demotion path keeps a promote list; promotion goes to the top node first, falling
  back to the next nodes down, never below the page's own node. Nodes are scanned from
  the top of the path down; promotions are applied in that order too.
- Copy budget: kpromoted is one kernel thread; per pass it copies at most
  `copy_rate` x period bytes (default: the machine's per-thread migration bandwidth,
  which `--scale` already scales; an explicit `copy_rate` is a full-scale value),
  half for promotions, half for the demotions that make room; the rest of the promote
  list waits for the next pass (it is still drained: those pages must be found again).
- "Or when woken": kpromoted is only periodic here (the promote list only grows in its
  own scans in this model, so waking it earlier would change nothing).
- Allocation policies: nothing special; MULTI-CLOCK places first touches as the
  `--alloc` policy says (dram-preferred, dram-always, pm-preferred, pm-always).
"""
from __future__ import annotations

import numpy as np

from ..engine.lru import PROMOTE
from ..errors import TierlabError
from ..params import parse_flag, parse_fraction
from ..units import PAGE, parse_duration, parse_size
from .base import POLICIES, Policy


@POLICIES.register("multi-clock")
class MultiClock(Policy):
    """MULTI-CLOCK (HPCA'22): promote list of pages referenced while active; kpromoted."""

    def __init__(self, period="1s", scan="100%", scan_min="4MiB", scan_max="256MiB",
                 make_room="yes", copy_rate="auto"):
        super().__init__(period=period, scan=scan, scan_min=scan_min, scan_max=scan_max,
                         make_room=make_room, copy_rate=copy_rate)
        self.period = parse_duration(period, "multi-clock period")
        if self.period <= 0:
            raise TierlabError(f"bad multi-clock period {period!r}: must be > 0")
        self.scan = parse_fraction(scan, "multi-clock scan", lo_open=True)
        self.scan_min_bytes = parse_size(scan_min, "multi-clock scan_min")
        self.scan_max_bytes = parse_size(scan_max, "multi-clock scan_max")
        self.make_room = parse_flag(make_room, "multi-clock make_room")
        if str(copy_rate).strip().lower() in ("auto", "thread"):
            self.copy_rate = None  # one thread: the machine's per-thread migrate_bw
        else:
            self.copy_rate = parse_size(copy_rate, "multi-clock copy_rate (bytes/s)")
            if self.copy_rate <= 0:
                raise TierlabError(f"bad multi-clock copy_rate {copy_rate!r}: must be > 0")

    def attach(self, sim):
        super().attach(sim)
        # byte budgets are full-scale values: a --scale F miniature uses them x F
        self.scan_min = max(1, int(sim.scaled_bytes(self.scan_min_bytes)) // PAGE)
        self.scan_max = max(1, int(sim.scaled_bytes(self.scan_max_bytes)) // PAGE)
        self.path = list(sim.machine.demotion)
        self.rank = {n: i for i, n in enumerate(self.path)}
        self.src_rank = np.full(256, -1, dtype=np.int64)  # rank of a page's node
        for n, i in self.rank.items():
            self.src_rank[n] = i
        self.counts = {"passes": 0, "scanned": 0, "joined_promote": 0, "activated": 0,
                       "promoted": 0, "promote_failed": 0, "reclaimed_for_room": 0,
                       "fallback_victims": 0, "over_budget": 0}
        self.last_list = 0
        sim.every(self.period, self.kpromoted)

    def _budget(self, size: int) -> int:
        if size <= 0:
            return 0
        return int(min(size, min(self.scan_max, max(self.scan_min, int(self.scan * size)))))

    def _room(self, node: int) -> int:
        mem = self.sim.mem
        return max(int(mem.free[node] - mem.wmark_low[node]), 0)

    def kpromoted(self, now):
        """One kpromoted pass over the lower nodes: scan, then drain the promote list."""
        sim = self.sim
        lru = sim.lru
        mem = sim.mem
        c = self.counts
        c["passes"] += 1
        lists = []
        for node in self.path[1:]:
            if mem.used[node] == 0:
                continue
            # active list: referenced while active -> promote list
            pages, ref = lru.scan(node, True, self._budget(int(lru.nr_active[node])))
            c["scanned"] += len(pages)
            hot = pages[ref]
            if len(hot):
                lru.flags[hot] |= PROMOTE
                lists.append(hot)
            # inactive list: referenced -> active (page_referenced on an inactive page)
            pages, ref = lru.scan(node, False, self._budget(lru.nr_inactive(node)))
            lru.activate(pages[ref])
            c["activated"] += int(ref.sum())
            c["scanned"] += len(pages)
        if not lists:
            self.last_list = 0
            return
        plist = np.concatenate(lists)
        c["joined_promote"] += len(plist)
        self.last_list = len(plist)
        self._drain(plist)

    def _drain(self, plist):
        sim = self.sim
        lru = sim.lru
        mem = sim.mem
        c = self.counts
        top = self.path[0]
        rate = sim.scaled_bytes(self.copy_rate) if self.copy_rate else sim.machine.migrate_bw
        budget = int(rate * self.period / PAGE)  # page copies kpromoted can do per pass
        if len(plist) > budget // 2:
            plist_now = plist[: budget // 2]
        else:
            plist_now = plist
        if self.make_room:
            need = min(len(plist_now) - self._room(top), budget - len(plist_now))
            if need > 0 and sim.machine.lower(top) is not None:
                goal = int(mem.wmark_high[top] - mem.wmark_low[top]) + need
                c["reclaimed_for_room"] += sim.reclaim(top, goal)
        c["over_budget"] += len(plist) - len(plist_now)
        plist, plist_all = plist_now, plist
        src_rank = self.src_rank
        left = plist
        for dst in self.path[:-1]:
            if len(left) == 0:
                break
            node = sim.node_of(left)
            up = np.flatnonzero(src_rank[node] > self.rank[dst])
            room = self._room(dst)
            if len(up) == 0 or room == 0:
                continue
            moved = sim.migrate(left[up[:room]], dst, reason="promote")
            c["promoted"] += moved
            if moved:
                keep = np.ones(len(left), dtype=bool)
                keep[up[:moved]] = False
                left = left[keep]
        c["promote_failed"] += len(left)
        # the promote list is drained: moved pages stay active on their new node, the
        # others go back to the active list
        lru.flags[plist_all] &= ~np.uint8(PROMOTE)

    def select_victims(self, node, n):
        """The engine's LRU choice; if it finds too few victims, the pages its active
        hand has just passed unreferenced (a workaround for an LRU quirk: a page the
        active hand deactivates looks referenced to the inactive hand, whose own pass
        time is older, so a node holding only active, recently used pages yields no
        victims; Linux clears the young bit when the active list is scanned)."""
        lru = self.sim.lru
        v = lru.reclaim_victims(node, n)
        short = n - len(v)
        if short > 0 and lru.nr_active[node] > 0:
            pages, ref = lru.scan(node, True, 2 * short)
            extra = pages[~ref][:short]
            lru.deactivate(extra)
            self.counts["fallback_victims"] += len(extra)
            v = np.concatenate((v, extra))
        return v

    def stats(self):
        out = {k: int(v) for k, v in self.counts.items()}
        out["promote_list_last"] = int(self.last_list)
        return out
