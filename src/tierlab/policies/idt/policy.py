"""`idt` and its ablations: IDT's demotion, ARP/PRP promotion and misplaced-region
promotion (HPDC'24; ALGORITHMS.md "IDT"), on IDT's region monitor or plain DAMON.

Every aggregation interval (1 s), in this order:

1. **Rewards.** Each node's previous decision gets ln((demoted + 1) / (promoted + 1)) - 1,
   demoted = pages IDT demoted from it since, promoted = ARP promotions of regions it
   had demoted (`agent.reward`).
2. **Demotion**, for every node with a lower node, top of the path first: on when free
   <= demote_wmark (10%), aggressive when free <= critical_wmark (1%). Access threshold
   = min nr_accesses of the node's regions, (min + max) / 2 when aggressive; eligible
   regions have nr_accesses <= threshold; the agent sees (min, q1, q2, q3, max) of
   their ages and picks age_thres = q2, q3 or max; regions with age >= age_thres (every
   eligible one when aggressive) are demoted whole, oldest and coldest first, to the
   first node down the path with free >= 1% after the move. An aggressive node that
   demoted nothing demotes its coldest regions regardless of age.
3. **ARP**: a region IDT demoted that is seen accessed (nr_accesses > 0) is promoted
   whole to the top node if it keeps free >= 1%, and charged to the node that demoted
   it; then **PRP**: among regions within `prp_window` (1 GiB) of address on a lower
   node, the nearest by |address gap| / window + Hamming(history) / bits is promoted
   too if its distance is under the threshold, which starts at 5 and tightens to each
   accepted distance (for the whole run, the literal rule; `prp_reset=aggregation`
   starts every aggregation from 5 again, an option the paper does not describe).
4. **Misplaced regions** (on a lower node, accessed, not demoted by IDT: allocated
   there, or demoted by kswapd) go to the highest node with room.

Moved regions get age and nr_accesses reset (the monitor's `reset_after_move`).

Assumptions (the paper and ALGORITHMS.md are silent): a region's node is the node of its
middle page (IDT's monitor keeps regions single-node; plain DAMON may not, and then the
whole region moves); which pages IDT demoted is kept as a byte per page (the node that
demoted it + 1), so ARP survives merges and splits; the demote-all fallback stops once
free is back at demote_wmark; with plain DAMON (no history) PRP uses the address gap
alone; on plain DAMON the history-based distance is absent (the policy does not read
the monitor's measurement-only history).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...engine.memory import UNALLOC
from ...errors import TierlabError
from ...monitors.base import MONITORS
from ...monitors.damon import hamming
from ...units import parse_size
from ..base import POLICIES, Policy
from .agent import ACTIONS, PPOAgent, age_thres_for, reward, state_of


#: the agent pre-trained by scripts/pretrain_idt.py on GUPS uniform / hot set / moving
SHIPPED_WEIGHTS = Path(__file__).resolve().parents[2] / "data" / "idt" / "ppo_gups.npz"


def range_pages(starts, ends) -> np.ndarray:
    """Every page of the ranges [starts[i], ends[i]), concatenated (vectorised)."""
    starts = np.asarray(starts, dtype=np.int64)
    lens = np.asarray(ends, dtype=np.int64) - starts
    if lens.sum() <= 0:
        return np.zeros(0, dtype=np.int64)
    offs = np.repeat(starts - np.concatenate(([0], np.cumsum(lens)[:-1])), lens)
    return np.arange(int(lens.sum()), dtype=np.int64) + offs


def _fraction(v, what: str) -> float:
    s = str(v).strip()
    try:
        x = float(s[:-1]) / 100 if s.endswith("%") else float(s)
    except ValueError:
        raise TierlabError(f"bad idt {what} {v!r}: expected e.g. 10% or 0.1") from None
    if not 0 <= x < 1:
        raise TierlabError(f"bad idt {what} {v!r}: must be in [0, 100%)")
    return x


@POLICIES.register("idt")
class IDT(Policy):
    """IDT (HPDC'24): region monitor with statistical merge/split, PPO-tuned demotion
    age threshold, ARP and PRP promotion."""

    #: the ablations differ only in these (idt-static-*, idt-damon, idt-noprp, idt-norl)
    fixed_action: int | None = None  #: None: the agent decides
    #: what each `--explain` line holds: per node its free share, whether aggressive,
    #: the access threshold, the agent's state, action, age_thres, eligible regions,
    #: pages and regions demoted, and the reward of its previous decision; then the
    #: regions ARP promoted and the PRP threshold
    explain_fields = ("t", "nodes", "arp_promoted", "prp_thres")
    default_monitor = "idt-regions"
    #: a callable returning the object that decides (act / give_reward / pending /
    #: updates, as PPOAgent); None: IDT's own PPO agent
    agent_factory = None
    default_prp = "on"
    default_age_thres = None

    def __init__(self, monitor=None, demote_wmark="10%", critical_wmark="1%",
                 accept_free="1%", age_thres=None, prp=None, prp_window="1GiB",
                 prp_thres=5.0, prp_reset="never", weights="shipped", learn="on",
                 explore=0.05, seed=0, explain=None):
        prp = self.default_prp if prp is None else prp
        age_thres = self.default_age_thres if age_thres is None else age_thres
        super().__init__(monitor=monitor, demote_wmark=demote_wmark,
                         critical_wmark=critical_wmark, accept_free=accept_free,
                         age_thres=age_thres, prp=prp, prp_window=prp_window,
                         prp_thres=prp_thres, prp_reset=prp_reset, weights=weights,
                         learn=learn,
                         explore=explore, seed=seed)
        self.monitor_name = monitor or self.default_monitor
        self.demote_wmark = _fraction(demote_wmark, "demote_wmark")
        self.critical_wmark = _fraction(critical_wmark, "critical_wmark")
        self.accept_free = _fraction(accept_free, "accept_free")
        if self.critical_wmark > self.demote_wmark:
            raise TierlabError(f"idt: critical_wmark {critical_wmark} above demote_wmark "
                               f"{demote_wmark}")
        self.fixed_age_thres = None if age_thres in (None, "") else int(age_thres)
        self.use_prp = str(prp).lower() not in ("0", "off", "no", "false")
        self.prp_window_bytes = parse_size(prp_window, "idt prp_window")
        self.prp_thres0 = float(prp_thres)
        if prp_reset not in ("never", "aggregation"):
            raise TierlabError(f"idt prp_reset {prp_reset!r}: valid: never, aggregation")
        self.prp_reset = prp_reset
        self.weights = weights
        self.learn = str(learn).lower() not in ("0", "off", "no", "false")
        self.explore = float(explore)
        self.seed = int(seed)
        self.explain = explain
        self.log: list[dict] = []

    # -- setup -------------------------------------------------------------------
    def _make_monitor(self, sim):
        name = self.monitor_name
        if name == "idt-regions" and getattr(sim, "real", False) and \
                not getattr(sim.kernel, "idle_page_tracking", False):
            # issue 5: IDT's own sampling needs per-page accessed bits from user space
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
            return MONITORS.create("damon", sample="10ms", aggr="1s",
                                   min_nr_regions=1000, max_nr_regions=10000,
                                   name="idt-damon")
        return MONITORS.create(self.monitor_name)

    def attach(self, sim):
        super().attach(sim)
        self.monitor = self._make_monitor(sim)
        self.monitor.attach(sim)
        self.monitor.subscribe(self._on_aggregation)
        if self.agent_factory is not None:  # another agent decides (tierlab.gym)
            self.agent = self.agent_factory()
        else:
            self.agent = PPOAgent(explore=self.explore, learn=self.learn, seed=self.seed)
        if self.agent_factory is None and self.weights not in (None, "", "none"):
            path = SHIPPED_WEIGHTS if self.weights == "shipped" else Path(self.weights)
            if not path.exists():
                raise TierlabError(f"idt weights {self.weights!r}: no file {path} (use "
                                   "weights=none to start untrained, or run "
                                   "scripts/pretrain_idt.py)")
            self.agent.load(path)
        mem = sim.mem
        self.path = list(sim.machine.demotion)
        self.top = self.path[0]
        self.demoted_by = np.zeros(mem.npages, dtype=np.uint8)
        self.prp_thres = self.prp_thres0
        self.prp_window = max(int(sim.scaled_bytes(self.prp_window_bytes)) // 4096, 1)
        self._since = {n: [0, 0] for n in self.path}  # node -> [demoted, promoted]
        self._prp_events = np.zeros((0, 2), dtype=np.int64)
        self.counts = dict(demoted=0, arp=0, prp=0, prp_hits=0, prp_resolved=0,
                           misplaced=0, decisions=0, fallback=0)
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
        moved = self.sim.migrate(range_pages(regs.start[idx], regs.end[idx]), dst,
                                 reason=reason)
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
        if self.prp_reset == "aggregation":
            self.prp_thres = self.prp_thres0
        self._resolve_prp(regs, nr)
        demoted = [self._demote_node(n, regs, node, nr, age, entry) for n in self.path[:-1]]
        node = mem.node[mid].astype(np.int64)  # after demotion
        # IDT zeroes nr_accesses of a migrated region: one demoted in this pass has not
        # been seen accessed on the lower node yet, so ARP must not promote it back on
        # the accesses it had on the upper node
        nr = nr.copy()
        nr[np.concatenate(demoted)] = 0
        self._promote(regs, node, nr, entry)
        if entry is not None:
            self.log.append(entry)
            if callable(self.explain):
                self.explain(entry)

    def _demote_node(self, n, regs, node, nr, age, entry) -> np.ndarray:
        """One demotion pass over node n (ALGORITHMS.md, IDT "Demotion"); returns the
        regions demoted."""
        mem = self.sim.mem
        free = self._free_frac(n)
        on = free <= self.demote_wmark
        aggressive = free <= self.critical_wmark
        mine = np.flatnonzero((node == n) & (node != UNALLOC))
        dem, pro = self._since[n]
        if n in self.agent.pending:
            self.agent.give_reward(n, reward(dem, pro), self._state(mine, nr, age)[0])
            if entry is not None:
                entry["nodes"].setdefault(n, {})["reward"] = reward(dem, pro)
        self._since[n] = [0, 0]
        if not on or mine.size == 0:
            return np.zeros(0, dtype=np.int64)
        lo, hi = int(nr[mine].min()), int(nr[mine].max())
        thres = (lo + hi) // 2 if aggressive else lo
        state, elig = self._state(mine, nr, age, thres)
        action = self.fixed_action
        if self.fixed_age_thres is not None:
            age_thres = self.fixed_age_thres
        else:
            if action is None:
                action = self.agent.act(n, state)
            age_thres = age_thres_for(action, state)
            self.actions[action] += 1
        self.counts["decisions"] += 1
        pick = elig if aggressive else elig[age[elig] >= age_thres]
        order = np.lexsort((-age[pick], nr[pick]))  # coldest, then oldest, first
        moved, done = self._demote(pick[order], regs, n)
        if aggressive and moved == 0:
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

    def _state(self, mine, nr, age, thres=None):
        if mine.size == 0:
            return state_of([]), mine
        if thres is None:
            thres = int(nr[mine].min())
        elig = mine[nr[mine] <= thres]
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
                self.demoted_by[range_pages(regs.start[done], regs.end[done])] = n + 1
                all_done.append(done)
                idx = idx[~np.isin(idx, done)]
            moved_total += moved
        self._since[n][0] += moved_total
        self.counts["demoted"] += moved_total
        done = np.concatenate(all_done) if all_done else np.zeros(0, dtype=np.int64)
        return moved_total, done

    def _promote(self, regs, node, nr, entry) -> None:
        lower = (node != self.top) & (node != UNALLOC) & (nr > 0)
        cand = np.flatnonzero(lower)
        if cand.size == 0:
            return
        by = self.demoted_by[(regs.start[cand] + regs.end[cand] - 1) // 2]
        arp = cand[by > 0]
        order = np.argsort(-nr[arp], kind="stable")
        arp, by_arp = arp[order], by[by > 0][order]
        promoted = []
        for j, b in zip(arp, by_arp):
            if self._room(self.top) < regs.end[j] - regs.start[j]:
                break
            got, _ = self._move([j], regs, self.top, "idt-arp")
            if got == 0:
                continue
            self.demoted_by[regs.start[j]:regs.end[j]] = 0
            self._since[int(b) - 1][1] += got
            self.counts["arp"] += 1
            promoted.append([int(regs.start[j]), int(regs.end[j])])
            if self.use_prp:
                self._prp(j, regs, node)
        mis = cand[by == 0]
        mis = mis[np.argsort(-nr[mis], kind="stable")]
        room = {d: self._room(d) for d in self.path}  # kept up to date below
        for j in mis:
            size = int(regs.end[j] - regs.start[j])
            above = self.path[: self.path.index(int(node[j]))]
            if max(room[d] for d in above) < size:
                continue
            dst = next(d for d in above if room[d] >= size)
            got = self._move([j], regs, dst, "idt-misplaced")[0]
            if got:
                self.counts["misplaced"] += 1
                room[dst] = self._room(dst)
                room[int(node[j])] = self._room(int(node[j]))
        if entry is not None:
            entry["arp_promoted"] = promoted[:50]
            entry["prp_thres"] = self.prp_thres

    def _prp(self, j, regs, node) -> None:
        """PRP: 1-NN of region j among lower-node regions within the window."""
        w = self.prp_window
        lo = np.searchsorted(regs.end, regs.start[j] - w, side="right")
        hi = np.searchsorted(regs.start, regs.end[j] + w, side="left")
        near = np.arange(lo, hi)
        near = near[(near != j) & (node[near] != self.top) & (node[near] != UNALLOC)]
        near = near[self.sim.mem.node[(regs.start[near] + regs.end[near] - 1) // 2]
                    != self.top]
        if near.size == 0:
            return
        gap = np.maximum(regs.start[near] - regs.end[j], regs.start[j] - regs.end[near])
        d = np.maximum(gap, 0) / w
        hist = self._history(regs)
        if hist is not None:
            bits = getattr(self.monitor, "history_bits", 64)
            d = d + hamming(hist[near], hist[j]) / bits
        k = int(np.argmin(d))
        if d[k] >= self.prp_thres:
            return
        c = near[k]
        if self._room(self.top) < regs.end[c] - regs.start[c]:
            return
        if self._move([c], regs, self.top, "idt-prp")[0]:
            self.prp_thres = float(d[k])
            self.demoted_by[regs.start[c]:regs.end[c]] = 0
            self.counts["prp"] += 1
            ev = np.array([[regs.start[c], regs.end[c]]], dtype=np.int64)
            self._prp_events = np.concatenate((self._prp_events, ev))

    def _resolve_prp(self, regs, nr) -> None:
        """PRP accuracy: a PRP-promoted range counts as a hit once any region overlapping
        it is seen accessed (checked from the next aggregation on)."""
        ev = self._prp_events
        if ev.shape[0] == 0:
            return
        acc = np.concatenate(([0], np.cumsum(nr > 0)))
        lo = np.searchsorted(regs.end, ev[:, 0], side="right")
        hi = np.searchsorted(regs.start, ev[:, 1], side="left")
        hit = acc[hi] - acc[lo] > 0
        self.counts["prp_hits"] += int(hit.sum())
        self.counts["prp_resolved"] += int(hit.sum())
        self._prp_events = ev[~hit]

    def stats(self) -> dict:
        c = dict(self.counts)
        c["prp_unresolved"] = int(self._prp_events.shape[0])
        c["prp_accuracy"] = (c["prp_hits"] / c["prp"]) if c["prp"] else None
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
