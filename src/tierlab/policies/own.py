"""`tierlab`: tierlab's own placement policy. One configuration for every
machine and workload; it puts together what the papers each did alone.

Monitoring: DAMON regions (`monitors/damon.py`; on Linux the kernel's DAMON, so the same
code runs there) with IDT's intervals (10 ms samples, 1 s aggregations, 1,000-10,000
regions at full scale; IDT, HPDC'24). A region's heat h is the share of its last two
aggregations' samples in which its sampled page was accessed; with one page drawn per
sample (damon_va_check_accesses) and accesses Poisson at rate lambda per page, h
estimates 1 - exp(-lambda s) (s the sample interval), so lambda = -ln(1 - h) / s, h
clipped below 1 - 1/(4n) for n samples (the estimate saturates near 740 accesses/s per
page: DAMON cannot tell hotter pages apart, which ranks them equal).

Decision, every aggregation:
1. **Where each region should be** (the hits placement of the oracle's `objective=hits`,
   on estimates): regions by estimated rate, hottest first, fill the nodes down the
   demotion path up to what the process can have there (its pages there plus the free
   memory above the high watermark).
2. **Load curves** (policies/loadbalance.py): where the backend has per-node counters
   (`tier_counters`: CHA TOR inserts and occupancy, the reads and their loaded
   latency by Little's law, as Colloid (SOSP'24) reads them; `tier_writes`: the
   memory controllers' writes), each node's loaded latency is fitted as a function of
   our reads and writes there, a co-runner's traffic apart. Without counters (the
   Linux backend, `balance=off`) latencies are the unloaded ones and step 4 is off.
3. **Region moves, admitted by gain against cost** (ALTO, ARMS): a promotion into a
   node with room is made when its expected gain over the region's horizon exceeds
   `margin` (1) times its cost: the copy's CPU and TLB shootdown, and with the load
   curves the stall the copy's traffic causes on both nodes (`_page_cost`; near
   saturation a copy delays every access queued behind it). The horizon is the
   longer of the region's DAMON age (a pattern that held for a seconds is expected to
   hold about a more) and the time the move has been wanted and deferred (ski
   rental: once the gain missed so far repays the copy, moving costs at most twice
   the best choice in hindsight; without it a region whose heat changes every
   aggregation, the hot tail of a recency pattern whose age keeps resetting, waits
   for ever). Into a full node a
   promotion displaces the coldest regions there (demoted to their own place, or the
   next node down); the pair is made only if the promoted region is hotter than every
   displaced one beyond their difference's binomial noise (a two-sample test: h_p -
   h_v > z sqrt(se_p^2 + se_v^2), se the standard error of h over n samples, z =
   sqrt(2 ln N) + 1 for N regions: the largest of N noise deviations stays below it)
   and the gain of the exchange over the promoted region's horizon repays both copies
   by `margin`. Gains are thread-seconds saved over the horizon: the change of both
   nodes' stall under their load curves when the region takes its share of the source
   node's counted traffic (`_saved`; rate x the difference of the unloaded latencies
   without counters), taken where the decision's earlier moves left the nodes' load
   (`_shift`): judged each alone, the moves of one decision overshot the balance
   together and the next decision moved them back. Uniform access (STREAM, uniform
   GUPS) has no significant difference, so nothing moves: the static placement is
   kept.
4. **Load balance over every node** (with counters; no published system balances
   more than two tiers): the budget the region moves left goes to moves of random
   shares of a queueing node's pages to the node where they lower the total stall most
   (displacing random pages of a full one), planned on the load curves
   (`loadbalance.plan`, from the counted load) and made when the stall saved over the
   source node's load age (the time its traffic has held within 10%; it starts again
   on the nodes a shed moves load between) repays the copies, their traffic's stall
   included. The counters, not the regions' estimates, say where the load is, so this
   works where the regions cannot resolve the hot pages (n copies of a program, a few
   very hot pages in big regions). Region moves do not go into a node that shed load
   at the previous decision.
5. **Headroom for our allocations** (`headroom=on`): the top node keeps free the most
   pages we allocated in one of the last 4 aggregations (at most a quarter of it),
   the fill placing that many fewer there. The coldest regions the fill places lower
   are demoted first, before any other move, so a growing heap's newest pages (YCSB
   D's hottest) are first-touched in the top node, not a lower one where they would
   wait for the next decision: TPP's (ASPLOS'23) demotion watermark apart
   from the allocation one, sized by our allocation rate. A heap that does not grow
   keeps none, and its runs are those of `headroom=off`. The growth counts from the
   first decision; `headroom=attach` counts it from the policy's start (the heap it
   had then: none in the simulator, whose set-up comes after), as a daemon started
   with its program sees the program fill its heap (scripts/sim_vs_kernel.py's exec
   cases).
6. **No storms**: the moves of one decision are capped at half the copy bandwidth over
   the aggregation interval; a moved region's age is reset (IDT's rule), so its
   horizon starts again and it cannot bounce back at once.
Every move is written to `--explain` with its reason, gain and cost, and each decision
with every node's counted reads and writes, utilisation, background, fitted slope,
marginal latency and the utilisation the planned moves aim for.

kswapd demotion stays on (the allocator's fallback when a burst of allocations fills a
node between decisions).
"""
from __future__ import annotations

