"""`alloc-auto`: pick among the four allocation policies of the HPDC'23 poster online
(dram-preferred, dram-always, pm-preferred, pm-always), since no single one wins
everywhere (ALGORITHMS.md, "Allocation policies").

A multi-armed bandit over allocation-time decisions: discounted UCB (D-UCB, Garivier
and Moulines, "On upper-confidence bound policies for switching bandit problems",
ALT'11), whose discount lets it follow a workload that changes.

- Pulls: an arm chosen at a first touch (`place`) places every allocation for `hold`
  (2) intervals; an interval ends at the first allocation at least `epoch` (1 s) after
  it began. A new arm is chosen at the allocation that ends the pull.
- Reward: the log of the application's throughput (work done per second, `sim.work` /
  `sim.now`: what an application's operation counter, or instructions retired,
  reports) over the pull's intervals after the first. The first is skipped because a
  placement pays off later than it costs: YCSB-D's new records are written in the
  interval that allocates them and read hot in the next, while dram-always's direct
  reclaim stalls the allocating interval. Throughput charges everything a choice causes
  (where the new pages' accesses land, reclaim stalls, pages displaced from DRAM). No
  rates of the workload are read; besides throughput only the nodes' free pages and
  watermarks (/proc/zoneinfo).
- Equivalent arms: arms that would place the allocation alike (the same share of it,
  in `levels` steps, in the fast tier and demoted to make room, counting DRAM's free
  pages above its high watermark) form a class: dram-preferred and dram-always while
  DRAM has room, dram-preferred and the PM arms once it has none, pm-preferred and
  pm-always while PM has room. The reward is credited to every arm of the chosen class.
- Choice: UCB over the classes of this allocation, each with its members' pooled credit:
  a class never credited first (by its first arm in `arms` order, so dram-preferred,
  the Linux default, when nothing is known yet); else the largest
  mean + c * sqrt(2 ln n / N), N and the mean discounted by `gamma` per pull, n the sum
  over classes; ties to the earlier arm; the class plays its first arm.

Limits: a workload that allocates everything at once (YCSB A, B, C, F) gives one
decision and no feedback before it: alloc-auto is dram-preferred there. Exploring costs
at least one pull of a worse class (two intervals). A pull's reward also carries the
state the earlier pulls left (pages they placed are still read), which the skipped
interval and the discount only partly absorb.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import TierlabError
from ..units import parse_duration
from ..workloads._common import parse_number
from .alloc import ALLOCS, AllocPolicy

ARMS = ("dram-preferred", "dram-always", "pm-preferred", "pm-always")


@ALLOCS.register("alloc-auto")
class AllocAuto(AllocPolicy):
    """Bandit (discounted UCB) over the four allocation policies, rewarded by throughput."""

    def __init__(self, arms="/".join(ARMS), epoch="1s", hold=2, c=0.05, gamma=0.95,
                 levels=4):
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
        self.levels = parse_number(levels, "alloc-auto levels", lo=1, hi=1000, integer=True)
        self.sim = None

    def _attach(self, sim) -> None:
        self.sim = sim
        k = len(self.arms)
        self.n = np.zeros(k)  # discounted credit count per arm
        self.s = np.zeros(k)  # discounted reward sum per arm
        self.pulls = np.zeros(k, dtype=np.int64)  # decisions that chose each arm
        self.current = None  # the running pull
        self.credits: list = []  # (placement signature, reward) of every closed pull
        self.history: list = []

    # -- what each arm would do --------------------------------------------------------
    def _signature(self, arm: AllocPolicy, n: int) -> tuple:
        """(share of the n pages to the fast tier, share demoted to make room) if `arm`
        placed them now, from the nodes' free pages above their high watermark (the
        few pages kswapd keeps free below it do not make two arms different), each
        share rounded to `levels` steps."""
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
        q = self.levels / max(n, 1)
        return int(round(to_fast * q)), int(round(demote * q))

    # -- the bandit ----------------------------------------------------------------------
    def _reward(self, now: float, work: float) -> None:
        """Close the running pull: credit log throughput over its measured part."""
        cur = self.current
        self.current = None
        if now <= cur["t0"] or work <= cur["w0"]:
            return
        r = math.log((work - cur["w0"]) / (now - cur["t0"]))
        self.n *= self.gamma
        self.s *= self.gamma
        self.n[cur["credit"]] += 1.0
        self.s[cur["credit"]] += r
        self.credits.append((cur["sig"], r))
        self.history.append((cur["start"], self.names[cur["arm"]], r))

    def _choose(self, sig: list) -> int:
        """UCB over the distinct placements (signatures) the arms would make now; a
        placement's credit is that of the past pulls that made the same one
        (discounted by their age); a placement never tried goes first, the one whose
        arms were played least before the others."""
        options = list(dict.fromkeys(sig))  # in the order of their first arm
        first = [sig.index(g) for g in options]
        n = np.zeros(len(options))
        s = np.zeros(len(options))
        if self.credits:
            done = [g for g, _ in self.credits]
            rew = np.array([r for _, r in self.credits])
            wt = self.gamma ** np.arange(len(rew) - 1, -1, -1, dtype=np.float64)
            for j, g in enumerate(options):
                hit = np.array([d == g for d in done])
                n[j] = wt[hit].sum()
                s[j] = (wt * rew)[hit].sum()
        fresh = np.flatnonzero(n <= 0)
        if len(fresh):  # the one whose arms were played least, then in arm order
            played = [int(self.pulls[[i for i, g in enumerate(sig) if g == options[j]]].sum())
                      for j in fresh]
            return first[int(fresh[int(np.argmin(played))])]
        idx = s / n + self.c * np.sqrt(2.0 * math.log(max(n.sum(), 1.0 + 1e-9)) / n)
        return first[int(np.flatnonzero(idx >= idx.max() - 1e-12)[0])]

    def place(self, sim, start: int, end: int) -> None:
        """Place [start, end) with the running pull's arm, or pull one anew."""
        if self.sim is not sim:
            self._attach(sim)
        now, work = float(sim.now), float(sim.work)
        cur = self.current
        if cur is not None and now - cur["t"] >= self.epoch:  # an interval ends
            cur["k"] += 1
            cur["t"] = now
            if cur["k"] == self.hold - 1:  # the measured part starts
                cur["t0"], cur["w0"] = now, work
            if cur["k"] >= self.hold:
                self._reward(now, work)
        if self.current is None:
            sig = [self._signature(a, end - start) for a in self.arms]
            arm = self._choose(sig)
            credit = np.flatnonzero([g == sig[arm] for g in sig])
            self.current = {"arm": arm, "credit": credit, "sig": sig[arm], "start": now,
                            "t": now, "k": 0, "t0": now, "w0": work}
            self.pulls[arm] += 1
        self.arms[self.current["arm"]].place(sim, start, end)

    def stats(self) -> dict:
        """Decisions per arm, the discounted mean reward (log throughput) of each, and
        the arm chosen most often in the last third of the decisions."""
        if self.sim is None:
            return {}
        k = len(self.arms)
        mean = np.divide(self.s, self.n, out=np.full(k, np.nan), where=self.n > 0)
        tail = [a for _, a, _ in self.history[-max(1, len(self.history) // 3):]]
        late = max(self.names, key=tail.count) if tail else None
        return {"pulls": {a: int(p) for a, p in zip(self.names, self.pulls)},
                "mean_log_throughput": {a: (None if math.isnan(m) else float(m))
                                        for a, m in zip(self.names, mean)},
                "decisions": int(self.pulls.sum()),
                "late_choice": late}
