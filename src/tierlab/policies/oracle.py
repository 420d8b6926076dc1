"""`oracle`: an upper bound under tierlab's own cost model. It reads the workload's true
rates (the one declared exception to "policies see monitor observations only") and,
whenever the field or the allocation changes, places every page at no cost where the
closed loop (engine/throughput.py: latencies, loaded latency per node, bandwidth caps)
is fastest.

`objective=throughput` (the default): the placement maximises the engine's
throughput X. X depends on the placement only through the per-node read and write
totals, so pages ranked hottest first are cut into bins (`bins` (2) of equal pages, plus
a cut at every node's capacity in that order, so the hits placement is one of the
candidates), and SLSQP chooses each bin's share per node (capacities, every page placed)
with dX/dshare from the implicit function theorem on X t(X) = threads (per node, the
marginal stall of one more read or write at fixed X, loaded-latency rise included, over
t + X dt/dX). A node's pages of a bin are spread evenly over the bin (`interleave`), so
each node gets the bin's mean rates as the solver assumed. It starts from the hits
placement and the placed result is kept only if it is faster (`_best`), so it is that
placement when bandwidth does not bind, and spreads hot pages over the tiers when the
fast tier's loaded latency exceeds theirs (Colloid's observation, SOSP'24). It is a
bound within the bins' resolution; more bins were slower and not better here (SLSQP's
local optima). Cost per change: the solve over bins x nodes, and work that
follows segments and moved pages, not the page map: the hot order is kept per piece
(a piece's allocated pages take consecutive ranks, counted from the engine's per-block
node counts, `Memory.blocks`), the desired node per rank as runs (`RankMap`), and the
movers are found by splitting pieces at run starts and reading only the blocks that
hold pages off their part's node (`_movers`); the candidates are compared on per-segment
counts plus their moves (`_best`). So a change costs O(segments x nodes + blocks +
pages moved + pages of bins spread over several nodes), blocks being 512 pages. At
512 GiB with 10x the updates (benchmarks/bench_memsim.py) this took the oracle from 7.0
to 0.5 s of CPU, results identical.

`objective=hits`: the earlier rule, hottest pages in the lowest-latency nodes (fast-tier
hits maximised); not a bound once bandwidth binds.
"""
from __future__ import annotations

import numpy as np

from ..engine.throughput import loaded_factor
from ..params import parse_choice, parse_number
from ..units import parse_duration
from .base import POLICIES, Policy


def _cuts(starts, ends, n: int) -> np.ndarray:
    """np.unique of 0, n and the segments' bounds: the field's segments are sorted and
    disjoint, so interleaved they are already in order (no sort)."""
    m = starts.shape[0]
    if m == 0 or starts[0] < 0 or ends[-1] > n:
        return np.unique(np.concatenate(([0, n], starts, ends)))
    c = np.empty(2 * m + 2, dtype=np.int64)
    c[0], c[-1] = 0, n
    c[1:-1:2], c[2:-1:2] = starts, ends
    keep = np.empty(c.shape[0], dtype=bool)
    keep[0] = True
    np.not_equal(c[1:], c[:-1], out=keep[1:])
    return c[keep]


def hot_pieces(field, mem):
    """The global hot order by pieces (the field's segments and the gaps between them),
    from the block counts (O(segments + blocks), no pass over the pages): (piece starts
    and ends, each piece's first rank and allocated pages, allocated pages before each
    piece in address order, all in address order; then piece read and write rate per
    page and allocated pages per piece, hottest first). Piece i's allocated pages, in
    address order, take ranks first[i], first[i] + 1, ..."""
    n = mem.npages
    cut = _cuts(field.starts, field.ends, n)
    starts, ends = cut[:-1], cut[1:]
    read = np.zeros(len(starts))
    write = np.zeros(len(starts))
    seg = field.segment_of(starts)
    ok = seg >= 0
    read[ok], write[ok] = field.read[seg[ok]], field.write[seg[ok]]
    csum = mem.allocated_before(cut)
    per_piece = csum[1:] - csum[:-1]
    order = np.argsort(-(read + write), kind="stable")
    first = np.zeros(len(starts), dtype=np.int64)
    first[order] = np.concatenate(([0], np.cumsum(per_piece[order])[:-1]))
    return (starts, ends, first, per_piece, csum[:-1], read[order], write[order],
            per_piece[order])


class RankMap:
    """The desired node of every rank as runs: run j covers ranks [lo[j], lo[j + 1])
    on node val[j], or, where val[j] is -1, on the nodes explicit[off[j]:...] one per
    rank (a bin spread over several nodes). Runs keep the placement O(runs) in size
    where the per-rank byte map was O(pages)."""

    def __init__(self, lo, val, explicit=None, off=None):
        self.lo = np.asarray(lo, dtype=np.int64)
        self.val = np.asarray(val, dtype=np.int64)
        self.explicit = np.zeros(0, np.uint8) if explicit is None else explicit
        self.off = np.zeros(len(self.lo), np.int64) if off is None else np.asarray(off)

    def run_of(self, rank) -> np.ndarray:
        return np.searchsorted(self.lo, rank, side="right") - 1


