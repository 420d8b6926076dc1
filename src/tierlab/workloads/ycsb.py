"""YCSB core workloads A-F over a key-value heap: `ycsb:a` .. `ycsb:f`.

Work unit: one YCSB *operation*. Records of ``record`` bytes (default 1 KiB: YCSB's 10
fields x 100 B) are laid out contiguously in insertion (key) order, so record i occupies
bytes [i*record, (i+1)*record) of the heap; only record data is modelled (no index).
With L = record/64 cache lines per record (rounded up), per operation:

- read: L reads of the record (readallfields=true); update: L writes (the record is
  rewritten); read-modify-write: L reads + L writes; insert: L writes to a new record at
  the end of the heap; scan: ``s`` consecutive records from the chosen key (s uniform in
  1..``scan_max``, default 100, as YCSB E), L reads each, i.e. (1 + scan_max)/2 x L
  reads on average (scans past the newest record return fewer).

Mixes (YCSB core workloads): A 50% read / 50% update, zipfian; B 95/5, zipfian;
C 100% read, zipfian; D 95% read / 5% insert, latest; E 95% scan / 5% insert, zipfian;
F 50% read / 50% read-modify-write, zipfian. ``dist`` (zipfian | latest | uniform)
overrides the key distribution; ``theta`` (0.99) is the zipfian constant.

Key distributions, as YCSB generates them:

- zipfian is YCSB's *scrambled* zipfian: a zipfian rank r over 10^10 items (YCSB's
  ITEM_COUNT; rank 0 hottest, P(r) ~ (r+1)^-theta) hashed with 64-bit FNV to key
  fnv(r) mod K, where K = records + 2 x expected inserts (YCSB's key range); keys not
  inserted yet are redrawn. The hottest ``detail`` ranks (default 65536) are placed
  exactly; the mass of all other ranks is spread as a uniform floor over the heap (each
  of those ranks carries < 1e-6 of the accesses and lands on a pseudo-random key, so the
  floor is their expected distribution). After aggregating to pages, the hottest
  ``detail`` pages keep their own segment and any remaining mass joins the floor.
  ``seed`` perturbs the hash (seed 0 = YCSB's placement).
- latest (YCSB's SkewedLatestGenerator): zipfian over recency, newest record hottest;
  the newest ``detail`` pages are exact, older records get log-spaced bins whose
  per-page rate is the bin's exact zipfian mass (partial zeta sums), so the field stays
  small at any heap size. With inserts the hot spot moves to the end of the heap.
- uniform: every record equally likely.

Scans spread each hot start page's mass over the following pages with the expected
coverage of a scan (averaged over record alignments within a page). Under zipfian the
point operations of a hot record fall on its own lines (`line_skew`), which a DRAM
cache of lines sees (Optane memory mode, engine/dram_cache.py).

Heap growth: workloads with inserts (D, E) grow the heap by insert_fraction x ops
records. The run is cut into ``steps`` (default 50) equal pieces of work; each piece is a
Change that allocates the pages its inserts will write (address order) and carries the
field for the current record count (inserts write uniformly over that piece's new
records). Without inserts there is one Change.

Defaults: ``records`` so that the initial heap is 64 GiB at scale 1 (64 Mi records of
1 KiB; twice the 32 GiB DRAM of the built-in machines), 8 client threads, memory-level
parallelism 4, 200 ns of CPU per operation (an in-process store: hashing, copying).
``ops`` defaults to ~90 simulated seconds with every page in DRAM, capped for D/E so that
inserts at most double the heap (D: 1.34e9 ops grow the heap from 64 to 128 GiB, which still
fits the 160 GiB dram-cxl machine).
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import TierlabError
from ..field import RateField
from ..params import parse_bytes, parse_choice, parse_number
from ..units import PAGE, fmt_size
from .base import WORKLOADS, Change, Workload, ranges
from ._common import MAX_WORK, common_params, default_work, parse_scale, sum_by_key

MIXES = {
    "a": ({"read": 0.5, "update": 0.5}, "zipfian"),
    "b": ({"read": 0.95, "update": 0.05}, "zipfian"),
    "c": ({"read": 1.0}, "zipfian"),
    "d": ({"read": 0.95, "insert": 0.05}, "latest"),
    "e": ({"scan": 0.95, "insert": 0.05}, "zipfian"),
    "f": ({"read": 0.5, "rmw": 0.5}, "zipfian"),
}
DISTS = ("zipfian", "latest", "uniform")
ITEM_COUNT = 10_000_000_000  # YCSB ScrambledZipfianGenerator.ITEM_COUNT
FNV_OFFSET = np.uint64(0xCBF29CE484222325)
FNV_PRIME = np.uint64(1099511628211)

_ZK = 1 << 16
_ztab: dict = {}


def zeta(n, theta: float):
    """sum_{i=1..n} i^-theta for n >= 0 (vectorised): exact up to 65536, then an
    Euler-Maclaurin tail (relative error < 1e-12)."""
    n = np.asarray(n, dtype=np.float64)
    tab = _ztab.get(theta)
    if tab is None:
        tab = np.concatenate(([0.0], np.cumsum(np.arange(1, _ZK + 1, dtype=np.float64)
                                               ** -theta)))
        _ztab[theta] = tab
    out = np.empty(n.shape)
    small = n <= _ZK
    out[small] = tab[np.floor(n[small]).astype(np.int64)]
    big = n[~small]
    if big.size:
        k = float(_ZK)
        if abs(theta - 1.0) < 1e-12:
            integral = np.log(big / k)
        else:
            integral = (big ** (1 - theta) - k ** (1 - theta)) / (1 - theta)
        tail = (integral + (big ** -theta - k ** -theta) / 2
                + theta / 12 * (k ** (-theta - 1) - big ** (-theta - 1)))
        out[~small] = tab[_ZK] + tail
    return out if out.ndim else float(out)


def fnv64(vals, seed: int = 0) -> np.ndarray:
    """YCSB's fnvhash64 (FNV-1 over the 8 little-endian bytes, then |signed|)."""
    v = np.asarray(vals, dtype=np.int64).astype(np.uint64)
    basis = FNV_OFFSET
    if seed:
        basis = np.uint64(0xCBF29CE484222325 ^ ((seed * 0x9E3779B97F4A7C15) % (1 << 64)))
    h = np.full(v.shape, basis, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for _ in range(8):
            h ^= v & np.uint64(0xFF)
            v >>= np.uint64(8)
            h *= FNV_PRIME
    s = h.view(np.int64)
    return np.abs(s)


@WORKLOADS.register("ycsb")
class Ycsb(Workload):
    """YCSB core workloads a-f on a key-value heap; D and E inserts grow the heap."""

    #: scans (and their length) are in workload E only
    variant_params = {"scan_max": ("e",)}

    def __init__(self, variant="a", records=None, record="1KiB", dist=None, theta=0.99,
                 ops=None, threads=8, compute_ns=200.0, mlp=4.0, detail=65536, steps=50,
                 scan_max=100, scale=1.0, seed=0):
        super().__init__()
        v = parse_choice(variant, "ycsb workload", tuple(MIXES))
        scale = parse_scale(scale)
        self.variant = v
        self.name = f"ycsb:{v}"
        self.work_unit = "ops"
        self.seed = int(seed)
        self.threads, self.compute_ns, self.mlp = common_params(threads, compute_ns, mlp,
                                                                what="ycsb")
        mix, d0 = MIXES[v]
        self.mix = {k: mix.get(k, 0.0) for k in ("read", "update", "rmw", "insert", "scan")}
        self.dist = d0 if dist is None else parse_choice(dist, "ycsb dist", DISTS)
        self.theta = parse_number(theta, "ycsb theta", lo=0.0, hi=5.0)
        if abs(self.theta - 1.0) < 1e-9:
            raise TierlabError(f"bad ycsb theta {theta!r}: must differ from 1 (YCSB's "
                               f"zipfian generator is undefined there); e.g. 0.99")
        self.rec = parse_bytes(record, "ycsb record", minimum=8)
        if self.rec > (1 << 20):
            raise TierlabError(f"bad ycsb record {record!r}: at most 1MiB")
        self.detail = parse_number(detail, "ycsb detail", lo=1, integer=True)
        self.steps = parse_number(steps, "ycsb steps", lo=1, hi=1000, integer=True)
        self.scan_max = parse_number(scan_max, "ycsb scan_max", lo=1, integer=True)
        if records is None:
            n0 = (64 << 30) / self.rec
        else:
            n0 = parse_number(records, "ycsb records", lo=1, integer=True)
        self.records = max(1, int(round(n0 * scale)))
        self.lines = -(-self.rec // 64)
        L = self.lines
        m = self.mix
        self.mean_scan = (1 + self.scan_max) / 2.0
        self.reads_per_op = (m["read"] + m["rmw"] + m["scan"] * self.mean_scan) * L
        self.writes_per_op = (m["update"] + m["rmw"] + m["insert"]) * L
        apo = self.reads_per_op + self.writes_per_op
        if ops is None:
            w = default_work(apo, self.compute_ns, self.threads, self.mlp)
            if m["insert"] > 0:
                w = min(w, n0 / m["insert"])
            w = float(f"{w:.3g}") * scale
        else:
            w = parse_number(ops, "ycsb ops", lo=0.0, hi=MAX_WORK, lo_open=True) * scale
        self.total_work = float(w)
        self.inserts = int(round(m["insert"] * self.total_work))
        self.keyspace = self.records + 2 * self.inserts  # YCSB: insertcount + expectednewkeys
        self.npages = self.footprint_pages = self._pages_for(self.records + self.inserts)
        self.params = {"workload": v, "records": self.records, "record": self.rec,
                       "dist": self.dist, "theta": self.theta, "ops": self.total_work,
                       "threads": self.threads, "heap": fmt_size(self._pages_for(
                           self.records) * PAGE),
                       "final_heap": fmt_size(self.npages * PAGE)}
        self._hot = None
        self._zs = None
        self._skew = None

    # -- layout -------------------------------------------------------------------
    def _pages_for(self, count: int) -> int:
        return max(1, -(-int(count) * self.rec // PAGE))

    def _spread(self, keys, mass):
        """Per-page mass of records `keys` carrying `mass` (split by byte overlap)."""
        if len(keys) == 0:
            return np.zeros(0, np.int64), np.zeros(0)
        keys = np.asarray(keys, dtype=np.int64)
        if PAGE % self.rec == 0:  # whole records per page
            p = keys // (PAGE // self.rec)
            lo, hi = int(p.min()), int(p.max())
            if hi - lo < 4 * len(p):  # compact range (latest): bincount
                pm = np.bincount(p - lo, np.asarray(mass, dtype=np.float64), hi - lo + 1)
                nz = np.flatnonzero(pm)
                return nz + lo, pm[nz]
            return sum_by_key(p, mass)
        pg, pm = self._spread_bytes(np.asarray(keys, dtype=np.int64) * self.rec,
                                    np.asarray(mass, dtype=np.float64))
        return sum_by_key(pg, pm)

    def _scan_kernel(self) -> np.ndarray:
        """Expected records read at each page offset from a scan's start page."""
        rec, smax = self.rec, self.scan_max
        period = PAGE // math.gcd(rec, PAGE)
        aligns = (np.arange(min(period, 64), dtype=np.int64) * rec) % PAGE
        d = np.arange(smax, dtype=np.int64)
        wt = (smax - d) / smax  # P(scan length > d)
        span = -(-(PAGE + smax * rec) // PAGE) + 1
        k = np.zeros(span)
        for a in aligns:
            pg, pm = self._spread_bytes(a + d * rec, wt)
            np.add.at(k, pg, pm)
        return k / len(aligns)

    def _spread_bytes(self, b0, mass):
        rec = self.rec
        b1 = b0 + rec
        p0 = b0 // PAGE
        kmax = int(((b1 - 1) // PAGE - p0).max()) + 1
        ps, ws = [], []
        for j in range(kmax):
            p = p0 + j
            ov = np.minimum(b1, (p + 1) * PAGE) - np.maximum(b0, p * PAGE)
            ok = ov > 0
            ps.append(p[ok])
            ws.append(mass[ok] * ov[ok] / rec)
        return np.concatenate(ps), np.concatenate(ws)

    # -- key distributions: (sparse pages, masses, background segments) -------------
    def _zipf_hot(self):
        if self._hot is None:
            r = np.arange(self.detail, dtype=np.int64)
            z = zeta(ITEM_COUNT, self.theta)
            mass = (r + 1.0) ** -self.theta / z
            keys = fnv64(r, self.seed) % self.keyspace
            rest = 1.0 - zeta(self.detail, self.theta) / z
            self._hot = (keys, mass, rest)
        return self._hot

    def _dist(self, c: int):
        """Key-choice distribution over records [0, c): (pg, pm, bs, be, brate)."""
        P = self._pages_for(c)
        empty = (np.zeros(0, np.int64), np.zeros(0))
        if self.dist == "uniform":
            return (*empty, np.array([0]), np.array([P]), np.array([1.0 / P]))
        # latest: rank r = c-1-key, P(r) ~ (r+1)^-theta over [0, c)
        th = self.theta
        H = zeta(c, th)
        E = int(min(c, -(-self.detail * PAGE // self.rec)))
        r = np.arange(E, dtype=np.int64)
        pg, pm = self._spread(c - 1 - r, (r + 1.0) ** -th / H)
        if E >= c:
            return pg, pm, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
        nb = 128
        edges = np.unique(np.round(E * (c / E) ** (np.arange(nb + 1) / nb)).astype(np.int64))
        edges[0], edges[-1] = E, c
        edges = np.unique(edges)
        ra, rb = edges[:-1], edges[1:]
        bmass = (zeta(rb, th) - zeta(ra, th)) / H  # ranks [ra, rb) <-> keys [c-rb, c-ra)
        bs = (c - rb) * self.rec // PAGE
        be = -(-(c - ra) * self.rec // PAGE)
        return pg, pm, bs, be, bmass / (be - bs)

    # -- fields -------------------------------------------------------------------
    def _sparse_ops(self, pg, pm, P):
        """Read and write rates per op of the sparse pages (pg, pm) under the mix,
        with scans spread forward over the following pages (truncated at page P)."""
        m, L = self.mix, self.lines
        rp = (m["read"] + m["rmw"]) * L
        wp = (m["update"] + m["rmw"]) * L
        sc = m["scan"] * L
        sr, sw = rp * pm, wp * pm
        if sc > 0 and len(pg):
            k = self._scan_kernel()
            offs = np.flatnonzero(k)
            cp = (pg[None, :] + offs[:, None]).ravel()
            cm = (pm[None, :] * k[offs][:, None]).ravel() * sc
            keep = cp < P
            return sum_by_key(np.concatenate((pg, cp[keep])),
                              np.concatenate((sr, cm[keep])),
                              np.concatenate((sw, np.zeros(int(keep.sum())))))
        return pg, sr, sw

    def _zipf_sparse(self):
        """Sparse part of the zipfian field for every hot key of the final heap, per unit
        of normalised mass, and the pages ordered hottest first (cached: a smaller heap
        is a prefix of the pages, keys beyond the record count living past its end)."""
        if self._zs is None:
            keys, mass, rest = self._zipf_hot()
            cf = self.records + self.inserts
            ok = keys < cf
            pg, pm = self._spread(keys[ok], mass[ok])
            spg, sr, sw = self._sparse_ops(pg, pm, self._pages_for(cf))
            order = np.argsort(-(sr + sw), kind="stable")
            self._zs = (spg, sr, sw, order)
        return self._zs

    def field_at(self, c: int, c_next: int | None = None) -> RateField:
        """Field with c records present and inserts filling records [c, c_next)."""
        m, L = self.mix, self.lines
        P = self._pages_for(c)
        rp = (m["read"] + m["rmw"]) * L
        wp = (m["update"] + m["rmw"]) * L
        sc = m["scan"] * L
        if self.dist == "zipfian":
            keys, mass, rest = self._zipf_hot()
            floor = rest * c / self.keyspace
            acc = mass[keys < c].sum() + floor
            spg, sr, sw, order = self._zipf_sparse()
            n = int(np.searchsorted(spg, P))  # pages of the current heap
            k = min(len(order), self.detail)
            while True:  # the `detail` hottest pages among the first n
                cand = order[:k]
                top = cand[cand < n][:self.detail]
                if len(top) == min(self.detail, n) or k == len(order):
                    break
                k = min(len(order), 2 * k)
            rest_r = sr[:n].sum() - sr[top].sum()
            rest_w = sw[:n].sum() - sw[top].sum()
            fr = (floor * (rp + sc * self.mean_scan) / P + rest_r / P) / acc
            fw = (floor * wp / P + rest_w / P) / acc
            top = np.sort(top)
            spg, sr, sw = spg[top], sr[top] / acc, sw[top] / acc
            bs = be = np.zeros(0, np.int64)
            br = bw = np.zeros(0)
        else:
            pg, pm, bs, be, brate = self._dist(c)
            spg, sr, sw = self._sparse_ops(pg, pm, P)
            br = (rp + sc * self.mean_scan) * brate
            bw = wp * brate
            # Keep the hottest `detail` sparse pages; the rest joins a uniform floor.
            fr = fw = 0.0
            if len(spg) > self.detail:
                topi = np.argpartition(-(sr + sw), self.detail - 1)[:self.detail]
                mask = np.zeros(len(spg), dtype=bool)
                mask[topi] = True
                fr, fw = sr[~mask].sum() / P, sw[~mask].sum() / P
                spg, sr, sw = spg[mask], sr[mask], sw[mask]
        starts = [bs, spg, [0]]
        ends = [be, spg + 1, [P]]
        rr = [br, sr, [fr]]
        ww = [bw, sw, [fw]]
        if c_next is not None and c_next > c and m["insert"] > 0:
            a = c * self.rec // PAGE
            b = self._pages_for(c_next)
            starts.append([a])
            ends.append([b])
            rr.append([0.0])
            ww.append([m["insert"] * L / (b - a)])
        return RateField.from_segments(np.concatenate(starts), np.concatenate(ends),
                              np.concatenate(rr), np.concatenate(ww), self.npages)

    def line_skew(self):
        """(pages, accesses per op on their hot lines, hot lines per page) for the
        zipfian key choice: the hottest `detail` ranks are single records, so a page
        holding one takes its reads and updates on that record's L lines, not on all
        64 of the page (what a cache of lines sees, engine/dram_cache.py; the lines of
        other records keep the uniform floor). Computed for the initial heap (inserts
        add at most 5% of the operations). Scans read whole runs of records, so their
        share is left spread over the page; None for latest and uniform, whose hot
        records fill whole pages, and for mixes without point operations (E)."""
        m, L = self.mix, self.lines
        point = (m["read"] + m["update"] + 2 * m["rmw"]) * L  # a rmw reads and writes
        if self.dist != "zipfian" or point <= 0:
            return None
        if self._skew is None:
            keys, mass, rest = self._zipf_hot()
            c = self.records
            ok = keys < c
            acc = mass[ok].sum() + rest * c / self.keyspace
            pg, pm = self._spread(keys[ok], mass[ok] * point / acc)
            _, nrec = self._spread(keys[ok], np.ones(int(ok.sum())))
            self._skew = (pg, pm, np.minimum(np.ceil(nrec * L - 1e-9), 64))
        return self._skew

    def changes(self):
        if self.inserts <= 0 or self.mix["insert"] <= 0:
            yield Change(0.0, field=self.field_at(self.records),
                         alloc=ranges((0, self._pages_for(self.records))), label="run")
            return
        S = self.steps
        w = self.total_work * np.arange(S + 1) / S
        counts = self.records + np.round(self.mix["insert"] * w).astype(np.int64)
        counts[-1] = self.records + self.inserts
        done = 0
        for k in range(S):
            c, cn = int(counts[k]), int(counts[k + 1])
            top = self._pages_for(max(cn, c))
            alloc = ranges((done, top)) if top > done else None
            done = max(done, top)
            yield Change(float(w[k]), field=self.field_at(c, cn), alloc=alloc,
                         label=f"{c} records")
