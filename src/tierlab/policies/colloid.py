"""`colloid-hemem` and `colloid-tpp`: Colloid (Vuppalapati and Agarwal, "Tiered Memory
Management: Access Latency is the Key!", SOSP'24) on HeMem (the shipped HeMem artifact,
webglider/hemem@1b442e5, src/pebs.c and src/pebs.h) and on upstream Linux memory tiering
(host-architecture/colloid, tpp/linux-6.3).

Principle: place pages so the tiers' *loaded* access latencies are equal, not so the
default tier serves the most accesses.

Measurement (`LoadedLatency`): per tier, uncore counters of demand reads inserted (I) and
their occupancy (O, requests in flight x time; `sim.tier_counters`, the CHA TOR events
0x35/0x36), per policy loop (10 ms) differences smoothed by an EWMA with alpha = 1/16
(`COLLOID_EWMA`), each of O and I. Little's law: L = O / I. The default tier D is the
top node of the demotion path, the alternate tier A every other node together (Colloid
is a two-tier design). p = I_D / (I_D + I_A), the share of accesses the default tier
serves.

Each loop (HeMem's 10 ms policy thread), instead of HeMem's hot/cold promotion:
- target shift (`COLLOID_EXPR3`, the artifact's closed form): dp = p (1 - p) |L_D - L_A|
  / ((1 - p) L_D + p L_A); L_D > L_A shifts access probability to A (hot pages move
  down), L_D < L_A toward D (hot pages move up);
- byte limit per loop (`COLLOID_DYNAMIC_LIMIT`): min(`limit` = 100 MB, dp x the loop's
  traffic (I_D + I_A) x 64 B); the loop swaps pairs while under it, so at least one a
  loop; a miniature moves its share of those bytes (`_pairs_allowed`);
- page choice (`SCAN_AND_SORT`): a 2 MiB page's share p_i = its decayed PEBS count /
  the total; repeatedly take the pair (i in the higher-latency tier, j in the other)
  with the largest p_i - p_j in (0, remaining dp] and swap them; a free frame in the
  lower-latency tier is a partner of share 0. A zero-count page of A is never promoted
  and a zero-count page of D is not demoted while D has a free frame (the pair rule
  already excludes both: p_i - p_j must be > 0).
Sampling as Colloid's HeMem fork does it (src/pebs.h, src/pebs.c): loads only (the
local and remote DRAM load events) at period 5003, where `hemem` samples stores too at
10007; store draws remain only for the write-protection stall (`hemem` `stores=stall`;
`period=10007,stores=count` restores HeMem's sampling). HeMem's hot rule (8 samples)
and cooling (at 18) are the fork's too. While one tier serves no reads
(p = 0 or 1, where the shift is 0 and a latency cannot be measured, e.g. every page
allocated in the alternate tier) HeMem's own promotion runs (an assumption: the
artifact's HeMem allocates in the default tier first, so it never starts there).

Option: `rule=search` is the binary-search target of HeMem commit 73136df and
MEMTIS+Colloid (bounds [p_lo, p_hi], delta 5%, epsilon 1%); `rule=closed` (default) is
the closed form above.
"""
from __future__ import annotations

import math

import numpy as np

from ..params import parse_choice, parse_number
from ..units import PAGE, parse_size
from .base import POLICIES
from .autonuma import AutoNumaTiering, fault_migrate, migrate_room
from .hemem import DRAM, HP, HeMem, MAX_SHIFT, NONE, NVM
from ..jit import kernel
from ..structures import Scratch

ACCESS_BYTES = 64
#: Colloid's HeMem samples loads at 5003 (src/pebs.h); the store period only sets the
#: draws that stand for the write rate in the write-protection stall (HeMem's 10007)
COLLOID_PERIOD = "5003+5003+10007"


