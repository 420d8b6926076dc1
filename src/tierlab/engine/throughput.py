"""Closed-loop throughput from placement (docs/model.md, "Closed loop").

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

from ..jit import kernel


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
    lo = bisect_throughput(
        np.array([t[0] for t in terms]), np.array([t[1] for t in terms]),
        np.array([t[2] for t in terms]), float(compute_ns), float(mlp), float(threads),
        float(x_cap))
    x = lo
    u = util(x)
    return x, u, [loaded_factor(v) for v in u]


# -- compiled kernels (tierlab.jit) --------------------------------------------
@kernel
def _bisect_throughput(a, b, c, compute_ns, mlp, threads, x_cap):
    # solve_throughput's root of x - threads / t(x), t(x) = (compute_ns + sum_i a_i
    # (1 + u_i / (2 (1 - u_i))) / mlp) 1e-9 with u_i = b_i + x c_i, by its bisection
    lo = 0.0
    hi = 0.0
    for it in range(61):
        x = 0.0 if it == 0 else 0.5 * (lo + hi)
        stall = 0.0
        for i in range(a.shape[0]):
            u = b[i] + x * c[i]
            stall += a[i] * (1.0 + u / (2.0 * (1.0 - u)))
        t = (compute_ns + stall / mlp) * 1e-9
        if it == 0:
            hi = threads / t  # unloaded throughput: an upper bound
            if hi >= x_cap:
                hi = x_cap * (1 - 1e-12)
            continue
        if x - threads / t > 0:
            hi = x
        else:
            lo = x
        if hi - lo <= 1e-9 * hi:
            break
    return lo


def bisect_throughput(a, b, c, compute_ns: float, mlp: float, threads: float,
                      x_cap: float) -> float:
    """The closed loop's throughput (`engine.throughput.solve_throughput`): the same
    bisection, float operation for float operation, compiled (it runs at every engine
    step: 32 evaluations of the loaded stall each)."""
    return float(_bisect_throughput(a, b, c, compute_ns, mlp, threads, x_cap))
