"""`idt` and its ablations: IDT's demotion, ARP/PRP promotion and misplaced-region
promotion (HPDC'24 and its slides; public code scale-snu/IDT, mm/damon/idt*.c), on IDT's
region monitor or plain DAMON.

Every **sampling interval** (10 ms; IDT's public code promotes in its sampling path), on
IDT's monitor (`idt-regions`, `subscribe_sample`):

- **ARP**: any region off the top node that is seen accessed in this interval (either
  sampled page) is promoted whole to the top node if that keeps the top node's free
  memory >= `accept_free` (1%, the critical watermark's check), whoever put it there:
  the public code's `IS_DEMOTED(r)` is `r->nid != IDT_DEFAULT_NODE` (scale-snu/IDT,
  mm/damon/vaddr.c `__damon_va_check_access`, include/linux/damon.h), so a region
  kswapd demoted or first touch placed low is promoted on its first sampled access,
  like one IDT demoted (`arp=all`, the default; `arp=demoted` promotes only the regions
  IDT demoted). A region IDT demoted is charged to the decision that demoted it.
- **PRP** then looks for the ARP region's nearest neighbour (k = 1) among **all**
  regions within `prp_window` (1 GiB) of address, whatever their node; if that
  neighbour already sits on a node at or above the ARP region's (now the top node),
  PRP does nothing (mm/damon/idt-promote.c `idt_promote_prp`, "don't promote if
  searched region is in upper tier"); otherwise it promotes the neighbour if its
  distance passes the threshold. Two rules, each distance on the scale of its own
  threshold:
  - `prp_rule=public` (the default; the paper gives no threshold, so the public code
    is the rule): for each candidate, v = address gap in units of prp_window / 100
    (the code's 10 MB, candidates up to 100 units) and a = Hamming distance of the
    whole history buffers; with the candidates' integer means m_v, m_a and variances
    s_v, s_a (each + 1, as the code guards zero), the distance is s_v (a - m_a)^2 +
    s_a (v - m_v)^2, the slides' "Normalized(vaddr distance) + Normalized(access_history
    distance)" on the code's variance-weighted squared scale (deviations from the
    candidates' means, as the code computes them). The neighbour is promoted if its
    distance is <= `prp_thres` (5, the code's `idt_prp_min_dist`), which then becomes
    that distance for the rest of the run (the code tightens it before it checks room).
  - `prp_rule=sum`: address gap / prp_window (capped at 1) + Hamming(histories) /
    history bits, in [0, 2], promoted if under `prp_thres` (0.25): a neighbour a
    quarter window away with the same history, or adjacent with a quarter of its bits
    different. That threshold is tierlab's choice, not a source's.
- slow hits: every accessed region on a lower node adds its pages to `slow_hit` (the
  accesses served by lower tiers as IDT sees them: intervals seen accessed x region
  pages); those IDT demoted add them to the decision that demoted them.

IDT's monitor runs with IDT's age rule, 1,024-sample histories and splits at a region's
middle (`age_rule=idt`, `history_bits=1024`, `split_at=middle`, passed to
`idt-regions`; `age_rule=damon`, `history_bits=64` and `split_at=between` restore
DAMON's age rule, the earlier length and the earlier cut). On plain DAMON
(`idt-damon`, DAMON's age rule, no history) no sample is seen, and ARP runs once per
aggregation on nr_accesses > 0 instead.

Every **aggregation interval** (1 s), in this order:

1. **PRP accuracy**: a PRP promotion made before this aggregation began counts as a hit
   if a region overlapping it was seen accessed in this aggregation, else a miss.
2. **Demotion**, for every node with a lower node, top of the path first: on when free
   <= demote_wmark (10%), aggressive when free < critical_wmark (1%, strict: the backup
   slide "Aggressive Demotion"). Normal: eligible regions have nr_accesses <= min of
   the node's regions and age >= age_thres. Aggressive (`aggressive=paper`, the
   slide): nr_accesses < (min + max) / 2 (strict) and age >= age_thres;
   `aggressive=public` (the earlier rule here): nr_accesses <= (min + max) // 2, age
   ignored (the public code's `__idt_demote`). The slide writes age > age_thres
   (`age_cmp=gt`); as age_thres is itself one of the eligible ages (q2, q3 or max),
   the strict test demotes nothing whenever those ages are equal, which is the usual
   state of idle regions (they age in lockstep: on `gups:hotset` every pass of the
   first minutes), so `age_cmp=ge`, the public code's test (`r->age <
   idt_age_thres` skips a region, mm/damon/idt.c `__idt_demote`), is the default: q2
   demotes the older half, max the oldest. The agent sees (min, q1, q2, q3, max) of
   the ages of the regions at or below the access threshold and picks age_thres = q2,
   q3 or max. Chosen regions are demoted whole, coldest then oldest first, to the
   first node down the path with free >= 1% after the move. An aggressive node that demoted nothing in the pass
   demotes **every** one of its regions, in address order, as far as the nodes below
   have room (`fallback=all`, the default: idt.c `idt_demote`, "Try demote all
   regions"; the code sums demoted pages by each region's node after the move, so its
   test never sees the demoting node's own pages and the fallback follows every
   aggressive pass: tierlab follows the intent, a pass that demoted nothing).
   `fallback=bounded` demotes the coldest regions regardless of age only until free is
   back at demote_wmark.
3. **Rewards**: before a node's new decision, its previous one gets (`reward=paper`,
   the slides' r(t) = log(demoted_pages(t) / slow_hit(t))) ln((demoted + 1) /
   (slow_hit + 1)), the +1s guarding log 0; or (`reward=public`) ln((demoted + 1) /
   (promoted + 1)) - 1, promoted = ARP-promoted pages. Either way each decision is
   credited with its own consequences only: the pages it demoted, and the slow hits and
   promotions of exactly those pages until the node's next decision (pages carry the
   demoting node and decision). `gamma` is the agent's discount (0.9; the paper reports
   gamma > 0 above gamma = 0).
4. **Misplaced regions** (`misplaced=on`, the earlier rule; off by default): regions on
   a lower node, accessed in the aggregation, that IDT did not demote (allocated
   there, or demoted by kswapd) go to the highest node with room. The public code has
   no such pass: its `idt_correct_region` runs only from ARP, once the top node took
   the region, and ARP covers every region off the top node (`arp=all`). With ARP on
   every region, this pass, run at the aggregation right after a demotion, took the
   top node's freed room before ARP could bring back the regions seen accessed:
   redis-ycsb-uniform (tests/data/traces, copies=8, 30 MiB DRAM nodes) ran at 0.60x
   `autonuma` with it and 1.08x without; `gups:dynamic` at 1/64, 3.21 M against 3.33 M
   updates/s.

Moved regions get age and nr_accesses reset (the monitor's `reset_after_move`).

Assumptions (the paper and the public code are silent): a region's node is the node of its
middle page (IDT's monitor keeps regions single-node; plain DAMON may not, and then the
whole region moves); which pages IDT demoted, and in which decision, is kept as two
bytes per page, so ARP and the rewards survive merges and splits; with plain DAMON (no
history) PRP uses the address gap alone.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...engine.memory import UNALLOC
from ...errors import TierlabError
from ...monitors.base import MONITORS
from ...monitors.idt_regions import HISTORY_RULES, history_distance
from ...params import parse_choice, parse_flag, parse_fraction, parse_int, parse_number
from ...units import parse_size
from ..base import POLICIES, Policy
from .agent import ACTIONS, PPOAgent, REWARDS, age_thres_for, reward, reward_paper, state_of
from ...jit import kernel
from ...engine.pagemap import fill_ranges


PRP_RULES = ("public", "sum")
#: each PRP rule's threshold, on its own distance's scale: the public code's
#: `idt_prp_min_dist` (5), and tierlab's choice on the [0, 2] scale of `sum`
PRP_THRES = {"public": 5.0, "sum": 0.25}
#: PRP's address unit is the window / PRP_UNITS (the public code: 10 MB units,
#: candidates up to 100 of them, about 1 GB)
PRP_UNITS = 100

#: IDT's region monitor as the public code runs it (docs/idt.md): the policy's
#: `history`, `history_bits`, `age_rule` and `split_at` default to these
REGION_MONITOR_DEFAULTS = dict(history="sample", history_bits=1024, age_rule="idt",
                               split_at="middle")

#: the agent pre-trained by scripts/pretrain_idt.py on GUPS uniform / hot set / moving
SHIPPED_WEIGHTS = Path(__file__).resolve().parents[2] / "data" / "idt" / "ppo_gups.npz"


@POLICIES.register("idt")
class IDT(Policy):
    """IDT (HPDC'24): region monitor with statistical merge/split, PPO-tuned demotion
    age threshold, ARP and PRP promotion."""

    #: the ablations differ only in these (idt-static-*, idt-damon, idt-noprp, idt-norl)
    fixed_action: int | None = None  #: None: the agent decides
    #: what each `--explain` line holds: per node its free share, whether aggressive,
    #: the access threshold, the agent's state, action, age_thres, eligible regions,
    #: pages and regions demoted, and the reward of its previous decision with its
    #: parts; then the regions ARP and PRP promoted since the last line
    explain_fields = ("t", "nodes", "arp_promoted", "prp_promoted", "prp_thres")
    internal_params = ("explain",)  #: set by `--explain`, not a user's key
    default_monitor = "idt-regions"
    #: a callable returning the object that decides (act / give_reward / pending /
    #: updates, as PPOAgent); None: IDT's own PPO agent
    agent_factory = None
    default_prp = "on"
    default_age_thres = None

    def __init__(self, monitor=None, demote_wmark="10%", critical_wmark="1%",
                 accept_free="1%", age_thres=None, prp=None, prp_window="1GiB",
                 prp_thres=None, prp_rule="public", aggressive="paper", reward="paper",
                 gamma=0.9, age_cmp="ge", sample="10ms", aggr="1s", history=None,
                 history_bits=None, age_rule=None, split_at=None, arp="all",
                 fallback="all", misplaced="off",
                 weights="shipped", learn="on", explore=0.05, seed=0, explain=None):
        prp = self.default_prp if prp is None else prp
        age_thres = self.default_age_thres if age_thres is None else age_thres
        super().__init__(monitor=monitor, demote_wmark=demote_wmark,
                         critical_wmark=critical_wmark, accept_free=accept_free,
                         age_thres=age_thres, prp=prp, prp_window=prp_window,
                         prp_thres=prp_thres, prp_rule=prp_rule, aggressive=aggressive,
                         reward=reward, gamma=gamma, age_cmp=age_cmp, sample=sample,
                         aggr=aggr, history=history, history_bits=history_bits,
                         age_rule=age_rule, split_at=split_at, arp=arp, fallback=fallback,
                         misplaced=misplaced,
                         weights=weights, learn=learn, explore=explore, seed=seed)
        self.monitor_name = monitor or self.default_monitor
        self.demote_wmark = parse_fraction(demote_wmark, "idt demote_wmark", hi_open=True)
        self.critical_wmark = parse_fraction(critical_wmark, "idt critical_wmark", hi_open=True)
        self.accept_free = parse_fraction(accept_free, "idt accept_free", hi_open=True)
        if self.critical_wmark > self.demote_wmark:
            raise TierlabError(f"idt: critical_wmark {critical_wmark} above demote_wmark "
                               f"{demote_wmark}")
        self.fixed_age_thres = None if age_thres in (None, "") else \
            parse_int(age_thres, "idt age_thres (aggregations)", 0, 2**31)
        self.use_prp = parse_flag(prp, "idt prp")
        self.prp_window_bytes = parse_size(prp_window, "idt prp_window")
        self.prp_rule = parse_choice(prp_rule, "idt prp_rule", PRP_RULES)
        if prp_thres in (None, ""):
            prp_thres = PRP_THRES[self.prp_rule]
        self.prp_thres0 = parse_number(prp_thres, "idt prp_thres", lo=0.0,
                                       hi=2.0 if self.prp_rule == "sum" else None)
        self.arp_all = parse_choice(arp, "idt arp", ("all", "demoted")) == "all"
        self.fallback = parse_choice(fallback, "idt fallback", ("all", "bounded"))
        self.misplaced_pass = parse_choice(misplaced, "idt misplaced", ("off", "on")) == "on"
        self.aggressive = parse_choice(aggressive, "idt aggressive", ("paper", "public"))
        self.reward_rule = parse_choice(reward, "idt reward", REWARDS)
        self.gamma = parse_number(gamma, "idt gamma", lo=0.0, hi=1.0)
        self.age_cmp = parse_choice(age_cmp, "idt age_cmp", ("ge", "gt"))
        self.sample, self.aggr = sample, aggr
        given = {k: v for k, v in dict(history=history, history_bits=history_bits,
                                       age_rule=age_rule, split_at=split_at).items()
                 if v is not None}
        if given and self.monitor_name != "idt-regions":
            raise TierlabError(f"bad {getattr(self, 'registered_name', 'idt')} "
                               f"{', '.join(given)}: a parameter of IDT's region monitor, and "
                               f"this policy runs on {self.monitor_name}")
        mp = {**REGION_MONITOR_DEFAULTS, **given}
        self.params.update(mp)  # the record shows the values the monitor runs with
        self.history = parse_choice(mp.pop("history"), "idt history", HISTORY_RULES)
        self.monitor_params = mp
        self.weights = None if self.agent_factory is not None or weights in (None, "", "none") \
            else SHIPPED_WEIGHTS if weights == "shipped" else Path(weights)
        if self.weights is not None and not self.weights.is_file():
            raise TierlabError(f"bad idt weights {weights!r}: no file {self.weights} (use "
                               "weights=none to start untrained, or run "
                               "scripts/pretrain_idt.py)")
        self.learn = parse_flag(learn, "idt learn")
        self.explore = parse_number(explore, "idt explore", lo=0.0, hi=1.0)
        self.seed = parse_int(seed, "idt seed", 0)
        self.explain = explain
        self.log: list[dict] = []
        self._make_monitor(None)  # its parameters are checked now, not at attach

    # -- setup -------------------------------------------------------------------
    def _make_monitor(self, sim):
        name = self.monitor_name
        if name == "idt-regions" and getattr(sim, "real", False) and \
                not getattr(sim.kernel, "idle_page_tracking", False):
            # on Linux, IDT's own sampling needs per-page accessed bits from user space
            # (idle page tracking, linux/idle_sampler.py); without it the Linux backend
            # runs IDT's policy on the kernel's DAMON with IDT's intervals, and says so.
            sim.note("idt: IDT's region monitor needs per-page accessed bits from idle "
                     "page tracking (/sys/kernel/mm/page_idle/bitmap, writable: "
                     "CONFIG_IDLE_PAGE_TRACKING and root), not available here; using the "
                     "kernel's DAMON with IDT's intervals (10 ms / 1 s / 1000-10000 "
                     "regions), as idt-damon")
            name = "damon"
        if name == "damon":
            # IDT's intervals and region limits on the plain DAMON monitor (idt-damon)
            return MONITORS.create("damon", sample=self.sample, aggr=self.aggr,
                                   min_nr_regions=1000, max_nr_regions=10000,
                                   name="idt-damon")
        if name == "idt-regions":
            return MONITORS.create("idt-regions", sample=self.sample, aggr=self.aggr,
                                   history=self.history, **self.monitor_params)
        return MONITORS.create(name)

    def attach(self, sim):
        super().attach(sim)
        self.monitor = self._make_monitor(sim)
        self.monitor.attach(sim)
        self.monitor.subscribe(self._on_aggregation)
        self.arp_per_sample = hasattr(self.monitor, "subscribe_sample")
        if self.arp_per_sample:
            self.monitor.subscribe_sample(self._on_sample)
        if self.agent_factory is not None:  # another agent decides (tierlab.gym)
            self.agent = self.agent_factory()
        else:
            self.agent = PPOAgent(explore=self.explore, learn=self.learn, seed=self.seed,
                                  gamma=self.gamma)
        if self.weights is not None:
            self.agent.load(self.weights)
        mem = sim.mem
        self.path = list(sim.machine.demotion)
        self.top = self.path[0]
        #: per page: the node that demoted it + 1 (0: IDT did not), and that node's
        #: decision number (mod 256) that did
        self.demoted_by = np.zeros(mem.npages, dtype=np.uint8)
        self.demoted_in = np.zeros(mem.npages, dtype=np.uint8)
        self.prp_thres = self.prp_thres0
        self.prp_window = max(int(sim.scaled_bytes(self.prp_window_bytes)) // 4096, 1)
        self.prp_unit = max(self.prp_window // PRP_UNITS, 1)
        #: each node's place on the demotion path (0 = top); unallocated ranks as top
        self.rank = np.zeros(256, dtype=np.int64)
        self.rank[self.path] = np.arange(len(self.path))
        self._decision = {n: 0 for n in self.path}  # node -> its decision number
        self._cons = {}  # (node, decision mod 256) -> [demoted, slow_hit, promoted]
        self._prp_events = np.zeros((0, 3))  # start, end, time promoted
        self._arp_log, self._prp_log = [], []
        self.counts = dict(demoted=0, arp=0, prp=0, prp_hits=0, prp_resolved=0,
                           misplaced=0, decisions=0, fallback=0, slow_hit=0)
        self.actions = np.zeros(len(ACTIONS), dtype=np.int64)

    # -- helpers -------------------------------------------------------------------
    def _free_frac(self, node: int) -> float:
        mem = self.sim.mem
        return float(mem.free[node]) / max(float(mem.capacity[node]), 1.0)

    def _room(self, node: int) -> int:
        """Pages `node` can take and keep free >= accept_free."""
        mem = self.sim.mem
        return int(mem.free[node] - self.accept_free * mem.capacity[node])

    def _move(self, idx, regs, dst: int, reason: str):
        """Migrate regions idx whole (the leading ones that fit, in the given order) to
        dst; returns (pages moved, regions moved)."""
        idx = np.asarray(idx, dtype=np.int64)
        sizes = regs.end[idx] - regs.start[idx]
        idx = idx[np.cumsum(sizes) <= self._room(dst)]
        if idx.size == 0:
            return 0, idx
        moved = self.sim.migrate_ranges(regs.start[idx], regs.end[idx], dst, reason=reason)
        self._reset(idx)
        return moved, idx

    def _reset(self, idx) -> None:
        mon = self.monitor
        if hasattr(mon, "reset_after_move"):
            mon.reset_after_move(idx)
        else:
            mon.reset_age(idx)

    def _history(self, regs):
        return getattr(regs, "history", None)

    def _consequence(self, by, dec, k: int, amount) -> None:
        """Add `amount` (pages) to part k (0 demoted, 1 slow_hit, 2 promoted) of the
        decisions (node by - 1, number dec) still awaiting their reward: one sum per
        awaiting decision (a few) by a count over the keys, not a step per region."""
        if not self._cons:
            return
        key = (np.asarray(by, dtype=np.int64) - 1) * 256 + np.asarray(dec, dtype=np.int64)
        x = np.asarray(amount, dtype=np.int64)
        ok = key >= 0  # by = 0: no decision (a PRP already cleared the pages)
        if not ok.all():
            key, x = key[ok], x[ok]
        if key.shape[0] == 0:
            return
        # page counts: float64 sums are exact below 2^53
        sums = np.bincount(key, weights=x)
        for (n, d), c in self._cons.items():
            kk = n * 256 + d
            if kk < sums.shape[0]:
                c[k] += int(sums[kk])

    # -- every sampling interval (IDT's monitor) -----------------------------------
    def _on_sample(self, mon, now: float, acc) -> None:
        regs = mon.regions
        keys = [n * 256 + d for n, d in self._cons]
        j, pages, sums, nfit = slow_hits(np.asarray(acc, dtype=bool), regs.start, regs.end,
                                         self.sim.mem.node, self.top, self.demoted_by,
                                         self.demoted_in, not self.arp_all, keys,
                                         self._room(self.top))
        if j.size:
            self.counts["slow_hit"] += pages
            for c, x in zip(self._cons.values(), sums.tolist()):
                c[1] += x
            self._arp(j[:nfit], regs)

    # -- every aggregation -------------------------------------------------------
    def _on_aggregation(self, mon, now: float) -> None:
        regs = mon.regions
        if len(regs) == 0:
            return
        mem = self.sim.mem
        mid = (regs.start + regs.end - 1) // 2
        node = mem.node[mid].astype(np.int64)
        nr = np.asarray(regs.nr_accesses, dtype=np.int64)
        age = np.asarray(regs.age, dtype=np.int64)
        entry = {"t": float(now), "nodes": {}} if self.explain is not None else None
        self._resolve_prp(regs, nr, now - mon.aggr_interval)
        if not self.arp_per_sample:  # plain DAMON: slow hits seen per aggregation
            lower = (node != self.top) & (node != UNALLOC) & (nr > 0)
            j = np.flatnonzero(lower)
            pages = (regs.end[j] - regs.start[j]) * nr[j]
            self.counts["slow_hit"] += int(pages.sum())
            self._consequence(self.demoted_by[mid[j]], self.demoted_in[mid[j]], 1, pages)
        demoted = [self._demote_node(n, regs, node, nr, age, entry) for n in self.path[:-1]]
        node = mem.node[mid].astype(np.int64)  # after demotion
        # IDT zeroes nr_accesses of a migrated region: one demoted in this pass has not
        # been seen accessed on the lower node yet, so ARP must not promote it back on
        # the accesses it had on the upper node
        nr = nr.copy()
        nr[np.concatenate(demoted)] = 0
        lower = (node != self.top) & (node != UNALLOC) & (nr > 0)
        cand = np.flatnonzero(lower)
        by = self.demoted_by[mid[cand]]
        if not self.arp_per_sample:
            arp = cand if self.arp_all else cand[by > 0]
            self._arp(arp[np.argsort(-nr[arp], kind="stable")], regs, node)
            node = mem.node[mid].astype(np.int64)
        if self.misplaced_pass:
            mis = cand[(by == 0) & (node[cand] != self.top)]
            self._misplaced(mis[np.argsort(-nr[mis], kind="stable")], regs, node)
        if entry is not None:
            entry["arp_promoted"] = self._arp_log[:50]
            entry["prp_promoted"] = self._prp_log[:50]
            entry["prp_thres"] = self.prp_thres
            self.log.append(entry)
            if callable(self.explain):
                self.explain(entry)
        self._arp_log, self._prp_log = [], []

    def _reward(self, c) -> float:
        demoted, slow_hit, promoted = c
        return reward(demoted, promoted) if self.reward_rule == "public" else \
            reward_paper(demoted, slow_hit)

    def _demote_node(self, n, regs, node, nr, age, entry) -> np.ndarray:
        """One demotion pass over node n (the module docstring, 2.); returns the
        regions demoted."""
        mem = self.sim.mem
        free = self._free_frac(n)
        on = free <= self.demote_wmark
        aggressive = free < self.critical_wmark
        mine = np.flatnonzero((node == n) & (node != UNALLOC))
        key = (n, self._decision[n] % 256)
        if n in self.agent.pending:
            c = self._cons.pop(key, [0, 0, 0])
            r = self._reward(c)
            self.agent.give_reward(n, r, self._state(mine, nr, age)[0])
            if entry is not None:
                entry["nodes"].setdefault(n, {}).update(
                    reward=r, reward_parts=dict(zip(("demoted", "slow_hit", "promoted"),
                                                    (int(x) for x in c))))
        self._cons.pop(key, None)
        if not on or mine.size == 0:
            return np.zeros(0, dtype=np.int64)
        self._decision[n] += 1
        self._cons[(n, self._decision[n] % 256)] = [0, 0, 0]
        lo, hi = int(nr[mine].min()), int(nr[mine].max())
        if not aggressive:
            thres, strict = lo, False
        elif self.aggressive == "paper":
            thres, strict = (lo + hi) / 2, True
        else:
            thres, strict = (lo + hi) // 2, False
        state, elig = self._state(mine, nr, age, thres, strict)
        action = self.fixed_action
        if self.fixed_age_thres is not None:
            age_thres = self.fixed_age_thres
        else:
            if action is None:
                action = self.agent.act(n, state)
            age_thres = age_thres_for(action, state)
            self.actions[action] += 1
        self.counts["decisions"] += 1
        if aggressive and self.aggressive == "public":
            pick = elig
        elif self.age_cmp == "gt":
            pick = elig[age[elig] > age_thres]
        else:
            pick = elig[age[elig] >= age_thres]
        order = np.lexsort((-age[pick], nr[pick]))  # coldest, then oldest, first
        moved, done = self._demote(pick[order], regs, n)
        if aggressive and moved == 0:
            if self.fallback == "all":  # every region of the node, in address order
                rest = mine
            else:  # the coldest, until free is back at demote_wmark
                need = int(self.demote_wmark * mem.capacity[n] - mem.free[n])
                rest = mine[np.lexsort((-age[mine], nr[mine]))]
                sizes = (regs.end - regs.start)[rest]
                rest = rest[np.cumsum(sizes) - sizes < max(need, 1)]
            moved, done = self._demote(rest, regs, n)
            self.counts["fallback"] += 1
        if entry is not None:
            entry["nodes"].setdefault(n, {}).update(
                free=free, aggressive=bool(aggressive), access_thres=thres,
                state=[float(x) for x in state],
                action=None if action is None else ACTIONS[action],
                age_thres=int(age_thres), eligible=int(elig.size), demoted_pages=moved,
                demoted_regions=[[int(regs.start[j]), int(regs.end[j])]
                                 for j in done[:50]])
        return done

    def _state(self, mine, nr, age, thres=None, strict=False):
        if mine.size == 0:
            return state_of([]), mine
        if thres is None:
            thres = int(nr[mine].min())
        elig = mine[nr[mine] < thres] if strict else mine[nr[mine] <= thres]
        return state_of(age[elig]), elig

    def _demote(self, idx, regs, n):
        """Demote regions idx of node n, each to the first node down the path that keeps
        1% free; returns (pages moved, regions moved)."""
        moved_total, all_done = 0, []
        for dst in self.path[self.path.index(n) + 1:]:
            if idx.size == 0:
                break
            moved, done = self._move(idx, regs, dst, "idt-demote")
            if done.size:
                s, e = regs.start[done], regs.end[done]
                fill_ranges(self.demoted_by, s, e, n + 1)
                fill_ranges(self.demoted_in, s, e, self._decision[n] % 256)
                all_done.append(done)
                idx = idx[~np.isin(idx, done)]
            moved_total += moved
        c = self._cons.get((n, self._decision[n] % 256))
        if c is not None:
            c[0] += moved_total
        self.counts["demoted"] += moved_total
        done = np.concatenate(all_done) if all_done else np.zeros(0, dtype=np.int64)
        return moved_total, done

    def _arp(self, arp, regs, node=None) -> None:
        """ARP: promote regions `arp` (off the top node, now seen accessed) whole to the
        top node while it keeps free >= accept_free, charging each that IDT demoted to
        the decision that demoted it; PRP after each. It stops at the first region
        larger than the top node's room, and the room only shrinks meanwhile (its moves
        and PRP's go to the top node), so the candidates from the first one larger than
        the room now are cut first (thousands a sample at bench_scale, most past it).
        `node`: each region's node (updated here), read from the page map if not
        given."""
        arp = np.asarray(arp, dtype=np.int64)
        over = np.flatnonzero(regs.end[arp] - regs.start[arp] > self._room(self.top))
        if over.size:
            arp = arp[:over[0]]
        if arp.size == 0:
            return
        if node is None:
            node = self.sim.mem.node[(regs.start + regs.end - 1) // 2].astype(np.int64)
        for j in arp.tolist():
            size = int(regs.end[j] - regs.start[j])
            if self._room(self.top) < size:
                break
            m = int((regs.start[j] + regs.end[j] - 1) // 2)
            by, dec = int(self.demoted_by[m]), int(self.demoted_in[m])
            got, _ = self._move([j], regs, self.top, "idt-arp")
            if got == 0:
                continue
            self.demoted_by[regs.start[j]:regs.end[j]] = 0
            self._consequence([by], [dec], 2, [got])
            self.counts["arp"] += 1
            self._arp_log.append([int(regs.start[j]), int(regs.end[j])])
            node[j] = self.top
            if self.use_prp:
                self._prp(j, regs, node)

    def _misplaced(self, mis, regs, node) -> None:
        """Misplaced regions, most accessed first, each to the highest node above it
        with room (stops once no node above the slow tiers has room for the smallest)."""
        room = {d: self._room(d) for d in self.path}  # kept up to date below
        sizes = regs.end[mis] - regs.start[mis]
        smallest = int(sizes.min()) if sizes.size else 0
        best = max(room[d] for d in self.path[:-1])  # every node above any region
        for j, size in zip(mis.tolist(), sizes.tolist()):
            if best < smallest:
                break
            if size > best:
                continue  # no node above has room for it
            above = self.path[: self.path.index(int(node[j]))]
            dst = next((d for d in above if room[d] >= size), None)
            if dst is None:
                continue
            got = self._move([j], regs, dst, "idt-misplaced")[0]
            if got:
                self.counts["misplaced"] += 1
                room[dst] = self._room(dst)
                room[int(node[j])] = self._room(int(node[j]))
                best = max(room[d] for d in self.path[:-1])

    def _prp_near(self, j, regs) -> np.ndarray:
        """PRP's candidates for region j: every other region less than PRP_UNITS + 1
        address units away (the public code's `dist > 100` test), whatever its node."""
        u = self.prp_unit
        reach = (PRP_UNITS + 1) * u
        lo = np.searchsorted(regs.end, regs.start[j] - reach, side="right")
        hi = np.searchsorted(regs.start, regs.end[j] + reach, side="left")
        near = np.arange(lo, hi)
        return near[near != j]

    def prp_distance(self, j, near, regs) -> np.ndarray:
        """PRP's distance of regions `near` to region j, on the scale of the rule's
        threshold (the module docstring): `public`, the code's variance-weighted squared
        deviations (integers); `sum`, address gap / prp_window + Hamming / history bits
        in [0, 2]. Without a history (plain DAMON) the history term is zero."""
        gap = np.maximum(np.maximum(regs.start[near] - regs.end[j],
                                    regs.start[j] - regs.end[near]), 0)
        hist = self._history(regs)
        a = history_distance(hist[near], hist[j]) if hist is not None else \
            np.zeros(near.shape[0], dtype=np.int64)
        if self.prp_rule == "sum":
            d = np.minimum(gap / self.prp_window, 1.0)
            if hist is not None:
                d = d + a / getattr(self.monitor, "history_bits", 64)
            return d
        v = gap // self.prp_unit
        n = max(near.shape[0], 1)
        ma, mv = a.sum() // n + 1, v.sum() // n + 1
        sa, sv = ((a - ma) ** 2).sum() // n + 1, ((v - mv) ** 2).sum() // n + 1
        return sv * (a - ma) ** 2 + sa * (v - mv) ** 2

    def _prp(self, j, regs, node) -> None:
        """PRP: the nearest region to j (k = 1) among all within the window; nothing if
        it sits at or above j's node, else promoted if its distance passes the rule's
        threshold (`public`: <= the running threshold, which it then becomes)."""
        near = self._prp_near(j, regs)
        if near.size == 0:
            return
        d = self.prp_distance(j, near, regs)
        k = int(np.argmin(d))
        c = near[k]
        if self.rank[int(node[c])] <= self.rank[int(node[j])]:
            return  # "don't promote if searched region is in upper tier"
        if self.prp_rule == "public":
            if d[k] > self.prp_thres:
                return
            self.prp_thres = float(d[k])
        elif d[k] >= self.prp_thres:
            return
        if self._room(self.top) < regs.end[c] - regs.start[c]:
            return
        if self._move([c], regs, self.top, "idt-prp")[0]:
            node[c] = self.top
            self.demoted_by[regs.start[c]:regs.end[c]] = 0
            self.counts["prp"] += 1
            self._prp_log.append([int(regs.start[c]), int(regs.end[c])])
            ev = np.array([[regs.start[c], regs.end[c], self.sim.now]])
            self._prp_events = np.concatenate((self._prp_events, ev))

    def _resolve_prp(self, regs, nr, began: float) -> None:
        """PRP accuracy: a PRP promotion made before this aggregation `began` is a hit if
        a region overlapping it was seen accessed in this aggregation, else a miss."""
        ev = self._prp_events
        due = ev[:, 2] <= began + 1e-9
        if not due.any():
            return
        acc = np.concatenate(([0], np.cumsum(nr > 0)))
        lo = np.searchsorted(regs.end, ev[due, 0], side="right")
        hi = np.searchsorted(regs.start, ev[due, 1], side="left")
        hit = acc[hi] - acc[lo] > 0
        self.counts["prp_hits"] += int(hit.sum())
        self.counts["prp_resolved"] += int(due.sum())
        self._prp_events = ev[~due]

    def stats(self) -> dict:
        c = dict(self.counts)
        c["prp_unresolved"] = int(self._prp_events.shape[0])
        c["prp_accuracy"] = (c["prp_hits"] / c["prp_resolved"]) if c["prp_resolved"] \
            else None
        c["actions"] = {a: int(k) for a, k in zip(ACTIONS, self.actions)}
        c["agent_updates"] = int(self.agent.updates)
        if hasattr(self.monitor, "stats"):
            c["monitor"] = self.monitor.stats()
        return c


def _variant(name: str, doc: str, **attrs):
    cls = type(name.replace("-", "_"), (IDT,), {"__doc__": doc, **attrs})
    return POLICIES.register(name)(cls)


_variant("idt-static-q2", "IDT with age_thres fixed to q2 of the eligible ages (no RL).",
         fixed_action=0)
_variant("idt-static-q3", "IDT with age_thres fixed to q3 of the eligible ages (no RL).",
         fixed_action=1)
_variant("idt-static-max", "IDT with age_thres fixed to the max eligible age (no RL).",
         fixed_action=2)
_variant("idt-damon", "IDT's policy on the plain DAMON monitor (IDT's intervals).",
         default_monitor="damon")


_variant("idt-noprp", "IDT without PRP (ARP only).", default_prp="off")
_variant("idt-norl", "IDT with age_thres fixed at its initial 10 (no RL).",
         default_age_thres=10)


# -- compiled kernels (tierlab.jit) --------------------------------------------
def _slow_hits_numpy(acc, start, end, node_map, top, by, dec, only_demoted, keys, room):
    mid = (start + end - 1) // 2
    node = node_map[mid]
    j = np.flatnonzero(acc & (node != top) & (node != 255) &
                       ((by[mid] > 0) | (not only_demoted)))
    size = end[j] - start[j]
    m = mid[j]
    key = np.where(by[m] > 0, (by[m].astype(np.int64) - 1) * 256 + dec[m], -1)
    sums = np.array([int(size[key == k].sum()) for k in keys], dtype=np.int64)
    over = np.flatnonzero(size > room)
    return j, int(size.sum()), sums, int(over[0]) if over.size else j.size


@kernel(numpy=_slow_hits_numpy)
def _slow_hits(acc, start, end, node_map, top, by, dec, only_demoted, keys, room):
    # IDT._on_sample: the regions accessed whose middle page is allocated off `top`
    # (and, with only_demoted, was demoted by IDT: by > 0); their pages in all; the
    # pages of those charged to each awaiting decision keys[k] = (by - 1) * 256 + dec
    # of the middle page; and how many lead before the first larger than `room`
    r = acc.shape[0]
    out = np.empty(r, np.int64)
    sums = np.zeros(keys.shape[0], np.int64)
    n = 0
    total = 0
    nfit = -1
    for i in range(r):
        if acc[i]:
            m = (start[i] + end[i] - 1) // 2
            c = node_map[m]
            if c != top and c != 255 and (by[m] > 0 or not only_demoted):
                size = end[i] - start[i]
                if nfit < 0 and size > room:
                    nfit = n
                out[n] = i
                n += 1
                total += size
                if by[m] > 0:
                    key = (np.int64(by[m]) - 1) * 256 + np.int64(dec[m])
                    for k in range(keys.shape[0]):
                        if keys[k] == key:
                            sums[k] += size
    return out[:n], total, sums, n if nfit < 0 else nfit


def slow_hits(acc, start, end, node_map, top: int, by, dec, only_demoted: bool, keys,
              room: int):
    """IDT's slow-tier hits of one sampling interval in one pass: (j, pages, sums,
    nfit) for the regions j accessed (`acc`) whose middle page m = (start + end - 1)
    // 2 is allocated off `top` (with `only_demoted`, only those with by[m] > 0: IDT
    demoted them); `pages`, their pages in all; sums[k], the pages of those whose
    by[m], dec[m] name the awaiting decision keys[k] = (by - 1) * 256 + dec; nfit, how
    many of j come before the first larger than `room` pages."""
    j, total, sums, nfit = _slow_hits(
        acc, start, end, node_map, np.uint8(top), by, dec, bool(only_demoted),
        np.asarray(keys, dtype=np.int64), np.int64(room))
    return j, int(total), sums, int(nfit)