import numpy as np

from ..engine.memory import UNALLOC
from ..errors import TierlabError
from ..field import range_pages
from ..monitors.damon import Damon
from ..monitors.idt_regions import IdtRegions
from ..params import parse_choice, parse_number
from ..units import PAGE
from .base import POLICIES, Policy
from .loadbalance import LoadCurves, plan

SAMPLE = 1 << 20  #: pages whose node one rebalance reads to count each node's, at most
CAP_DOWN, CAP_UP = 0.8, 0.05  #: the top node's cap steps (multiplicative, additive)
#: the cap comes down while the top node's marginal latency exceeds the next node's by
#: CAP_ABOVE, and goes back up while it is below CAP_BELOW times it
CAP_ABOVE, CAP_BELOW = 1.2, 0.9
LOAD_AGE_BAND = 0.1  #: a node's traffic "held" while within 10% of the last decision's
PROBE = 5  #: pages per region looked at for its node (evenly spaced)
EXPLAIN_MOVES = 64  #: moves per decision written to --explain
#: the top node keeps free the most we allocated in one of the last HEADROOM_AGGRS
#: aggregations, at most HEADROOM_MAX of it
HEADROOM_AGGRS, HEADROOM_MAX = 4, 0.25


@POLICIES.register("tierlab")
class Tierlab(Policy):
    """tierlab's own: DAMON regions, hottest-first fill of the tiers, moves admitted by
    expected gain against copy cost (significance-tested) under per-node load curves,
    the load of queueing nodes balanced over every node, and room kept on the top node
    for a growing heap's new pages."""

    explain_fields = ("t", "nodes", "aimed_util", "moves")

    def __init__(self, sample="10ms", aggr="1s", min_nr_regions=1000,
                 max_nr_regions=10000, margin="1", monitor="idt", balance="on",
                 headroom="on"):
        super().__init__(sample=sample, aggr=aggr, min_nr_regions=min_nr_regions,
                         max_nr_regions=max_nr_regions, margin=margin, monitor=monitor,
                         balance=balance, headroom=headroom)
        #: "off": the hits placement alone, as without uncore counters (an ablation)
        self.balance = parse_choice(balance, "tierlab balance", ("on", "off"))
        #: "off": the top node is filled to its high watermark however fast we allocate
        self.headroom = parse_choice(headroom, "tierlab headroom", ("on", "off", "attach"))
        kinds = {"idt": IdtRegions, "damon": Damon}
        if str(monitor) not in kinds:
            raise TierlabError(f"bad tierlab monitor {monitor!r}; valid: idt, damon")
        # IDT's monitor as the own policy was built on: DAMON's age rule, 64 history
        # bits, splits between the two sampled pages
        extra = dict(age_rule="damon", history_bits=64, split_at="between") \
            if monitor == "idt" else {}
        self.monitor = kinds[str(monitor)](sample=sample, aggr=aggr,
                                           min_nr_regions=min_nr_regions,
                                           max_nr_regions=max_nr_regions,
                                           name=f"tierlab-{monitor}", **extra)
        self.margin = parse_number(margin, "tierlab margin (the gain a move must repay, in "
                                   "multiples of its cost)", lo=0.0, hi=1e6, lo_open=True)
        self.explain = None
        self.promoted = self.demoted = self.refused_noise = self.refused_cost = 0
        self.decisions = 0
        self._counters = None
        self.curves = None  #: LoadCurves, once two counter readings are in
        self.balance_entry = None  #: the last rebalance's --explain entry
        self.budget_share = 1.0  #: the top node's cap on the estimated accesses
        self.spread = 0
        self._want_runs = None
        self._total = None  #: our allocated pages at the last decision
        self._grown: list[int] = []  #: pages we allocated in each recent aggregation
        self.reserve = 0  #: pages kept free on the top node for our allocations
        self._load = None  #: our reads and writes per node as this decision's moves left them
        self._copy_stall = None  #: per node, the stall one page copied there causes (s)
        self._load_age = None  #: per node, decisions its traffic has held (`_observe`)
        self._last_T = None  #: per node, the traffic (reads + writes /s) last counted

    def attach(self, sim) -> None:
        super().attach(sim)
        m = sim.machine
        self.path = list(m.demotion)
        self.lat = np.array([m.read_latency_ns(n) for n in range(m.nnodes)]) * 1e-9
        self._read_bw = np.array([t.read_bw for t in m.tiers])
        self._write_bw = np.array([t.write_bw for t in m.tiers])
        self.copy_s = PAGE / m.migrate_bw * sim.scale  # CPU per page copied
        self.shootdown_s = m.tlb_shootdown_s * sim.threads / (512 * sim.scale)
        self._rng = sim.rng_for("tierlab-spread")
        self._shed_from = np.zeros(m.nnodes, dtype=bool)  #: shed from at this decision
        self.monitor.attach(sim)
        self.monitor.subscribe(self.decide)
        if self.headroom == "attach":  # the heap's growth counts from now (`_reserve`)
            self._total = int(np.count_nonzero(sim.mem.node != UNALLOC))

    # -- observations --------------------------------------------------------------------
    def _nodes(self, s, e):
        """The node of each region: the most common among PROBE evenly spaced pages
        (UNALLOC when none is allocated)."""
        size = e - s
        off = (np.arange(PROBE) + 0.5) / PROBE
        pages = s[:, None] + np.minimum((size[:, None] * off).astype(np.int64), size[:, None] - 1)
        nd = self.sim.node_of(pages.ravel()).reshape(pages.shape)
        k = self.sim.machine.nnodes
        counts = np.stack([(nd == n).sum(axis=1) for n in range(k)], axis=1)
        node = counts.argmax(axis=1).astype(np.uint8)
        node[counts.max(axis=1) == 0] = UNALLOC
        return node

    def _read_counters(self):
        """Per-node reads/s, writes/s and the reads' mean loaded latency (s) since the
        last decision, from the uncore counters where the backend has them (CHA TOR
        inserts and occupancy; the memory controllers' writes, zero where not
        counted); None otherwise."""
        tc = getattr(self.sim, "tier_counters", None)
        if tc is None or self.balance == "off":
            return None
        try:
            ins, occ = tc()
        except (AttributeError, TierlabError):
            return None
        tw = getattr(self.sim, "tier_writes", None)
        wr = tw() if tw is not None else np.zeros_like(ins)
        now = self.sim.now
        prev, self._counters = self._counters, (ins, occ, wr, now)
        if prev is None or now <= prev[3]:
            return None
        di, do, dt = ins - prev[0], occ - prev[1], now - prev[3]
        with np.errstate(invalid="ignore", divide="ignore"):
            lat = np.where(di > 0, do / np.where(di > 0, di, 1) * 1e-9, np.nan)
        return di / dt, (wr - prev[2]) / dt, lat

    def _observe(self) -> None:
        """Read the counters and fit the load curves (balance_entry None without)."""
        got = self._read_counters()
        self.balance_entry = None
        if got is None:
            return
        R, W, lat = got
        if self.curves is None:
            self.curves = LoadCurves(self.lat, self._read_bw, self._write_bw)
        cv = self.curves
        cv.update(R, W, lat)
        # DAMON's age rule on each node's traffic: it grows while the traffic stays
        # within LOAD_AGE_BAND of the last decision's, and starts again otherwise
        T = R + W
        if self._load_age is None:
            self._load_age, self._last_T = np.zeros(T.size, dtype=int), T
        same = np.abs(T - self._last_T) <= LOAD_AGE_BAND * np.maximum(self._last_T, 1e-9)
        self._load_age = np.where(same, self._load_age + 1, 0)
        self._last_T = T
        self.balance_entry = {"nodes": [
            {"node": n, "reads_per_s": float(R[n]), "writes_per_s": float(W[n]),
             "loaded_ns": float(cv.latency(n, R[n], W[n]) * 1e9), "util": float(cv.u[n]),
             "background": float(cv.b[n]), "slope": float(cv.a[n]),
             "marginal_ns": float(cv.marginal(n) * 1e9)} for n in range(R.size)],
            "aimed_util": None}
        # Colloid's direction on the top node's share of the estimated accesses, by
        # marginal latency (an access moved's cost, its queueing effect included)
        top, nxt = (cv.marginal(n) if R[n] + W[n] > 0 else self.lat[n]
                    for n in self.path[:2])
        if top > nxt * CAP_ABOVE:
            self.budget_share = max(self.budget_share * CAP_DOWN, 0.05)
        elif top < nxt * CAP_BELOW:
            self.budget_share = min(self.budget_share + CAP_UP, 1.0)

    def _rebalance(self, s, e, budget, out) -> int:
        """Counter-driven load balance (policies/loadbalance.py) with what is left of
        `budget`: plan moves of random shares of a queueing node's pages to
        another node (displacing random pages of a full one) that lower the total
        stall over their horizon more than their copies cost, and make them. A random
        share of a node's pages carries that share of its traffic in expectation
        however coarse the regions: the counters, not the regions' estimates, say
        where the load is (weighted interleaving, as Linux's MPOL_WEIGHTED_INTERLEAVE,
        with weights from the load curves). A shed must repay its copies, their
        traffic's stall included, within its source node's load age: the decisions
        its traffic has stayed within LOAD_AGE_BAND of the last (DAMON's age rule, on
        a node; a load that held for t is expected to hold about t more), which
        starts again on the nodes a shed moves load between. Nodes that shed at the
        last decision take none. Returns the pages moved."""
        cv = self.curves
        R = cv.R
        size = e - s
        span = int(size.sum())
        rng = self._rng
        cum = np.cumsum(size)

        def at(off):  # offsets into the monitored span -> pages
            j = np.searchsorted(cum, off, side="right")
            return s[j] + off - (cum[j] - size[j])

        exact = span <= SAMPLE
        pages = range_pages(s, e) if exact else at(np.sort(rng.integers(0, span, SAMPLE)))
        nd = self.sim.node_of(pages)
        k = R.size
        mine = [pages[nd == n] for n in range(k)]
        held = np.array([m.size for m in mine]) * (span / pages.size)  # pages per node
        mem = self.sim.mem
        room = (mem.free - mem.wmark_high).astype(float)
        # a load that held for t is expected to hold about t more (as a region's age)
        horizon = np.maximum(self._load_age, 1) * self.monitor.aggr_interval
        steps, R1, W1 = plan(cv, held, room, horizon, self.copy_s + self.shootdown_s,
                             self.margin, budget, closed=self._closed)
        order = [rng.permutation(m.size) for m in mine]
        taken = [np.zeros(0, dtype=np.int64) for _ in range(k)]

        def draw(n, count):
            """`count` pages of node n not drawn yet this decision, at random."""
            if exact:
                got = mine[n][order[n][taken[n].size:taken[n].size + count]]
            else:  # more than SAMPLE pages: draw until enough are on n
                got = np.zeros(0, dtype=np.int64)
                for _ in range(8):
                    want = count - got.size
                    if want <= 0:
                        break
                    cand = at(rng.integers(0, span, max(4096, int(2 * want * span
                                                                   / max(held[n], 1)))))
                    cand = np.unique(cand[self.sim.node_of(cand) == n])
                    cand = np.setdiff1d(cand, np.concatenate((taken[n], got)))
                    got = np.concatenate((got, rng.permutation(cand)[:want]))
            taken[n] = np.concatenate((taken[n], got))
            return got

        moved = 0
        for n, m, x, to, d, saved, cost in steps:
            if d:
                got_d = self.sim.migrate(draw(m, d), to, reason="tierlab")
                moved += got_d
                out.append({"pages": int(got_d), "from": int(m), "to": int(to),
                            "reason": "displaced by a load shed", "gain_s": 0.0,
                            "cost_s": float(got_d * self._page_cost(m, to))})
            got_x = self.sim.migrate(draw(n, x), m, reason="tierlab")
            moved += got_x
            self.spread += got_x
            self._shed_from[n] = True
            self._load_age[[n, m, to] if d else [n, m]] = 0  # our move changed their load
            out.append({"pages": int(got_x), "from": int(n), "to": int(m),
                        "reason": "load shed to lower the total stall",
                        "gain_s": float(saved * horizon[n]), "cost_s": float(cost)})
        self.balance_entry["aimed_util"] = [float(x) for x in
                                            cv.b + cv.a * (cv.kr * R1 + cv.kw * W1)]
        return moved

    # -- the decision ---------------------------------------------------------------------
    def decide(self, mon, now: float) -> None:
        self.decisions += 1
        r = mon.regions
        s, e = np.asarray(r.start, dtype=np.int64), np.asarray(r.end, dtype=np.int64)
        if s.size == 0:
            return
        size = e - s
        n = 2 * mon.max_nr_accesses
        h = (np.asarray(r.nr_accesses) + np.asarray(r.last_nr_accesses)) / n
        h = np.clip(h, 0.0, 1.0 - 1.0 / (4 * n))
        # per page, /s; a sample reads mon.pages_per_sample pages a region
        lam = -np.log1p(-h) / (mon.sample_interval * mon.pages_per_sample)
        se = np.sqrt(np.maximum(h * (1 - h), 1.0 / n) / n)
        self.z = float(np.sqrt(2 * np.log(max(s.size, 2))) + 1.0)
        node = self._nodes(s, e)
        ok = node != UNALLOC
        k = self.sim.machine.nnodes
        self._A = np.bincount(node[ok], weights=(lam * size)[ok], minlength=256)[:k]
        self._held = np.bincount(node[ok], weights=size[ok], minlength=256)[:k]
        self.reserve = self._reserve(int(self._held.sum()))
        # the nodes that shed load at the last decision: nothing comes into them now
        self._closed, self._shed_from = self._shed_from, np.zeros(k, dtype=bool)
        self._observe()
        cv = self.curves
        # our reads and writes per node as the moves made so far leave them
        self._load = (cv.R.copy(), cv.W.copy()) if cv is not None else None
        self._copy_stall = cv.copy_stall() if self.balance_entry is not None else None
        budget = int(0.5 * self.sim.machine.migrate_bw * mon.aggr_interval / PAGE)
        want = self._fill(lam, size, ok, node)
        horizon = np.maximum(np.asarray(r.age, dtype=float) + 1.0,
                             self._wanting(s, e, ok & (want != UNALLOC) & (want != node))
                             + 1.0) * mon.aggr_interval
        moves, taken = [], np.zeros(s.size, dtype=bool)
        if self.reserve:  # first: our next allocations land where they will be wanted
            budget -= self._make_room(s, e, size, lam, node, want, budget, taken, moves)
        made = self._moves(s, e, size, h, se, lam, node, want, horizon, budget, taken)
        budget -= sum(m["end_page"] - m["start_page"] for m in made)
        moves += made
        if self.balance_entry is not None and budget > 0:
            self._rebalance(s, e, budget, moves)
        if self.explain is not None:
            self.explain({"t": float(now),
                          **(self.balance_entry or {"nodes": None, "aimed_util": None}),
                          "moves": moves[:EXPLAIN_MOVES], "moves_total": len(moves)})

    def _wanting(self, s, e, away):
        """Aggregations each region has wanted to be elsewhere, continuously: the mean
        over its pages of the previous decision's count plus one where `away` (regions
        split and merge between decisions, so counts follow pages), else 0. With it the
        horizon of a move is at least the time the move has been deferred (ski rental:
        once the gain missed so far repays the cost, moving costs at most twice the best
        choice in hindsight), so a region whose heat changes every aggregation (a
        recency pattern: its DAMON age keeps resetting) is not deferred for ever."""
        prev = self._want_runs
        cur = np.zeros(s.size)
        if prev is not None:
            ps, pe, pc = prev
            before = np.concatenate(([0.0], np.cumsum(pc * (pe - ps))))

            def mass(x):  # sum over the previous runs of count x pages below x
                j = np.maximum(np.searchsorted(ps, x, side="right") - 1, 0)
                inside = np.clip(np.minimum(x, pe[j]) - ps[j], 0, None)
                return before[j] + pc[j] * inside

            cur = (mass(e) - mass(s)) / np.maximum(e - s, 1)
        cur = np.where(away, cur, 0.0)
        self._want_runs = (s.copy(), e.copy(), np.where(away, cur + 1.0, 0.0))
        return cur

    def _fill(self, lam, size, ok, node):
        """Desired node per region: hottest first down the path, each node up to what
        this process can have there (its pages there now plus the free memory above the
        high watermark: other processes and the kernel keep theirs)."""
        k = self.sim.machine.nnodes
        ours = np.bincount(node[ok], weights=size[ok], minlength=256)[:k]
        want = np.full(lam.shape[0], UNALLOC, dtype=np.uint8)
        idx = np.flatnonzero(ok)
        order = idx[np.argsort(-lam[idx], kind="stable")]
        sz = size[order]
        heat = lam[order] * sz
        pos = 0
        for i, nd in enumerate(self.path):
            room = int(ours[nd]) + self._room(nd)
            last = i == len(self.path) - 1
            cum = np.cumsum(sz[pos:])
            take = int(np.searchsorted(cum, room, side="right")) if not last else cum.size
            if i == 0 and self.budget_share < 1.0 and order.size:
                hc = np.cumsum(heat[pos:])
                take = min(take, int(np.searchsorted(hc, self.budget_share * hc[-1],
                                                     side="right")))
            want[order[pos:pos + take]] = nd
            pos += take
            if pos >= order.size:
                break
        return want

    def _saved(self, rate, src, dst, pages):
        """Stall saved per second (thread-seconds) by moving `pages` pages carrying
        `rate` estimated accesses/s from node src to node dst. With the load curves
        (counters read), the pages take their share of src's counted reads and writes
        (their share of its estimated accesses; of its pages where the estimates see
        none) and the saving is the change of both nodes' stall under the curves, at
        the load the decision's moves so far left (`_load`), the move's own effect on
        their queueing included: the rebalance and the region moves answer to one
        model, and a move pays only where the marginal latency, not the average, is
        lower. Without counters, rate x the difference of the unloaded latencies."""
        cv = self.curves
        if cv is None or self.balance_entry is None:
            return rate * (self.lat[src] - self.lat[dst])
        R, W = self._load
        Rs, Ws, Rd, Wd = R[src], W[src], R[dst], W[dst]
        r, w = self._traffic(rate, src, pages)
        return (cv.stall(src, Rs, Ws) - cv.stall(src, Rs - r, Ws - w)
                - (cv.stall(dst, Rd + r, Wd + w) - cv.stall(dst, Rd, Wd)))

    def _page_cost(self, src, dst) -> float:
        """Thread-seconds one page's move from src to dst costs: the copy's CPU and
        TLB shootdown, and with the load curves the stall its traffic causes on both
        nodes at the decision's counted load (`LoadCurves.copy_stall`; near
        saturation a copy delays every access queued behind it)."""
        c = self.copy_s + self.shootdown_s
        if self._copy_stall is not None:
            c += float(self._copy_stall[src] + self._copy_stall[dst])
        return c

    def _traffic(self, rate, src, pages):
        """The counted reads and writes per second that `pages` pages carrying `rate`
        estimated accesses/s take from node src: their share of its estimated
        accesses (of its pages where the estimates see none) of its counted traffic
        at the decision's start, at most what the decision's moves have left there."""
        A, P = self._A[src], self._held[src]
        share = np.where(A > 0, rate / np.where(A > 0, A, 1.0), pages / np.maximum(P, 1))
        share = np.minimum(share, 1.0)
        R, W = self._load
        return (np.minimum(self.curves.R[src] * share, R[src]),
                np.minimum(self.curves.W[src] * share, W[src]))

    def _shift(self, rate, src, dst, pages) -> None:
        """Book a made move's traffic in the decision's running load, so the gain of
        each later move is taken where the earlier ones left the nodes' queues (the
        moves of one decision together do not overshoot the balance)."""
        if self.curves is None or self.balance_entry is None:
            return
        R, W = self._load
        r, w = self._traffic(rate, src, pages)
        R[src] -= r
        W[src] -= w
        R[dst] += r
        W[dst] += w

    def _moves(self, s, e, size, h, se, lam, node, want, horizon, budget, taken):
        """Admitted moves, made, up to `budget` pages, of regions not `taken` (marked
        as they move); returns their explain entries.
        For each node d down the path, the regions that should be on d (hottest gain
        first) come in: into room, or displacing the regions on d that should be
        elsewhere (coldest first), which go where they should be (or one node down)."""
        path = self.path
        valid = (node != UNALLOC) & (want != UNALLOC)
        k = self.sim.machine.nnodes
        gain = np.where(valid, self._saved(lam * size, np.minimum(node, k - 1),
                                           np.minimum(want, k - 1), size), 0.0)  # per region
        out = []
        used = np.zeros(s.size, dtype=np.int64)  # pages of each victim already displaced
        for d in path:
            if self._closed[d]:
                continue  # load was shed from it at the last decision: none comes back
            cand = np.flatnonzero(valid & (want == d) & (node != d) & (gain > 0) & ~taken)
            if cand.size == 0:
                continue
            cand = cand[np.argsort(-gain[cand] / size[cand], kind="stable")]  # per page
            victims = np.flatnonzero(valid & (node == d) & (want != d) & ~taken)
            victims = victims[np.argsort(lam[victims], kind="stable")]
            vi = 0
            room = self._room(d)
            for p in cand:
                if budget <= 0:
                    break
                pages = int(size[p])
                copy = pages * self._page_cost(node[p], d)
                g = float(self._saved(lam[p] * pages, node[p], d, pages))  # as loads are now
                if g <= 0:
                    self.refused_cost += 1
                    continue
                if room >= pages:
                    if g * horizon[p] < self.margin * copy:
                        self.refused_cost += 1
                        continue
                    got = self._move(s[p], e[p], node[p], d, "into room",
                                     g * horizon[p], copy, out)
                    self._shift(lam[p] * pages, node[p], d, pages)
                    room -= got
                    budget -= got
                    taken[p] = True
                    continue
                need, j, vmax, vcost, vloss, freed = pages - max(room, 0), vi, 0.0, 0.0, 0.0, 0
                chunks = []
                while freed < need and j < victims.size:
                    v = victims[j]
                    c = min(int(size[v]) - int(used[v]), need - freed)  # only what is needed
                    freed += c
                    chunks.append((v, c))
                    vmax = max(vmax, h[v] + self.z * np.hypot(se[p], se[v]))
                    to = self._dest(d, want[v])
                    vloss -= self._saved(lam[v] * c, d, to, c)
                    vcost += c * self._page_cost(d, to)
                    if used[v] + c >= size[v]:
                        j += 1
                if freed < need:
                    break
                if h[p] <= vmax:
                    self.refused_noise += 1
                    break  # colder candidates follow, hotter victims: none would pass
                net = g - vloss
                hz = horizon[p]  # the displaced stay down as long as p stays up
                if net * hz < self.margin * (copy + vcost):
                    self.refused_cost += 1
                    continue
                for v, c in chunks:  # the coldest regions first, from their start
                    to = self._dest(d, want[v])
                    a = int(s[v] + used[v])
                    budget -= self._move(a, a + c, d, to, "displaced by a hotter region",
                                         self._saved(lam[v] * c, d, to, c) * hz,
                                         c * self._page_cost(d, to), out)
                    self._shift(lam[v] * c, d, to, c)
                    used[v] += c
                    taken[v] = True
                vi = j
                room = self._room(d)
                got = self._move(s[p], e[p], node[p], d, "exchange with colder regions",
                                 net * hz, copy + vcost, out)
                self._shift(lam[p] * pages, node[p], d, pages)
                room -= got
                budget -= got
                taken[p] = True
        moved = np.flatnonzero(taken)
        if moved.size:
            self.monitor.reset_age(moved)
        return out

    def _move(self, s, e, src, dst, why, gain, cost, out) -> int:
        """Migrate region [s, e) to dst; count and explain it."""
        got = self.sim.migrate_range(int(s), int(e), int(dst), reason="tierlab")
        if self.path.index(int(dst)) < self.path.index(int(src)):
            self.promoted += got
        else:
            self.demoted += got
        out.append({"start_page": int(s), "end_page": int(e), "from": int(src),
                    "to": int(dst), "reason": why, "gain_s": float(gain),
                    "cost_s": float(cost)})
        return got

    def _reserve(self, total: int) -> int:
        """Pages to keep free on the top node: the most we allocated in one of the last
        HEADROOM_AGGRS aggregations (our allocated pages grow as first touches land;
        on Linux, /proc/PID/numa_maps or move_pages(2)), at most HEADROOM_MAX of the
        node. A program whose newest data is its hottest (YCSB D's latest
        distribution, a growing heap) then first-touches it in the top node instead of
        a lower one, where it would wait for the next decision: the demotion
        watermark kept apart from the allocation one (TPP, ASPLOS'23: allocation and
        reclamation decoupled), sized by the allocation rate rather than fixed."""
        prev, self._total = self._total, total
        if self.headroom == "off" or prev is None:
            return 0
        self._grown = (self._grown + [max(total - prev, 0)])[-HEADROOM_AGGRS:]
        top = self.path[0]
        return int(min(max(self._grown), HEADROOM_MAX * self.sim.mem.capacity[top]))

    def _room(self, node: int) -> int:
        """Free pages of `node` above its high watermark, less the reserve on the top
        node (negative while the reserve is not free)."""
        mem = self.sim.mem
        kept = self.reserve if node == self.path[0] else 0
        return int(mem.free[node] - mem.wmark_high[node]) - kept

    def _make_room(self, s, e, size, lam, node, want, budget, taken, out) -> int:
        """Demote the coldest of the top node's regions that the fill (with the
        reserve) places lower until the reserve is free, within `budget`, marking
        them `taken`; returns the pages moved."""
        top = self.path[0]
        short = min(-self._room(top), budget)
        if short <= 0:
            return 0
        vic = np.flatnonzero((node == top) & (want != top) & (want != UNALLOC))
        moved = 0
        for v in vic[np.argsort(lam[vic], kind="stable")]:
            if moved >= short:
                break
            c = min(int(size[v]), short - moved)
            taken[v] = True
            to = self._dest(top, want[v])
            moved += self._move(s[v], s[v] + c, top, to, "room for new allocations",
                                -float(lam[v] * c * (self.lat[to] - self.lat[top])),
                                c * self._page_cost(top, to), out)
            self._shift(lam[v] * c, top, to, c)
        return moved

    def _dest(self, src: int, wanted: int) -> int:
        """Where a displaced region goes: where it should be, or one node down."""
        if wanted != UNALLOC and int(wanted) in self.path and int(wanted) != src:
            return int(wanted)
        i = self.path.index(src)
        return int(self.path[min(i + 1, len(self.path) - 1)])

    def stats(self) -> dict:
        return {"decisions": self.decisions, "promoted_pages": int(self.promoted),
                "demoted_pages": int(self.demoted), "refused_noise": self.refused_noise,
                "refused_cost": self.refused_cost,
                "spread_pages": int(self.spread), "budget_share": float(self.budget_share),

                "monitor": self.monitor.stats()}