class LoadedLatency:
    """Colloid's latency view of two tiers from the uncore counters (module docstring)."""

    def __init__(self, sim, default: int, alpha: float = 1 / 16):
        self.sim = sim
        self.default = default
        self.alpha = float(alpha)
        self._last = None
        self.occ = np.zeros(2)
        self.ins = np.zeros(2)
        self.traffic = 0.0  # accesses in the last loop

    def update(self) -> None:
        """Fold the counters' change since the last call into the EWMAs."""
        ins, occ = self.sim.tier_counters()
        if self._last is None:
            self._last = (ins, occ)
            return
        di, do = ins - self._last[0], occ - self._last[1]
        self._last = (ins, occ)
        alt = np.arange(ins.shape[0]) != self.default
        d_i = np.array([di[self.default], di[alt].sum()])
        d_o = np.array([do[self.default], do[alt].sum()])
        self.ins += self.alpha * (d_i - self.ins)
        self.occ += self.alpha * (d_o - self.occ)
        self.traffic = float(d_i.sum())

    def state(self):
        """(L_D, L_A, p), or None before both tiers were seen serving reads."""
        if np.any(self.ins <= 0):
            return None
        lat = self.occ / self.ins
        return float(lat[0]), float(lat[1]), float(self.ins[0] / self.ins.sum())


def delta_p_closed(l_d: float, l_a: float, p: float) -> float:
    """COLLOID_EXPR3: p (1 - p) |L_D - L_A| / ((1 - p) L_D + p L_A)."""
    den = (1 - p) * l_d + p * l_a
    return p * (1 - p) * abs(l_d - l_a) / den if den > 0 else 0.0


class BinarySearch:
    """The target of HeMem 73136df / MEMTIS+Colloid: bounds on p narrowed toward equal
    latencies (delta 5%: close enough; epsilon 1%: re-open the bound)."""

    def __init__(self, delta: float = 0.05, eps: float = 0.01):
        self.lo, self.hi, self.delta, self.eps = 0.0, 1.0, delta, eps

    def __call__(self, l_d: float, l_a: float, p: float) -> float:
        if abs(l_d - l_a) <= self.delta * l_d:
            return 0.0
        if l_d < l_a:
            self.lo = p
            if self.hi <= self.lo:
                self.hi = 1.0
            if self.hi - self.lo < self.eps:
                self.hi = 1.0
        else:
            self.hi = p
            if self.lo >= self.hi:
                self.lo = 0.0
            if self.hi - self.lo < self.eps:
                self.lo = 0.0
        return abs((self.lo + self.hi) / 2 - p)


def pick_pairs(p_src, p_dst, free_slots: int, dp: float, most: int, order=None):
    """Pairs (index into p_src, index into p_dst or -1 for a free frame) swapped in
    order, each with the largest p_i - p_j in (0, remaining dp]; at most `most`.

    Each pair's partner is the unused one of smallest share >= p_i - left (equal
    shares: lowest index), or a free frame (share 0) where that is at least as good;
    equal differences go to the lowest i. The partners with a finite share are sorted
    once; each round walks the sources by share with one forward pointer over them
    (`_walk_pairs`): at bench_scale, numpy's search of every source per pair
    was half of colloid-hemem's CPU. A partner of infinite share never pairs.

    `order`: (the sources of positive share, the partners of finite share), each as
    indexes in ascending share, when the caller has them (`TierShares` sorts
    HeMem's integer counts as it computes the shares); no share may then be
    negative."""
    p_src = np.asarray(p_src, dtype=float)
    if p_src.size == 0:
        return []
    p_dst = np.asarray(p_dst, dtype=float)
    if order is None:
        part = np.argsort(p_dst, kind="stable")
        dst = p_dst[part]
        fin = np.isfinite(dst) | (dst < 0)  # -inf sorts first and stays a partner
        src_up, part = None, part[fin]
    else:
        src_up, part = order
    src_i, dst_j = _walk_pairs(p_src, p_dst[part], part, free_slots, dp, most,
                               src_up=src_up)
    return list(zip(src_i.tolist(), dst_j.tolist()))


