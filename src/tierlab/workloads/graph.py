"""graph: a power-law graph kernel (GAPBS-like PageRank or betweenness centrality).

Work unit: one *edge traversed* (one neighbour visited). A ``pr`` iteration traverses
every edge once; a ``bc`` iteration (one source) traverses every edge twice (forward BFS
and backward dependency pass), so total work = iterations x edges (x 2 for bc).

Layout (addresses in this order, first-touched in this order at work 0, as GAPBS builds
the CSR graph and then the kernel allocates its arrays):

- ``offsets``: CSR row offsets, 8 B per vertex;
- ``edges``: CSR neighbour ids, 4 B per edge (vertices x avg_degree edges);
- vertex property arrays of 8 B per vertex: ``pr`` has scores and contrib; ``bc`` has
  depths, sigma (path counts) and delta (dependencies).

Accesses per edge traversed (cache lines of 64 B; d = avg_degree):

- edges: 1/16 read (sequential sweep: uniform over the array);
- offsets: 1/(8d) read (sequential: uniform);
- every property array: 1/(8d) write, sequential per vertex (uniform), plus for pr
  scores a 1/(8d) read;
- random neighbour accesses, skewed by in-degree (vertex v is visited in proportion to
  its degree): pr reads contrib[v] once per edge; bc reads depths[v] once, sigma[v]
  0.5 times and writes it 0.25 times, and reads delta[v] 0.5 times per edge traversed
  (a schematic average of Brandes' two passes).

The LLC is not modelled: every random access is a memory access (hub vertices would
often hit in cache on a real machine).

Degrees: weights drawn i.i.d. from a power law P(x) ~ x^-alpha on [1, vertices]
(alpha = 2.0 by default; only relative weights matter). With ``sorted`` = no (default)
vertex ids are in random order (GAPBS generators), so each 4 KiB page of a property
array (512 vertices) receives the summed weight of 512 random vertices; with ``sorted``
= yes ids follow decreasing degree (a degree-sorted relabelling), so the first pages are
the hottest and the page masses follow the power law's quantiles exactly. For random
order with more than 4 Mi vertices, the heavy tail (the ~4 Mi heaviest vertices) is
drawn individually and scattered over random pages, and each page's sum of the light
vertices is drawn from its normal approximation (central limit theorem). Compactness:
the ``detail`` (65536) hottest pages of the vertex pattern keep their own segment; the
other pages are averaged over contiguous chunks (at most 16384 chunks), so a property
array costs at most ~150k segments.

Defaults: 800 M vertices, average degree 16: edges 48 GiB, offsets and each property
array 6 GiB, ~66 GiB in all for pr (72 GiB for bc; IDT's GAPBS runs had 96-110 GB RSS).
16 threads, memory-level parallelism 8 (independent neighbour loads), 1 ns of compute
per edge. ``iterations`` defaults to what fills ~90 simulated seconds with every page
in DRAM (9 for pr, 2 for bc at scale 1). ``scale`` multiplies the vertex count (edges
follow), so footprint and work scale together.
"""
from __future__ import annotations

import numpy as np

from ..errors import TierlabError
from ..field import RateField
from ..params import parse_choice, parse_flag, parse_number
from ..units import PAGE, fmt_size
from .base import WORKLOADS, Change, Workload
from ._common import MAX_WORK, common_params, default_work, parse_scale

VPP = PAGE // 8  # vertices per page of an 8-byte property array
EXACT_LIMIT = 1 << 22  # vertices drawn one by one up to this many

KERNELS = {
    # name: property arrays; per edge degree-skewed (read, write) per array;
    # extra sequential reads per vertex (in units of 1/(8d)) per array
    "pr": (("scores", "contrib"), {"contrib": (1.0, 0.0)}, {"scores": 1.0}),
    "bc": (("depths", "sigma", "delta"),
           {"depths": (1.0, 0.0), "sigma": (0.5, 0.25), "delta": (0.5, 0.0)}, {}),
}


