"""Seeds as an axis: means with 95% confidence intervals, and a verdict per pair.

Every run of a sweep is seeded on its own, so the runs of one (machine, workload,
policy, allocation policy) over seeds are independent samples. Throughput gets its mean
and a Student-t interval over seeds. A policy's speedup over the baseline is paired by
seed (both runs share the seed, hence the workload's random draws): the interval and
the verdict come from a one-sample t-test on the per-seed log speedups, which is the
paired t-test on log throughputs; the interval is exponentiated back, so it is an
interval of the geometric-mean speedup. With one seed there is no interval and no
verdict ("1 seed, no interval").
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

LEVEL = 0.95  #: confidence level of every interval and verdict
TEST = "paired t-test over seeds on log throughput, 95%"
ONE_SEED = "1 seed, no interval"
#: the note under a table of one seed
ONE_SEED_NOTE = "1 seed, so no interval and no verdict: --seeds 0-2 (or more) gives both"


@dataclass(frozen=True)
class Estimate:
    """A mean over seeds with its 95% interval (lo, hi are None with one seed)."""

    mean: float
    lo: float | None
    hi: float | None
    n: int

    def text(self, fmt: str = "{:.3g}") -> str:
        """'1.26x [1.21, 1.31]' (the interval in the mean's format, without its unit)."""
        if self.lo is None:
            return fmt.format(self.mean)
        bare = fmt.rstrip("x%")
        return f"{fmt.format(self.mean)} [{bare.format(self.lo)}, {bare.format(self.hi)}]"

    def pm(self, fmt: str = "{:.3g}") -> str:
        """'6.97e+05 ±0.4%': the mean and the interval's half-width relative to it."""
        if self.lo is None or not self.mean:
            return fmt.format(self.mean)
        return f"{fmt.format(self.mean)} ±{100 * (self.hi - self.mean) / abs(self.mean):.1f}%"


def mean_ci(xs) -> Estimate:
    """Arithmetic mean and Student-t 95% interval of xs."""
    x = np.asarray(list(xs), dtype=float)
    m = float(x.mean())
    if x.size < 2:
        return Estimate(m, None, None, int(x.size))
    from scipy import stats  # here: importing scipy costs the Linux guest ~110 MiB
    half = float(stats.t.ppf(0.5 + LEVEL / 2, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Estimate(m, m - half, m + half, int(x.size))


def geo_ci(ratios) -> Estimate:
    """Geometric mean of positive ratios with the exponentiated t-interval of their
    logs."""
    e = mean_ci(np.log(np.asarray(list(ratios), dtype=float)))
    if e.lo is None:
        return Estimate(math.exp(e.mean), None, None, e.n)
    return Estimate(math.exp(e.mean), math.exp(e.lo), math.exp(e.hi), e.n)


def verdict(ratios) -> str:
    """faster / slower / no difference at 95% (paired over seeds), or ONE_SEED."""
    r = np.log(np.asarray(list(ratios), dtype=float))
    if r.size < 2:
        return ONE_SEED
    if np.all(np.abs(r) < 1e-9):  # the same runs, up to the last bit of a quotient
        return "no difference"
    if np.ptp(r) == 0:  # identical every seed: the t statistic is undefined
        return "faster" if r[0] > 0 else "slower"
    from scipy import stats
    with warnings.catch_warnings():  # nearly equal seeds: scipy warns, the p is sound
        warnings.simplefilter("ignore", RuntimeWarning)
        p = stats.ttest_1samp(r, 0.0).pvalue
    if p < 1 - LEVEL:
        return "faster" if r.mean() > 0 else "slower"
    return "no difference"


def _key(r) -> tuple:
    return r["machine"], r["workload"], r["policy"], r["alloc"]


def group_runs(records) -> dict[tuple, list[dict]]:
    """(machine, workload, policy, alloc) -> its runs (one per seed), in record order."""
    out: dict[tuple, list[dict]] = {}
    for r in records:
        out.setdefault(_key(r), []).append(r)
    return out


def pair_rows(records) -> list[dict]:
    """One row per (machine, workload, policy, alloc): seeds, throughput estimate,
    speedup estimate (None for the baseline's own runs without speedups), verdict."""
    rows = []
    for (m, w, p, a), rs in group_runs(records).items():
        sp = [r["speedup"] for r in rs if r.get("speedup")]
        rows.append({"machine": m, "workload": w, "policy": p, "alloc": a,
                     "seeds": sorted(r["seed"] for r in rs),
                     "work_unit": rs[0].get("work_unit", "ops"),
                     "scale": rs[0].get("scale"),
                     "throughput": mean_ci(r["throughput"] for r in rs),
                     "speedup": geo_ci(sp) if sp else None,
                     "verdict": verdict(sp) if sp else "-",
                     "log_sd": float(np.std(np.log(sp), ddof=1)) if len(sp) > 1 else 0.0})
    return rows


def geomean_rows(records) -> list[dict]:
    """Per (machine, alloc, policy): the geometric mean of the speedup across
    workloads, per seed, then its mean and interval over the seeds every workload
    has."""
    by: dict[tuple, dict[int, dict[str, float]]] = {}
    workloads: dict[tuple, set] = {}
    for r in records:
        if r.get("speedup"):
            k = (r["machine"], r["alloc"], r["policy"])
            by.setdefault(k, {}).setdefault(r["seed"], {})[r["workload"]] = r["speedup"]
            workloads.setdefault(k, set()).add(r["workload"])
    rows = []
    for k, seeds in by.items():
        full = [s for s, ws in seeds.items() if set(ws) == workloads[k]]
        per_seed = [math.exp(np.mean(np.log(list(seeds[s].values())))) for s in full]
        if per_seed:
            rows.append({"machine": k[0], "alloc": k[1], "policy": k[2],
                         "workloads": len(workloads[k]), "seeds": sorted(full),
                         "geomean": geo_ci(per_seed)})
    return rows


def spread_notes(rows: list[dict]) -> list[str]:
    """One line per workload where two policies adjacent in speedup are closer than
    the spread of their speedups across seeds: more seeds are needed to order them."""
    notes = []
    groups: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["speedup"] is not None and r["speedup"].n > 1:
            groups.setdefault((r["machine"], r["workload"], r["alloc"]), []).append(r)
    for (m, w, a), rs in groups.items():
        rs = sorted(rs, key=lambda r: r["speedup"].mean)
        for x, y in zip(rs, rs[1:]):
            gap = math.log(y["speedup"].mean / x["speedup"].mean)
            spread = max(x["log_sd"], y["log_sd"])
            if spread > gap:
                notes.append(f"note: on {w} ({m}), {x['policy']} and {y['policy']} differ by "
                             f"{100 * (math.exp(gap) - 1):.1f}%, less than their spread "
                             f"across seeds ({100 * (math.exp(spread) - 1):.1f}%, the larger "
                             "standard deviation): more seeds are needed to order them")
    return notes


def ratio_claim(ratios, fmt: str = "{:.2f}x") -> str:
    """A claim's number from per-seed ratios (a over b, paired by seed): '2.09x [2.05,
    2.12], faster' (geometric mean, 95% interval, verdict); one seed: '2.09x (1 seed, no
    interval)'."""
    ratios = [float(x) for x in ratios]
    if not ratios or not all(math.isfinite(x) and x > 0 for x in ratios):
        return "-"
    e = geo_ci(ratios)
    word = verdict(ratios)
    return f"{e.text(fmt)} ({word})" if word == ONE_SEED else f"{e.text(fmt)}, {word}"


def paired(records, a: str, b: str, match=("machine", "workload", "alloc"),
           field: str = "policy") -> list[float]:
    """Throughput of the runs whose `field` is a over those whose `field` is b, one ratio
    per pair with equal `match` fields and seed (match=("workload",) pairs runs on two
    machines; field="alloc" compares allocation policies)."""
    thr: dict[str, dict[tuple, float]] = {a: {}, b: {}}
    for r in records:
        if r[field] in thr:
            thr[r[field]][tuple(r[k] for k in match) + (r["seed"],)] = r["throughput"]
    return [thr[a][k] / thr[b][k] for k in thr[a] if k in thr[b] and thr[b][k] > 0
            and thr[a][k] > 0]


def versus(records, a: str, b: str) -> str:
    """A claim "a beats b" over a suite: the geometric mean of a's throughput over b's,
    paired by (machine, workload, alloc, seed), with its 95% interval and the verdict
    of a paired t-test over those pairs on log throughput."""
    pairs = paired(records, a, b)
    if not pairs:
        return "-"
    e = geo_ci(pairs)
    word = verdict(pairs)
    word = {"faster": f"{a} faster", "slower": f"{a} slower"}.get(word, word)
    return f"{a}/{b} {e.text('{:.2f}')}, {word} ({len(pairs)} pairs of workload and seed)"


def over_seeds(records) -> list[dict]:
    """One record per (machine, workload, policy, alloc), for the tables that show one
    number per cell: throughput and every `speedup*` field are geometric means over the
    seeds, every other field is the lowest seed's run; `seeds` lists the seeds
    (report.html and `pair_rows` give the intervals)."""
    out = []
    for rs in group_runs(records).values():
        first = min(rs, key=lambda r: r["seed"])
        rec = dict(first, seeds=sorted(r["seed"] for r in rs))
        if len(rs) > 1:
            for k in [k for k in first if k == "throughput" or k.startswith("speedup")]:
                xs = [r.get(k) for r in rs]
                ok = all(isinstance(x, (int, float)) and x > 0 for x in xs)
                rec[k] = float(np.exp(np.mean(np.log(xs)))) if ok else None
        out.append(rec)
    return out


def seeds_footer(records, report_html: bool = True) -> str:
    """The closing paragraph of a reproduction's README: which seeds its numbers are
    over, and where their intervals are (`report_html`: in the report.html beside it;
    without one, nowhere)."""
    seeds = sorted({s for r in records if isinstance(r, dict) and "seed" in r
                    for s in r.get("seeds", [r["seed"]])})  # over_seeds keeps `seeds`
    if len(seeds) <= 1:
        return (f"\n\nOne seed ({seeds[0] if seeds else 0}): no interval and no verdict; "
                "`--seeds 0-2` gives both.\n")
    where = ("the report.html that `tierlab reproduce` writes beside this file gives each "
             f"its 95% interval and verdict ({TEST})") if report_html else \
        "no interval is drawn for them"
    return (f"\n\nSeeds {', '.join(map(str, seeds))}: a number that stands for several "
            "runs is their geometric mean over the seeds (other figures: the lowest "
            f"seed's run); {where}.\n")
