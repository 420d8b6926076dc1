"""`tierlab telemetry`: how well monitors find a workload's hot pages, over time
(Telescope, ATC'24: precision and recall of the hot set, and monitor CPU).

Each monitor runs alone: one simulation per monitor, under a policy that migrates
nothing (`static`) with the monitor attached, on a machine whose DRAM holds the whole
footprint unless one is given (so a masim config's phase times are simulated times).
DAMON-family monitors (`damon`, `telescope-*`) take the ATC'24 intervals (5 ms
sampling, 200 ms aggregation) unless their spec sets `aggr`.

Every `window` (1 s) of simulated time, over the aggregations that ended in it:

- monitor hot set, region monitors (`regions` + `subscribe`): a page is hot when the
  nr_accesses of its regions, averaged over the window's aggregations, exceed `hot_min`
  (5): ATC'24's "a region is hot if nr_accesses > 5", read in DAMON's own unit, accessed
  samples per aggregation interval (200 ms of 5 ms samples, 40 at most); counts are
  rescaled to 40 samples when a monitor's intervals differ.
- monitor hot set, sample monitors (`pebs`: `subscribe(fn(batch, now))` with batches of
  sampled `pages` and their `reads`/`writes` sample counts): a page is hot when it got
  at least `sample_min` (1) samples in the window.
- true hot set (`truth`), from the rate field:
  `relative` (default): the workload's hot set, pages whose access rate over the window
  is at least 2x the mean over the footprint, as the paper scores monitors against
  masim's hot regions whatever their per-page rate: a large hot set has a low rate per
  page, which is what makes a 4 KiB accessed bit miss it;
  `sampled`: pages a perfect monitor checking their own bit every 5 ms would find
  accessed in more than `hot_min` of an aggregation's 40 intervals, in expectation
  (sum over the intervals of 1 - exp(-rate_p x work per interval), per field epoch).
- precision = |monitor hot & true hot| / |monitor hot| (None when the monitor marks
  nothing hot), recall = |monitor hot & true hot| / |true hot| (None when nothing is
  truly hot), in pages; monitor CPU: cumulative seconds and the window's share of one
  core.

Everything is kept as page intervals (no per-page array), so 5 TiB costs what 5 GiB
does here. Outputs: DIR/telemetry.json, DIR/telemetry.csv (one row per monitor and
window), DIR/telemetry.png (precision, recall and CPU over time per monitor).
"""
from __future__ import annotations

import csv
import gc
import json
import math
import time
from pathlib import Path

import numpy as np

from ..errors import TierlabError
from ..monitors import MONITORS
from ..monitors.damon_paddr import DamonPaddr
from ..policies.static import Static
from ..registry import Spec
from ..units import PAGE
from .results import jsonable

WINDOW = 1.0  #: seconds per precision/recall point (ATC'24)
HOT_MIN = 5.0  #: hot: nr_accesses > 5 over 1 s (ATC'24)
REF_SAMPLE = 0.005  #: the 5 ms sampling interval the hot rules count in
REF_AGGR = 0.2  #: the 200 ms aggregation interval nr_accesses counts over
ATC24_AGGR = "200ms"
REL_HOT = 2.0  #: relative truth: hot at >= this many times the footprint's mean rate
TRUTHS = ("relative", "sampled")
SAMPLE_MIN = 1  #: a sample monitor's page is hot with at least this many samples
CSV_COLUMNS = ["monitor", "t", "precision", "recall", "monitor_hot_bytes",
               "true_hot_bytes", "hit_bytes", "nr_regions", "cpu_seconds", "cpu_share"]


# -----------------------------------------------------------------------------------
# Page-interval arithmetic (sorted, disjoint [start, end) intervals)
# -----------------------------------------------------------------------------------
def merge_intervals(starts, ends):
    """Sorted disjoint intervals joined where one ends at the next one's start."""
    s, e = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    keep = e > s
    s, e = s[keep], e[keep]
    if s.size < 2:
        return s, e
    head = np.ones(s.size, dtype=bool)
    head[1:] = s[1:] != e[:-1]
    last = np.append(np.flatnonzero(head)[1:] - 1, s.size - 1)
    return s[head], e[last]


