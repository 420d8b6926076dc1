"""Load balance over N memory nodes from per-node counters, for tierlab's own policy
(policies/own.py): each node's loaded latency fitted as a function of the process's
traffic there, and the shares of pages to move between nodes that lower the total
stall most for their copies.

The inputs are what a real machine shows per NUMA node: the process's reads (CHA TOR
inserts, or per-core OCR events by target memory) and their mean latency (TOR
occupancy / inserts, Little's law), the memory controllers' writes (IMC CAS_COUNT.WR;
PMM write-queue inserts on Optane), and the node's unloaded latency and read and
write bandwidth (ACPI HMAT: /sys/devices/system/node/nodeN/access0/initiators/
read_latency, read_bandwidth, write_bandwidth).
"""
from __future__ import annotations

import numpy as np

from ..units import PAGE

LINE = 64  #: bytes one access moves (a cache line)
U_MAX = 0.99  #: utilisation the model is evaluated up to
FIT_WINDOW = 30  #: decisions of history in a node's fit
SHARES = np.array([0.01, 0.02, 0.05, 0.1, 0.2, 0.35, 0.5])  #: shares of a node tried
MAX_STEPS = 8  #: moves one plan makes at most
QUEUEING = 0.5  #: a node sheds load once its marginal latency exceeds L0 by this share


def utilisation(y):
    """Utilisation u of a queue whose latency is y times its unloaded one, inverting
    the M/D/1 sojourn y = 1 + u / (2 (1 - u))."""
    y = np.maximum(y, 1.0)
    return 2 * (y - 1) / (2 * y - 1)


def factor(u):
    """y(u) = 1 + u / (2 (1 - u)), u clipped below U_MAX."""
    u = np.clip(u, 0.0, U_MAX)
    return 1.0 + u / (2.0 * (1.0 - u))


class LoadCurves:
    """Each node's loaded latency as a function of this process's traffic there:
    L = L0 y(b + a v), y the M/D/1 sojourn factor (latency rises as 1 + u / (2 (1 -
    u)) towards saturation, the shape of measured loaded-latency curves; Colloid,
    SOSP'24, section 2), v = R line / read_bw + W line (1 / read_bw + 1 / write_bw)
    the utilisation our reads R and writes W (a write reads the line for ownership,
    then writes it back) would cause by the node's bandwidth, a >= 1 the slope of the
    node's utilisation over v across the last FIT_WINDOW decisions (least squares,
    once v has varied by 5%; a node not fitted takes the fitted nodes' median, else 1),
    at most u / v so the curve passes through the measured point; b = u - a v is what
    is not ours (a co-runner, migration copies). Taking all of u as ours would make
    a node shared with a co-runner look ever steeper as we leave it, and empty it."""

    def __init__(self, lat0, read_bw, write_bw):
        self.L0 = np.asarray(lat0, dtype=float)
        self.kr = LINE / np.asarray(read_bw, dtype=float)
        self.kw = self.kr + LINE / np.asarray(write_bw, dtype=float)
        n = self.L0.size
        self.hist = np.zeros((0, 2, n))
        self.R = self.W = self.u = self.b = np.zeros(n)
        self.a = np.ones(n)

    def update(self, reads, writes, lat) -> None:
        """One decision's counters: reads/s and writes/s per node, the reads' mean
        latency (s; NaN where none)."""
        R = np.asarray(reads, dtype=float)
        W = np.asarray(writes, dtype=float)
        lat = np.where(np.isfinite(lat) & (R > 0), lat, self.L0)
        u = utilisation(lat / self.L0)
        v = self.kr * R + self.kw * W
        self.R, self.W, self.u = R, W, u
        self.hist = np.concatenate((self.hist, [[v, u]]))[-FIT_WINDOW:]
        hv, hu = self.hist[:, 0], self.hist[:, 1]
        mv = hv.mean(axis=0)
        var = ((hv - mv) ** 2).mean(axis=0)
        cov = ((hv - mv) * (hu - hu.mean(axis=0))).mean(axis=0)
        fitted = (len(self.hist) >= 5) & (np.sqrt(var) > 0.05 * mv) & (v > 0)
        a = np.clip(np.where(fitted, cov / np.where(var > 0, var, 1.0), 1.0), 1.0, 20.0)
        a = np.where(fitted, a, float(np.median(a[fitted])) if fitted.any() else 1.0)
        self.a = np.where((v > 0) & (a * v > u), u / np.where(v > 0, v, 1.0), a)
        self.b = np.clip(u - self.a * v, 0.0, U_MAX)

    def latency(self, n, R, W):
        """Loaded latency (s) on node n at our traffic R, W."""
        return self.L0[n] * factor(self.b[n] + self.a[n] * (self.kr[n] * R
                                                             + self.kw[n] * W))

    def stall(self, n, R, W):
        """Thread-seconds of stall per second of our accesses on node n."""
        return (R + W) * self.latency(n, R, W)

    def copy_stall(self, R=None, W=None):
        """Per node, the thread-seconds of our stall one page copied to or from it
        costs: its PAGE bytes of copy traffic raise the node's utilisation by
        PAGE / read_bw for a second (the engine's copies in flight, docs/model.md),
        and our stall there grows by d stall / du = (R + W) L0 y'(u) per unit, y'(u)
        = 1 / (2 (1 - u)^2). Nothing on an idle node; a great deal near saturation,
        where a copy delays every access queued behind it."""
        R = self.R if R is None else np.asarray(R, dtype=float)
        W = self.W if W is None else np.asarray(W, dtype=float)
        u = np.clip(self.b + self.a * (self.kr * R + self.kw * W), 0.0, U_MAX)
        return (R + W) * self.L0 / (2 * (1 - u) ** 2) * self.kr * (PAGE / LINE)

    def marginal(self, n):
        """d stall / d(share of the node's traffic), per access moved (s): what one
        more access like the node's own costs there, its queueing effect included."""
        R, W = self.R[n], self.W[n]
        e = 1e-3
        return ((self.stall(n, R * (1 + e), W * (1 + e)) - self.stall(n, R, W))
                / max(e * (R + W), 1e-300))


