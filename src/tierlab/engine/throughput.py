"""Closed-loop throughput from placement (DESIGN.md, "Closed loop").

Per unit of work a thread spends `compute_ns` plus the memory stall of its accesses:
sum over nodes of reads x read latency + writes x write latency, divided by the
memory-level parallelism. Latency grows with the node's utilisation as the waiting
time of an M/D/1 queue, L = L0 * (1 + u / (2 (1 - u))), which also caps throughput at
the node's bandwidth. Utilisation counts read traffic (reads, and the read-for-ownership
of writes) against read bandwidth, write-backs against write bandwidth, plus migration
copies in flight. Throughput X (work/s over all threads) is the fixed point
X = threads / t(X), found by bisection (t grows with X, so there is one root).
"""
from __future__ import annotations

import math

import numpy as np

from .. import kernels


def loaded_factor(u: float) -> float:
    """Latency multiplier at utilisation u (M/D/1 mean sojourn / service time)."""
    return 1.0 + u / (2.0 * (1.0 - u))


def solve_throughput(reads, writes, read_lat_ns, write_lat_ns, read_bw, write_bw,
                     bg_util, compute_ns: float, mlp: float, threads: float,
                     access_bytes: float = 64.0, extra_writes=None):
    """Return (X work/s, per-node utilisation list, per-node latency factor list).

    reads/writes: accesses per unit of work on each node; *_bw in bytes/s;
    bg_util: utilisation already taken by background traffic (migrations), < 1;
    extra_writes: line writes per unit of work that take write bandwidth but no
    thread waits for (a DRAM cache's fills and write-backs).
    """
    k = len(reads)
    extra = extra_writes or [0.0] * k
    # bandwidth cost per unit of work, as a fraction of each node's capacity-seconds
    cost = [access_bytes * ((reads[i] + writes[i]) / read_bw[i]
                            + (writes[i] + extra[i]) / write_bw[i])
            for i in range(k)]
    base = [min(max(b, 0.0), 0.95) for b in bg_util]

    def util(x):
        return [base[i] + x * cost[i] for i in range(k)]

    # the nodes with accesses, each as (its unloaded stall per work, base, cost): the
    # same float operations in the same order as summing over every node, fewer calls
    terms = [(reads[i] * read_lat_ns[i] + writes[i] * write_lat_ns[i], base[i], cost[i])
             for i in range(k) if reads[i] or writes[i]]

    x_cap = math.inf
    for i in range(k):
        if cost[i] > 0:
            x_cap = min(x_cap, (1.0 - base[i]) / cost[i])
    lo = kernels.bisect_throughput(
        np.array([t[0] for t in terms]), np.array([t[1] for t in terms]),
        np.array([t[2] for t in terms]), float(compute_ns), float(mlp), float(threads),
        float(x_cap))
    x = lo
    u = util(x)
    return x, u, [loaded_factor(v) for v in u]