def hits_by_rank(total: int, bounds, order) -> RankMap:
    """The hits placement: `order`'s nodes filled up to cumulative `bounds`, the last
    taking the rest of the `total` ranks."""
    lo = [0]
    val = []
    for i, node in enumerate(order):
        hi = total if i == len(order) - 1 else int(min(max(bounds[i], lo[-1]), total))
        val.append(node)
        lo.append(hi)
    return RankMap(lo[:-1], val)


def _movers(mem, pieces, ranks: RankMap):
    """(pages, their desired nodes) of the allocated pages whose desired node, that of
    their rank, is not their node, in address order: what `teleport` keeps of a full
    placement. Each piece is split where a run of `ranks` begins inside its rank range
    (at that rank's page, `Memory.select_allocated`), so every part lies in one run; a
    part on one node is read only in the blocks holding pages elsewhere
    (`Memory.pages_not_on`), a part of a spread bin page by page."""
    starts, ends, first, npg, before = (x[pieces[3] > 0] for x in pieces[:5])
    if len(starts) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.uint8)
    inner = ranks.lo[ranks.lo > 0]
    by_rank = np.argsort(first, kind="stable")
    p = by_rank[np.maximum(np.searchsorted(first[by_rank], inner, side="right") - 1, 0)]
    inside = (inner > first[p]) & (inner < first[p] + npg[p])
    inner, p = inner[inside], p[inside]
    a = np.concatenate((starts, mem.select_allocated(before[p] + inner - first[p])))
    rank0 = np.concatenate((first, inner))
    piece = np.concatenate((np.arange(len(starts)), p))
    o = np.argsort(a, kind="stable")
    a, rank0, piece = a[o], rank0[o], piece[o]
    b = ends[piece]
    same = piece[1:] == piece[:-1]
    b[:-1][same] = a[1:][same]
    val = ranks.val[ranks.run_of(rank0)]
    one = np.flatnonzero(val >= 0)
    pg, part = mem.pages_not_on(a[one], b[one], val[one])
    pages, dsts = [pg], [val[one][part].astype(np.uint8)]
    spread = np.flatnonzero(val < 0)
    if len(spread):
        pg, n = mem.allocated_in(a[spread], b[spread])
        run = ranks.run_of(rank0[spread])  # one run per part: index its nodes directly
        at = np.repeat(ranks.off[run] + rank0[spread] - ranks.lo[run], n)
        want = ranks.explicit[at + (np.arange(len(pg)) - np.repeat(np.cumsum(n) - n, n))]
        mv = mem.node[pg] != want
        pages.append(pg[mv])
        dsts.append(want[mv])
    pages, dsts = np.concatenate(pages), np.concatenate(dsts)
    o = np.argsort(pages, kind="stable")
    return pages[o], dsts[o]


def _hits_node(rank, bounds, order):
    """The node of each rank when `order`'s nodes fill up to cumulative `bounds`."""
    slot = np.minimum(np.searchsorted(bounds, rank, side="right"), len(order) - 1)
    return np.asarray(order, dtype=np.uint8)[slot]


def rank_bins(read, write, npages, cuts, nbins: int):
    """The hot order cut into at most `nbins` rank ranges of about equal pages, also cut
    at `cuts` (ranks): per bin its first rank, its pages, and its mean read and write
    rate per page (exact: cumulative rates are piecewise linear in rank)."""
    cum_p = np.concatenate(([0], np.cumsum(npages)))
    total = int(cum_p[-1])
    edges = np.unique(np.concatenate((np.rint(np.linspace(0, total, nbins + 1)),
                                      np.clip(cuts, 0, total)))).astype(np.int64)
    n = np.diff(edges)
    keep = np.concatenate((n > 0, [True]))
    edges = edges[keep]
    n = np.diff(edges)
    r = np.diff(np.interp(edges, cum_p, np.concatenate(([0], np.cumsum(read * npages)))))
    w = np.diff(np.interp(edges, cum_p, np.concatenate(([0], np.cumsum(write * npages)))))
    return edges[:-1], n, r / n, w / n


