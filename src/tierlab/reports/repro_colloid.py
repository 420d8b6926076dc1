"""`tierlab reproduce colloid`: Colloid's GUPS figure (SOSP'24 artifact, Figure 6;
host-architecture/colloid, sosp24-artifact/) with HeMem and HeMem+Colloid, and with
upstream Linux tiering (the artifact's "TPP", `numa_balancing=2`: `autonuma-tiering`)
and TPP+Colloid.

GUPS, 15 threads, 72 GiB, a 20 GiB hot set taking 90% of the updates, on a default tier
of 25 GiB DRAM (the artifact's managed capacity) and an alternate tier of 96 GiB whose
unloaded read latency is 135, 148, 168 or 192 ns (the artifact varies the remote
socket's uncore frequency; here `dram-cxl:cxl_lat=`). The antagonist (the artifact's
`mio` STREAM on 0/5/10/15 cores of the default tier's socket, "0x-3x") is
`antagonist=dram@SHARE` with 1x = 25% of the default tier's bandwidth kept busy, 2x =
50%, 3x = 75%: a mapping chosen here (the artifact gives cores, not bandwidth; 15
STREAM cores about saturate a socket's DRAM). Linux tiering and TPP+Colloid run on the
same grid.
"""
from __future__ import annotations

import json
from pathlib import Path

from .. import api
from .stats import ONE_SEED, geo_ci, seeds_footer, verdict

#: the artifact's alternate-tier unloaded latencies (ns) and antagonist levels
LATENCIES = [135, 148, 168, 192]
LOADS = [0, 1, 2, 3]
SHARE_PER_X = 25  #: % of the default tier's bandwidth one "x" of antagonist keeps busy
POLICIES = ["hemem", "colloid-hemem", "autonuma-tiering", "colloid-tpp"]
#: (base, with Colloid) pairs: the artifact's TPP is Linux 6.3's tiering mode
#: (host-architecture/colloid, tpp/README.md: baseline numa_balancing=2)
PAIRS = [("hemem", "colloid-hemem"), ("autonuma-tiering", "colloid-tpp")]
WORKLOAD = "gups:hotset,size=72GiB,hot=20GiB,threads=15"
#: X+Colloid over X in the artifact at 3x, by latency; HeMem at 0x: 0.99-1.01
PAPER_3X = {"hemem": {135: 2.36, 148: 2.19, 168: 1.97, 192: 1.76},
            "autonuma-tiering": {135: 1.81, 148: 1.72, 168: 1.59, 192: 1.50}}
COLLOID_SCALE = 1 / 64


def machine(lat: int, load: int) -> str:
    ant = f",antagonist=dram@{SHARE_PER_X * load}%" if load else ""
    return f"dram-cxl:dram=25GiB,cxl=96GiB,cxl_lat={lat}ns{ant}"


