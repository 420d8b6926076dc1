"""`tierlab reproduce NAME --out DIR`: a paper's evaluation in the simulator, as a
Markdown report with PNG figures and the run records (results.json).

`idt` (HPDC'24; docs/idt.md): on `optane-4tier`, the workload suite under every
baseline and IDT, speedups normalised to `autonuma` with a geomean row; the ablations
(RL against fixed thresholds, PRP on/off with PRP accuracy, IDT's monitor against plain
DAMON, and each public-code rule against the option that restores the earlier one);
and a 2-tier run. Each section states the paper's number next to
the simulator's.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

from .. import api
from ..units import PAGE
from .plots import plot_speedup
from .repro_allocation import ALLOC_SCALE, reproduce_allocation
from .repro_beyond import reproduce_beyond
from .repro_colloid import COLLOID_SCALE, reproduce_colloid
from .repro_johnny_cache import JC_SCALE, reproduce_johnny_cache
from .results import present_traces
from .stats import (ONE_SEED, TEST, geo_ci, geomean_rows, mean_ci, over_seeds, pair_rows,
                    ratio_claim, seeds_footer, versus)
from .tables import geomean_speedups

IDT_BASELINES = ["autonuma", "autonuma-tiering", "autonuma-tiering-mglru", "tpp",
                 "tiering-0.8", "autotiering", "multi-clock", "damon-tiering"]
#: PRP on the normalised-sum distance with a fixed threshold (the default is the public
#: code's distance and running threshold)
PRP_SUM = "idt:prp_rule=sum"
#: the agent without discount (the paper: gamma > 0 beats gamma = 0)
GAMMA0 = "idt:gamma=0"
#: each rule IDT follows from its public code, against the option restoring the rule
#: tierlab used before: DAMON's age rule, 64 history bits, splits between the sampled
#: pages, ARP of IDT's demotions only, the bounded aggressive fallback, the
#: misplaced-region pass (and PRP_SUM)
IDT_RULE_OPTIONS = {"idt:age_rule=damon": "age reset only past max_nr_accesses / 10",
                    "idt:history_bits=64": "64 history bits instead of 1,024",
                    "idt:split_at=between": "splits between the two sampled pages",
                    "idt:arp=demoted": "ARP only of regions IDT demoted",
                    "idt:fallback=bounded": "aggressive fallback only to demote_wmark",
                    "idt:misplaced=on": "a misplaced-region pass at each aggregation",
                    PRP_SUM: "PRP on the normalised sum, fixed threshold 0.25"}
IDT_ABLATIONS = ["idt", "idt-static-q2", "idt-static-q3", "idt-static-max", "idt-norl",
                 GAMMA0, "idt-noprp", "idt-damon", *IDT_RULE_OPTIONS]


def md_matrix(records: list[dict], policies: list[str]) -> str:
    """Workloads x policies Markdown table of speedups over seeds (stats.pair_rows):
    the geometric mean, and with several seeds its 95% interval and verdict; a geomean
    row across workloads (its interval over seeds)."""
    wls = list(dict.fromkeys(r["workload"] for r in records))
    by = {(r["workload"], r["policy"]): r for r in pair_rows(records)}
    out = ["| workload | " + " | ".join(policies) + " |",
           "|---|" + "---:|" * len(policies)]
    for w in wls:
        out.append(f"| {w} | " + " | ".join(_cell(by.get((w, p))) for p in policies) + " |")
    gm = {g["policy"]: g["geomean"] for g in geomean_rows(records)}
    out.append("| **geomean** | " + " | ".join(
        f"**{gm[p].text('{:.2f}')}**" if p in gm else "-" for p in policies) + " |")
    seeds = sorted({r["seed"] for r in records})
    out.append("")
    out.append(f"Seeds {', '.join(map(str, seeds))}: " + (
        f"[lo, hi] is the 95% interval and the word the verdict against the baseline "
        f"({TEST})." if len(seeds) > 1 else f"{ONE_SEED}."))
    return "\n".join(out)


def _cell(row) -> str:
    """One speedup cell: '2.45', or '2.45 [2.31, 2.60] faster' over several seeds."""
    if row is None or row["speedup"] is None:
        return "-"
    sp = row["speedup"]
    if sp.lo is None:
        return f"{sp.mean:.2f}"
    word = "" if row["verdict"] == "no difference" and sp.mean == 1 else f" {row['verdict']}"
    return sp.text("{:.2f}") + word


def _geo(xs) -> float:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")


def reproduce_idt(out: Path, scale: float, workloads: list[str], jobs: int | None,
                  on_done=None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    pols = IDT_BASELINES + ["idt", "oracle"]
    main = api.compare(["optane-4tier"], workloads, pols, scale=scale, baseline="autonuma",
                       jobs=jobs, on_done=on_done)
    abl = api.compare(["optane-4tier"], workloads, IDT_ABLATIONS[1:] + ["autonuma"],
                      scale=scale, baseline="autonuma", jobs=jobs, on_done=on_done)
    abl += [r for r in main if r["policy"] == "idt"]
    two = api.compare(["optane-2tier"], workloads,
                      ["autonuma", "autonuma-tiering-mglru", "tpp", "damon-tiering", "idt",
                       "oracle"], scale=scale, baseline="autonuma", jobs=jobs,
                      on_done=on_done)
    recs = main + abl + two
    (out / "results.json").write_text(json.dumps(recs, indent=1))
    plot_speedup(main, "autonuma", out / "idt-4tier.png")
    plot_speedup(abl, "autonuma", out / "idt-ablations.png")
    plot_speedup(two, "autonuma", out / "idt-2tier.png")
    gm = {k[2]: v for k, v in geomean_speedups(main).items()}
    gm2 = {k[2]: v for k, v in geomean_speedups(two).items()}
    best = max((p for p in IDT_BASELINES if p in gm), key=gm.get)
    order = {p: i for i, p in enumerate(("idt", PRP_SUM, "idt-damon"))}
    wls = {w: i for i, w in enumerate(dict.fromkeys(r["workload"] for r in abl))}
    prp = sorted((r for r in abl if r["policy"] in order),
                 key=lambda r: (wls[r["workload"]], order[r["policy"]], r["seed"]))
    prp_rows = "\n".join(
        f"| {r['workload']} | {r['policy']} | {r['seed']} | "
        f"{r['policy_stats'].get('arp', 0)} | "
        f"{r['policy_stats'].get('prp', 0)} | "
        + (f"{r['policy_stats']['prp_accuracy']:.2f}"
           if r['policy_stats'].get('prp_accuracy') is not None else "-") + " |"
        for r in prp)
    ham, hm = [], {"idt": [], "idt-damon": []}
    by = {(r["workload"], r["policy"]): r for r in over_seeds(abl)}
    for w in dict.fromkeys(r["workload"] for r in abl):
        cells = []
        for p, key in (("idt", "mean_merged_hamming"), ("idt", "mean_merged_hamming_aggr"),
                       ("idt-damon", "mean_merged_hamming")):
            m = (by.get((w, p), {}).get("policy_stats") or {}).get("monitor") or {}
            h = m.get(key)
            if h is not None and key.endswith("_aggr") == (p == "idt"):
                hm[p].append(h)  # both in one unit: a bit per aggregation
            cells.append("-" if h is None else f"{h:.3f} ({m.get('merges', 0)} merges)")
        ham.append(f"| {w} | " + " | ".join(cells) + " |")
    g = {p: _geo([r["speedup"] for r in abl if r["policy"] == p]) for p in IDT_ABLATIONS}
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    acc = [r["policy_stats"]["prp_accuracy"] for r in abl if r["policy"] == "idt"
           and r["policy_stats"].get("prp_accuracy") is not None]
    nprp = [r["policy_stats"].get("prp", 0) for r in abl if r["policy"] == "idt"]
    best_static = max(("idt-static-q2", "idt-static-q3", "idt-static-max", "idt-norl"),
                      key=lambda p: g[p])
    claims = f"""| claim | paper | tierlab |