def marginal_times(reads, writes, x, devices):
    """Per node, the stall time (ns) of one more read and one more write per unit of
    work at throughput x at fixed x (latency x M/D/1 factor, plus the factor's rise with
    utilisation), and the stall's derivative in x (ns per work/s)."""
    lat_r, lat_w, bw_r, bw_w, bg, access_bytes = devices[:6]
    k = len(reads)
    g_r, g_w, d_x = np.zeros(k), np.zeros(k), 0.0
    for i in range(k):
        cr = access_bytes / bw_r[i]
        cw = access_bytes * (1 / bw_r[i] + 1 / bw_w[i])
        per_x = cr * reads[i] + cw * writes[i]
        u = min(bg[i] + x * per_x, 0.999999)
        f = loaded_factor(u)
        df = 1 / (2 * (1 - u) ** 2)
        load = reads[i] * lat_r[i] + writes[i] * lat_w[i]
        g_r[i] = lat_r[i] * f + load * df * x * cr
        g_w[i] = lat_w[i] * f + load * df * x * cw
        d_x += load * df * per_x
    return g_r, g_w, d_x


def balanced_shares(read, write, npages, limits, start, predict, devices):
    """Pages of each bin per node (B x k) maximising predict's throughput X under the
    bins' pages and the nodes' limits, from `start` (SLSQP on the fractions, with
    dX/dy from the implicit function theorem on X t(X) = threads); returns (shares, X)."""
    from scipy.optimize import minimize  # here: importing scipy costs the guest ~110 MiB

    compute_ns, mlp = devices[6], devices[7]
    B, k = start.shape
    n = npages.astype(float)

    def totals(z):
        y = z.reshape(B, k) * n[:, None]
        return y.T @ read, y.T @ write

    def neg_x(z):
        return -predict(*totals(z))[0] / x0

    def grad(z):
        reads, writes = totals(z)
        x = predict(reads, writes)[0]
        g_r, g_w, d_x = marginal_times(reads, writes, x, devices)
        t = compute_ns + _stall(reads, writes, x, devices) / mlp
        dx_dy = -x * (np.outer(read, g_r) + np.outer(write, g_w)) / mlp / (t + x * d_x / mlp)
        return -(dx_dy * n[:, None]).ravel() / x0

    z0 = (start / np.maximum(n, 1)[:, None]).ravel()
    x0 = predict(*totals(z0))[0]
    cons = [{"type": "eq", "fun": lambda z: z.reshape(B, k).sum(axis=1) - 1,
             "jac": lambda z: np.kron(np.eye(B), np.ones((1, k)))},
            {"type": "ineq", "fun": lambda z: (limits - (z.reshape(B, k) * n[:, None])
                                               .sum(axis=0)) / max(n.sum(), 1),
             "jac": lambda z: -np.kron(n[None, :], np.eye(k)) / max(n.sum(), 1)}]
    res = minimize(neg_x, z0, jac=grad, bounds=[(0, 1)] * (B * k), constraints=cons,
                   method="SLSQP", options={"maxiter": 200, "ftol": 1e-10})
    z = np.clip(res.x, 0, 1).reshape(B, k)
    z /= np.maximum(z.sum(axis=1, keepdims=True), 1e-300)
    x = predict(*totals(z.ravel()))[0]
    if x < x0:
        return start, x0
    return z * n[:, None], x


def _stall(reads, writes, x, devices):
    """Sum over nodes of loaded read and write latencies (ns per unit of work)."""
    lat_r, lat_w, bw_r, bw_w, bg, access_bytes = devices[:6]
    total = 0.0
    for i in range(len(reads)):
        u = min(bg[i] + x * access_bytes * ((reads[i] + writes[i]) / bw_r[i]
                                            + writes[i] / bw_w[i]), 0.999999)
        total += (reads[i] * lat_r[i] + writes[i] * lat_w[i]) * loaded_factor(u)
    return total


def interleave(counts) -> RankMap:
    """Node of every rank: the bins in rank order, bin b holding counts[b, i] pages of
    node i, each node's spread evenly over the bin (so every node gets the bin's mean
    rates, as the shares assumed): node i's t-th page at key b + (t + 0.5) / counts[b, i],
    ranks in key order, the lower node first on a tie. Keys of bin b lie in (b, b + 1),
    so each bin is ordered on its own; a bin on one node is a run."""
    B, k = counts.shape
    lo, val, off, explicit = [], [], [], []
    base = nexp = 0
    for b in range(B):
        c = counts[b]
        m = int(c.sum())
        if m == 0:
            continue
        lo.append(base)
        off.append(nexp)
        if np.count_nonzero(c) <= 1:
            val.append(int(np.argmax(c)))
        else:
            nid = np.repeat(np.arange(k), c)
            t = np.arange(m) - np.repeat(np.cumsum(c) - c, c)
            key = b + (t + 0.5) / c[nid]
            explicit.append(nid.astype(np.uint8)[np.argsort(key, kind="stable")])
            val.append(-1)
            nexp += m
        base += m
    return RankMap(lo, val, np.concatenate(explicit) if explicit else None, off)


