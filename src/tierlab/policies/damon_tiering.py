"""`damon-tiering`: Linux's DAMON-based memory tiering (DAMOS migrate_hot/migrate_cold,
Linux >= 6.11; the kernel's mm/damon/ and samples/damon/mtier.c).

The kernel's reference setup (samples/damon/mtier.c) runs two physical-address (paddr)
DAMON contexts, one per node, with one scheme each:

- on the fast node: ``migrate_cold`` to the slow node for regions with nr_accesses 0
  (0% access) of any age; quota 200 MiB per 1 s window; quota goal: fast-node free
  memory 0.5% (DAMOS_QUOTA_NODE_MEM_FREE_BP, 50); a "young" page filter rejects pages
  accessed since their last check;
- on the slow node: ``migrate_hot`` to the fast node for regions with nr_accesses >= 1
  (5% of the 20 samples per aggregation); quota 200 MiB per 1 s window; quota goal:
  fast-node used memory 99.7% (DAMOS_QUOTA_NODE_MEM_USED_BP, 9970); a young filter
  allows only pages accessed since their last check;
- apply interval 1 s; prioritisation weights: nr_accesses 100, age 100, size 0;
  sample 5 ms, aggregation 100 ms, 10..1000 regions (mtier.c also turns on the
  Linux 6.15 intervals auto-tuning, aiming at 4% observed accesses: not modelled).
kswapd demotion stays on (Linux keeps it).

Kernel rules implemented (mm/damon/core.c, ops-common.c, paddr.c, samples/damon/mtier.c):

- access pattern (__damos_valid_target): min/max nr_accesses, min/max age, region
  size >= 1 page;
- quota windows (damos_adjust_quota): a window opens at the first application and
  every `reset` interval; at each opening the effective size quota ``esz`` is re-tuned;
- goal tuning (damos_set_effective_quota, "consist" tuner): score = current metric x
  10000 / target (the highest over goals); esz_bp = damon_feed_loop_next_input(
  max(esz_bp, 10000), score), i.e. next = last x (1 + (goal - score) / goal) when under
  the goal, last x (1 - (score - goal) / goal) when over (never below 10000, and
  10000 at once when score >= 2 x goal); esz = min(esz_bp / 10000, quota size);
- prioritisation (damos_adjust_quota's score histogram): every pattern-matching region
  gets a score (damon_hot_score: freq = nr_accesses x 100 / max_nr_accesses; age
  subscore from log2 of the age in seconds, negated when freq is 0, mapped to 0..100;
  weighted mean x 99 / 100; migrate_cold uses 99 - hotness, damon_cold_score); the
  min_score is the highest score at which the size of regions scoring >= it reaches
  esz; only regions scoring >= min_score are applied;
- application (damos_apply_scheme): regions in address order; a region that would
  overrun the quota is split at the remaining quota (page-aligned) and only its first
  part applied; the charged size counts the whole (part) region whatever the filters
  and the migration achieve; once esz is used up the scheme stops for the window and
  the next application resumes after the last charged address
  (damos_skip_charged_region); an applied region's age is reset to 0;
- migration (damon_pa_migrate / damon_migrate_pages): pages that pass the filter are
  moved to the scheme's fixed target node without reclaim at the target (the sim's
  `migrate` stops at the target's min watermark); the young filter is
  test-and-clear (damon_folio_young, then damon_folio_mkold when young).
- the copy is synchronous in the kdamond (`copy=kdamond`, default): damon_pa_migrate
  isolates a region's folios and migrate_pages() copies them in the kdamond thread
  (MIGRATE_ASYNC: it skips pages it would wait for, but copies in the caller), one per
  context (mtier.c: a context per node), so a scheme's pages land at one thread's copy
  speed (the machine's `migrate_bw`, scaled with `--scale`; what was copied is settled at
  each aggregation, 100 ms, which costs no engine events), and the context decides
  its next scheme, or its next apply, only once the copy is done. The filter and the
  quota charge happen at the decision. The target's pages are allocated GFP_NOWAIT
  (__damon_pa_migrate_folio_list): no direct reclaim, but a target below its low
  watermark wakes kswapd, which demotes to the high watermark (at once, between the
  engine's 1 s kswapd passes). `copy=instant` lands a scheme's pages at its decision
  (tierlab before 2026-12-06). The copy's CPU is charged either way. 200 MiB at
  1.5 GB/s take 0.14 s; in the test guest (TCG) the kernel's DAMOS moved a 128 MiB hot
  range in about 1.2 s (docs/linux.md). The kdamond's sampling also pauses while it
  copies; that pause is not modelled.

Simulator mapping and assumptions (documented choices):

- address space (`ops`). `ops=paddr` is mtier.c's: a DAMON context per source node
  (`damon-paddr`, monitors/damon_paddr.py), its regions over that node's frames
  (`Simulation.node_frames`, laid out in `frames` order: `boot`, the default, or
  `random`); a region's size in the pattern, histogram and quota is its frame count,
  free frames included, as the kernel charges it; its pages are those its frames hold,
  others' idle frames (`Memory.idle`) among them, which migrate_cold demotes as any
  page. `ops=vaddr` (the default, tierlab before 2026-12-07, and what tierlab exec
  runs on the kernel's vaddr DAMON): one `damon` monitor watches the workload's
  virtual range; a scheme applies to a region's pages that sit on the scheme's source
  node, and its size in the pattern, histogram and quota is the number of those pages.
  A region without such pages is not a target. All schemes share one set of regions
  (and one max_nr_accesses threshold); an applied region's age reset covers its pages
  on every node. Other processes' idle frames on a node are, to paddr, a region never
  found accessed and the oldest: vaddr's migrate_cold takes them first
  (`_cold_idle`). Where the two differ: paddr sees a hot page left on the slow node
  among the frames the cold pages demoted after it took, a region that looks cold;
  vaddr sees it beside the rest of its hot range.
- schemes run at aggregation boundaries (apply interval rounded up to a multiple of the
  aggregation interval), scheme by scheme in list order over all regions (the kernel
  walks regions and applies every due scheme to each in turn: the same except that a
  quota split made by a later scheme is not seen by an earlier one in that pass).
- multi-tier (`promote`): DAMOS migrate target_nid is one fixed node per scheme. Cold:
  each node with a lower node on the demotion path gets a migrate_cold scheme to that
  lower node, goal: its own free ratio. Hot: `promote=all` (default) gives every node
  below the top one a migrate_hot scheme per faster node, fastest target first, each
  with the goal "target node used 99.7%": pages go to the fastest node with room (a
  full target fails the migration and the next scheme takes the pages);
  `promote=next`: one scheme to the next faster node on the path (hot pages climb one
  tier per move); `promote=top`: one scheme to the top node. On 2 tiers all coincide
  with mtier.c.
- goals and the simulator's watermarks (`goal_offset`): Linux's watermarks on large
  nodes sit within ~0.1-0.3% of the node, below both goals (0.5% free, 0.3% free =
  99.7% used), so DAMON acts before kswapd. The simulator spaces min/low/high at
  0.5/1/1.5% (docs/model.md), which would put the cold goal below the min watermark,
  where `migrate` stops: migrate_cold could never act. By default (`goal_offset=high`)
  both goals are shifted by the node's high watermark (free goal 0.5% + high, used
  goal 99.7% - high) to keep their place above kswapd's band; `goal_offset=none` uses
  the literal values.
- initial quota state (`esz_init`): a real kdamond runs from before the workload
  allocates; while the fast node fills, migrate_hot under-achieves its goal and its
  esz_bp winds up to the quota cap, while migrate_cold over-achieves and sits at the
  minimum. The simulator allocates at time 0, so `esz_init=boot` (default) starts
  each scheme in that state (esz_bp = quota x 10000 when its goal is unmet on empty
  nodes, else the minimum 10000); `esz_init=zero` starts from 0 as a kdamond started
  on a full machine (the feed loop then needs minutes to reach a page).
- the young filter checks (and charges, one accessed-bit check each) every page of
  the charged regions, but evaluates the bits only until the target's free room is
  covered; the pages after that could not move anyway and only miss their mkold.
- quota time limit (`ms`), watermarks-based activation, other filters: not used by the
  tiering setup, not implemented.

Parameters (strings accepted): sample, aggr, update, min_nr_regions, max_nr_regions
(monitor); quota (size per window, 200MiB), reset (window, 1s), apply (1s), cold_free
(0.5%), hot_used (99.7%), goal_offset (high|none), min_age (cold scheme minimum age, a
duration, 0s), hot (minimum access rate of migrate_hot, 5%), promote (all|next|top),
young (on|off), weight_nr (100), weight_age (100), esz_init (boot|zero), copy
(kdamond|instant), ops (vaddr|paddr), frames (boot|random: paddr's frame order), goals
(on|off:
off leaves the quota goals out, as on a kernel before 6.16, which has no node-memory goal
metrics: every window's effective quota is then the size quota, damos_set_effective_quota).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import TierlabError
from ..monitors.base import MONITORS
from ..monitors.damon import Damon
from ..monitors.damon_paddr import FRAME_ORDERS, DamonPaddr
from ..params import parse_choice, parse_flag, parse_fraction, parse_int
from ..units import PAGE, parse_duration, parse_size
from .base import POLICIES, Policy

#: DAMOS_MAX_SCORE, DAMON_MAX_SUBSCORE, DAMON_MAX_AGE_IN_LOG (mm/damon)
MAX_SCORE = 99
MAX_SUBSCORE = 100
MAX_AGE_IN_LOG = 32
ULONG_MAX = (1 << 64) - 1
GOAL = 10000
MIN_INPUT = 10000


def feed_loop_next_input(last: int, score: int) -> int:
    """damon_feed_loop_next_input: the next input for a target score of 10000."""
    if score == GOAL:
        return last
    if score >= 2 * GOAL:
        return MIN_INPUT
    diff = abs(score - GOAL)
    comp = last * diff // GOAL if last < ULONG_MAX // diff else last // GOAL * diff
    if score > GOAL:
        return max(last - comp, MIN_INPUT)
    return min(last + comp, ULONG_MAX)


def hot_score(nr, age, max_nr_accesses: int, aggr_interval: float, weight_nr=100,
              weight_age=100) -> np.ndarray:
    """damon_hot_score (mm/damon/ops-common.c), vectorised over regions."""
    nr = np.asarray(nr, dtype=np.int64)
    age = np.asarray(age, dtype=np.int64)
    freq = nr * MAX_SUBSCORE // max(int(max_nr_accesses), 1)
    # age in seconds = age x aggr_interval_us / 1e6, rounded down (integer microseconds)
    age_sec = age * int(round(aggr_interval * 1e6)) // 1_000_000
    age_log = np.zeros(age_sec.shape, dtype=np.int64)
    pos = age_sec > 0
    age_log[pos] = np.minimum(np.floor(np.log2(age_sec[pos])).astype(np.int64) + 1,
                              MAX_AGE_IN_LOG)
    age_log = np.where(freq == 0, -age_log, age_log) + MAX_AGE_IN_LOG
    age_sub = age_log * MAX_SUBSCORE // MAX_AGE_IN_LOG // 2
    hot = weight_nr * freq + weight_age * age_sub
    if weight_nr + weight_age:
        hot = hot // (weight_nr + weight_age)
    return hot * MAX_SCORE // MAX_SUBSCORE


def cold_score(nr, age, max_nr_accesses, aggr_interval, weight_nr=100, weight_age=100):
    """damon_cold_score: DAMOS_MAX_SCORE - hotness."""
    return MAX_SCORE - hot_score(nr, age, max_nr_accesses, aggr_interval, weight_nr,
                                 weight_age)


@dataclass
class Scheme:
    """One DAMOS scheme (pattern, action, quota with one goal, filter) and its state."""

    action: str  # "migrate_hot" | "migrate_cold"
    src: int
    dst: int
    min_nr: int
    max_nr: int
    min_age: int
    max_age: int
    quota_sz: int  # bytes per window (0 = no size quota)
    reset_interval: float
    goal_metric: str | None  # "node_mem_used_bp" | "node_mem_free_bp" | None (no goal)
    goal_nid: int
    goal_bp: int
    weight_nr: int = 100
    weight_age: int = 100
    young_filter: bool = True
    # state
    esz_bp: int = 0
    esz: int = 0
    charged_sz: int = 0
    charged_from: float | None = None
    total_charged_sz: int = 0
    charge_addr_from: int | None = None
    min_score: int = 0
    applied_window: int = 0
    # statistics (DAMOS stat)
    nr_tried: int = 0
    sz_tried: int = 0
    nr_applied: int = 0
    sz_applied: int = 0
    qt_exceeds: int = 0
    windows: list = field(default_factory=list)  # (start, charged bytes, applied bytes)

    @property
    def name(self) -> str:
        return f"{self.action}:{self.src}->{self.dst}"

    # -- quota -----------------------------------------------------------------------
    def goal_score(self, mem) -> int:
        """damos_quota_score for the one goal: current x 10000 / target."""
        cap = int(mem.capacity[self.goal_nid])
        free = int(mem.free[self.goal_nid])
        if cap <= 0:
            return GOAL
        cur = (cap - free) * 10000 // cap if self.goal_metric == "node_mem_used_bp" \
            else free * 10000 // cap
        return cur * 10000 // max(self.goal_bp, 1)

    def set_effective_quota(self, mem) -> None:
        """damos_set_effective_quota with the "consist" goal tuner; without a goal (and
        no time quota) the size quota itself."""
        if self.goal_metric is None:
            self.esz = self.quota_sz
            return
        self.esz_bp = feed_loop_next_input(max(self.esz_bp, MIN_INPUT), self.goal_score(mem))
        esz = self.esz_bp // 10000
        if self.quota_sz and self.quota_sz < esz:
            esz = self.quota_sz
        self.esz = esz

    def adjust_quota(self, now: float, mem) -> None:
        """damos_adjust_quota's window handling."""
        if self.charged_from is None:
            self.charged_from = now
            self.set_effective_quota(mem)
        elif now >= self.charged_from + self.reset_interval - 1e-9:
            if self.esz and self.charged_sz >= self.esz:
                self.qt_exceeds += 1
            self.windows.append((self.charged_from, self.charged_sz, self.applied_window))
            self.total_charged_sz += self.charged_sz
            self.charged_from = now
            self.charged_sz = 0
            self.applied_window = 0
            self.set_effective_quota(mem)