def plan(cv: LoadCurves, pages, room, horizon, page_cost, margin, budget, closed=None):
    """Moves of random shares of a node's pages to another node that lower the total
    stall most, each made when its stall saved over `horizon` (s, per source node)
    repays `margin` x its copies (`page_cost` s each, plus the stall each copy's
    traffic causes on the two nodes it crosses, `LoadCurves.copy_stall`). A share q
    of node n's pages (`pages`, per node) carries q of its reads and writes in
    expectation; where the destination m lacks `room`, as many of m's pages (a random
    share of them, with their share of its traffic) go to the node, n included, where
    they cost least. Greedy, best net gain first, up to MAX_STEPS moves and `budget`
    pages copied.
    Nodes `closed` (a mask) take no load: those that shed it a decision ago, so two
    saturated nodes do not pass the same load back and forth.
    Only nodes whose queueing matters shed (marginal latency over (1 + QUEUEING) x
    the unloaded one): random pages carry a node's average heat, so between unloaded
    nodes a swap would only trade the order of pages by heat, which the region moves
    know better.
    Returns the moves [(n, m, pages_moved, to, pages_displaced, saved_per_s,
    cost_s)] and the reads and writes per node they lead to."""
    R, W = cv.R.copy(), cv.W.copy()
    P = np.asarray(pages, dtype=float).copy()
    room = np.asarray(room, dtype=float).copy()
    k = R.size
    out = []
    queued = np.array([cv.marginal(n) for n in range(k)]) > (1 + QUEUEING) * cv.L0
    for _ in range(MAX_STEPS):
        best = None
        for n in range(k):
            if P[n] < 1 or R[n] + W[n] <= 0 or not queued[n]:
                continue
            for m in range(k):
                if m == n or (closed is not None and closed[m]):
                    continue
                x = np.floor(SHARES * P[n])  # and what the budget allows
                x = np.unique(np.concatenate((x, [budget, budget // 2])))
                x = x[(x >= 1) & (x <= P[n])]
                d = np.maximum(x - np.maximum(room[m], 0.0), 0.0)
                ok = (x >= 1) & (d <= P[m]) & (x + d <= budget)
                if not ok.any():
                    continue
                q, qd = x / P[n], d / max(P[m], 1.0)
                base = cv.stall(n, R[n], W[n]) + cv.stall(m, R[m], W[m])
                rn, wn = R[n] * (1 - q), W[n] * (1 - q)
                rm, wm = R[m] * (1 - qd) + R[n] * q, W[m] * (1 - qd) + W[n] * q
                dr, dw = R[m] * qd, W[m] * qd  # the displaced pages' traffic
                cs = cv.copy_stall(R, W)
                saved = np.full((k, x.size), -np.inf)
                net = np.full((k, x.size), -np.inf)
                costs = np.zeros((k, x.size))
                for to in range(k):
                    if to == m:
                        continue
                    fits = d <= np.maximum(room[to] + (x if to == n else 0.0), 0.0)
                    if to == n:  # a swap
                        after = cv.stall(n, rn + dr, wn + dw) + cv.stall(m, rm, wm)
                        gain = base - after
                    else:
                        after = (cv.stall(n, rn, wn) + cv.stall(m, rm, wm)
                                 + cv.stall(to, R[to] + dr, W[to] + dw))
                        gain = base + cv.stall(to, R[to], W[to]) - after
                    saved[to] = np.where(fits | (d == 0), gain, -np.inf)
                    costs[to] = (x * (page_cost + cs[n] + cs[m])
                                 + d * (page_cost + cs[m] + cs[to]))
                    net[to] = np.where(ok, saved[to] * horizon[n] - margin * costs[to],
                                       -np.inf)
                to = net.argmax(axis=0)
                cols = np.arange(x.size)
                saved, net, cost = saved[to, cols], net[to, cols], costs[to, cols]
                i = int(np.argmax(net))
                if net[i] > 0 and (best is None or net[i] > best[0]):
                    best = (net[i], n, m, int(x[i]), int(to[i]), int(d[i]),
                            float(saved[i]), float(cost[i]), q[i], qd[i])
        if best is None:
            break
        _, n, m, x, to, d, saved, cost, q, qd = best
        dr, dw = R[m] * qd, W[m] * qd
        R[m] += R[n] * q - dr
        W[m] += W[n] * q - dw
        R[n] -= R[n] * q
        W[n] -= W[n] * q
        R[to] += dr
        W[to] += dw
        P[n] -= x
        P[m] += x - d
        P[to] += d
        room[m] -= x - d
        room[n] += x
        room[to] -= d
        budget -= x + d
        out.append((n, m, x, to, d, saved, cost))
    return out, R, W