|---|---|---|
| merge quality: mean Hamming distance of merged histories, DAMON -> IDT | 8.13 -> 5.15 | {64 * mean(hm['idt-damon']):.2f} -> {64 * mean(hm['idt']):.2f} bits of 64 (one bit per aggregation; mean over workloads) |
| IDT's monitor pays off end to end: `idt` vs `idt-damon` | (IDT's design) | {g['idt']:.2f}x vs {g['idt-damon']:.2f}x; {versus(abl, 'idt', 'idt-damon')} |
| RL beats every static threshold: `idt` vs the best of q2/q3/max/age 10 | yes | {g['idt']:.2f}x vs {g[best_static]:.2f}x (`{best_static}`); {versus(abl, 'idt', best_static)} |
| gamma > 0 beats gamma = 0 | yes | {g['idt']:.2f}x (0.9) vs {g[GAMMA0]:.2f}x (0); {versus(abl, 'idt', GAMMA0)} |
| PRP fires and is accurate | accuracy high | {sum(nprp)} PRP promotions over {len(nprp)} runs, {f"accuracy {mean(acc):.2f} (mean over the {len(acc)} runs with one resolved)" if acc else "none resolved"} |
| IDT beats IDT without PRP | yes | {g['idt']:.2f}x vs {g['idt-noprp']:.2f}x; {versus(abl, 'idt', 'idt-noprp')} |
| IDT over AutoNUMA balancing | 2.08x (mean) | {gm.get('idt', float('nan')):.2f}x (geomean) |
| IDT over the best baseline | +11.2% (AutoNUMA tiering + MGLRU) | {100 * (gm.get('idt', float('nan')) / gm[best] - 1):+.1f}% (`{best}`); {versus(main, 'idt', best)} |
"""
    ordering = "holds" if gm.get("idt", 0) > gm.get(best, 0) else "does not hold"
    two_best = gm2.get("autonuma-tiering-mglru", float("nan"))
    text = f"""# IDT (HPDC'24) reproduced in tierlab

