"""`tierlab reproduce johnny-cache`: Johnny Cache (OSDI'23) against Linux's memory mode
and HeMem (SOSP'21), as the Johnny Cache paper compares them.

The same hardware two ways: Optane in memory mode behind a 32 GiB direct-mapped DRAM
cache of 2 MiB slots (`linux-mm`, `jc-static`, `jc-dynamic`), and Optane in app-direct
mode beside 32 GiB of DRAM (`hemem`, its PEBS thread on a core of its own or on the
application's, `static` as the floor). Workloads: GUPS with 8 and 16 threads (16 GiB
hot in 64 GiB), GUPS++ (64 MiB of hot 64 B items scattered over an array twice the
DRAM), a BC-like graph, a NAS MG-like stream (STREAM triad over 48 GiB), uniform GUPS
over 64 GiB, and a KV store (YCSB C over 64 GiB). Throughput relative to `linux-mm`,
and the DRAM cache's hit ratio.
"""
from __future__ import annotations

from pathlib import Path

from .. import api
from .results import write_results
from .stats import TEST, over_seeds, paired, ratio_claim, seeds_footer

JC_CACHE = "optane-memory-mode:dram=32GiB,optane=256GiB,frame=2MiB"
JC_FLAT = "optane-2tier:dram=32GiB,optane=256GiB"
JC_CACHE_POLICIES = ["linux-mm", "jc-static", "jc-dynamic"]
JC_FLAT_POLICIES = ["static", "hemem", "hemem:core=shared"]
#: (label, workload, what the paper found for its kind)
JC_WORKLOADS = [
    ("GUPS, 8 threads", "gups:hotset,size=64GiB,hot=16GiB,threads=8",
     "conflict avoidance at allocation is near optimal"),
    ("GUPS, 16 threads", "gups:hotset,size=64GiB,hot=16GiB,threads=16",
     "conflict avoidance at allocation is near optimal"),
    ("GUPS++", "gups:gupspp,size=64GiB", "caching wins: scattered small hot items"),
    ("BC-like graph", "graph:bc", "JC ahead of Linux and HeMem"),
    ("NAS MG-like stream", "stream", "caching loses: a stream larger than the cache"),
    ("GUPS, uniform over 2x DRAM", "gups:uniform,size=64GiB,threads=16",
     "caching loses: a uniform set larger than the cache"),
    ("KV store (YCSB C)", "ycsb:c", "caching wins: scattered small hot items"),
]
JC_SCALE = 1 / 32
#: the pairs the paper's claims are about (README, "Each claim's pair")
JC_CLAIMS = [("jc-static", "linux-mm"), ("jc-static", "hemem"), ("jc-dynamic", "jc-static"),
             ("hemem:core=shared", "hemem")]


def reproduce_johnny_cache(out: Path, scale: float, workloads: list[str],
                           jobs: int | None, on_done=None) -> Path:
    """Run the matrix, write README.md, johnny-cache.png, results.json and results.csv.
    `workloads` is not used: the workloads are the paper's kinds."""
    out.mkdir(parents=True, exist_ok=True)
    wls = [w for _, w, _ in JC_WORKLOADS]
    recs = api.compare([JC_CACHE], wls, JC_CACHE_POLICIES, scale=scale,
                       baseline="linux-mm", jobs=jobs, on_done=on_done)
    recs += api.compare([JC_FLAT], wls, JC_FLAT_POLICIES, scale=scale, baseline="static",
                        jobs=jobs, on_done=on_done)
    base = {(r["workload"], r["seed"]): r["throughput"] for r in recs
            if r["policy"] == "linux-mm"}
    for r in recs:
        b = base.get((r["workload"], r["seed"]))
        r["speedup_over_linux_mm"] = r["throughput"] / b if b else None
    write_results(recs, out)
    pols = JC_CACHE_POLICIES + JC_FLAT_POLICIES
    by = {(r["workload"], r["policy"]): r for r in over_seeds(recs)}
    rows, claims = [], []
    for label, w, paper in JC_WORKLOADS:
        cells = []
        for p in pols:
            r = by.get((w, p))
            s = r and r["speedup_over_linux_mm"]
            cells.append("-" if s is None else f"{s:.2f}")
        hits = " / ".join(f"{100 * by[(w, p)]['dram_cache']['hit_ratio']:.0f}%"
                          for p in JC_CACHE_POLICIES if (w, p) in by)
        rows.append(f"| {label} | " + " | ".join(cells) + f" | {hits} | {paper} |")
        mine = [r for r in recs if r["workload"] == w]
        claims.append(f"| {label} | " + " | ".join(
            ratio_claim(paired(mine, a, b, match=("workload",))) for a, b in JC_CLAIMS)
            + f" | {paper} |")
    _plot(recs, pols, out / "johnny-cache.png")
    text = f"""# Johnny Cache (OSDI'23) reproduced in tierlab

Memory mode: `{JC_CACHE}`; app-direct: `{JC_FLAT}`; scale {scale:g} (every size, bandwidth
and thread count times {scale:g}; rates per page as at full scale). Throughput relative to
`linux-mm` (memory mode with Linux's random frames); hit ratio of the DRAM cache for
linux-mm / jc-static / jc-dynamic. Workloads: {", ".join(f"`{w}`" for w in wls)}.

| workload | {" | ".join(f"`{p}`" for p in pols)} | DRAM-cache hits | paper |
|---|{"---:|" * len(pols)}---:|---|
{chr(10).join(rows)}

The paper: conflict avoidance at allocation (`jc-static`) is near optimal on GUPS and
cheaper than migrations; caching beats migration for scattered small hot items (GUPS++,
KV stores) and loses for streaming or uniform sets larger than the cache (NAS MG, CG);
up to 5x over Linux and HeMem; the dynamic policy is finicky. HeMem's sampling thread
costs the application a core when it shares the application's (`hemem:core=shared`).

Each claim's pair, throughput ratio paired by seed with its 95% interval and verdict
({TEST}): caching with conflict avoidance against Linux's memory mode and against
migration (HeMem, app-direct), the dynamic policy against the static one, and HeMem's
sampler on the application's core against a core of its own.

| workload | {" | ".join(f"`{a}` / `{b}`" for a, b in JC_CLAIMS)} | paper |
|---|{"---|" * len(JC_CLAIMS)}---|
{chr(10).join(claims)}

![speedups](johnny-cache.png)
"""
    path = out / "README.md"
    path.write_text(text + seeds_footer(recs))
    return path


def _plot(recs, pols, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np
    labels = [lab for lab, _, _ in JC_WORKLOADS]
    by = {(r["workload"], r["policy"]): r.get("speedup_over_linux_mm") for r in recs}
    x = np.arange(len(labels))
    width = 0.8 / len(pols)
    fig, ax = plt.subplots(figsize=(11, 4.2))
    for i, p in enumerate(pols):
        ys = [by.get((w, p)) or 0.0 for _, w, _ in JC_WORKLOADS]
        ax.bar(x + (i - (len(pols) - 1) / 2) * width, ys, width, label=p)
    ax.axhline(1.0, color="k", lw=0.8)
    ax.set_xticks(x, labels, fontsize=8)
    ax.set_ylabel("throughput / linux-mm")
    ax.set_title("Johnny Cache: memory mode (linux-mm, jc-*) vs app-direct (static, hemem)")
    ax.legend(fontsize=8, ncol=3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