def covered_below(starts, ends, x) -> np.ndarray:
    """Pages of the intervals below each x."""
    x = np.asarray(x, dtype=np.int64)
    if starts.size == 0:
        return np.zeros(x.shape, dtype=np.int64)
    cum = np.concatenate(([0], np.cumsum(ends - starts)))
    k = np.searchsorted(starts, x, side="right")
    km = np.maximum(k - 1, 0)
    part = np.clip(x - starts[km], 0, ends[km] - starts[km])
    return np.where(k > 0, cum[km] + part, 0)


def overlap(a_s, a_e, b_s, b_e) -> int:
    """Pages in both interval sets."""
    a_s, a_e = np.asarray(a_s, dtype=np.int64), np.asarray(a_e, dtype=np.int64)
    b_s, b_e = np.asarray(b_s, dtype=np.int64), np.asarray(b_e, dtype=np.int64)
    if a_s.size == 0 or b_s.size == 0:
        return 0
    return int((covered_below(b_s, b_e, a_e) - covered_below(b_s, b_e, a_s)).sum())


def precision_recall(mon, true):
    """(precision, recall, hit pages, monitor pages, true pages) of two interval sets."""
    hit = overlap(mon[0], mon[1], true[0], true[1])
    m = int((mon[1] - mon[0]).sum())
    t = int((true[1] - true[0]).sum())
    return (hit / m if m else None, hit / t if t else None, hit, m, t)


def region_hot(aggs, hot_min: float = HOT_MIN, scale: float = 1.0):
    """Hot intervals of a region monitor over a window: pages whose regions'
    nr_accesses, summed over the aggregations `aggs` [(start, end, nr), ...] and
    multiplied by `scale`, exceed `hot_min`."""
    if not aggs:
        z = np.zeros(0, dtype=np.int64)
        return z, z
    s = np.concatenate([np.asarray(a[0], dtype=np.int64) for a in aggs])
    e = np.concatenate([np.asarray(a[1], dtype=np.int64) for a in aggs])
    nr = np.concatenate([np.asarray(a[2], dtype=float) for a in aggs])
    bounds = np.unique(np.concatenate((s, e)))
    k = bounds.size
    diff = (np.bincount(np.searchsorted(bounds, s), nr, minlength=k)
            - np.bincount(np.searchsorted(bounds, e), nr, minlength=k))
    cnt = np.cumsum(diff)[:-1]
    hot = cnt * scale > hot_min
    return merge_intervals(bounds[:-1][hot], bounds[1:][hot])


def page_intervals(pages):
    """Sorted unique pages as runs [start, end)."""
    p = np.unique(np.asarray(pages, dtype=np.int64))
    return merge_intervals(p, p + 1)


def _epochs(timeline, t0: float, t1: float):
    """[(field, seconds, work)] of the field epochs overlapping (t0, t1]."""
    starts = list(timeline.epoch_start) + [math.inf]
    parts = []
    for k, f in enumerate(timeline.fields):
        a, b = max(starts[k], t0), min(starts[k + 1], t1)
        if b <= a or f.nsegments == 0:
            continue
        dw = float(timeline.work_at(b) - timeline.work_at(a))
        if dw > 0:
            parts.append((f, b - a, dw))
    return parts


def true_hot(timeline, t0: float, t1: float, hot_min: float = HOT_MIN,
             truth: str = "relative", rel: float = REL_HOT,
             ref_sample: float = REF_SAMPLE, ref_aggr: float = REF_AGGR):
    """Truly hot intervals over (t0, t1] (see the module docstring).

    `relative`: pages whose access rate over the window is at least `rel` times the
    mean over the footprint (the workload's hot set, as masim's hot regions are the
    paper's). `sampled`: pages a perfect monitor checking their own bit every
    `ref_sample` would find accessed more than `hot_min` times per `ref_aggr`."""
    z = np.zeros(0, dtype=np.int64)
    parts = _epochs(timeline, t0, t1)
    if not parts:
        return z, z
    bounds = np.unique(np.concatenate([np.concatenate((f.starts, f.ends)) for f, _, _ in parts]))
    lo = bounds[:-1]
    e = np.zeros(lo.size)
    inside = np.zeros(lo.size, dtype=bool)
    for f, secs, dw in parts:
        r, w = f.rate_of(lo)
        if truth == "relative":
            e += (r + w) * dw
            inside |= f.segment_of(lo) >= 0
        else:
            n = secs / ref_sample
            e += n * -np.expm1(-(r + w) * dw / n)
    if truth == "relative":
        length = np.diff(bounds)
        pages = int(length[inside].sum())
        if pages == 0:
            return z, z
        hot = inside & (e >= rel * float((e * length).sum()) / pages)
    else:
        hot = e * (ref_aggr / (t1 - t0)) > hot_min
    return merge_intervals(lo[hot], bounds[1:][hot])


