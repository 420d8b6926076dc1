"""`alloc-auto`: pick among the four allocation policies of the HPDC'23 poster online
(dram-preferred, dram-always, pm-preferred, pm-always), since no single one wins
everywhere (the poster: Maruf et al., "Allocation Policies Matter for Hybrid Memory
Systems").

At each first touch of n pages (`place`):

1. What each arm would do now: (pages to the fast tier, pages demoted to make room),
   from the nodes' free pages above their high watermark (/proc/zoneinfo); the few pages
   kswapd keeps free below it do not make two arms different.
2. Dominated placements are dropped: one that puts no more of the allocation in the
   fast tier and demotes no fewer pages than another (PM-first while DRAM has room:
   nothing is saved and every access to the new pages is slower; PM-first and
   dram-preferred coincide once DRAM is full), and one that demotes while the
   allocation alone fills the fast tier (a bulk first touch, e.g. a heap loaded at
   once: reclaim would demote the allocation's own earlier pages, paying a stall for
   the same share of it in DRAM).
3. One placement left: it is made, no decision. Otherwise (the fast tier is at its high
   watermark, or nearly, and the allocation is smaller than it) the choice is between
   *spilling* the overflow to the slow tier and *reclaiming* room for it (dram-always:
   direct reclaim in the allocating thread), and a bandit decides. Of arms that place
   alike, the one that starts on a slow node plays: spilling is then pm-preferred,
   which leaves DRAM's last free pages (between its low and high watermarks) alone,
   where dram-preferred would take them and wake kswapd to demote as many, a reclaim by
   another name, and would take DRAM below IDT's 1% critical watermark at every
   allocation (its aggressive passes: YCSB-E under IDT, docs/allocation.md).

The bandit: discounted UCB (D-UCB, Garivier and Moulines, "On upper-confidence bound
policies for switching bandit problems", ALT'11) over the two choices; the discount
lets it follow a workload that changes.

- Pulls: a choice made at a contested allocation places every allocation until the
  pull ends. A pull's intervals end at the first allocation at least `epoch` (1 s)
  after the interval began. A pull that switches choice lasts `hold` (2) intervals
  and is measured over the last; one that repeats the previous choice is measured
  over one. The first interval after a switch is skipped because a placement pays off
  later than it costs: YCSB-D's new records are written in the interval that
  allocates them and read hot in the next, while reclaim stalls the allocating one.
  A spill nobody chose (a bulk first touch larger than DRAM's room) is measured as a
  pull of spill too.
- Reward: the log of the application's throughput (work done per second, `sim.work` /
  `sim.now`: what an operation counter, or instructions retired, reports) over the
  measured interval. Throughput charges everything a choice causes (where the new
  pages' accesses land, reclaim stalls, pages displaced from DRAM).
- Choice: reclaim first (LRU's premise: new pages are hotter than the inactive tail
  reclaim demotes); spill, while never credited, only once reclaim has shown a cost:
  the stall of its direct reclaims, measured around the allocations it places, is at
  least `stall_min` (1%) of its pulls' time. Then the largest mean + c * sqrt(2 ln n /
  N), N and the mean discounted by `gamma` per pull, n the sum over both; ties to
  reclaim.

Observed: throughput, the nodes' free pages and watermarks, and the time the
allocations it places take (their reclaim stalls). No rates of the workload.

Limits (docs/allocation.md): a heap first-touched at once gives one decision, before any
feedback, and the rules above make it dram-preferred, which loses where the newest
pages of the heap are its hottest (YCSB-D: dram-always's reclaim would keep the heap's
end in DRAM; 5% behind under MULTI-CLOCK). A workload whose new pages are colder than
DRAM's coldest and whose reclaim costs no stall keeps reclaiming (the tiering policy
has to move the victims back). Exploring spill costs at least one pull of it, and a
pull's reward carries the state earlier pulls left, which the skipped interval and
the discount only partly absorb.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import TierlabError
from ..params import parse_number
from ..units import parse_duration
from .alloc import ALLOCS, AllocPolicy

ARMS = ("dram-preferred", "dram-always", "pm-preferred", "pm-always")
#: the two choices of a contested allocation (ties go to the first)
CHOICES = ("reclaim", "spill")


@ALLOCS.register("alloc-auto")
class AllocAuto(AllocPolicy):
    """Dominance rules, then a bandit (discounted UCB) between spilling to the slow tier
    (pm-preferred) and reclaiming the fast tier (dram-always), rewarded by
    throughput."""

    #: `tierlab run --explain FILE`: one JSON line per decision and per closed pull
    explain_fields = ("t", "alloc")
    explain = None

    def __init__(self, arms="/".join(ARMS), epoch="1s", hold=2, c=0.05, gamma=0.95,
                 stall_min=0.01):
        names = [a.strip() for a in str(arms).split("/") if a.strip()]
        bad = [a for a in names if a not in ARMS]
        if bad or not names:
            raise TierlabError(f"bad alloc-auto arms {arms!r}: expected names separated "
                               f"by '/' from {', '.join(ARMS)}")
        if len(set(names)) != len(names):
            raise TierlabError(f"bad alloc-auto arms {arms!r}: an arm is listed twice")
        self.names = names
        self.arms = [ALLOCS.create(a) for a in names]
        self.epoch = parse_duration(epoch, "alloc-auto epoch")
        if self.epoch < 0:
            raise TierlabError(f"bad alloc-auto epoch {epoch!r}: must be >= 0")
        self.hold = parse_number(hold, "alloc-auto hold", lo=1, hi=100, integer=True)
        self.c = parse_number(c, "alloc-auto c", lo=0.0)
        self.gamma = parse_number(gamma, "alloc-auto gamma", lo=0.0, hi=1.0, lo_open=True)
        self.stall_min = parse_number(stall_min, "alloc-auto stall_min", lo=0.0, hi=1.0)
        self.sim = None

    def _attach(self, sim) -> None:
        self.sim = sim
        self.n = np.zeros(len(CHOICES))  # discounted credit count per choice
        self.s = np.zeros(len(CHOICES))  # discounted reward sum per choice
        self.pulls = np.zeros(len(self.arms), dtype=np.int64)  # pulls that played each arm
        self.placed = np.zeros(len(self.arms), dtype=np.int64)  # allocations each arm placed
        self.current = None  # the running pull
        self.last = None  # the choice of the previous pull
        self.reclaim_time = 0.0  # length of the closed reclaim pulls
        self.reclaim_stall = 0.0  # application stall in the reclaims they made
        self.history: list = []  # (start, arm, reward) of every closed pull

    # -- what each arm would do --------------------------------------------------------
    def _effect(self, arm: AllocPolicy, n: int) -> tuple[int, int]:
        """(pages of the n to the fast tier, pages demoted to make room) if `arm` placed
        them now, counting the nodes' free pages above their high watermark."""
        sim = self.sim
        mem = sim.mem
        room = np.maximum(mem.free - mem.wmark_high, 0)
        fast = set(sim.machine.fast_nodes())
        left, to_fast, demote = n, 0, 0
        for node in arm.order(sim.machine):
            take = min(left, int(room[node]))
            if arm.always and sim.machine.lower(node) is not None:
                demote += left - take
                take = left
            if node in fast:
                to_fast += take
            left -= take
            if left == 0:
                break
        if left and arm.fallback:  # every preferred node full: anywhere, fast first
            to_fast += left
        return to_fast, demote

    def options(self, n: int) -> dict[str, tuple[int, int]]:
        """The placements left after the dominance rules: choice -> (index of the arm
        making it, one starting on a slow node first, then in `arms` order; pages of
        the n it puts in the fast tier); 'spill' for one without demotion, 'reclaim'
        for one with."""
        eff = [self._effect(a, n) for a in self.arms]
        fast = set(self.sim.machine.fast_nodes())
        fast_cap = sum(int(self.sim.mem.capacity[i]) for i in fast)
        bulk = [d > 0 and n >= fast_cap for _, d in eff]  # would demote its own pages
        keep = {}
        # among arms placing alike, one that starts on a slow node first: it leaves the
        # fast tier's pages below its high watermark alone
        order = sorted(range(len(eff)),
                       key=lambda i: self.arms[i].order(self.sim.machine)[0] in fast)
        for i in order:
            f, d = eff[i]
            if bulk[i] or any(g >= f and e <= d and (g, e) != (f, d)
                              for (g, e), b in zip(eff, bulk) if not b):
                continue
            keep.setdefault("reclaim" if d > 0 else "spill", (i, f))
        return keep or {"reclaim" if eff[0][1] > 0 else "spill": (0, eff[0][0])}

    # -- the bandit ----------------------------------------------------------------------
    def _reward(self, now: float, work: float) -> None:
        """Close the running pull: credit log throughput over its measured part."""
        cur = self.current
        self.current = None
        self.last = cur["choice"]
        if cur["choice"] == "reclaim":
            self.reclaim_time += now - cur["start"]
        if now <= cur["t0"] or work <= cur["w0"]:
            return
        r = math.log((work - cur["w0"]) / (now - cur["t0"]))
        j = CHOICES.index(cur["choice"])
        self.n *= self.gamma
        self.s *= self.gamma
        self.n[j] += 1.0
        self.s[j] += r
        self.history.append((cur["start"], self.names[cur["arm"]], r))
        self._say(now, closed=cur["choice"], started=cur["start"], measured_from=cur["t0"],
                  log_throughput=r, mean={c: float(self.s[i] / self.n[i])
                                          for i, c in enumerate(CHOICES) if self.n[i] > 0})

    def _say(self, now: float, **what) -> None:
        """One `--explain` line, when asked for."""
        if self.explain is not None:
            self.explain({"t": now, "alloc": what})

    def _choose(self) -> tuple[str, str]:
        """D-UCB over spill and reclaim, and why. Before both are credited: reclaim
        first; spill only once reclaim has shown a cost, its direct-reclaim stall being
        at least `stall_min` of its pulls' time."""
        if self.n[CHOICES.index("reclaim")] <= 0:
            return "reclaim", "reclaim first: never measured"
        if self.n[CHOICES.index("spill")] <= 0:
            share = self.reclaim_stall / max(self.reclaim_time, 1e-12)
            if share >= self.stall_min:
                return "spill", f"spill never measured; reclaim stalled {share:.1%} of its time"
            return "reclaim", f"reclaim stalled only {share:.2%} of its time: spill not tried"
        idx = self.s / self.n + self.c * np.sqrt(2.0 * math.log(self.n.sum()) / self.n)
        best = CHOICES[int(np.flatnonzero(idx >= idx.max() - 1e-12)[0])]
        return best, "largest upper bound: " + ", ".join(
            f"{c} {v:.3f}" for c, v in zip(CHOICES, idx))

    def _tick(self, now: float, work: float) -> None:
        """End the running pull's interval if `epoch` has passed since it began; close
        the pull after its last."""
        cur = self.current
        if cur is None or now - cur["t"] < self.epoch:
            return
        cur["k"] += 1
        cur["t"] = now
        if cur["k"] == cur["need"] - 1:  # the measured interval starts
            cur["t0"], cur["w0"] = now, work
        if cur["k"] >= cur["need"]:
            self._reward(now, work)

    def _pull(self, choice: str, arm: int, need: int, now: float, work: float) -> None:
        """Start a pull of `choice` (played by arm `arm`) measured after `need` - 1
        intervals."""
        self.current = {"choice": choice, "arm": arm, "start": now, "t": now, "k": 0,
                        "need": need, "t0": now, "w0": work}

    def place(self, sim, start: int, end: int) -> None:
        """Place [start, end): the one undominated placement, or the running pull's
        choice, or a new pull's."""
        if self.sim is not sim:
            self._attach(sim)
        now, work = float(sim.now), float(sim.work)
        self._tick(now, work)
        n = end - start
        opts = self.options(n)
        if len(opts) == 1:
            choice, (arm, to_fast) = next(iter(opts.items()))
            if self.current is None and choice == "spill" and to_fast < n:
                # a spill nobody chose (a bulk first touch): observe it as one
                self._pull(choice, arm, 1, now, work)
                self._say(now, decision=choice, arm=self.names[arm], pages=n,
                          why="bulk first touch larger than DRAM's room: measured as spill")
        else:
            if self.current is None:
                choice, why = self._choose()
                need = 1 if choice == self.last else self.hold
                self._pull(choice, opts[choice][0], need, now, work)
                self.pulls[opts[choice][0]] += 1
                self._say(now, decision=choice, arm=self.names[opts[choice][0]], why=why,
                          pages=n, fast_free=int(sum(sim.mem.free[i]
                                                     for i in sim.machine.fast_nodes())))
            arm = opts[self.current["choice"]][0]
        self.placed[arm] += 1
        stall = sim.stats.app_stall_seconds
        self.arms[arm].place(sim, start, end)
        if self.arms[arm].always:
            self.reclaim_stall += sim.stats.app_stall_seconds - stall

    def stats(self) -> dict:
        """Pulls and placements per arm, the discounted mean reward (log throughput) of
        spill and reclaim, and the arm played most often in the last third of the
        pulls."""
        if self.sim is None:
            return {}
        mean = np.divide(self.s, self.n, out=np.full(len(CHOICES), np.nan), where=self.n > 0)
        tail = [a for _, a, _ in self.history[-max(1, len(self.history) // 3):]]
        late = max(self.names, key=tail.count) if tail else None
        return {"pulls": {a: int(p) for a, p in zip(self.names, self.pulls)},
                "placements": {a: int(p) for a, p in zip(self.names, self.placed)},
                "mean_log_throughput": {c: (None if math.isnan(m) else float(m))
                                        for c, m in zip(CHOICES, mean)},
                "decisions": int(self.pulls.sum()),
                "late_choice": late}