@POLICIES.register("colloid-hemem")
class ColloidHeMem(HeMem):
    """Colloid (SOSP'24) on HeMem: swap 2 MiB pages between the default and the
    alternate tier until their loaded latencies (Little's law on uncore counters) are
    equal."""

    def __init__(self, rule="closed", alpha=1 / 16, limit="100MB", **hemem):
        hemem.setdefault("period", COLLOID_PERIOD)
        hemem.setdefault("stores", "stall")
        super().__init__(**hemem)
        self.params.update(rule=rule, alpha=alpha, limit=limit)
        self.rule = parse_choice(rule, "colloid rule", ("closed", "search"))
        self.alpha = parse_number(alpha, "colloid alpha", lo=0.0, hi=1.0, lo_open=True)
        self.limit = parse_size(limit, "colloid limit")
        self._search = BinarySearch()
        self._shares = TierShares()
        self._credit = 0.0  # bytes of pairs carried between loops (`_pairs_allowed`)
        self.shifts = {"down": 0, "up": 0}
        self.last = None

    def attach(self, sim) -> None:
        super().attach(sim)
        self.view = LoadedLatency(sim, self.top, self.alpha)

    def _migrate(self, now: float) -> None:
        self.view.update()
        st = self.view.state()
        if st is None:  # a tier serves nothing yet (p = 0 or 1: the shift would be 0)
            super()._migrate(now)
            return
        l_d, l_a, p = st
        dp = (delta_p_closed(l_d, l_a, p) if self.rule == "closed"
              else self._search(l_d, l_a, p))
        self.last = {"L_D": l_d, "L_A": l_a, "p": p, "dp": dp}
        if dp <= 0:
            return
        down = l_d > l_a  # hot pages leave the default tier
        src_tier, dst_tier = (DRAM, NVM) if down else (NVM, DRAM)
        # every tracked page cooled; the sources of positive share and the partners
        # in ascending share, with their shares (a zero-count page of the alternate
        # tier is never promoted: no partner going down)
        total, src, p_src, src_up, dst, p_dst = self._shares(
            self.tier, self.reads, self.writes, self.clk, self.clock, MAX_SHIFT, NONE,
            src_tier, dst_tier, zero_partners=not down)
        if total <= 0:
            return
        mem = self.sim.mem
        if down:
            free = sum(max(int(mem.free[n] - mem.wmark_min[n]), 0) for n in self.lower)
        else:
            free = max(int(mem.free[self.top] - mem.wmark_low[self.top]), 0)
        most = self._pairs_allowed(dp)
        if most == 0:
            return
        pairs = pick_pairs(p_src, p_dst, free // HP, dp, most,
                           order=(src_up, np.arange(len(p_dst))))
        if not pairs:
            return
        moving = src[[i for i, _ in pairs]]
        partners = dst[[j for _, j in pairs if j >= 0]]
        self.shifts["down" if down else "up"] += len(pairs)
        if down:
            self._apply(partners, moving, now)
        else:
            self._apply(moving, partners, now)

    def _pairs_allowed(self, dp: float) -> int:
        """Pairs this loop may swap. The artifact's loop swaps while the bytes moved
        are under min(`limit`, dp x traffic x 64 B) (pebs.c, `for (migrated_bytes = 0;
        migrated_bytes < migrate_limit;)`): ceil(limit / pair) pairs, at least one
        whenever the limit is positive. A 1/F miniature holds 1/F of the pages, so it
        moves 1/F of those bytes: a credit carries the fraction of a pair from loop to
        loop (else its floor of one pair a loop would swap F times the artifact's
        share of memory); what a loop may not use is lost, as in the artifact."""
        pair = 2 * HP * PAGE  # a pair copies two 2 MiB pages
        scale = float(self.sim.scaled_bytes(1.0))
        limit = min(self.sim.scaled_bytes(self.limit),
                    dp * self.view.traffic * ACCESS_BYTES) / scale  # full-scale bytes
        if limit < 1:  # the artifact's limit is a whole number of bytes
            return 0
        self._credit += math.ceil(limit / pair) * pair * scale
        most = int(self._credit // pair)
        self._credit -= most * pair
        return most

    def stats(self) -> dict:
        out = super().stats()
        out.update(colloid_shifts=dict(self.shifts), colloid_last=self.last)
        return out


@POLICIES.register("colloid-tpp")
class ColloidTpp(AutoNumaTiering):
    """Colloid (SOSP'24) on upstream Linux memory tiering, the artifact's on/off
    integration: its "TPP" is Linux 6.3's `numa_balancing=2` (host-architecture/
    colloid, tpp/README.md), so the base is `autonuma-tiering`; Colloid is mode 6
    (tiering bit 2 + Colloid bit 4, without the NORMAL bit 1). Rules (tpp/linux-6.3):
    - default-tier pages are scanned and stamped with their scan time as the others
      are, whether Colloid is on or not (mm/mprotect.c `change_pte_range`);
    - while the default tier's loaded latency exceeds the alternate tier's
      (`colloid_local_lat_gt_remote`), no hint fault promotes: the free-space test
      still resets the hot threshold and the threshold still adapts, but the refusal
      comes before the rate limit, so no candidate is counted
      (kernel/sched/fair.c `should_numa_migrate_memory`);
    - meanwhile a faulting default-tier page is demoted to the next node down if it is
      hot, which in mode 6 means its hint-fault latency is under the hot threshold
      (the node's adapted `nbp_threshold`, else `hot_threshold`, 1 s); the active-LRU
      test applies only with the NORMAL bit (fair.c `numa_migrate_memory_away_target`),
      and the demotion is a misplaced-page migration (mm/memory.c `do_numa_page`,
      `migrate_misplaced_page`: only into room above the target's high watermark);
    - with the NORMAL bit off, task_numa_fault counts no fault (fair.c, "NUMA fault
      stats not necessary when normal NUMA balancing is off"), so task_numa_placement
      never runs and the scan period stays at task_scan_start, which task_tick_numa
      sets at the first tick: the scanner's first period, not adapted (`adapt=0`).

    Measurement: `LoadedLatency` once per hint-fault poll (50 ms). colloid-mon busy-polls
    the counters with alpha 1/32, a time constant far below a poll, so per poll the
    counters' difference already is that average; `alpha` (1/2, colloid-mon's 10 ms
    timer mode) smooths across polls.
    """

    skip = "none"  #: mode 6 scans every node, the default tier's too

    def __init__(self, alpha=0.5, **tiering):
        super().__init__(**tiering)
        self.params.update(alpha=alpha)
        self.alpha = parse_number(alpha, "colloid alpha", lo=0.0, hi=1.0, lo_open=True)
        self.colloid_on = False
        self.on_polls = 0
        self.demoted_hot = 0
        self.last = None

    def attach(self, sim):
        super().attach(sim)
        self.view = LoadedLatency(sim, self.dst, self.alpha)
        self.scanner.adapt = False

    def fault_thread(self, times, latency):
        """`AutoNumaTiering.fault_thread`, or while Colloid is on every fault refused:
        the threshold resets (free space enough) or adapts at the faults' times, and
        every fault is refused before the rate limit counts it; kswapd still runs
        (`settle` on the poll as it found the node)."""
        if not self.colloid_on:
            return super().fault_thread(times, latency)
        if times.shape[0]:
            if int(self.sim.mem.free[self.dst]) > self.enough_mark():
                self.nbp_threshold = 0.0
            else:
                j = int(np.searchsorted(times, self.th_start + self.th_period,
                                        side="right"))
                if j < times.shape[0]:
                    self._adjust_threshold(float(times[j]))
        return np.zeros(times.shape[0], dtype=np.int8), self.kswapd.begin()

    def on_faults(self, pages, times, latency, now):
        self.view.update()
        st = self.view.state()
        if st is not None:
            self.last = {"L_D": st[0], "L_A": st[1], "p": st[2]}
        self.colloid_on = st is not None and st[0] > st[1]
        sim = self.sim
        latency = np.asarray(latency)
        local = sim.node_of(pages) == self.dst
        if self.colloid_on:
            self.on_polls += 1
            p = pages[local][latency[local] < self.threshold()]
            lower = sim.machine.lower(self.dst)
            if lower is not None and p.shape[0]:
                self.demoted_hot += fault_migrate(sim, p[:migrate_room(sim, lower)], lower,
                                                  "colloid-demote")
        keep = ~local
        super().on_faults(pages[keep], times[keep], latency[keep], now)

    def stats(self):
        d = super().stats()
        d.update(colloid_on_polls=int(self.on_polls), colloid_demoted=int(self.demoted_hot),
                 colloid_last=self.last)
        return d


# -- compiled kernels (tierlab.jit) --------------------------------------------
@kernel
def _tier_shares(tier, reads, writes, clk, clock, max_shift, none, src_tier, dst_tier,
                 zero_partners, src, cs, dst, cd, p_src, p_dst, src_up, dst_up, hs, hd):
    # Colloid on HeMem: every tracked page cooled in place (as halve_at); the pages of
    # src_tier of positive count (src, in index order, with their counts cs and
    # shares count / total) and the partners, the pages of dst_tier (of positive
    # count unless zero_partners), listed in ascending count, equal counts in index
    # order (a stable argsort of the shares, which count / total keeps in the counts'
    # order), with their shares; src_up: the sources in ascending count. By a counting
    # sort over the counts (histograms hs, hd); the arrays after zero_partners are
    # the caller's, of at least len(tier) entries (hs, hd: any size). Two passes over
    # the pages without branches (the cooling with the counts into dst_up, then the
    # lists: each page written at the end of both, which advance where it belongs);
    # the rest over the two lists.
    # Returns (total, sources, partners, sorted): not sorted (src_up and the partners
    # in index order, dst_up their counts) when a count reaches len(hs)
    n = tier.shape[0]
    total = np.int64(0)
    ch = dst_up  # each page's count: scratch until the partners are placed
    for h in range(n):
        tr = tier[h] != none
        s = min(max(clock - clk[h], 0), max_shift)
        r = reads[h] >> s
        w = writes[h] >> s
        reads[h] = r if tr else reads[h]
        writes[h] = w if tr else writes[h]
        clk[h] = clock if tr else clk[h]
        x = r + w
        ch[h] = x
        total += x if tr else 0
    nsrc = ndst = 0
    for h in range(n):
        x = ch[h]
        t = tier[h]
        src[nsrc] = h
        cs[nsrc] = x
        dst[ndst] = h
        cd[ndst] = x
        nsrc += (t == src_tier) & (x > 0)
        ndst += (t == dst_tier) & ((x > 0) | zero_partners)
    ft = np.float64(total) if total > 0 else np.float64(1.0)  # no shares without counts
    for i in range(nsrc):
        p_src[i] = np.float64(cs[i]) / ft
    cap = hs.shape[0]
    ok = True
    for i in range(nsrc):
        if cs[i] >= cap:
            ok = False
    for j in range(ndst):
        if cd[j] >= cap:
            ok = False
    if not ok:
        for j in range(ndst):
            src_up[j] = dst[j]
            dst_up[j] = cd[j]
            p_dst[j] = np.float64(cd[j]) / ft
        return total, nsrc, ndst, False
    hs[:] = 0
    hd[:] = 0
    for i in range(nsrc):
        hs[cs[i]] += 1
    for j in range(ndst):
        hd[cd[j]] += 1
    a = 0  # hs[c], hd[c]: where count c's first entry goes
    b = 0
    for c in range(cap):
        x, y = hs[c], hd[c]
        hs[c], hd[c] = a, b
        a += x
        b += y
    for i in range(nsrc):
        c = cs[i]
        src_up[hs[c]] = i
        hs[c] += 1
    for j in range(ndst):  # the partners placed by count: pages and shares
        c = cd[j]
        k = hd[c]
        dst_up[k] = dst[j]
        p_dst[k] = np.float64(c) / ft
        hd[c] = k + 1
    for j in range(ndst):
        dst[j] = dst_up[j]
    return total, nsrc, ndst, True


class TierShares:
    """Colloid-on-HeMem's view of every tracked page (`__call__`), with its arrays kept
    between calls: its 48,500 calls at bench_scale would map and fault 0.9 MB of fresh
    arrays each."""

    #: counts below this are sorted by counting (HeMem's are a few dozen at most)
    COUNTS = 1024

    def __init__(self):
        self._buf = Scratch()
        self._hist = (np.empty(self.COUNTS, np.int64), np.empty(self.COUNTS, np.int64))

    def __call__(self, tier, reads, writes, clk, clock: int, max_shift: int, none: int,
                 src_tier: int, dst_tier: int, zero_partners: bool = True):
        """Every page with tier != none cooled in place (`halve_at`), then (total
        count, sources, their shares, the sources' order, partners, their shares): the
        sources are the pages of src_tier of positive count, in index order, with
        src_up their indexes in ascending share; the partners are the pages of
        dst_tier (of positive count unless `zero_partners`) in ascending share, equal
        shares in index order: np.argsort(kind="stable") of the shares, by a counting
        sort over the integer counts, whose order count / total keeps (Colloid's pairs
        sorted both, 0.43 of their 0.55 ms a call at bench_scale; numpy's sort when a
        count reaches `COUNTS`). Shares are what numpy's float sum and division give
        (integer counts: the sum is exact below 2^53); zeros where the total is 0. The
        arrays returned are views of this object's, valid until its next call."""
        n = tier.shape[0]
        buf = self._buf.get(*((dt, n) for dt in (np.int64, np.int64, np.int64, np.int64,
                                                 np.float64, np.float64, np.int64,
                                                 np.int64)))
        src, cs, dst, cd, p_src, p_dst, src_up, dst_up = buf
        total, ns, nd, counted = _tier_shares(
            tier, reads, writes, clk, np.int64(clock), np.int64(max_shift),
            np.uint8(none), np.uint8(src_tier), np.uint8(dst_tier), bool(zero_partners),
            *buf, *self._hist)
        src, p_src, dst, p_dst = src[:ns], p_src[:ns], dst[:nd], p_dst[:nd]
        if counted:
            return int(total), src, p_src, src_up[:ns], dst, p_dst
        # a count past the table: the partners' pages and counts were left in src_up
        # and dst_up, in index order
        o = np.argsort(dst_up[:nd], kind="stable")
        dst[:] = src_up[:nd][o]
        p_dst[:] = dst_up[:nd][o] / (float(total) if total > 0 else 1.0)
        return int(total), src, p_src, np.argsort(cs[:ns], kind="stable"), dst, p_dst


@kernel
def _pick_pairs(p_src, src_up, vals, partner, free_slots, dp, most, out_i, out_j):
    # Colloid's pairs (policies.colloid.pick_pairs): each round, every unused source i
    # takes the first unused partner k with vals[k] >= p_i - left (vals ascending), or
    # a free frame; the largest difference in (0, left] pairs first, equal differences
    # by lowest i. The sources are walked in ascending share (src_up) so the partner
    # pointer only moves forward: O(sources + partners) a round, not a search each
    n, m, ns = p_src.shape[0], vals.shape[0], src_up.shape[0]
    alive = np.ones(m, np.bool_)
    used = np.zeros(n, np.bool_)
    left = dp
    npairs = 0
    while npairs < most and left > 0:
        best = -np.inf
        bi = -1
        bk = -1
        bfree = False
        k = 0
        for q in range(ns):
            i = src_up[q]
            p = p_src[i]
            x = p - left
            while k < m and (vals[k] < x or not alive[k]):
                k += 1
            part = vals[k] if k < m and not used[i] else np.inf
            diff = p - part if part < p else -np.inf
            use_free = False
            if free_slots > 0:
                fd = p if (not used[i]) and p <= left and p > 0 else -np.inf
                use_free = fd >= diff
                if fd > diff:
                    diff = fd
            if diff > best or (diff == best and i < bi):
                best, bi, bk, bfree = diff, i, k, use_free
        if bi < 0 or not np.isfinite(best) or best <= 0:
            break
        out_i[npairs] = bi
        if bfree:
            out_j[npairs] = -1
            free_slots -= 1
        else:
            out_j[npairs] = partner[bk]
            alive[bk] = False
        npairs += 1
        used[bi] = True
        left -= best
    return npairs


def _walk_pairs(p_src, vals, partner, free_slots: int, dp: float, most: int,
                src_up=None):
    """Colloid's pair rule over sources `p_src` and the unused partners' shares `vals`
    (ascending, each with its index `partner`): (source indexes, partner indexes or -1
    for a free frame), in pairing order (`policies.colloid.pick_pairs`). `src_up`: the
    sources of positive share in ascending share, if the caller has them (no partner
    share may then be negative)."""
    p_src = np.ascontiguousarray(p_src, dtype=np.float64)
    most = max(min(int(most), p_src.shape[0]), 0)
    out_i, out_j = np.empty(most, np.int64), np.empty(most, np.int64)
    vals = np.ascontiguousarray(vals, dtype=np.float64)
    # any order of ascending share would do (equal differences go to the lowest index
    # whatever the walk's order); numpy's stable sort was the fastest on HeMem's shares.
    # Without a negative partner share only sources of positive share can pair (p - v
    # > 0, or a free frame for p > 0), and the partner pointer's stops for the others
    # do not move it: the walk skips them (bench_memsim's colloid-hemem: 276 of 241,000
    # sources a call)
    if src_up is None:
        src = np.flatnonzero(p_src > 0) if vals.shape[0] == 0 or vals[0] >= 0 \
            else np.arange(p_src.shape[0])
        src_up = src[np.argsort(p_src[src], kind="stable")]
    elif vals.shape[0] and vals[0] < 0:
        raise ValueError("pick_pairs: src_up holds only positive shares, but a partner's "
                         "share is negative")
    k = _pick_pairs(p_src, src_up, vals,
                    np.ascontiguousarray(partner, dtype=np.int64), int(free_slots),
                    float(dp), most, out_i, out_j)
    return out_i[:k], out_j[:k]
