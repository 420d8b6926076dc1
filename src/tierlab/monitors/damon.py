"""`damon`: Linux's Data Access MONitor (mm/damon, virtual address space operations).

Facts from the IDT (HPDC'24) and Telescope (ATC'24) papers; every rule below was
checked against the mainline sources of mm/damon/core.c and mm/damon/vaddr.c (2024-2025;
each rule names the kernel function it follows).

Regions
    Contiguous page ranges [start, end) tiling the monitored ranges, each with
    ``nr_accesses`` (sampling intervals of the current aggregation in which its sampled
    page was accessed), ``last_nr_accesses`` (the previous aggregation's) and ``age``
    (aggregation intervals its access level has stayed about the same).

Sampling (damon_va_prepare_access_checks / damon_va_check_accesses)
    Every sample interval each region picks a new random page in [start, end)
    (``damon_rand(start, end)``), clears its accessed bit, and one interval later counts
    the region accessed if the bit is set. Regions only change at aggregation
    boundaries, so all samples of one aggregation (regions x samples_per_aggr, on the
    sample-interval grid) are drawn at once, at the aggregation, vectorised.
    ``check_accesses`` returns the largest ``nr_accesses`` seen.

Aggregation (kdamond_fn), in the kernel's order
    1. merge (kdamond_merge_regions, damon_merge_regions_of): threshold = largest
       observed nr_accesses / 10 (integer division, may be 0); size limit = monitored
       size / min_nr_regions (damon_region_sz_limit, at least one page). Walking the
       regions in address order: the age rule, then a region merges into the previous
       (already merged) one when adjacent, |prev.nr_accesses - nr_accesses| <=
       threshold and the two sizes sum to <= the limit; the merged nr_accesses and age
       are size-weighted means rounded down at each merge (damon_merge_two_regions).
       While more than max_nr_regions remain, repeat with threshold = max(1, 2 x
       threshold) until threshold / 2 reaches max_nr_accesses (each pass re-runs the
       age rule, as the kernel does).
    2. age rule (in damon_merge_regions_of): age = 0 when |nr_accesses -
       last_nr_accesses| > threshold, or (`zero_age_reset`, on by default: the 2025
       change "mm/damon/core: reset age if nr_accesses changes between non-zero and
       zero"; off gives the earlier rule) when exactly one of them is 0; else age + 1.
    3. schemes: the subscribers (`subscribe`) run here, on the merged regions with this
       aggregation's nr_accesses, as kdamond_apply_schemes does. They may split regions
       and reset ages (`split_at`, `reset_age`).
    4. reset (kdamond_reset_aggregated): last_nr_accesses = nr_accesses; nr_accesses = 0.
    5. split (kdamond_split_regions): only when nr_regions <= max_nr_regions / 2; each
       region is cut in 2 pieces, or 3 when the number of regions did not change since
       the previous split and is < max_nr_regions / 3; a cut leaves 10%-90% (random
       tenths, damon_rand(1, 10)) of the current piece on the left, page-aligned, is
       skipped when that is empty or the piece is <= 2 pages; pieces keep nr_accesses,
       last_nr_accesses and age (damon_split_region_at).
    6. ops update every `update` interval (damon_va_update -> damon_set_regions): the
       monitored ranges are re-read and the regions fitted to them (regions outside
       removed, the first/last region of each range stretched to its bounds, holes
       filled with fresh regions); the size limit is recomputed.

Monitored ranges (damon_va_three_regions)
    The process's mapped area minus its two biggest gaps: here the allocated pages of
    the workload (the simulator has no VMAs: a run of unallocated pages is a gap),
    recomputed only when the allocation changed. With fewer than two gaps the ranges
    are the allocated runs (the kernel would refuse a target without two gaps). An
    explicit `target` ("A-B" byte range, or a list of page ranges) overrides it.
    Initial regions: each range cut into pieces of at most the size limit
    (damon_apply_min_nr_regions).

Defaults: sample 5 ms, aggregation 100 ms, update 1 s, min_nr_regions 10,
max_nr_regions 1000 (damon_new_ctx; the DAMON sysfs defaults).

Miniatures (`--scale F`, docs/model.md, Scale): a miniature keeps the full-scale
run's region resolution relative to the workload's layout. A synthetic miniature shrinks
every feature (a GUPS hot set, a graph's vertex count) by F, so it keeps the region
bounds as given: 1,000 regions over a 1/256 GUPS still resolve its hot set as they do
over 512 GiB. n of a trace's k copies keep their recorded features and are n/k of the
full-scale layout (`Workload.layout_share`), so they get n/k x the bounds (min at least
3, the kernel's floor): the regions covering one copy are those of the full-scale run.
Either way the CPU charged per check is F / layout_share x the full-scale 150 ns, so
the monitor costs F x its full-scale CPU, taken from F x the cores, as every other
per-event charge (`scaled_regions`, `charge_checks`).

Rate-model sampling (the fast path). With the engine's `RateSource`, the probability
that sample (region i, interval j) finds its page p accessed is 1 - exp(-rate_p x
(W(t_j+1) - W(t_j))) per field epoch -- exactly what `AccessedBits.test_since` draws for
a clear at t_j and a test at t_j+1 (same floor/horizon clamps). It is evaluated here
from the timeline for all sample times at once, because `test_since` takes one `now`
per call (a per-entry `now` would need `RateSource._epochs` to take an array t1).
As each interval draws a fresh uniform page, a sample is Bernoulli(q_ij) with q_ij the
mean over the region's pages of that probability (segment prefix sums, no page drawn),
independent across intervals; with equal work increments (constant throughput over
the aggregation) nr_accesses is one Binomial(samples, q_i) draw. This is the same
distribution as the per-sample checks (tests/test_damon.py checks it). When the field
changes within the aggregation, or has far more segments than there are samples, the
pages are drawn and their rates summed over the epochs. Other sources (an
`ExactSource`) fall back to `sim.bits.test_since` once per sample time.

Cost: each sample is two accessed-bit operations (the clear at prepare and the test at
check), counted on `sim.bits` (`charge`) and charged as monitor CPU at
`bits.check_cost` (150 ns at full scale) each. Region bookkeeping is not charged.

Approximations (where the simulator differs from the kernel): no huge pages (the
kernel checks the PMD of a THP and reuses the result for the same folio); DAMON's
own clearing of accessed bits is not seen by other consumers of `sim.bits` (the
stateless prepare/check pattern); intervals auto-tuning (Linux 6.15, intervals_goal)
is not implemented; `nr_accesses_bp` (the pseudo moving sum) is not kept: schemes run
at aggregation boundaries, where it equals nr_accesses x 10000.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..errors import TierlabError
from ..params import parse_flag, parse_int
from ..units import PAGE, parse_duration, parse_size
from .base import MONITORS, Monitor

UNALLOC = 255  # engine/memory.py's marker of an unallocated page (not imported: no engine)


# -----------------------------------------------------------------------------------
# Pure region operations (kernel rules), unit-testable on crafted states
# -----------------------------------------------------------------------------------
@dataclass
class Regions:
    """A snapshot of the regions (numpy arrays, address order; pages)."""

    start: np.ndarray
    end: np.ndarray
    nr_accesses: np.ndarray
    age: np.ndarray
    last_nr_accesses: np.ndarray

    def __len__(self) -> int:
        return int(self.start.shape[0])

    @property
    def size(self) -> np.ndarray:
        return self.end - self.start


def hamming(h1, h2) -> np.ndarray:
    """Bits that differ between uint64 histories (element-wise)."""
    return np.bitwise_count(np.bitwise_xor(np.asarray(h1, dtype=np.uint64),
                                           np.asarray(h2, dtype=np.uint64))).astype(np.int64)


def _i64(x) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.int64)


def merge_pass(start, end, nr, last, age, thres: int, sz_limit: int,
               zero_age_reset: bool = True):
    """One damon_merge_regions_of pass: the age rule, then merging into the previous
    region (see the module docstring). Returns new (start, end, nr, last, age) arrays;
    a merged region keeps the left region's last_nr_accesses (damon_merge_two_regions).

    The age rule is vectorised. The merge is sequential by nature (a region is compared
    with the previous region *as merged so far*, rounded down at each merge), but most
    regions are decided up front: the merged-so-far value of the run ending at i-1 is
    within `thres` of nr[i-1] (a run's value stays between its old value and each
    newcomer, and every newcomer was within `thres`), so region i surely starts a run
    when it is not adjacent, when |nr[i] - nr[i-1]| > 2 x thres, or when the two
    sizes alone exceed the limit. Only the remaining stretches are walked in Python."""
    start, end, nr, last, age = (_i64(a) for a in (start, end, nr, last, age))
    R = start.shape[0]
    if R == 0:
        return start, end, nr, last, age
    reset = np.abs(nr - last) > thres
    if zero_age_reset:
        reset |= (nr == 0) != (last == 0)
    age = np.where(reset, 0, age + 1)
    if R == 1:
        return start, end, nr, last, age
    th, lim = int(thres), int(sz_limit)
    sz = end - start
    head = np.ones(R, dtype=bool)
    head[1:] = ((start[1:] != end[:-1]) | (np.abs(nr[1:] - nr[:-1]) > 2 * th)
                | (sz[:-1] + sz[1:] > lim))
    undecided = np.flatnonzero(~head)
    run_nr, run_age = nr.copy(), age.copy()
    if undecided.size:
        n, a, z = nr.tolist(), age.tolist(), sz.tolist()
        upd_i, upd_n, upd_a, heads = [], [], [], []
        prev = -2
        hd = pn = pa = ps = 0
        for i in undecided.tolist():
            if i - 1 != prev:  # region i-1 surely heads a run: start from it
                if prev >= 0:
                    upd_i.append(hd)
                    upd_n.append(pn)
                    upd_a.append(pa)
                hd = i - 1
                pn, pa, ps = n[hd], a[hd], z[hd]
            ni, si = n[i], z[i]
            d = pn - ni
            if -th <= d <= th and ps + si <= lim:
                tot = ps + si
                pn = (pn * ps + ni * si) // tot
                pa = (pa * ps + a[i] * si) // tot
                ps = tot
            else:
                upd_i.append(hd)
                upd_n.append(pn)
                upd_a.append(pa)
                heads.append(i)
                hd, pn, pa, ps = i, ni, a[i], si
            prev = i
        upd_i.append(hd)
        upd_n.append(pn)
        upd_a.append(pa)
        run_nr[upd_i] = upd_n
        run_age[upd_i] = upd_a
        head[heads] = True
    first = np.flatnonzero(head)
    lastidx = np.append(first[1:] - 1, R - 1)
    return (start[first], end[lastidx], run_nr[first], last[first], run_age[first])


def _merge_pass_reference(start, end, nr, last, age, thres, sz_limit, zero_age_reset=True):
    """The plain sequential walk of damon_merge_regions_of (kept to test merge_pass)."""
    st, en, n, la, ag = (np.asarray(x).tolist() for x in (start, end, nr, last, age))
    out = []
    for i in range(len(st)):
        d = n[i] - la[i]
        reset = abs(d) > thres or (zero_age_reset and ((n[i] == 0) != (la[i] == 0)))
        ai = 0 if reset else ag[i] + 1
        if out and out[-1][1] == st[i] and abs(out[-1][2] - n[i]) <= thres and \
                (out[-1][1] - out[-1][0]) + (en[i] - st[i]) <= sz_limit:
            ps, pe, pn, pl, pa = out[-1]
            sl, sr = pe - ps, en[i] - st[i]
            out[-1] = [ps, en[i], (pn * sl + n[i] * sr) // (sl + sr), pl,
                       (pa * sl + ai * sr) // (sl + sr)]
        else:
            out.append([st[i], en[i], n[i], la[i], ai])
    cols = list(zip(*out)) if out else [[]] * 5
    return tuple(_i64(c) for c in cols)


def scaled_regions(lo: int, hi: int, share: float) -> tuple[int, int]:
    """Region bounds (min_nr_regions, max_nr_regions) of a run that lays out `share`
    of the full-scale layout (`Workload.layout_share`): share x the full-scale bounds,
    min at least 3 (the kernel's floor), max at least min."""
    if share >= 1:
        return lo, hi
    lo2 = max(3, round(lo * share))
    return lo2, max(lo2, round(hi * share))


def merge_regions(start, end, nr, last, age, threshold: int, sz_limit: int,
                  max_nr_regions: int, max_nr_accesses: int, zero_age_reset: bool = True):
    """kdamond_merge_regions: merge passes, doubling the threshold while more than
    max_nr_regions remain (and threshold / 2 < max_nr_accesses)."""
    thres = int(threshold)
    while True:
        start, end, nr, last, age = merge_pass(start, end, nr, last, age, thres, sz_limit,
                                               zero_age_reset)
        thres = max(1, thres * 2)
        if not (len(start) > max_nr_regions and thres // 2 < max_nr_accesses):
            return start, end, nr, last, age


def split_regions(start, end, nr, last, age, nr_subs: int, rng: np.random.Generator,
                  min_region: int = 1):
    """damon_split_regions_of: cut every region in up to `nr_subs` pieces. Iteration k
    cuts the current left piece at ALIGN_DOWN(rand[1, 10) x size / 10, min_region) when
    the piece is > 2 x min_region and the cut is inside it; pieces keep the region's
    nr_accesses, last_nr_accesses and age. Vectorised over regions."""
    start, end = _i64(start), _i64(end)
    n = start.shape[0]
    if n == 0 or nr_subs < 2:
        return start, end, _i64(nr), _i64(last), _i64(age)
    cuts = []
    cur = end - start  # size of the piece being cut (the left one)
    for _ in range(nr_subs - 1):
        k = rng.integers(1, 10, size=n)
        sub = (k * cur // 10) // min_region * min_region
        ok = (cur > 2 * min_region) & (sub > 0) & (sub < cur)
        cuts.append(np.where(ok, start + sub, -1))
        cur = np.where(ok, sub, cur)
    c = np.stack(cuts, axis=1)  # (n, nr_subs - 1), -1 = no cut
    per = (c >= 0).sum(axis=1)
    if per.sum() == 0:
        return start, end, _i64(nr), _i64(last), _i64(age)
    owner = np.repeat(np.arange(n), per + 1)
    bounds = np.concatenate((start, c[c >= 0]))
    own_b = np.concatenate((np.arange(n), np.nonzero(c >= 0)[0]))
    order = np.lexsort((bounds, own_b))
    new_start = bounds[order]
    new_end = np.empty_like(new_start)
    new_end[:-1] = new_start[1:]
    new_end[-1] = end[-1]
    last_of = np.cumsum(per + 1) - 1
    new_end[last_of] = end
    return (new_start, new_end, _i64(nr)[owner], _i64(last)[owner], _i64(age)[owner])


def allocated_runs(node: np.ndarray, chunk: int = 1 << 26):
    """(starts, ends) of the runs of allocated pages (node != 255), scanning `node` in
    chunks so that huge address spaces need no full-size temporaries."""
    n = node.shape[0]
    starts, ends = [], []
    prev = False
    for c0 in range(0, n, chunk):
        m = node[c0:c0 + chunk] != UNALLOC
        if m.shape[0] == 0:
            break
        if bool(m[0]) != prev:
            (starts if m[0] else ends).append(np.array([c0]))
        d = np.flatnonzero(m[1:] != m[:-1]) + 1
        if d.size:
            up = m[d]
            starts.append(d[up] + c0)
            ends.append(d[~up] + c0)
        prev = bool(m[-1])
    if prev:
        ends.append(np.array([n]))
    s = np.concatenate(starts).astype(np.int64) if starts else np.zeros(0, np.int64)
    e = np.concatenate(ends).astype(np.int64) if ends else np.zeros(0, np.int64)
    return s, e


def three_regions(starts, ends) -> list[tuple[int, int]]:
    """damon_va_three_regions: the mapped span minus its two biggest gaps (the first
    found wins a tie, as the kernel's strict comparisons do), as up to 3 ranges."""
    starts, ends = _i64(starts), _i64(ends)
    if starts.size == 0:
        return []
    gaps = starts[1:] - ends[:-1]
    if gaps.size == 0:
        return [(int(starts[0]), int(ends[-1]))]
    pick = np.sort(np.argsort(-gaps, kind="stable")[:2])
    cuts = [(int(ends[i]), int(starts[i + 1])) for i in pick]
    out, lo = [], int(starts[0])
    for a, b in cuts:
        out.append((lo, a))
        lo = b
    out.append((lo, int(ends[-1])))
    return out


def _parse_target(target):
    """None, "A-B" (sizes, e.g. "0-4GiB": a byte range), or [(start_page, end_page)]."""
    if target is None or (isinstance(target, str) and target.strip().lower() in ("", "auto")):
        return None
    if isinstance(target, str):
        out = []
        for part in target.split(";"):
            a, sep, b = part.partition("-")
            if not sep:
                raise TierlabError(f"bad damon target {target!r}: expected A-B byte "
                                   "ranges such as 0-4GiB (';' between ranges)")
            lo, hi = parse_size(a, "damon target") // PAGE, -(-parse_size(b, "damon target")
                                                             // PAGE)
            out.append((lo, hi))
    else:
        out = [(int(a), int(b)) for a, b in target]
    for a, b in out:
        if not 0 <= a < b:
            raise TierlabError(f"bad damon target range {a}-{b} (pages): need 0 <= start < end")
    return sorted(out)


# -----------------------------------------------------------------------------------
# The monitor
# -----------------------------------------------------------------------------------
@MONITORS.register("damon")
class Damon(Monitor):
    """DAMON (vaddr): adaptive regions sampled every 5 ms, aggregated every 100 ms.

    Policy-facing API: `subscribe(fn)` (fn(monitor, now) after each aggregation's
    merge, where DAMOS runs), `regions` (a `Regions` snapshot: start, end, nr_accesses,
    age, last_nr_accesses), `max_nr_accesses` (aggregation / sample), `split_at(i,
    page)`, `reset_age(idx)`, `sample_interval`, `aggr_interval`, `nr_aggregations`,
    `pages_per_sample`.
    """

    #: pages whose accessed bits one sample of a region reads (the kernel's DAMON: one,
    #: damon_va_check_access)
    pages_per_sample = 1

    def __init__(self, sample="5ms", aggr="100ms", update="1s", min_nr_regions=10,
                 max_nr_regions=1000, target=None, zero_age_reset=True, name="damon"):
        super().__init__(sample=sample, aggr=aggr, update=update,
                         min_nr_regions=min_nr_regions, max_nr_regions=max_nr_regions,
                         target=target, zero_age_reset=zero_age_reset, name=name)
        si = parse_duration(sample, "damon sample interval")
        ai = parse_duration(aggr, "damon aggregation interval")
        if si <= 0 or ai < si:
            raise TierlabError(f"bad damon intervals sample={sample!r} aggr={aggr!r}: need "
                               "0 < sample <= aggregation")
        self.sample_interval = si
        #: kdamond aggregates after aggr/sample (integer) sampling intervals
        self.samples_per_aggr = max(1, int(ai / si + 1e-9))
        self.aggr_interval = self.samples_per_aggr * si
        self._unit_grid = np.arange(self.samples_per_aggr + 1) / self.samples_per_aggr
        self.update_interval = parse_duration(update, "damon update interval")
        self.min_nr_regions = parse_int(min_nr_regions, "damon min_nr_regions", 3)
        self.max_nr_regions = parse_int(max_nr_regions, "damon max_nr_regions",
                                         self.min_nr_regions)
        self.target = _parse_target(target)
        self.zero_age_reset = parse_flag(zero_age_reset, "damon zero_age_reset")
        self.name = str(name)
        z = np.zeros(0, dtype=np.int64)
        self._s, self._e, self._nr, self._last, self._age = z, z, z, z, z
        self._snap: Regions | None = None
        self._in_aggr = False
        self._subs = []
        self._ranges: list[tuple[int, int]] = []
        self._alloc_seen = None
        self.sz_limit = 1
        self._last_nr_split = 0
        self._t_last = None
        self._next_update = 0.0
        self.rng = np.random.default_rng(0)
        self.sim = None
        self.nr_aggregations = 0
        self.checks = 0
        self.cpu_seconds = 0.0
        self._cost_scale = 1.0
        self.max_observed = 0
        self._nr_sum = 0
        # a measurement only, never used for a decision: each region's history of
        # accessed aggregations (bit 0 = nr_accesses > 0 in the last one, as
        # idt-regions keeps it), to compare the two monitors' merges (IDT, Section 5)
        self._mh = np.zeros(0, dtype=np.uint64)
        self._mh_s = np.zeros(0, dtype=np.int64)
        self._mh_merges = 0
        self._mh_sum = 0.0

    # -- API -----------------------------------------------------------------------
    @property
    def max_nr_accesses(self) -> int:
        """aggregation interval / sample interval (damon_max_nr_accesses)."""
        return self.samples_per_aggr

    @property
    def nr_regions(self) -> int:
        return int(self._s.shape[0])

    @property
    def regions(self) -> Regions:
        """During a subscriber call: the live merged regions (this aggregation's
        nr_accesses). Otherwise: the snapshot taken after the last aggregation's schemes
        (what DAMON's damon_aggregated tracepoint reports)."""
        if self._in_aggr or self._snap is None:
            return Regions(self._s, self._e, self._nr, self._age, self._last)
        return self._snap

    def subscribe(self, fn) -> None:
        """Call fn(monitor, now) at every aggregation, after merging (DAMOS's place)."""
        self._subs.append(fn)

    def split_at(self, i: int, page: int) -> None:
        """damon_split_region_at: region i becomes [start, page) and [page, end), both
        keeping nr_accesses, last_nr_accesses and age."""
        i, page = int(i), int(page)
        if not self._s[i] < page < self._e[i]:
            raise ValueError(f"split point {page} outside region {i} "
                             f"[{self._s[i]}, {self._e[i]})")
        self._s = np.insert(self._s, i + 1, page)
        self._e = np.insert(self._e, i, page)
        for name in ("_nr", "_last", "_age"):
            a = getattr(self, name)
            setattr(self, name, np.insert(a, i + 1, a[i]))

    def reset_age(self, idx) -> None:
        age = self._age.copy()
        age[np.asarray(idx, dtype=np.int64)] = 0
        self._age = age

    def set_regions(self, start, end, nr_accesses=None, age=None, last_nr_accesses=None):
        """Replace the regions (tests, or a user-given initial state)."""
        s, e = _i64(start), _i64(end)
        if s.shape != e.shape or np.any(e <= s) or np.any(s[1:] < e[:-1]):
            raise ValueError("regions must be non-empty, sorted and disjoint")
        z = np.zeros(s.shape[0], dtype=np.int64)
        self._s, self._e = s, e
        self._nr = _i64(nr_accesses) if nr_accesses is not None else z.copy()
        self._age = _i64(age) if age is not None else z.copy()
        self._last = _i64(last_nr_accesses) if last_nr_accesses is not None else z.copy()
        self._snap = None
        self._update_sz_limit()

    # -- kdamond --------------------------------------------------------------------
    def attach(self, sim) -> None:
        super().attach(sim)
        self.rng = sim.rng_for(self.name)
        if getattr(sim, "real", False):  # the Linux backend: the kernel's own DAMON
            sim.attach_damon(self)
            return
        self.scale_regions(sim)
        monitors = getattr(sim, "monitors", None)
        if isinstance(monitors, dict):
            monitors.setdefault(self.name, self)
        # the first call (t = now) builds the regions; later ones aggregate
        sim.every(self.aggr_interval, self._kdamond, offset=0.0)

    def scale_regions(self, sim) -> None:
        """The miniature's region bounds and CPU per check (the module docstring)."""
        share = float(getattr(getattr(sim, "workload", None), "layout_share", 1.0))
        self.min_nr_regions, self.max_nr_regions = scaled_regions(
            self.min_nr_regions, self.max_nr_regions, share)
        self._cost_scale = float(getattr(sim, "scale", 1.0)) / min(1.0, share)

    def charge_checks(self, n: int) -> None:
        """n accessed-bit operations: counted, and charged as monitor CPU at
        `bits.check_cost` x F / layout_share (`scale_regions`)."""
        sim = self.sim
        bits = getattr(sim, "bits", None)
        cost = n * getattr(bits, "check_cost", 150e-9) * self._cost_scale
        self.checks += n
        self.cpu_seconds += cost
        if hasattr(sim, "charge_cpu"):
            sim.charge_cpu(cost, "monitor")

    def _kdamond(self, now: float) -> None:
        if self._t_last is None:
            self._ops_update(now, force=True)
            self._t_last = now
            return
        t0 = self._t_last
        self._t_last = now
        if getattr(self.sim, "daemon", None) is not None:
            # a daemon's thread reads the kernel's DAMON when it gets to it
            # (`engine.DaemonSteps`): the kdamond has aggregated on its own meanwhile,
            # and the read sees its last aggregation interval (the splits and merges
            # of the ones before are not replayed)
            t0 = max(t0, now - self.aggr_interval)
        if self.nr_regions:
            nr = self._sample(t0, now)
            self.aggregate(nr, now)
        if now + 1e-12 >= self._next_update:
            self._ops_update(now)

    def aggregate(self, nr_accesses, now: float = 0.0) -> None:
        """One aggregation with the given per-region nr_accesses (the sampling result):
        merge (with the age rule), subscribers (schemes), reset, split."""
        nr = _i64(nr_accesses)
        if nr.shape != self._s.shape:
            raise ValueError("nr_accesses must have one value per region")
        self._nr = np.minimum(nr, self.max_nr_accesses)
        self.nr_aggregations += 1
        mx = int(self._nr.max()) if self._nr.size else 0
        self.max_observed = mx
        old_s = self._s
        h = self._history_before_merge()
        (self._s, self._e, self._nr, self._last, self._age) = merge_regions(
            self._s, self._e, self._nr, self._last, self._age, mx // 10, self.sz_limit,
            self.max_nr_regions, self.max_nr_accesses, self.zero_age_reset)
        self._history_after_merge(old_s, h)
        self._publish(now)
        self._split()

    def _publish(self, now: float) -> None:
        """Subscribers (DAMOS) on the live regions, the snapshot, then
        kdamond_reset_aggregated."""
        self._in_aggr = True
        try:
            for fn in self._subs:
                fn(self, now)
        finally:
            self._in_aggr = False
        # no copies: region arrays are only ever replaced, never written in place
        self._snap = Regions(self._s, self._e, self._nr, self._age, self._last)
        self._nr_sum += self.nr_regions
        self._last = self._nr
        self._nr = np.zeros_like(self._last)

    def _history_before_merge(self) -> np.ndarray:
        """The measurement history aligned with the current regions (a region created
        since takes the history of the old region holding its start), with this
        aggregation's bit shifted in."""
        if not np.array_equal(self._mh_s, self._s):
            k = np.searchsorted(self._mh_s, self._s, side="right") - 1
            old = self._mh if self._mh.size else np.zeros(1, dtype=np.uint64)
            self._mh = np.where(k >= 0, old[np.clip(k, 0, max(old.size - 1, 0))],
                                np.uint64(0)).astype(np.uint64)
        return (self._mh << np.uint64(1)) | (self._nr > 0).astype(np.uint64)

    def _history_after_merge(self, old_s: np.ndarray, h: np.ndarray) -> None:
        """Hamming distance of each absorbed region to its run's first region (the
        same measure idt-regions reports), then one history per merged region."""
        first = np.searchsorted(old_s, self._s)
        if old_s.size > self._s.size:
            absorbed = np.ones(old_s.size, dtype=bool)
            absorbed[first] = False
            run = np.searchsorted(self._s, old_s, side="right") - 1
            valid = max(min(self.nr_aggregations, 64), 1)
            self._mh_merges += int(absorbed.sum())
            self._mh_sum += float(hamming(h[absorbed], h[first[run[absorbed]]]).sum()) / valid
        self._mh, self._mh_s = h[first], self._s

    def _split(self) -> None:
        """kdamond_split_regions."""
        n = self.nr_regions
        if n == 0 or n > self.max_nr_regions // 2:
            return
        subs = 3 if (self._last_nr_split == n and n < self.max_nr_regions // 3) else 2
        (self._s, self._e, self._nr, self._last, self._age) = split_regions(
            self._s, self._e, self._nr, self._last, self._age, subs, self.rng)
        self._last_nr_split = n

    def _update_sz_limit(self) -> None:
        """damon_region_sz_limit: monitored size / min_nr_regions, at least a page."""
        tot = int((self._e - self._s).sum())
        self.sz_limit = max(tot // self.min_nr_regions, 1)

    # -- monitored ranges ------------------------------------------------------------
    def _read_ranges(self):
        if self.target is not None:
            return self.target
        sim = self.sim
        mem = getattr(sim, "mem", None)
        if mem is None:
            raise TierlabError("damon: no target range given and no allocation to monitor")
        ver = getattr(sim, "alloc_version", None)
        if ver is not None and ver == self._alloc_seen:
            return self._ranges
        self._alloc_seen = ver
        return three_regions(*allocated_runs(mem.node))

    def _ops_update(self, now: float, force: bool = False) -> None:
        """damon_va_update: fit the regions to the (re-read) monitored ranges."""
        self._next_update = now + self.update_interval
        ranges = self._read_ranges()
        if not force and ranges == self._ranges:
            return
        first = self.nr_regions == 0
        self._set_ranges(ranges)
        self._ranges = list(ranges)
        self._update_sz_limit()
        if first:
            self._apply_min_nr_regions()

    def _set_ranges(self, ranges) -> None:
        """damon_set_regions: drop regions outside every range; per range, stretch the
        first/last intersecting region to its bounds and fill holes with new regions
        (nr_accesses 0, age 0); a range no region touches gets one new region."""
        s, e = self._s, self._e
        parts = []
        for a, b in ranges:
            sel = np.flatnonzero((s < b) & (e > a))
            if sel.size == 0:
                parts.append((np.array([a]), np.array([b]), np.zeros(1, np.int64),
                              np.zeros(1, np.int64), np.zeros(1, np.int64)))
                continue
            ps, pe = np.clip(s[sel], a, b), np.clip(e[sel], a, b)
            ps[0], pe[-1] = a, b
            nr, la, ag = self._nr[sel], self._last[sel], self._age[sel]
            hole = ps[1:] > pe[:-1]
            if hole.any():
                hs, he = pe[:-1][hole], ps[1:][hole]
                z = np.zeros(hs.shape[0], np.int64)
                ps, pe = np.concatenate((ps, hs)), np.concatenate((pe, he))
                nr, la, ag = (np.concatenate((x, z)) for x in (nr, la, ag))
                o = np.argsort(ps, kind="stable")
                ps, pe, nr, la, ag = ps[o], pe[o], nr[o], la[o], ag[o]
            parts.append((ps, pe, nr, la, ag))
        if not parts:
            z = np.zeros(0, np.int64)
            self._s, self._e, self._nr, self._last, self._age = z, z, z, z, z
            return
        self._s, self._e, self._nr, self._last, self._age = (
            _i64(np.concatenate([p[k] for p in parts])) for k in range(5))

    def _apply_min_nr_regions(self) -> None:
        """damon_apply_min_nr_regions: cut regions larger than the size limit into
        pieces of the limit (from the left)."""
        lim = self.sz_limit
        size = self._e - self._s
        k = -(-size // lim)
        if np.all(k <= 1):
            return
        owner = np.repeat(np.arange(size.shape[0]), k)
        first = np.repeat(np.cumsum(k) - k, k)
        off = (np.arange(owner.shape[0]) - first) * lim
        ns = self._s[owner] + off
        ne = np.minimum(ns + lim, self._e[owner])
        self._s, self._e = ns, ne
        self._nr, self._last, self._age = self._nr[owner], self._last[owner], self._age[owner]

    # -- sampling ------------------------------------------------------------------
    def _sample(self, t0: float, t1: float) -> np.ndarray:
        """nr_accesses of every region over the sample intervals of (t0, t1]."""
        sim = self.sim
        S = self.samples_per_aggr
        R = self.nr_regions
        grid = t0 + self._unit_grid * (t1 - t0)
        grid[-1] = t1
        lo, hi = grid[:-1], grid[1:]
        bits = getattr(sim, "bits", None)
        horizon = getattr(bits, "horizon", math.inf)
        levels = getattr(bits, "levels", None)
        floor = float(getattr(levels[0], "floor", 0.0)) if levels else 0.0
        if floor > t0:  # a clear of every bit (clear_all) during the aggregation
            lo = np.where(floor <= hi, np.maximum(lo, floor), lo)
        if t1 - t0 > horizon:
            lo = np.maximum(lo, hi - horizon)
        n = R * S
        source = getattr(sim, "source", None)
        timeline = getattr(source, "timeline", None)
        if timeline is not None and hasattr(timeline, "fields"):
            nr = self._sample_rate(timeline, lo, hi)
            if bits is not None:
                bits.charge(2 * n)
        else:  # generic source: one stateless prepare/check per sample time
            pages = self._draw_pages(np.arange(R))
            acc = np.zeros((R, S), dtype=bool)
            for j in range(S):  # a page number < 0: a frame without the workload's page
                p = pages[:, j]
                ok = p >= 0
                acc[ok, j] = bits.test_since(0, p[ok], lo[j], float(hi[j]))
            nr = acc.sum(axis=1)
        self.charge_checks(2 * n)
        return nr

    def _draw_pages(self, rows) -> np.ndarray:
        """One random page per (region, sample interval): damon_rand(start, end)."""
        s, e = self._s[rows], self._e[rows]
        u = self.rng.random((rows.shape[0], self.samples_per_aggr))
        p = s[:, None] + (u * (e - s)[:, None]).astype(np.int64)
        return np.minimum(p, (e - 1)[:, None])

    def _sample_rate(self, tl, lo, hi) -> np.ndarray:
        """nr_accesses from the rate model (see the module docstring).

        Mixture path (one field epoch over the aggregation, field not much larger than
        the samples): a sample draws a uniform page of its region and then that page's
        Bernoulli(1 - exp(-rate_p dW_j)); with a fresh page each interval this is
        Bernoulli(q_ij), q_ij = mean over the region's pages of 1 - exp(-rate_p dW_j)
        (segment prefix sums), independent across intervals; with equal dW_j the
        count is Binomial(samples, q_i). Otherwise: draw the pages and sum the rate
        over the epochs overlapping each interval."""
        R = self.nr_regions
        epochs = self._rate_epochs(tl, lo, hi)
        if not epochs:
            return np.zeros(R, dtype=np.int64)
        if len(epochs) == 1 and epochs[0][0].nsegments <= max(20 * R, 20000):
            f, dw = epochs[0]
            equal = np.ptp(dw) <= 1e-9 * float(dw.max())
            return self._counts_from(self._mean_access_prob(f, dw[:1] if equal else dw))
        pages = self._draw_pages(np.arange(R))
        lam = np.zeros(pages.shape)
        flat = pages.ravel()
        for f, dw in epochs:
            r, w = f.rate_of(flat)
            lam += (r + w).reshape(pages.shape) * dw[None, :]
        return (self.rng.random(lam.shape) < -np.expm1(-lam)).sum(axis=1).astype(np.int64)

    def _counts_from(self, q) -> np.ndarray:
        """nr_accesses from each (region, sample)'s access probability q, (R, S), or
        (R, 1) when every sample's is the same (one Binomial draw a region)."""
        if q.shape[1] == 1:
            return self.rng.binomial(self.samples_per_aggr, q[:, 0]).astype(np.int64)
        return (self.rng.random(q.shape) < q).sum(axis=1).astype(np.int64)

    @staticmethod
    def _rate_epochs(tl, lo, hi) -> list:
        """(field, work of each sample interval under it) for the field epochs
        overlapping the sample intervals [lo_j, hi_j]; none when no work was done."""
        S = lo.shape[0]
        t_lo, t_hi = float(lo.min()), float(hi[-1])
        epochs = []
        es = tl.epoch_start
        if es[-1] <= t_lo:  # one field over the whole aggregation (the usual case)
            w = tl.work_at(np.concatenate((lo, hi)))
            dw = np.maximum(w[S:] - w[:S], 0.0)
            if dw.max() > 0:
                epochs.append((tl.fields[-1], dw))
        else:
            starts = list(es) + [math.inf]
            for k, f in enumerate(tl.fields):
                a, b = starts[k], starts[k + 1]
                if b <= t_lo or a >= t_hi:
                    continue
                dw = tl.work_at(np.clip(hi, a, b)) - tl.work_at(np.clip(lo, a, b))
                dw = np.maximum(dw, 0.0)
                if np.any(dw > 0):
                    epochs.append((f, dw))
        return epochs

    def _mean_access_prob(self, f, dw) -> np.ndarray:
        """(R, len(dw)): mean over each region's pages of 1 - exp(-rate_p x dw)."""
        s, e = self._s, self._e
        R = s.shape[0]
        k = dw.shape[0]
        if f.nsegments == 0:
            return np.zeros((R, k))
        rate = f.read + f.write
        lens = f.ends - f.starts
        x = np.concatenate((s, e))
        i = np.searchsorted(f.starts, x, side="right") - 1
        ii = np.maximum(i, 0)
        inside = np.minimum(x - f.starts[ii], lens[ii])
        # k is 1 (constant throughput) or samples_per_aggr, whose works per interval
        # repeat (they change only where the throughput does): one pass per value
        vals, inv = np.unique(dw, return_inverse=True)
        out = np.empty((R, vals.shape[0]))
        for j in range(vals.shape[0]):
            qp = -np.expm1(-rate * vals[j])  # one page's access probability
            cum = np.empty(qp.shape[0] + 1)
            cum[0] = 0.0
            np.cumsum(qp * lens, out=cum[1:])
            g = cum[ii] + qp[ii] * inside
            g[i < 0] = 0.0
            out[:, j] = (g[R:] - g[:R]) / (e - s)
        return np.clip(out[:, inv], 0.0, 1.0)

    def stats(self) -> dict:
        return {"aggregations": self.nr_aggregations, "nr_regions": self.nr_regions,
                "mean_nr_regions": self._nr_sum / max(self.nr_aggregations, 1),
                "checks": self.checks, "cpu_seconds": self.cpu_seconds,
                "merges": self._mh_merges,
                "mean_merged_hamming": (self._mh_sum / self._mh_merges
                                        if self._mh_merges else None)}