def round_shares(shares, npages, limits):
    """Integer pages per (bin, node) from fractional shares within `limits`: floors,
    then each bin's remaining pages to the nodes with room, largest fraction first."""
    base = np.floor(shares + 1e-9).astype(np.int64)
    room = np.asarray(limits, dtype=np.int64) - base.sum(axis=0)
    for b in range(shares.shape[0]):
        rem = int(npages[b]) - int(base[b].sum())
        for i in np.lexsort((-room, -(shares[b] - base[b]))):
            if rem <= 0:
                break
            take = min(rem, max(int(room[i]), 0))
            base[b, i] += take
            room[i] -= take
            rem -= take
    return base


@POLICIES.register("oracle")
class Oracle(Policy):
    """Knows the true rates; at each change places every page where the engine's closed
    loop is fastest (`objective=throughput`), or the hottest pages in the fastest tiers
    (`objective=hits`), at no cost: the upper bound of every comparison of placements
    across nodes. Not on a memory-mode machine (DRAM as a cache), where it places
    nothing and frame choice (Johnny Cache) beats it (docs/model.md, "Oracle")."""

    uses_true_rates = True
    free_migrations = True

    def __init__(self, interval="1s", objective="throughput", bins=2):
        super().__init__(interval=interval, objective=objective, bins=bins)
        self.interval = parse_duration(interval, "oracle interval")
        self.objective = parse_choice(objective, "oracle objective", ("throughput", "hits"))
        self.bins = int(parse_number(bins, "oracle bins", lo=1, hi=512))
        self._seen = None
        self.solves = 0

    def attach(self, sim):
        super().attach(sim)
        sim.every(self.interval, self.tick)

    def on_change(self):
        self.tick(self.sim.now)

    def tick(self, now):
        sim = self.sim
        version = (sim.field_version, sim.alloc_version)
        if version == self._seen:
            return
        self._seen = version
        m = sim.machine
        order = sorted(range(m.nnodes), key=m.read_latency_ns)
        # fill each node down to its low watermark, where kswapd stays asleep (the
        # allocator fills that far too); the slowest node takes whatever is left
        limits = (sim.mem.capacity - sim.mem.wmark_low).astype(np.int64)
        limits[order[-1]] = sim.mem.capacity[order[-1]]
        if sim.mem.allocated > limits.sum():
            limits = sim.mem.capacity.copy()
        if self.objective == "hits" or getattr(sim, "cache", None) is not None:
            pieces = hot_pieces(sim.true_field, sim.mem)
            ranks = hits_by_rank(int(pieces[-1].sum()), np.cumsum(limits[order]), order)
            pages, dst = _movers(sim.mem, pieces, ranks)
        else:
            pages, dst = self._balanced(sim, order, limits)
        sim.teleport(pages, dst, reason="oracle")

    def _balanced(self, sim, order, limits):
        """The throughput placement (module docstring); the hits placement when that is
        at least as fast once placed."""
        field, mem = sim.true_field, sim.mem
        pieces = hot_pieces(field, mem)
        read, write, npages = pieces[-3:]
        bounds = np.cumsum(limits[order])
        first, n, r, w = rank_bins(read, write, npages, bounds, self.bins)
        m, wl = sim.machine, sim.workload
        k = m.nnodes
        devices = ([m.read_latency_ns(i) for i in range(k)],
                   [m.write_latency_ns(i) for i in range(k)],
                   [t.read_bw for t in m.tiers], [t.write_bw for t in m.tiers],
                   [m.antagonist.get(i, 0.0) for i in range(k)], wl.access_bytes,
                   wl.compute_ns, wl.mlp)
        start = np.zeros((len(n), k))  # the hits placement: each bin on one node
        start[np.arange(len(n)), _hits_node(first, bounds, order)] = n
        shares, _ = balanced_shares(r, w, n, limits.astype(float), start, sim.predict,
                                    devices)
        self.solves += 1
        hits = _movers(mem, pieces, hits_by_rank(int(npages.sum()), bounds, order))
        placed = _movers(mem, pieces, interleave(round_shares(shares, n, limits)))
        return self._best(sim, field, hits, placed)

    @staticmethod
    def _best(sim, field, *candidates):
        """The candidate placement ((pages that move, their nodes)) with the highest X:
        each one's per-node totals from the segments' block counts plus its moves."""
        mem = sim.mem
        k = sim.machine.nnodes
        now = mem.range_counts(field.starts, field.ends)
        best, best_x = None, -1.0
        for pages, dst in candidates:
            seg = field.segment_of(pages)
            ok = seg >= 0
            key = seg[ok] * k
            size = now.size
            delta = np.bincount(key + dst[ok], minlength=size) \
                - np.bincount(key + mem.node[pages[ok]], minlength=size)
            x = sim.predict(*field.totals(now + delta.reshape(now.shape)))[0]
            if x > best_x:
                best, best_x = (pages, dst), x
        return best