Machine `optane-4tier` (two sockets x {{DRAM, Optane}}, demotion path local DRAM ->
remote DRAM -> local Optane -> remote Optane) at scale {scale:g}; workloads:
{", ".join(f"`{w}`" for w in workloads)}. Speedup = throughput / throughput under
`autonuma` on the same workload (the paper's normalisation). Records: `results.json`.

## The paper's claims beside tierlab's

{claims}
## Main comparison (4 tiers)

{md_matrix(main, pols)}

![4 tiers](idt-4tier.png)

| | paper | tierlab |
|---|---|---|
| IDT over AutoNUMA balancing (mean) | 2.08x | {gm.get('idt', float('nan')):.2f}x (geomean) |
| IDT over the best prior system | +11.2% (AutoNUMA tiering + MGLRU) | {100 * (gm.get('idt', float('nan')) / gm[best] - 1):+.1f}% (best here: `{best}`, {gm[best]:.2f}x) |

The paper's ordering (IDT above every baseline) {ordering} here.

## Ablations

{md_matrix(abl, ["idt"] + IDT_ABLATIONS[1:])}

![ablations](idt-ablations.png)

RL against fixed thresholds (geomean over the workloads): `idt` {g['idt']:.2f}x,
`idt-static-q2` {g['idt-static-q2']:.2f}x, `idt-static-q3` {g['idt-static-q3']:.2f}x,
`idt-static-max` {g['idt-static-max']:.2f}x, `idt-norl` (age_thres 10)
{g['idt-norl']:.2f}x; without discount (`{GAMMA0}`) {g[GAMMA0]:.2f}x.

The public code's rules against the options that restore the rules tierlab used before
(geomean over the workloads; `idt` {g['idt']:.2f}x):

| option | earlier rule | geomean |
|---|---|---:|
{chr(10).join(f"| `{p}` | {why} | {g[p]:.2f}x |" for p, why in IDT_RULE_OPTIONS.items())}

PRP (accuracy = share of PRP-promoted regions seen accessed in the aggregation after
their promotion; `idt` runs the public code's distance and its threshold, 5 on that
distance's scale and tightened to each accepted distance for the rest of the run;
`{PRP_SUM}` a fixed threshold on the normalised sum, geomean {g[PRP_SUM]:.2f}x;
`idt-noprp` {g['idt-noprp']:.2f}x):

| workload | policy | seed | ARP regions | PRP regions | PRP accuracy |
|---|---|---:|---:|---:|---:|
{prp_rows}

Merge quality: the mean normalised Hamming distance between the access histories of
regions merged together (each absorbed region against its run's first). IDT's monitor
is measured on its own history (one bit per sampling interval, the last 1,024) and, to
compare with plain DAMON under the same policy, on a measurement-only history of one
bit per aggregation (nr_accesses > 0, the last 64), the one DAMON keeps.

| workload | `idt` (own history) | `idt` (per aggregation) | `idt-damon` (per aggregation) |
|---|---:|---:|---:|
{chr(10).join(ham)}

## Two tiers (`optane-2tier`)

{md_matrix(two, ["autonuma", "autonuma-tiering-mglru", "tpp", "damon-tiering", "idt", "oracle"])}

![2 tiers](idt-2tier.png)

The paper: on 2 tiers IDT only ties AutoNUMA tiering with MGLRU. Here: `idt`
{gm2.get('idt', float('nan')):.2f}x against {two_best:.2f}x.
"""
    path = out / "README.md"
    path.write_text(text + idt_real_traces(out, jobs, on_done) + seeds_footer(recs))
    return path


#: real programs recorded with `tierlab trace record` (committed small recordings, 16
#: copies each: 16 threads, ~200 MiB) on a 4-tier machine with 64 MiB per DRAM node
IDT_TRACE_MACHINE = "optane-4tier:dram=64MiB,optane=512MiB"
IDT_TRACES = ["trace:tests/data/traces/rocksdb-dbbench.npz,copies=16",
              "trace:tests/data/traces/redis-ycsb-zipfian.npz,copies=16"]


def idt_real_traces(out: Path, jobs: int | None, on_done=None) -> str:
    """The real-trace rows: IDT and the baselines on recorded programs at full scale
    (run from the repository's root, where the recordings are; skipped elsewhere)."""
    traces = present_traces(IDT_TRACES)
    if not traces:
        return "\n## Real programs\n\nSkipped: run from the repository's root.\n"
    pols = IDT_BASELINES + ["idt", "oracle"]
    recs = api.compare([IDT_TRACE_MACHINE], traces, pols, baseline="autonuma", jobs=jobs,
                       on_done=on_done)
    (out / "results-traces.json").write_text(json.dumps(recs, indent=1))
    return f"""
## Real programs (recorded traces)

RocksDB `db_bench` and redis-server under YCSB zipfian, recorded with `tierlab trace
record` (tests/data/traces, scripts/traces), 16 copies each, at full scale on
`{IDT_TRACE_MACHINE}`. Speedup over `autonuma`; records: `results-traces.json`.

{md_matrix(recs, pols)}
"""


#: HeMem (SOSP'21) GUPS: 512 GiB footprint, hot sets 1-256 GiB, 16 threads, on a machine
#: with HeMem's 192 GiB of DRAM and 768 GiB of Optane (docs/hemem.md)
HEMEM_MACHINE = "optane-2tier:dram=192GiB,optane=768GiB"
HEMEM_HOT_GIB = [1, 2, 4, 8, 16, 32, 64, 128, 256]
HEMEM_POLICIES = ["hemem", "static", "autonuma-tiering", "damon-tiering", "idt", "oracle"]


def reproduce_hemem(out: Path, scale: float, workloads: list[str], jobs: int | None,
                    on_done=None) -> Path:
    """HeMem's GUPS figure: throughput against hot-set size (the hot set gets 90% of the
    updates), and a hot set that moves. `workloads` is ignored (the paper's GUPS)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out.mkdir(parents=True, exist_ok=True)
    wls = [f"gups:hotset,size=512GiB,hot={h}GiB,threads=16" for h in HEMEM_HOT_GIB]
    recs = api.compare([HEMEM_MACHINE], wls, HEMEM_POLICIES, scale=scale, baseline="static",
                       jobs=jobs, on_done=on_done)
    move = api.compare([HEMEM_MACHINE], ["gups:dynamic,size=512GiB,hot=16GiB,threads=16"],
                       HEMEM_POLICIES, scale=scale, baseline="static", jobs=jobs,
                       on_done=on_done)
    (out / "results.json").write_text(json.dumps(recs + move, indent=1))
    move_rows = {r["policy"]: r for r in pair_rows(move)}  # with intervals over seeds
    # the claims' numbers per seed: flatness of hemem over the hot sets that fit, and
    # each policy's steady throughput over static's at the largest hot set
    runs = {(r["workload"], r["policy"], r["seed"]): _steady(r) for r in recs}
    seeds = sorted({r["seed"] for r in recs})
    fit_w = [w for h, w in zip(HEMEM_HOT_GIB, wls) if h <= 128]
    flat = [min(v) / max(v) for v in ([runs.get((w, "hemem", s)) for w in fit_w]
                                      for s in seeds) if v and None not in v]
    conv = {p: ratio_claim(runs[(wls[-1], p, s)] / runs[(wls[-1], "static", s)]
                           for s in seeds if (wls[-1], p, s) in runs
                           and (wls[-1], "static", s) in runs)
            for p in HEMEM_POLICIES if p != "static"}
    # the paper's GUPS figure reports steady throughput: here the run's second half, after
    # the hot set has been moved (the first half pays for moving up to 2 x 128 GiB); the
    # geometric mean of each cell's runs over the seeds
    by = {k: geo_ci(runs[k + (s,)] for s in seeds).mean
          for k in {(w, p) for w, p, _ in runs}
          if all(k + (s,) in runs and runs[k + (s,)] > 0 for s in seeds)}
    recs, move = over_seeds(recs), over_seeds(move)  # one number per cell over seeds
    whole = {(r["workload"], r["policy"]): r["throughput"] for r in recs}
    fig, ax = plt.subplots(figsize=(7, 4))
    for p in HEMEM_POLICIES:
        ys = [by.get((w, p), float("nan")) / scale for w in wls]
        ax.plot(HEMEM_HOT_GIB, ys, "o-", label=p)
    ax.axvline(192, color="grey", ls=":", lw=1)
    ax.text(192, ax.get_ylim()[1] * 0.95, " DRAM", color="grey", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("hot set (GiB) of a 512 GiB GUPS")
    ax.set_ylabel("updates/s, second half of the run (full scale)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "hemem-gups.png", dpi=110)
    plt.close(fig)
    plot_speedup(move, "static", out / "hemem-move.png")
    head = "| hot set (GiB) | " + " | ".join(HEMEM_POLICIES) + " |"
    rows = [head, "|---:|" + "---:|" * len(HEMEM_POLICIES)]
    for h, w in zip(HEMEM_HOT_GIB, wls):
        rows.append(f"| {h} | " + " | ".join(f"{by.get((w, p), float('nan')) / scale:.3g}"
                                           for p in HEMEM_POLICIES) + " |")
    wf = [whole[(w, "hemem")] for w in fit_w if (w, "hemem") in whole]
    flat_whole = min(wf) / max(wf) if wf else float("nan")
    mrow = " | ".join(_cell(move_rows.get(p)) for p in HEMEM_POLICIES)
    text = f"""# HeMem (SOSP'21) reproduced in tierlab

Machine `{HEMEM_MACHINE}` (HeMem's 192 GiB DRAM + 768 GiB Optane) at scale {scale:g};
GUPS with 16 threads on a 512 GiB footprint, 90% of the updates on a hot set of 1-256
GiB placed last by first touch. Throughput in updates/s at full scale (the miniature's
divided by the scale) over the second half of each run, once the hot set has moved (the
paper's figure is steady throughput). Records: `results.json`.

![GUPS throughput against hot-set size](hemem-gups.png)

{chr(10).join(rows)}

The paper: HeMem's GUPS throughput stays flat while the hot set fits in DRAM and falls
to the others' when it does not. Here: HeMem's slowest fitting hot set (<= 128 GiB)
runs at {mean_ci(flat).text('{:.0%}') if flat else '-'} of its fastest in the second half
(mean over seeds with its 95% interval; {100 * flat_whole:.0f}% over the whole run, which
includes moving the hot set up). At 256 GiB (larger than DRAM), second-half throughput
over `static`'s, paired by seed ({TEST}):

{chr(10).join(f"- `{p}` {v}" for p, v in conv.items())}

## A hot set that moves (16 GiB, every 150 s), speedup over `static`

| {" | ".join(HEMEM_POLICIES)} |
|{"---:|" * len(HEMEM_POLICIES)}
| {mrow} |

![moving hot set](hemem-move.png)
"""
    path = out / "README.md"
    path.write_text(text + seeds_footer(recs + move))
    return path


#: Telescope (ATC'24) detection: case, footprint GiB, hot bytes, needles, the paper's
#: DAMON and Telescope
TELESCOPE_CASES = [("1GiB", 1, 2**30 // 10, 10, "> 90%", "> 90%"),
                   ("10GiB", 10, 10 * 2**30 // 10, 10, "< 50%", "> 90%"),
                   ("100GiB", 100, 100 * 2**30 // 10, 10, "~0%", "> 90%"),
                   ("5TiB", 5 * 1024, 10 * 2**30, 10, "0% (nothing in a minute)",
                    "> 90% in seconds"),
                   ("5TiB-1needle", 5 * 1024, 10 * 2**30, 1, "0% (nothing in a minute)",
                    "> 90% in seconds")]
#: masim as one memory- and TLB-bound thread (ATC'24's premise): every random access
#: misses the TLB, so no overlap (mlp 1) and ~80 ns of page walk before the 81 ns DRAM
#: access: ~6.2 M accesses/s, at which rate the configs' phase times hold (aps)
TELESCOPE_MASIM = ",mlp=1,compute_ns=80,aps=6.2e6"
TELESCOPE_MONITORS = ["damon", "telescope-bounded", "telescope-flex"]


def telescope_config(path: Path, footprint_gib: int, hot_bytes: int, needles: int,
                     seconds: int, cold_weight: float = 1e-9) -> Path:
    """A masim config: `needles` hot regions (together `hot_bytes`) spread evenly through
    an almost idle footprint (the cold regions get `cold_weight` of the accesses)."""
    total = footprint_gib * 2**30
    cold = (total - hot_bytes) // (needles + 1) // PAGE * PAGE
    hot = hot_bytes // needles // PAGE * PAGE
    regions = [f"cold{i}, {cold}" if k == 0 else f"hot{i}, {hot}"
               for i in range(needles) for k in (0, 1)] + [f"cold{needles}, {cold}"]
    pats = [f"hot{i}, 1, 64, {1.0 / needles:.6g}, ro" for i in range(needles)]
    pats += [f"cold{i}, 1, 64, {cold_weight:.3g}, ro" for i in range(needles + 1)]
    path.write_text("# generated by tierlab reproduce telescope\n" + "\n".join(regions)
                    + f"\n\nrun\n{seconds * 1000}\n" + "\n".join(pats) + "\n")
    return path


def reproduce_telescope(out: Path, scale: float, workloads: list[str], jobs: int | None,
                        on_done=None) -> Path:
    """ATC'24's detection table: masim footprints of 1, 10 and 100 GiB with 10% hot, and
    5 TiB with 10 GiB of hot needles (ten, and one), almost idle elsewhere, masim as one
    TLB-bound thread (`TELESCOPE_MASIM`); each monitor alone, its precision and recall
    of the hot pages over 60 s (`tierlab telemetry`), then tiering on the detected
    regions. `scale` and `workloads` are not used: the footprints are the paper's."""
    from ..sweep import active
    from .telemetry import run_telemetry, write_telemetry
    out.mkdir(parents=True, exist_ok=True)
    rows, results = [], []
    if on_done is not None and active() is not None:
        active().expect(len(TELESCOPE_CASES) * len(TELESCOPE_MONITORS), "telemetry")
    for name, gib, hot, needles, paper_damon, paper_tel in TELESCOPE_CASES:
        cfg = telescope_config(out / f"telescope-{name}.cfg", gib, hot,
                               needles=needles, seconds=60)
        res = run_telemetry(f"masim:{cfg}{TELESCOPE_MASIM}", TELESCOPE_MONITORS,
                            on_done=(lambda n, e, w=name: on_done(_Job(w, n), e)
                                     if on_done else None))
        write_telemetry(res, out / name)
        results.append(res)
        got = {e["monitor"]: e["summary"] for e in res["monitors"]}

        def cell(m):
            sm = got.get(m) or {}
            r, t = sm.get("last_recall"), sm.get("recall90_at")
            pr = sm.get("mean_precision")
            return ("-" if r is None else f"{100 * r:.0f}%") + \
                (f" (90% at {t:g} s)" if t is not None else "") + \
                ("" if pr is None else f", precision {100 * pr:.0f}%")
        rows.append(f"| {name} | {paper_damon} | {cell('damon')} | {paper_tel} | "
                    f"{cell('telescope-bounded')} | {cell('telescope-flex')} |")
    tier_rows = []
    tiering = []
    for name, mach, pols in TELESCOPE_TIERING:
        cfg = f"masim:{out / f'telescope-{name}.cfg'}{TELESCOPE_MASIM}"
        recs = api.compare([mach], [cfg], pols, baseline="static", jobs=1, on_done=on_done)
        tiering += recs
        by = {r["policy"]: r for r in pair_rows(recs)}  # intervals and verdicts over seeds
        tier_rows.append(f"| {name} on `{mach}` | " + " | ".join(
            _cell(by.get(p)) for p in TELESCOPE_TIER_POLICIES) + " |")
    (out / "results.json").write_text(json.dumps({"telemetry": results, "tiering": tiering},
                                                 indent=1, default=str))
    text = f"""# Telescope (ATC'24) reproduced in tierlab

Each monitor alone (no migration) on masim footprints: hot needles (10% of 1, 10 and
100 GiB; 10 GiB in 5 TiB, in ten pieces or in one) in an almost idle cold part (configs
beside this file), 60 simulated seconds. masim runs as one memory- and TLB-bound thread
(`{TELESCOPE_MASIM.lstrip(',')}`: no overlap, ~80 ns of page walk per access, ~6.2 M
accesses/s), so a hot set of N pages gets ~6.2 M / N accesses per page per second. A
region is hot when its nr_accesses (accessed 5 ms samples per 200 ms aggregation) exceed
5 on average over the second; the truth is the configured hot needles
(reports/telemetry.py, `truth=relative`). Recall of the hot pages at the end (and when
it first reached 90%), mean precision. Per-second curves: `NAME/telemetry.png`.

| footprint | paper: DAMON | DAMON | paper: Telescope | telescope-bounded | telescope-flex |
|---|---|---|---|---|---|
{chr(10).join(rows)}

## Tiering on the detected hot regions

DAMON-based tiering (`damon-tiering`: DAMOS migrate_hot/migrate_cold with quotas) acting
on DAMON's regions or on Telescope's; the hot needles start in the slow tier (the cold
regions before them fill DRAM at first touch). Speedup over `static` (the paper: +5.6%
to +34% throughput on 1-2 TB Redis/YCSB). The oracle is left out at 5 TiB: it re-places
every page at each change and does not fit this machine's memory there. With several
seeds a cell is the geometric mean with its 95% interval and verdict ({TEST}).

| case | {" | ".join(f"`{p}`" for p in TELESCOPE_TIER_POLICIES)} |
|---|{"---:|" * len(TELESCOPE_TIER_POLICIES)}
{chr(10).join(tier_rows)}
"""
    path = out / "README.md"
    path.write_text(text + seeds_footer(tiering))
    return path


TELESCOPE_TIER_POLICIES = ["static", "damon-tiering", "damon-tiering:monitor=telescope-bounded",
                           "damon-tiering:monitor=telescope-flex", "oracle"]
#: (case, machine with less DRAM than the footprint, policies)
TELESCOPE_TIERING = [("100GiB", "optane-2tier:dram=16GiB,optane=128GiB", TELESCOPE_TIER_POLICIES),
                     ("5TiB", "optane-2tier:dram=32GiB,optane=6TiB", TELESCOPE_TIER_POLICIES[:-1])]


class _Job:
    """What a reproduction's progress callback prints for one telemetry run."""

    def __init__(self, workload, policy):
        self.machine, self.workload, self.policy = "telemetry", workload, policy


def _steady(rec: dict) -> float:
    """Mean throughput over the second half of a run's time series (the whole run's if
    the series is too short)."""
    t, thr = rec["series"]["t"], rec["series"]["throughput"]
    half = [x for x, tt in zip(thr, t) if tt >= t[-1] / 2] if t else []
    return sum(half) / len(half) if half else rec["throughput"]


REPRODUCTIONS = {"idt": reproduce_idt, "hemem": reproduce_hemem,
                 "telescope": reproduce_telescope, "johnny-cache": reproduce_johnny_cache,
                 "allocation": reproduce_allocation, "colloid": reproduce_colloid,
                 "beyond": reproduce_beyond}
#: each reproduction's default miniature (`--scale`)
REPRODUCTION_SCALE = {"idt": 1 / 64, "hemem": 1 / 256, "telescope": 1.0,
                      "johnny-cache": JC_SCALE, "allocation": ALLOC_SCALE,
                      "colloid": COLLOID_SCALE, "beyond": 1 / 64}