MONITOR_CHOICES = ("damon", "telescope-bounded", "telescope-flex")


@dataclass
class Kdamond:
    """One DAMON context's thread (copy=kdamond): its schemes, the pages it still
    copies, the schemes of its pass still to decide, its next apply time."""

    next_apply: float
    copied_to: float
    schemes: list = field(default_factory=list)
    queue: list = field(default_factory=list)  # (scheme, pages still to copy)
    todo: list = field(default_factory=list)
    credit: float = 0.0
    mon: Damon | None = None


@POLICIES.register("damon-tiering")
class DamonTiering(Policy):
    """Linux >= 6.11 DAMON tiering: DAMOS migrate_hot/migrate_cold with quota goals."""

    def __init__(self, sample="5ms", aggr="100ms", update="1s", min_nr_regions=10,
                 max_nr_regions=1000, quota="200MiB", reset="1s", apply="1s",
                 cold_free="0.5%", hot_used="99.7%", goal_offset="high", min_age="0s",
                 hot="5%", promote="all", young="on", weight_nr=100, weight_age=100,
                 esz_init="boot", monitor="damon", goals="on", copy="kdamond",
                 ops="vaddr", frames="boot"):
        super().__init__(sample=sample, aggr=aggr, update=update,
                         min_nr_regions=min_nr_regions, max_nr_regions=max_nr_regions,
                         quota=quota, reset=reset, apply=apply, cold_free=cold_free,
                         hot_used=hot_used, goal_offset=goal_offset, min_age=min_age,
                         hot=hot, promote=promote, young=young, weight_nr=weight_nr,
                         weight_age=weight_age, esz_init=esz_init, monitor=monitor, goals=goals,
                         copy=copy, ops=ops, frames=frames)
        # the regions DAMOS acts on: DAMON's, or Telescope's (ATC'24: the same regions
        # with their samples checked at upper page-table levels; its tiering runs)
        if monitor not in MONITOR_CHOICES:
            raise TierlabError(f"damon-tiering monitor {monitor!r}; valid: "
                               f"{', '.join(MONITOR_CHOICES)}")
        self.ops = parse_choice(ops, "damon-tiering ops", ("vaddr", "paddr"))
        self.frames = parse_choice(frames, "damon-tiering frames", FRAME_ORDERS)
        if self.ops == "paddr" and monitor != "damon":
            raise TierlabError(f"damon-tiering monitor {monitor!r} watches virtual "
                               "addresses; ops=paddr runs DAMON's paddr ops (monitor=damon)")
        self._mon_args = dict(sample=sample, aggr=aggr, update=update,
                              min_nr_regions=min_nr_regions, max_nr_regions=max_nr_regions)
        self.monitor = MONITORS.create(monitor, **self._mon_args, name="damon-tiering")
        #: the DAMON context of each source node (paddr), or the one of all (vaddr: None)
        self.monitors: dict = {}
        self.quota = parse_size(quota, "damon-tiering quota")
        self.reset = parse_duration(reset, "damon-tiering reset interval")
        self.apply = parse_duration(apply, "damon-tiering apply interval")
        if self.reset <= 0 or self.apply < 0:
            raise TierlabError("damon-tiering: reset must be > 0 and apply >= 0")
        self.cold_free = parse_fraction(cold_free, "damon-tiering cold_free")
        self.hot_used = parse_fraction(hot_used, "damon-tiering hot_used")
        self.goal_offset = parse_choice(goal_offset, "damon-tiering goal_offset", ("high", "none"))
        min_age_s = parse_duration(min_age, "damon-tiering min_age")
        self.min_age = int(math.ceil(min_age_s / self.monitor.aggr_interval - 1e-9))
        hot_frac = parse_fraction(hot, "damon-tiering hot")
        mx = self.monitor.max_nr_accesses
        self.hot_min_nr = max(1, int(hot_frac * mx + 1e-9)) if hot_frac > 0 else 0
        self.promote = parse_choice(promote, "damon-tiering promote", ("all", "next", "top"))
        self.young = parse_flag(young, "damon-tiering young")
        self.weight_nr = parse_int(weight_nr, "damon-tiering weight_nr", 0, 2**32 - 1)
        self.weight_age = parse_int(weight_age, "damon-tiering weight_age", 0, 2**32 - 1)
        self.esz_init = parse_choice(esz_init, "damon-tiering esz_init", ("boot", "zero"))
        self.goals = parse_flag(goals, "damon-tiering goals")
        self.copy = parse_choice(copy, "damon-tiering copy", ("kdamond", "instant"))
        self.schemes: list[Scheme] = []
        self._counts: dict = {}
        self._next_apply: dict = {}  # copy=instant: context (source node, or None) -> time
        self._ctx: dict = {}  # copy=kdamond: source node -> its Kdamond
        self.young_checks = 0

    # -- setup -------------------------------------------------------------------
    def attach(self, sim):
        super().attach(sim)
        if self.young and getattr(sim, "real", False):
            # the kernel applies this filter to each page's PTE inside DAMOS; from user
            # space (tierlab daemon) single pages' accessed bits are not visible
            sim.note("damon-tiering: the young-page filter needs per-page accessed bits, "
                     "which user space cannot read; running with young=off")
            self.young = False
        if self.ops == "paddr" and getattr(sim, "real", False):
            sim.note("damon-tiering: ops=paddr needs the kernel's paddr DAMON contexts; "
                     "tierlab runs DAMON on the workload's virtual addresses (ops=vaddr)")
            self.ops = "vaddr"
        if self.copy == "kdamond" and getattr(sim, "real", False):
            # move_pages(2) copies in the daemon's own thread: the copy takes its real
            # time there, the simulator's pacing would only add a wait
            self.copy = "instant"
        mem = sim.mem
        path = list(sim.machine.demotion)
        high_bp = (mem.wmark_high * 10000 // np.maximum(mem.capacity, 1)).astype(int)
        off = (lambda n: int(high_bp[n])) if self.goal_offset == "high" else (lambda n: 0)
        free_bp = int(round(self.cold_free * 10000))
        used_bp = int(round(self.hot_used * 10000))
        # the quota is bytes per window: it shrinks with the miniature (--scale)
        common = dict(quota_sz=int(sim.scaled_bytes(self.quota)), reset_interval=self.reset,
                      weight_nr=self.weight_nr, weight_age=self.weight_age,
                      young_filter=self.young)
        BIG = 1 << 62
        for i, n in enumerate(path[:-1]):
            self.schemes.append(Scheme(
                "migrate_cold", n, path[i + 1], 0, 0, self.min_age, BIG,
                goal_metric="node_mem_free_bp" if self.goals else None, goal_nid=n,
                goal_bp=free_bp + off(n), **common))
        for i, n in enumerate(path[1:], start=1):
            if self.promote == "top":
                targets = [path[0]]
            elif self.promote == "next":
                targets = [path[i - 1]]
            else:
                targets = path[:i]
            for t in targets:
                self.schemes.append(Scheme(
                    "migrate_hot", n, t, self.hot_min_nr, BIG, 0, BIG,
                    goal_metric="node_mem_used_bp" if self.goals else None, goal_nid=t,
                    goal_bp=max(used_bp - off(t), 1), **common))
        for s in self.schemes:
            if self.esz_init == "boot":
                # goal evaluated on empty nodes: used 0%, free 100%
                cur = 0 if s.goal_metric == "node_mem_used_bp" else 10000
                unmet = cur * 10000 // max(s.goal_bp, 1) < GOAL
                s.esz_bp = s.quota_sz * 10000 if (unmet and s.quota_sz) else MIN_INPUT
        start = sim.now + self.apply  # damos_set_next_apply_sis at start
        if self.ops == "paddr":
            for n in sorted({s.src for s in self.schemes}):
                self.monitors[n] = DamonPaddr(node=n, frames=self.frames, **self._mon_args,
                                              name=f"damon-tiering:node{n}")
        else:
            self.monitors[None] = self.monitor
        for key in self.monitors:
            self._next_apply[key] = start
        if self.copy == "kdamond":
            for s in self.schemes:
                key = s.src if self.ops == "paddr" else None
                ctx = self._ctx.setdefault(s.src, Kdamond(start, sim.now,
                                                          mon=self.monitors[key]))
                ctx.schemes.append(s)
            # pages a second one kdamond copies: the machine's migrate_bw (a miniature's
            # machine has it scaled already, as the engine's background mover); the
            # copies are settled at each aggregation (no engine events of their own)
            self._copy_rate = sim.machine.migrate_bw / PAGE
        for key, mon in self.monitors.items():
            mon.attach(sim)
            mon.subscribe(functools.partial(self._on_aggregation, node=key))
        self.rng = sim.rng_for("damon-tiering")

    # -- DAMOS -------------------------------------------------------------------
    def _on_aggregation(self, mon: Damon, now: float, node=None) -> None:
        """DAMOS at an aggregation of the context watching `node`'s frames (paddr), or
        of the one monitor (vaddr: node None, every context)."""
        if self._ctx:
            ctxs = [c for n, c in self._ctx.items() if node is None or n == node]
            self._copy(now, ctxs)
            for ctx in ctxs:  # a kdamond still copying applies nothing
                if not ctx.queue and not ctx.todo and now + 1e-9 >= ctx.next_apply:
                    ctx.next_apply = now + self.apply
                    for s in ctx.schemes:
                        s.adjust_quota(now, self.sim.mem)
                    ctx.todo = list(ctx.schemes)
                    self._drive(ctx, now)
            return
        if now + 1e-9 < self._next_apply[node]:
            return
        self._next_apply[node] = now + self.apply
        mem = self.sim.mem
        schemes = [s for s in self.schemes if node is None or s.src == node]
        for s in schemes:  # kdamond_apply_schemes: adjust every due quota first
            s.adjust_quota(now, mem)
        self._counts = {}  # (node, start, end) -> pages on node, valid for this pass
        for s in schemes:
            self._apply_scheme(s, mon, now)

    def _drive(self, ctx: "Kdamond", now: float) -> None:
        """A kdamond's pass: its schemes in order, each decided once the one before
        it has copied its pages (kdamond_apply_schemes migrates synchronously)."""
        while not ctx.queue and ctx.todo:
            self._counts = {}
            self._apply_scheme(ctx.todo.pop(0), ctx.mon, now)

    def _copy(self, now: float, ctxs) -> None:
        """Each of these kdamonds copies its queued pages, in order, at one thread's
        speed, for the time since its last aggregation; pages the target refuses (its
        min watermark) fail at no copy time."""
        for ctx in ctxs:
            dt, ctx.copied_to = now - ctx.copied_to, now
            if not ctx.queue and not ctx.todo:
                continue
            ctx.credit += self._copy_rate * dt
            while ctx.queue and ctx.credit >= 1:
                s, pages = ctx.queue[0]
                n = min(int(ctx.credit), pages.size)
                self._wake_kswapd(s.dst)
                moved = self.sim.migrate(pages[:n], s.dst, reason=f"damos_{s.action}")
                self._applied(s, moved)
                ctx.credit -= moved
                if n == pages.size:
                    ctx.queue.pop(0)
                else:
                    ctx.queue[0] = (s, pages[n:])
            if not ctx.queue:
                ctx.credit = 0.0
                self._drive(ctx, now)

    def _wake_kswapd(self, node: int) -> None:
        """The target's pages are allocated GFP_NOWAIT (__damon_pa_migrate_folio_list):
        no direct reclaim, but below the low watermark the allocation wakes kswapd,
        which demotes until the high watermark (the engine's kswapd, at once)."""
        mem = self.sim.mem
        if mem.free[node] < mem.wmark_low[node] and self.sim.machine.lower(node) is not None:
            self.sim.reclaim(node, int(mem.wmark_high[node] - mem.free[node]))

    def _cold_idle(self, s: "Scheme") -> bool:
        """paddr: others' idle frames on the source node (`Memory.idle`) are a region no
        sample finds accessed (damon_folio_young: an unmapped folio that
        damon_folio_mkold left idle) and the oldest, so migrate_cold's quota takes them
        before any of the workload's regions. They move at once (not through the
        kdamond's copy queue), the copy charged. True when the quota is used up."""
        demote = getattr(self.sim, "demote_idle", None)
        idle = getattr(self.sim.mem, "idle", None)
        if demote is None or idle is None or idle[s.src] <= 0:
            return False
        n = int(idle[s.src])
        if s.esz:
            n = min(n, int(s.esz - s.charged_sz) // PAGE)
        moved = demote(s.src, s.dst, n, reason=f"damos_{s.action}")
        if moved:
            s.charged_sz += moved * PAGE
            s.nr_tried += 1
            s.sz_tried += moved * PAGE
            self._applied(s, moved)
        return bool(s.esz) and s.esz - s.charged_sz < PAGE

    @staticmethod
    def _applied(s: "Scheme", moved: int) -> None:
        if moved:
            s.nr_applied += 1
        s.sz_applied += moved * PAGE
        s.applied_window += moved * PAGE

    def _count_on(self, starts, ends, node) -> np.ndarray:
        """Pages of each region [starts[i], ends[i]) on `node` (cached for the pass and
        kept exact across this pass's own migrations by `_moved`); the regions not
        cached yet are counted in one call from the per-block counts
        (`Memory.range_counts`), not a pass over each region's pages."""
        cache = self._counts
        keys = [(node, a, b) for a, b in zip(starts.tolist(), ends.tolist())]
        got = [cache.get(k) for k in keys]
        miss = [j for j, c in enumerate(got) if c is None]
        if miss:
            m = np.array(miss, dtype=np.int64)
            cnt = self.sim.mem.range_counts(starts[m], ends[m])[:, node]
            for j, c in zip(miss, cnt.tolist()):
                got[j] = cache[keys[j]] = c
        return np.array(got, dtype=np.int64)

    def _moved(self, mon: Damon, pages: np.ndarray, src: int, dst: int) -> None:
        """Update the pass's cached counts after `pages` moved from src to dst."""
        if not self._counts or pages.size == 0:
            return
        r = mon.regions
        idx = np.searchsorted(r.start, pages, side="right") - 1
        k = np.bincount(idx, minlength=len(r))
        for i in np.flatnonzero(k).tolist():
            a, b, c = int(r.start[i]), int(r.end[i]), int(k[i])
            if (src, a, b) in self._counts:
                self._counts[(src, a, b)] -= c
            if (dst, a, b) in self._counts:
                self._counts[(dst, a, b)] += c

    def _pages_on(self, a: int, b: int, node: int) -> np.ndarray:
        return np.flatnonzero(self.sim.mem.node[a:b] == node) + a

    def _apply_scheme(self, s: Scheme, mon: Damon, now: float) -> None:
        if s.quota_sz and s.esz - s.charged_sz < PAGE:
            return  # nothing can be charged this window (ALIGN_DOWN(esz - charged) == 0)
        paddr = self.ops == "paddr"
        if paddr:
            mon.frames.sync()  # the copies landed since the aggregation's sampling
        elif s.action == "migrate_cold" and self._cold_idle(s):
            return
        # damos_skip_charged_region: resume after the last charged address
        resume = s.charge_addr_from
        s.charge_addr_from = None
        if resume is not None:
            r = mon.regions
            i = int(np.searchsorted(r.end, resume, "right"))
            if i < len(r) and r.start[i] < resume:
                mon.split_at(i, resume)
        r = mon.regions
        pat = ((r.nr_accesses >= s.min_nr) & (r.nr_accesses <= s.max_nr)
               & (r.age >= s.min_age) & (r.age <= s.max_age))
        idx = np.flatnonzero(pat)
        if idx.size == 0:
            return
        if paddr:  # a region's size is its frames, whatever they hold
            cnt = r.end[idx] - r.start[idx]
        else:
            cnt = self._count_on(r.start[idx], r.end[idx], s.src)
            keep = cnt > 0
            idx, cnt = idx[keep], cnt[keep]
        if idx.size == 0:
            return
        fn = hot_score if s.action == "migrate_hot" else cold_score
        score = fn(r.nr_accesses[idx], r.age[idx], mon.max_nr_accesses, mon.aggr_interval,
                   s.weight_nr, s.weight_age)
        if s.esz:
            # damos_adjust_quota: the min score whose cumulated size reaches esz
            hist = np.bincount(score, weights=cnt.astype(float) * PAGE,
                               minlength=MAX_SCORE + 1)
            cum = np.cumsum(hist[::-1])
            hit = np.flatnonzero(cum >= s.esz)
            s.min_score = MAX_SCORE - int(hit[0]) if hit.size else 0
            ok = score >= s.min_score
            idx, cnt = idx[ok], cnt[ok]
        if resume is not None:
            ok = r.start[idx] >= resume
            idx, cnt = idx[ok], cnt[ok]
        if idx.size == 0:
            return
        # walk in address order, charging each region's size to the quota
        sizes = cnt * PAGE
        if s.esz:
            avail = s.esz - s.charged_sz
            cum = np.cumsum(sizes)
            nfull = int(np.searchsorted(cum, avail, "right"))
            before = int(cum[nfull - 1]) if nfull else 0
            part = (avail - before) // PAGE if nfull < idx.size else 0
        else:
            nfull, part = idx.size, 0
        apply_idx = idx[:nfull].tolist()
        grab = (lambda a, b: np.arange(a, b)) if paddr else (
            lambda a, b: self._pages_on(a, b, s.src))
        chunks = [grab(int(r.start[i]), int(r.end[i])) for i in apply_idx]
        if part > 0:
            i = int(idx[nfull])
            # the first `part` of the region's pages on src (paddr: its frames): it holds
            # more than that (cum[nfull] > avail), so the node's hand-scan stops inside it
            pg = np.arange(int(r.start[i]), int(r.start[i]) + part) if paddr else \
                self.sim.mem.pages_on(s.src, int(r.start[i]), part)[0]
            cut = int(pg[-1]) + 1
            if cut < int(r.end[i]):
                mon.split_at(i, cut)  # the left piece keeps index i
                r = mon.regions
            chunks.append(pg)
            apply_idx.append(i)
        if not apply_idx:
            return
        charged = int(sum(len(c) for c in chunks)) * PAGE
        s.charged_sz += charged
        s.nr_tried += len(apply_idx)
        s.sz_tried += charged
        if s.esz and s.charged_sz >= s.esz:
            s.charge_addr_from = int(r.end[apply_idx[-1]])
        pages = np.concatenate(chunks)
        if paddr:
            pages = self._frame_pages(s, mon, pages)
        if s.young_filter and pages.size:
            pages = self._young_filter(pages, s, now)
        mon.reset_age(np.asarray(apply_idx))
        if self._ctx:  # its kdamond copies them from the next aggregation on
            if pages.size:
                self._ctx[s.src].queue.append((s, pages))
            return
        moved = self.sim.migrate(pages, s.dst, reason=f"damos_{s.action}") if pages.size else 0
        # move_pages takes the pages in order and stops at the target's min watermark
        self._moved(mon, pages[:moved], s.src, s.dst)
        self._applied(s, moved)

    def _frame_pages(self, s: Scheme, mon: DamonPaddr, frames: np.ndarray) -> np.ndarray:
        """paddr: the workload's pages in the scheme's frames. Others' idle pages among
        them are never young (unmapped: damon_folio_young finds no accessed PTE), so
        migrate_cold demotes them at once (`Simulation.demote_idle`, the copy charged)
        and migrate_hot leaves them; free frames and others' memory hold nothing to
        move."""
        owner = mon.owner[frames]
        idle = frames[owner == mon.frames.IDLE]
        if idle.size and s.action == "migrate_cold":
            moved = self.sim.demote_idle(s.src, s.dst, int(idle.size),
                                         reason=f"damos_{s.action}")
            mon.frames.move_idle(s.src, idle[:moved], s.dst)
            self._applied(s, moved)
        return owner[owner >= 0]

    def _young_filter(self, pages: np.ndarray, s: Scheme, now: float) -> np.ndarray:
        """DAMOS_FILTER_TYPE_YOUNG (damon_folio_young, then mkold when young): migrate_hot
        keeps young pages, migrate_cold drops them. Every page of the charged regions is
        checked and charged (one accessed-bit check each); with copy=instant, to save
        wall time, the bits are only evaluated, in address order, until the target
        node's room (free above its min watermark) is covered -- the rest could not
        move anyway, and only their bit clearing is skipped."""
        sim = self.sim
        bits = sim.bits
        self.young_checks += int(pages.size)
        sim.charge_cpu(pages.size * bits.check_cost, "monitor")
        room = int(sim.mem.free[s.dst] - sim.mem.wmark_min[s.dst])
        if self._ctx:  # copy=kdamond: kswapd makes room while the kdamond copies
            room = pages.size
        keep, got, pos = [], 0, 0
        hot = s.action == "migrate_hot"
        step = room + room // 4 + 64
        while got < room and pos < pages.size:
            chunk = pages[pos:pos + step]
            young = bits.test_and_clear(0, chunk, now)
            sel = chunk[young] if hot else chunk[~young]
            keep.append(sel)
            got += sel.size
            pos += chunk.size
            step *= 2
        return np.concatenate(keep) if keep else pages[:0]

    # -- reporting ---------------------------------------------------------------
    def stats(self) -> dict:
        mon = ({f"node{n}": m.stats() for n, m in self.monitors.items()}
               if self.ops == "paddr" else self.monitor.stats())
        out = {"monitor": mon, "young_checks": self.young_checks}
        for s in self.schemes:
            out[s.name] = {"sz_tried": s.sz_tried, "sz_applied": s.sz_applied,
                           "nr_tried": s.nr_tried, "nr_applied": s.nr_applied,
                           "qt_exceeds": s.qt_exceeds, "esz": s.esz,
                           "min_score": s.min_score}
        return out