def _pow_int(a, b, p):
    """Integral of x^p over [a, b] (vectorised in a, b)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    if abs(p + 1.0) < 1e-12:
        return np.log(b / a)
    return (b ** (p + 1) - a ** (p + 1)) / (p + 1)


class PowerLaw:
    """Density ~ x^-alpha on [1, xmax]."""

    def __init__(self, alpha: float, xmax: float):
        self.a, self.xmax = alpha, max(xmax, 2.0)
        self.norm = float(_pow_int(1.0, self.xmax, -alpha))

    def surv(self, x):
        """P(X > x)."""
        return _pow_int(x, self.xmax, -self.a) / self.norm

    def quantile_above(self, q):
        """x such that P(X > x) = q (vectorised)."""
        q = np.clip(np.asarray(q, dtype=np.float64), 0.0, 1.0)
        a = self.a
        if abs(a - 1.0) < 1e-12:
            return self.xmax ** (1.0 - q)
        m = self.xmax ** (1 - a)
        return (q + (1 - q) * m) ** (1 / (1 - a))

    def moment(self, lo, hi, k=1):
        """Integral of x^k f(x) over [lo, hi]."""
        return _pow_int(lo, hi, k - self.a) / self.norm

    def sample(self, rng, n, lo=1.0, hi=None):
        """n draws conditioned on [lo, hi]."""
        hi = self.xmax if hi is None else hi
        u = rng.random(n)
        a = self.a
        if abs(a - 1.0) < 1e-12:
            return lo * (hi / lo) ** u
        l1, h1 = lo ** (1 - a), hi ** (1 - a)
        return (l1 + u * (h1 - l1)) ** (1 / (1 - a))


def page_masses(V: int, alpha: float, sorted_ids: bool, rng) -> np.ndarray:
    """Share of degree-weighted accesses on each page (VPP vertices) of a property array."""
    npv = -(-V // VPP)
    pl = PowerLaw(alpha, float(V))
    if sorted_ids:
        # rank fraction q in [k0/V, k1/V) -> weights x(q) descending
        k = np.minimum(np.arange(npv + 1, dtype=np.float64) * VPP, V) / V
        x = pl.quantile_above(k)  # x[0] = xmax, x[-1] = 1
        m = pl.moment(x[1:], x[:-1])
        return m / m.sum()
    counts = np.full(npv, VPP, dtype=np.int64)
    counts[-1] = V - VPP * (npv - 1)
    if V <= EXACT_LIMIT:
        w = pl.sample(rng, V)
        m = np.add.reduceat(w, np.arange(0, V, VPP))
        return m / m.sum()
    # heavy tail individually, light part by its normal approximation per page
    t = float(pl.quantile_above(EXACT_LIMIT / V))
    p_heavy = float(pl.surv(t))
    nh = int(rng.binomial(V, p_heavy))
    heavy = pl.sample(rng, nh, lo=t)
    hp = rng.integers(0, V, nh) // VPP
    hcount = np.bincount(hp, minlength=npv)
    hmass = np.bincount(hp, heavy, minlength=npv)
    pl_mass = 1.0 - p_heavy
    mu = pl.moment(1.0, t, 1) / pl_mass
    var = pl.moment(1.0, t, 2) / pl_mass - mu * mu
    nl = np.maximum(counts - hcount, 0)
    light = rng.normal(nl * mu, np.sqrt(nl * max(var, 0.0)))
    light = np.maximum(light, nl.astype(np.float64))
    m = light + hmass
    return m / m.sum()


def compress(mass: np.ndarray, detail: int, max_chunks: int = 16384):
    """Overlapping segments (starts, ends, rate) reproducing `mass` per page: the
    `detail` largest pages exactly, the others at their chunk's mean."""
    n = len(mass)
    if n <= detail:
        idx = np.arange(n, dtype=np.int64)
        return idx, idx + 1, mass.copy()
    top = np.argpartition(-mass, detail - 1)[:detail]
    is_top = np.zeros(n, dtype=bool)
    is_top[top] = True
    size = max(1, -(-n // max_chunks))
    cs = np.arange(0, n, size, dtype=np.int64)
    ce = np.minimum(cs + size, n)
    rest = np.where(is_top, 0.0, mass)
    cnt = np.add.reduceat((~is_top).astype(np.float64), cs)
    avg = np.add.reduceat(rest, cs) / np.maximum(cnt, 1.0)
    top = np.sort(top)
    delta = np.maximum(mass[top] - avg[top // size], 0.0)
    return (np.concatenate((cs, top)), np.concatenate((ce, top + 1)),
            np.concatenate((avg, delta)))


@WORKLOADS.register("graph")
class Graph(Workload):
    """Power-law graph kernel (GAPBS-like pr or bc): CSR sweeps, degree-skewed vertices."""

    def __init__(self, variant=None, vertices=800_000_000, avg_degree=16, alpha=2.0,
                 iterations=None, kernel=None, sorted="no", threads=16, compute_ns=1.0, mlp=8.0,
                 detail=65536, scale=1.0, seed=0):
        super().__init__()
        scale = parse_scale(scale)
        self.threads, self.compute_ns, self.mlp = common_params(threads, compute_ns, mlp,
                                                                what="graph")
        # `graph:bc` names the kernel as a variant; `graph:kernel=bc` works too
        if variant is not None and kernel is not None:
            raise TierlabError(f"bad graph spec: the kernel is given twice (graph:{variant} "
                               f"and kernel={kernel}); give one")
        self.kernel = parse_choice(variant or kernel or "pr", "graph kernel", tuple(KERNELS))
        self.sorted = parse_flag(sorted, "graph sorted")
        V0 = parse_number(vertices, "graph vertices", lo=1, integer=True)
        d = parse_number(avg_degree, "graph avg_degree", lo=0.0, hi=1e6, lo_open=True)
        self.alpha = parse_number(alpha, "graph alpha", lo=1.0, hi=10.0, lo_open=True)
        self.detail = parse_number(detail, "graph detail", lo=1, integer=True)
        self.seed = int(seed)
        V = max(VPP, int(round(V0 * scale)))
        E = int(round(V * d))
        self.vertices, self.edges, self.avg_degree = V, E, d
        self.name = f"graph:{self.kernel}"
        self.work_unit = "edges"
        props, self._skew, self._seqread = KERNELS[self.kernel]
        self.props = props
        npv = -(-V // VPP)
        off_pages = -(-(V + 1) * 8 // PAGE)
        edge_pages = max(1, -(-E * 4 // PAGE))
        layout = [("offsets", off_pages), ("edges", edge_pages)] + [(p, npv) for p in props]
        starts = np.concatenate(([0], np.cumsum([n for _, n in layout])[:-1]))
        self.arrays = {name: (int(s), int(s + n)) for (name, n), s in zip(layout, starts)}
        self.npages = self.footprint_pages = int(sum(n for _, n in layout))
        per_edge = self.accesses_per_edge()
        passes = 2 if self.kernel == "bc" else 1
        if iterations is None:
            w = default_work(per_edge, self.compute_ns, self.threads, self.mlp)
            self.iterations = max(1, round(w / (passes * E / scale)))
        else:
            self.iterations = parse_number(iterations, "graph iterations", lo=0.0,
                                           hi=MAX_WORK, lo_open=True)
        self.total_work = float(self.iterations * passes * E)
        self.params = {"kernel": self.kernel, "vertices": V, "edges": E, "avg_degree": d,
                       "alpha": self.alpha, "sorted": self.sorted,
                       "iterations": self.iterations, "threads": self.threads,
                       "footprint": fmt_size(self.npages * PAGE)}

    def accesses_per_edge(self) -> float:
        d = self.avg_degree
        seq = (1 + len(self.props) + sum(self._seqread.values())) / (8 * d)
        skew = sum(r + w for r, w in self._skew.values())
        return 1 / 16 + seq + skew

    def field(self):
        d = self.avg_degree
        S, E_, R, W = [], [], [], []

        def uni(name, r, w):
            a, b = self.arrays[name]
            S.append([a]), E_.append([b]), R.append([r / (b - a)]), W.append([w / (b - a)])

        uni("offsets", 1 / (8 * d), 0.0)
        uni("edges", 1 / 16, 0.0)
        for p in self.props:
            uni(p, self._seqread.get(p, 0.0) / (8 * d), 1 / (8 * d))
        rng = np.random.default_rng(self.seed)
        mass = page_masses(self.vertices, self.alpha, self.sorted, rng)
        cs, ce, cr = compress(mass, self.detail)
        for p, (r, w) in self._skew.items():
            a, _ = self.arrays[p]
            S.append(cs + a), E_.append(ce + a), R.append(cr * r), W.append(cr * w)
        return RateField.from_segments(np.concatenate(S), np.concatenate(E_), np.concatenate(R),
                              np.concatenate(W), self.npages)

    def changes(self):
        alloc = np.array([self.arrays[n] for n in ("offsets", "edges") + tuple(self.props)],
                         dtype=np.int64)
        yield Change(0.0, field=self.field(), alloc=alloc, label=self.kernel)