def reproduce_colloid(out: Path, scale: float, workloads, jobs, on_done=None) -> Path:
    """Run the grid (latency x load x {hemem, colloid-hemem}); write README.md, the
    figure and results.json. `workloads` is ignored (the artifact's GUPS)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    out.mkdir(parents=True, exist_ok=True)
    grid = {(lat, load): machine(lat, load) for lat in LATENCIES for load in LOADS}
    recs = api.compare(list(grid.values()), [WORKLOAD], POLICIES, scale=scale,
                       baseline="hemem", jobs=jobs, on_done=on_done)
    (out / "results.json").write_text(json.dumps(recs, indent=1))
    seed0 = min(r["seed"] for r in recs)
    by = {(r["machine"], r["policy"]): r for r in recs if r["seed"] == seed0}
    thr = {(r["machine"], r["policy"], r["seed"]): r["throughput"] for r in recs}
    seeds = sorted({r["seed"] for r in recs})
    # with Colloid over without, paired by seed: geometric mean, interval, verdict
    ratio = {(base, k): [thr[(m, col, s)] / thr[(m, base, s)] for s in seeds]
             for base, col in PAIRS for k, m in grid.items()}
    est = {k: geo_ci(v) for k, v in ratio.items()}
    gain = {k: e.mean for k, e in est.items()}

    def cell(key) -> str:
        e = est[key]
        return f"{e.mean:.2f}" if e.lo is None else \
            f"{e.text('{:.2f}')} {verdict(ratio[key])}"
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, (base, col) in zip(axes, PAIRS):
        for lat in LATENCIES:
            ax.plot(LOADS, [gain[(base, (lat, x))] for x in LOADS], "o-", label=f"{lat} ns")
        ax.axhline(1.0, color="grey", lw=1, ls=":")
        ax.set_xticks(LOADS, [f"{x}x" for x in LOADS])
        ax.set_xlabel(f"antagonist (1x = {SHARE_PER_X}% of the default tier's bandwidth)")
        ax.set_title(f"{col} / {base}")
    axes[0].set_ylabel("throughput with Colloid / without")
    axes[0].legend(title="alternate tier", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "colloid-gups.png", dpi=110)
    plt.close(fig)
    rows = ["| system | alternate tier | " + " | ".join(f"{x}x" for x in LOADS)
            + " | paper 3x |", "|---|---:|" + "---:|" * (len(LOADS) + 1)]
    for base, col in PAIRS:
        for lat in LATENCIES:
            rows.append(f"| {col} / {base} | {lat} ns | "
                        + " | ".join(cell((base, (lat, x))) for x in LOADS)
                        + f" | {PAPER_3X[base][lat]:.2f} |")
    lrows = ["| alternate tier | load | policy | default-tier share | L_D ns | L_A ns |"
             " migrated |", "|---:|---:|---|---:|---:|---:|---:|"]
    for (lat, x), m in grid.items():
        for p in POLICIES:
            r = by[(m, p)]
            last = r["policy_stats"].get("colloid_last") or {}
            lrows.append(f"| {lat} ns | {x}x | {p} | "
                         f"{100 * r['tier_access_share']['dram']:.0f}% | "
                         f"{last.get('L_D', float('nan')):.0f} | "
                         f"{last.get('L_A', float('nan')):.0f} | "
                         f"{r['migrated_bytes'] / 2**30:.1f} GiB |")

    def span(base, x):
        v = [gain[(base, (lat, x))] for lat in LATENCIES]
        return f"{min(v):.2f}-{max(v):.2f}x"
    text = f"""# Colloid (SOSP'24) reproduced in tierlab

`{WORKLOAD}` on `dram-cxl:dram=25GiB,cxl=96GiB,cxl_lat=LAT` at scale {scale:g}, with
`antagonist=dram@SHARE` for the artifact's 0x-3x STREAM load (1x = {SHARE_PER_X}% of the
default tier's bandwidth; a mapping chosen here). Throughput with Colloid over without
on the same machine: HeMem+Colloid (`colloid-hemem`) over `hemem`, TPP+Colloid
(`colloid-tpp`) over the artifact's TPP, which is Linux 6.3's memory tiering
(`autonuma-tiering`). Records: `results.json`. Seeds {", ".join(map(str, seeds))}: {
"each cell is the geometric mean over seeds of the ratio (both runs share the seed), its 95% interval and the verdict of a paired t-test over seeds on log throughput (faster: Colloid helps)" if len(seeds) > 1 else ONE_SEED}.

{chr(10).join(rows)}

![with Colloid over without](colloid-gups.png)

The artifact: HeMem+Colloid 0.99-1.01x with no antagonist and 1.76-2.36x at 3x, TPP+Colloid
1.50-1.81x at 3x, both decreasing with the alternate tier's latency. Here: HeMem+Colloid
{span("hemem", 0)} at 0x and {span("hemem", 3)} at 3x; TPP+Colloid
{span("autonuma-tiering", 0)} at 0x and {span("autonuma-tiering", 3)} at 3x.

Latencies at the end of each run of seed {seed0}, as Colloid's counters see them (L =
occupancy / inserts, EWMA), and where the accesses went (`colloid_last` is empty without
Colloid):

{chr(10).join(lrows)}
"""
    path = out / "README.md"
    path.write_text(text + seeds_footer(recs))
    return path