# -----------------------------------------------------------------------------------
# Scoring a monitor during its run
# -----------------------------------------------------------------------------------
def is_region_monitor(mon) -> bool:
    return hasattr(mon, "subscribe") and hasattr(mon, "regions")


def is_sample_monitor(mon) -> bool:
    """`pebs`: subscribers get fn(batch, now), batch.pages with reads/writes counts."""
    return getattr(type(mon), "registered_name", None) == "pebs" and hasattr(mon, "subscribe")


class Scorer:
    """Collects a monitor's view per window and scores it against the true hot set."""

    def __init__(self, sim, mon, window=WINDOW, hot_min=HOT_MIN, sample_min=SAMPLE_MIN,
                 truth="relative"):
        self.sim, self.mon = sim, mon
        self.window, self.hot_min, self.sample_min = window, hot_min, sample_min
        self.truth = truth
        self.rows: list[dict] = []
        self._t0 = 0.0
        self._next = window
        self._aggs: list = []
        self._samples = 0
        self._pages: list = []
        self._counts: list = []
        self._cpu0 = 0.0
        if is_region_monitor(mon):
            mon.subscribe(self._on_aggregate)
        else:
            mon.subscribe(self._on_batch)

    def _on_aggregate(self, mon, now: float) -> None:
        r = mon.regions
        self._aggs.append((r.start, r.end, r.nr_accesses))
        self._samples += int(getattr(mon, "samples_per_aggr", 1))
        if now >= self._next - 1e-6:
            scale = (REF_AGGR / REF_SAMPLE) / max(self._samples, 1)
            hot = region_hot(self._aggs, self.hot_min, scale)
            self._close(now, hot, len(r.start))

    def _on_batch(self, batch, now: float) -> None:
        pages = np.asarray(batch.pages, dtype=np.int64)
        if hasattr(batch, "reads"):
            counts = np.asarray(batch.reads) + np.asarray(batch.writes)
        else:
            counts = np.ones(pages.shape[0], dtype=np.int64)
        self._pages.append(pages)
        self._counts.append(counts)
        if now >= self._next - 1e-6:
            p = np.concatenate(self._pages) if self._pages else np.zeros(0, np.int64)
            c = np.concatenate(self._counts) if self._counts else np.zeros(0, np.int64)
            u, inv = np.unique(p, return_inverse=True)
            tot = np.bincount(inv, c, minlength=u.shape[0])
            self._close(now, page_intervals(u[tot >= self.sample_min]), None)

    def _close(self, now: float, hot, nr_regions) -> None:
        tl = self.sim.timeline
        truth = true_hot(tl, self._t0, now, self.hot_min, self.truth)
        prec, rec, hit, m, t = precision_recall(hot, truth)
        cpu = float(self.sim.stats.monitor_cpu_seconds)
        self.rows.append({"t": float(now), "precision": prec, "recall": rec,
                          "monitor_hot_bytes": m * PAGE, "true_hot_bytes": t * PAGE,
                          "hit_bytes": hit * PAGE, "nr_regions": nr_regions,
                          "cpu_seconds": cpu,
                          "cpu_share": (cpu - self._cpu0) / max(now - self._t0, 1e-12)})
        self._cpu0 = cpu
        self._t0 = float(now)
        self._next = now + self.window
        self._aggs, self._samples, self._pages, self._counts = [], 0, [], []


class _Watch(Static):
    """`static` with one monitor attached: nothing migrates, the monitor only watches."""

    def __init__(self, monitor):
        super().__init__()
        self.monitor = monitor
        self.spec = "static"

    def attach(self, sim) -> None:
        super().attach(sim)
        self.monitor.attach(sim)


# -----------------------------------------------------------------------------------
# The command
# -----------------------------------------------------------------------------------
def monitor_spec(text: str) -> Spec:
    """The spec as given, with the ATC'24 aggregation for DAMON-family monitors."""
    from ..monitors.damon import Damon
    spec = Spec.parse(text)
    cls = MONITORS.get(spec.name)
    if isinstance(cls, type) and issubclass(cls, Damon) and "aggr" not in spec.params:
        spec = Spec(spec.name, spec.args, {**spec.params, "aggr": ATC24_AGGR})
    return spec


def split_monitors(text: str) -> list[str]:
    """'damon:aggr=1s,telescope-flex:error=10%' -> one spec per monitor (monitors take
    no bare-word variants: a part without '=' starts a new spec)."""
    items: list[str] = []
    for part in str(text).split(","):
        part = part.strip()
        if not part:
            continue
        if items and "=" in part and ":" not in part.split("=", 1)[0]:
            items[-1] += "," + part
        else:
            items.append(part)
    if not items:
        raise TierlabError("no monitors given; valid: " + ", ".join(MONITORS.names()))
    return items


def default_machine(workload) -> str:
    """optane-2tier with DRAM holding the footprint (and its watermarks) whole."""
    gib = math.ceil(workload.footprint_pages * PAGE * 1.05 / 2 ** 30) + 1
    return f"optane-2tier:dram={gib}GiB"


def run_telemetry(workload: str, monitors, machine=None, seed: int = 0,
                  window: float = WINDOW, hot_min: float = HOT_MIN,
                  sample_min: int = SAMPLE_MIN, truth: str = "relative", note=None,
                  progress=None, on_done=None) -> dict:
    """Run each monitor alone on `workload` and score it every `window` seconds.

    `note(text)`: one-line messages (a skipped monitor); `progress(name, fraction)`;
    `on_done(name, entry)` after each monitor. Returns the telemetry record."""
    from .. import api
    if window <= 0:
        raise TierlabError(f"bad telemetry window {window!r}: must be > 0 seconds")
    if hot_min < 0:
        raise TierlabError(f"bad telemetry hot_min {hot_min!r}: must be >= 0")
    if truth not in TRUTHS:
        raise TierlabError(f"bad telemetry truth {truth!r}: valid choices are "
                           + ", ".join(TRUTHS))
    note = note or (lambda text: None)
    wl = api.make_workload(workload, 1.0, seed)
    mach = api.make_machine(machine or default_machine(wl))
    todo, skipped = [], []
    for text in monitors:
        name = Spec.parse(text).name
        if name == "pebs" and name not in MONITORS.names():
            skipped.append({"monitor": text, "reason": "pebs is not registered "
                            "(monitors/pebs.py missing)"})
            note(f"{text}: skipped (no pebs monitor registered)")
            continue
        mon = MONITORS.create(monitor_spec(text))  # bad names and values fail here
        if isinstance(mon, DamonPaddr):  # its regions are frames, not addresses
            skipped.append({"monitor": text, "reason": "its regions are physical frames; "
                            "the hot set is scored by virtual address"})
            note(f"{text}: skipped (its regions are physical frames, the hot set is "
                 "scored by virtual address)")
            continue
        if not (is_region_monitor(mon) or is_sample_monitor(mon)):
            skipped.append({"monitor": text, "reason": "neither regions nor PEBS samples "
                            "to score"})
            note(f"{text}: skipped (neither regions nor PEBS samples to score)")
            continue
        todo.append(text)
    entries = []
    for text in todo:
        t_wall = time.perf_counter()
        mon = MONITORS.create(monitor_spec(text))
        cb = None if progress is None else (lambda f, n=text: progress(n, f))
        sim = api.simulation(mach, api.make_workload(workload, 1.0, seed), _Watch(mon),
                             "dram-preferred", seed, 1.0, cb)
        scorer = Scorer(sim, mon, window, hot_min, sample_min, truth)
        rec = sim.run()
        rows = scorer.rows
        if not rows:  # the run is the workload's: the same length for every monitor
            raise TierlabError(f"telemetry window {window:g} s is longer than the run "
                               f"({rec['sim_seconds']:.3g} simulated s): no window to "
                               f"score; give one of at most {rec['sim_seconds'] / 2:.3g} s")
        entry = {"monitor": text, "params": {k: str(v) for k, v in mon.params.items()},
                 "sim_seconds": rec["sim_seconds"],
                 "monitor_cpu_seconds": rec["monitor_cpu_seconds"],
                 "cpu_share": rec["monitor_cpu_seconds"] / max(rec["sim_seconds"], 1e-12),
                 "wall_seconds": time.perf_counter() - t_wall,
                 "stats": jsonable(mon.stats()),
                 "summary": summarize(rows),
                 "series": {k: [r[k] for r in rows] for k in CSV_COLUMNS[1:]}}
        entries.append(entry)
        if on_done is not None:
            on_done(text, entry)
        del sim, scorer, mon
        gc.collect()  # sim <-> policy <-> monitor cycles: free the page map now
    return {"workload": workload, "machine": mach.name, "seed": seed, "window": window,
            "hot_min": hot_min, "sample_min": sample_min, "truth": truth,
            "ref_sample": REF_SAMPLE, "ref_aggr": REF_AGGR,
            "monitors": entries, "skipped": skipped}


def summarize(rows) -> dict:
    """Mean precision and recall, the last window's, and when recall first reached 90%."""
    def mean(k):
        v = [r[k] for r in rows if r[k] is not None]
        return float(np.mean(v)) if v else None
    first90 = next((r["t"] for r in rows if r["recall"] is not None and r["recall"] >= 0.9),
                   None)
    last = rows[-1] if rows else {"precision": None, "recall": None}
    return {"windows": len(rows), "mean_precision": mean("precision"),
            "mean_recall": mean("recall"), "last_precision": last["precision"],
            "last_recall": last["recall"], "recall90_at": first90}


def write_telemetry(result: dict, outdir) -> list[Path]:
    """DIR/telemetry.json, DIR/telemetry.csv and DIR/telemetry.png."""
    out = Path(outdir)
    out.mkdir(parents=True, exist_ok=True)
    jp, cp, pp = out / "telemetry.json", out / "telemetry.csv", out / "telemetry.png"
    jp.write_text(json.dumps(result, indent=1))
    with open(cp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(CSV_COLUMNS)
        for e in result["monitors"]:
            s = e["series"]
            for i in range(len(s["t"])):
                w.writerow([e["monitor"]] + ["" if s[k][i] is None else s[k][i]
                                             for k in CSV_COLUMNS[1:]])
    plot_telemetry(result, pp)
    return [jp, cp, pp]


def plot_telemetry(result: dict, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(3, 1, figsize=(8, 7.5), sharex=True)
    for e in result["monitors"]:
        s = e["series"]
        t = np.asarray(s["t"], dtype=float)
        for ax, k in zip(axes[:2], ("precision", "recall")):
            y = np.array([np.nan if v is None else v for v in s[k]], dtype=float)
            ax.plot(t, y, lw=1.3, label=e["monitor"])
        axes[2].plot(t, 100 * np.asarray(s["cpu_share"], dtype=float), lw=1.3,
                     label=e["monitor"])
    for ax, lab in zip(axes, ("precision", "recall", "monitor CPU (% of a core)")):
        ax.set_ylabel(lab)
        ax.grid(alpha=0.3)
    axes[0].set_ylim(-0.02, 1.02)
    axes[1].set_ylim(-0.02, 1.02)
    axes[2].set_xlabel("simulated seconds")
    if result["monitors"]:
        axes[0].legend(fontsize=8)
    fig.suptitle(f"Hot-set detection on {result['workload']} (hot: nr_accesses > "
                 f"{result['hot_min']:g} per 200 ms; truth {result.get('truth', 'sampled')})",
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
