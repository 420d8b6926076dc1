"""The simulator against the kernel: tiering mechanisms run for real in the test guest
(tests/guest: Linux 6.12 under QEMU, node 0 with the CPUs, node 1 CPU-less) and the same
mechanism in the simulator on a machine that mirrors the guest.

    .venv/bin/python scripts/sim_vs_kernel.py --out docs/sim-vs-kernel [--case NAME] \
        [--repeats N] [--report-only]

Cases (`--case`, repeatable; default all):
- kernel-hotcold, kernel-moving, kernel-replay: Linux's NUMA-balancing tiering (mode 2,
  kswapd demotion by the multi-gen LRU) against `autonuma-tiering-mglru` with the
  guest's knobs, on hotcold's static hot range, on a hot set that moves (hotcold
  --hot-windows, as gups:dynamic) and on a recorded program replayed
  (tests/guest/replay.c against `trace:` of the same file);
- damon-hotcold, damon-moving: the kernel's DAMON-based tiering (DAMOS migrate_hot /
  migrate_cold on physical addresses, samples/damon/mtier.c's setup) against
  `damon-tiering` with the same intervals and quotas;
- exec-damon-tiering, exec-idt, exec-tierlab: `tierlab exec --policy P` on the moving
  hot set against the simulator running P.

Every case uses one machine calibration: node 0 is the guest's node 0, the free memory
the workload found its room and the rest held by others, the kernel's watermarks and
demotion switch, QEMU's HMAT latencies and bandwidths, the guest's copy speed,
hint-fault, first-touch and PTE-scan costs (`--migrate-bw`, `--hint-fault-us`,
`--first-touch-us`, `--pte-ns`, `--pte-slot-ns`), and the pages on node 0's LRU lists
before the workload started (`idle_pages`); nothing is tuned per case. Measured in each
run, as the workload's op rate is: in the exec cases, how long tierlab exec's thread
took a step of each kind and a page moved (its record's `daemon_steps`,
`engine.DaemonSteps`): the simulated policy's steps take as long; it is told the machine
tierlab exec's policy was given (`machine_spec`) and starts from the placement hotcold
found at ready. Writes README.md (one table
of the gaps, then a section per case), CASE.png and data.json to --out.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "guest"))

import harness  # noqa: E402
import replay_export  # noqa: E402
from tierlab import api  # noqa: E402
from tierlab.engine.engine import DaemonSteps  # noqa: E402
from tierlab.machines.machine import CacheSpec, Machine, Tier  # noqa: E402
from tierlab.units import PAGE  # noqa: E402

MIB = 2**20
#: targets of the comparison: the hot pages' share on node 0 at every second after the
#: first, and the promotion and demotion counters at the end
HOT_GAP, COUNTER_GAP = 0.05, 0.15
#: counters below this many pages (on the kernel's side) get no relative gap; below it
#: on both sides they agree (a few pages either way)
MIN_COUNT = 100
#: the moving hot set: 3 windows of 64 MiB, the hot one moving every 10 s, 40 s
MOVING = dict(windows=3, hot_mib=64, move_ms=10000, seconds=40)
#: the replayed program: the repository's redis YCSB zipfian recording, 24 copies (366
#: MiB touched against node 0's ~310 MiB free), 50,000 accesses a copy per window
REPLAY = dict(trace="redis-ycsb-zipfian", copies=24, per_window=50000, hot_pages=9000,
              seconds=120)
#: the guest's calibration, the --migrate-bw, --hint-fault-us, --first-touch-us, --pte-ns
#: and --pte-slot-ns defaults: one migrating thread's copy speed (MiB/s: tierlab exec in
#: tests/guest moved 77,807 pages in 5.9 s of migration CPU), a NUMA hint fault's cost
#: (us: TCG runs the kernel ~10-30x slower than hardware's 1-2 us), a page's first touch
#: (us: the median of hotcold's fill time per page over 46 guest runs, 11-54 us,
#: 2026-12-05/06: its `ready` event's fill_s over its pages) and a PTE's change of
#: protection (ns: the median of 7 smoke runs' mprotect over 64 MiB of present PTEs,
#: 136-195 ns, 2026-12-06: the change_protection NUMA balancing's scan does, walk
#: included) and the NUMA scan's walk of one PTE slot (ns: kernel-replay's fill, 3 guest
#: runs of 2026-12-06, where no PTE changes and nothing faults or demotes: a pass over
#: the replayer's address space, one task_numa_work, every 3.70 s of its runtime, so by
#: the overhead cap (period 500 ms, task_scan_start, + 2 ticks + 32 x the pass's cost) a
#: pass costs 99.7 ms, over its 624 PTE tables, 319,488 slots)
MIGRATE_BW_MIB, HINT_FAULT_US, FIRST_TOUCH_US, PTE_NS, PTE_SLOT_NS = \
    51.0, 10.0, 32.0, 144.0, 312.0
#: the --ticker-us default (harness.TICKER_US, as the test boots): every guest CPU switches
#: address space every 1 ms (tick.c, start_tickers), which flushes TCG's TLB, so a PTE
#: accessed bit cleared by DAMON or the multi-gen LRU is set again at the page's next
#: access, as on hardware, whose TLB holds far less than these hot ranges. Without it the
#: guest's DAMON read a 64 MiB hot range at 5e6 ops/s as never accessed (0 of 20 samples
#: in every aggregation for 20 s); with it at 8.6-10.6 of 20 (the damonview scenario,
#: tests/guest/README.md)
TICKER_US = harness.TICKER_US
#: the --kernel-migrate-bw default: the kernel's own page migrations (a hint fault's
#: promotion in the faulting thread, kswapd's demotion, a kdamond's DAMOS migration) in
#: MiB/s. A kernel-hotcold run with tick_ms=50 (2026-12-06, the scenario of 330ae53) read
#: 7,000 promotions a second while kswapd slept (0.43-0.92 s: 126 us a page besides the
#: 10 us fault), then 6,500 a second beside kswapd's 7,700 demotions and 8,600 beside
#: its 10,300 in the second pass: 25-40 MiB/s against the 51 MiB/s tierlab exec's
#: move_pages(2) reached (MIGRATE_BW_MIB, the exec cases' copy speed)
KERNEL_MIGRATE_BW_MIB = 32.0
#: the kernel cases' scan and promotion-filter counters (/proc/vmstat), kept beside the
#: simulator's own (hint faults taken, PTEs made PROT_NONE, pages past the hot threshold)
SCAN_COUNTERS = dict(hint_faults="numa_hint_faults", pte_updates="numa_pte_updates",
                     candidates="pgpromote_candidate")
DAMON = dict(sample="5ms", aggr="100ms", update="1s", min_nr_regions=10,
             max_nr_regions=1000, quota="200MiB", reset="1s", apply="1s", hot="5%",
             ops="paddr", frames="boot")


@dataclass
class Case:
    name: str
    tiering: str            # kernel | damon | exec
    workload: str           # hotcold | moving | replay
    policy: str = ""        # exec: the policy tierlab exec runs
    args: dict = field(default_factory=dict)


CASES = {c.name: c for c in [
    Case("kernel-hotcold", "kernel", "hotcold"),
    Case("kernel-moving", "kernel", "moving", args=MOVING),
    Case("kernel-replay", "kernel", "replay", args=REPLAY),
    Case("damon-hotcold", "damon", "hotcold"),
    Case("damon-moving", "damon", "moving", args=MOVING),
    Case("exec-damon-tiering", "exec", "moving", "damon-tiering", MOVING),
    Case("exec-idt", "exec", "moving", "idt", MOVING),
    # under TCG the guest's pages are touched tens of times less often than on hardware,
    # which by tierlab's own cost model does not repay a copy: the gate is lowered, as in
    # tests/guest's exec run of it (harness.TEST_BOOTS)
    Case("exec-tierlab", "exec", "moving", "tierlab:margin=0.01", MOVING),
]}


# -- the guest ----------------------------------------------------------------------
class GuestFailed(RuntimeError):
    """A case's guest run failed; the other cases still run."""


def _boot(scenario: str, args: dict, timeout: int = 900):
    ok, why = harness.ensure_built()
    if not ok:
        sys.exit(f"sim_vs_kernel: the guest cannot run here: {why}")
    run = harness.boot(scenario, args, timeout=timeout)
    if not run.ok:
        raise GuestFailed(f"the guest run failed ({run.log_path})\n{run.explain()}")
    return run


def _last(ts, t) -> int:
    """Index of the last sample at or before t (-1 before any)."""
    return int(np.searchsorted(ts, t + 1e-9)) - 1


def _step(ts, ys, t):
    """The last sample at or before t (the first one before any)."""
    return ys[max(_last(ts, t), 0)] if len(ys) else float("nan")


#: a guest sample older than this (s) does not say where the pages are now: the sampler
#: stalls while a kdamond migrates (its stats request waits for it) and under load
FRESH_S = 1.0


def _fresh(ts, ys, t):
    """The last sample at or before t if it is at most FRESH_S old, else NaN."""
    i = _last(ts, t)
    return ys[i] if i >= 0 and t - ts[i] <= FRESH_S + 1e-9 else float("nan")


def guest_args(case: Case, ticker_us: int = TICKER_US) -> tuple[str, dict]:
    """The scenario (tests/guest/scenarios) and its arguments that run `case`."""
    a = dict(case.args)
    if ticker_us:
        a["ticker_us"] = int(ticker_us)
    if case.workload == "hotcold":
        a.update(hot_mib=128, seconds=240)
    if case.tiering == "exec":
        # tierlab exec's own python holds ~110 MiB of node 0 beside the bound cold range
        return "daemon", dict(mode="exec", policy=case.policy, alloc="dram-preferred",
                              interval="1s", hot_node=1, cold_node=0, cold_mib="auto",
                              headroom_mib=128, progress_ms=500, sample_ms=500, **a)
    return "tiering", dict(tiering=case.tiering, workload="replay" if case.workload ==
                           "replay" else "hotcold", sample_ms=500, interval_ms=500, **a)


def _room_at_ready(at_ready: dict | None, samples: list) -> int | None:
    """Node 0's pages the workload had at hotcold's ready in an exec case: its own
    there (ready-nodes) and node 0's free pages then, from the first placement sample
    (taken after ready: the pages the policy moved since, per range, are given back).
    None without the ready-nodes line."""
    if not at_ready or not samples:
        return None
    first = samples[0]
    hot0 = sum(w[0] for w in at_ready["windows"])
    cold0 = at_ready["cold"][0]
    free = first["free"]["N0"] + (first["hot"]["N0"] - hot0) + \
        (first["cold"]["N0"] - cold0)
    return int(hot0 + cold0 + free)


def _exec_clock(run) -> float:
    """The guest uptime at which tierlab exec's own clock (its record's series `t`) read
    0: its first interval line ("t=   0.0s ...", logged with the uptime it came at).
    The exec command's start is seconds earlier (the interpreter and numpy load first:
    6 s under TCG), which would put the daemon's moves before hotcold's ready."""
    for r in run.of("exec-line"):
        line = r.get("line", "")
        if line.startswith("t=") and "s " in line:
            return float(r["uptime"]) - float(line[2:].split("s", 1)[0])
    return run.one("exec-command")["uptime"]


def reread_guest(case: Case, g: dict) -> dict:
    """A saved guest run read again from its log (when the log is still here), so a
    change in how a log is read applies to runs already made; the saved run as it is
    otherwise."""
    log = Path(g.get("log") or "")
    if not log.is_file():
        return g
    run = harness.GuestRun.from_log(log, *guest_args(case))
    return dict(guest_data(case, run), commit=g.get("commit", "?"))


def boot_guest(case: Case, ticker_us: int = TICKER_US) -> dict:
    scenario, args = guest_args(case, ticker_us)
    return guest_data(case, _boot(scenario, args))


def guest_data(case: Case, run) -> dict:
    """The kernel's timeline in a guest run of `case`, from the moment the mechanism
    went on (hotcold: after the fill; replay: before its first touch; exec: when the
    workload was ready): the hot pages' share on node 0, pages promoted and demoted."""
    kind = "replay" if case.workload == "replay" else "hotcold"
    ready = run.one(kind, event="ready")
    prog = [p for p in run.of(kind) if p.get("event") == "progress"]
    done = run.one(kind, event="done")
    samples = run.of("placement")
    v0 = (run.one("placement-initial") or samples[0])["vmstat"]
    if case.tiering == "exec":
        t_on = ready["uptime"]
    else:
        t_on = max(run.one("tiering-on")["uptime"], ready["uptime"] if kind == "replay" else 0)
    g = dict(case=case.name, log=str(run.log_path), sizes=run.one("sizes"),
             zoneinfo=(run.one("zoneinfo") or {}).get("nodes"),
             nodes_before=(run.one("nodes-before") or {}).get("nodes"),
             knobs=run.one("kernel-tiering-knobs"), ready=ready,
             ready_nodes=run.one(kind, event="ready-nodes"),
             ops=int(done["ops"]), run_s=float(done.get("run_s") or done["seconds"]),
             write_share=float(done["writes"]) / max(done["ops"], 1),
             ticker_us=(run.one("tickers") or {}).get("ticker_us"))
    g["ops_per_s"] = g["ops"] / g["run_s"]  # the average, stalls included
    # hotcold's clock (its hot set moves by it) starts at ready, before the mechanism
    g["lag"] = round(t_on - ready["uptime"], 3) if kind == "hotcold" else 0.0
    n_hot = ready.get("window_pages") or ready["hot_pages"]
    g["hot_pages"] = n_hot
    if case.workload == "hotcold" and case.tiering != "exec":  # numa_maps of the hot range
        g["t"] = [round(s.get("maps_uptime", s["uptime"]) - t_on, 3) for s in samples]
        g["hot_fast"] = [s["hot"].get("N0", 0) / n_hot for s in samples]
    else:  # the workload's own move_pages query of its current hot pages
        g["t"] = [round(p["uptime"] - t_on, 3) for p in prog]
        g["hot_fast"] = [p.get("hot_nodes", {}).get("0", 0) / n_hot for p in prog]
        g["window"] = [int(p.get("window", 0)) for p in prog]  # which one it measured
    if case.tiering == "exec":
        res = run.one("exec-results")["data"][0]
        t_exec = _exec_clock(run)
        st = res["series"]
        ts = [t + t_exec - t_on for t in st["t"]]
        p0, d0 = _step(ts, st["promotions"], 0.0), _step(ts, st["demotions"], 0.0)
        g["ct"] = [round(t, 3) for t in ts if t >= 0]
        g["promoted"] = [p - p0 for t, p in zip(ts, st["promotions"]) if t >= 0]
        g["demoted"] = [d - d0 for t, d in zip(ts, st["demotions"]) if t >= 0]
        g["exec_policy_stats"] = res.get("policy_stats")
        g["exec_daemon_steps"] = res.get("daemon_steps")
        g["node0_room_at_ready"] = _room_at_ready(g.get("ready_nodes"), samples)
        g["exec_machine_spec"] = res.get("machine_spec")
        return g
    g["ct"] = [round(s.get("counters_uptime", s["uptime"]) - t_on, 3) for s in samples]
    vm = [s["vmstat"] for s in samples]
    kswapd = [v["pgdemote_kswapd"] + v["pgdemote_direct"] - v0["pgdemote_kswapd"]
              - v0["pgdemote_direct"] for v in vm]
    promoted = [v["pgpromote_success"] - v0["pgpromote_success"] for v in vm]
    if case.tiering == "damon":  # DAMOS moves are not in the tiering counters
        def applied(s, action):
            return sum(k["sz_applied"] for k in s.get("damos", {}).values()
                       if k["action"] == action) // PAGE
        promoted = [p + applied(s, "migrate_hot") for p, s in zip(promoted, samples)]
        kswapd = [d + applied(s, "migrate_cold") for d, s in zip(kswapd, samples)]
        g["damon_goals"] = run.of("damon-goal")
        g["damon_config"] = run.one("damon-config")
    g["promoted"], g["demoted"] = promoted, kswapd
    if case.tiering == "kernel":  # the scanner's and the promotion filter's own counts
        for key, name in SCAN_COUNTERS.items():
            g[key] = [v[name] - v0[name] for v in vm]
        g.update(kernel_state(samples))
    return g


def kernel_state(samples: list) -> dict:
    """The kernel's state beside its counters, where the guest's sampler read it: the
    workload's NUMA-scan passes over its address space (mm->numa_scan_seq) and CPU
    seconds, from the first sample, and node 0's multi-gen LRU agings (max_seq)."""
    sched = [s.get("sched") or {} for s in samples]
    out = {}
    if all("numa_scan_seq" in x for x in sched):
        out["scan_passes"] = [x["numa_scan_seq"] - sched[0]["numa_scan_seq"] for x in sched]
        out["runtime_s"] = [round(x.get("runtime_ms", 0) / 1000, 3) for x in sched]
    gens = [(s.get("lru_gen") or {}).get("N0") for s in samples]
    if all(gens):
        out["agings"] = [g[-1][0] - gens[0][-1][0] for g in gens]
    return out


# -- the simulator --------------------------------------------------------------------
def guest_machine(g: dict, watermarks: bool = True, migrate_bw: float = 1.5e9,
                  hint_fault_s: float = 1.5e-6, first_touch_s: float = 0.0,
                  pte_walk_s: float = 20e-9, pte_update_s: float = 50e-9) -> Machine:
    """node 0 = the guest's node 0 (its managed pages, /proc/zoneinfo), of which what
    the workload did not get is held by others (`others_pages`); node 1 = the CPU-less
    node below it on the demotion path; the kernel's watermarks as fractions of node 0;
    `migrate_bw` the copy speed of one migrating thread, `hint_fault_s` the cost of one
    NUMA hint fault to the faulting thread, `first_touch_s` that of a page's first
    touch, `pte_walk_s` and `pte_update_s` the NUMA scan's per PTE walked and changed;
    reclaim demotes as the guest's demotion_enabled said. The node's own size matters
    to the rules that read fractions of it (DAMOS node-memory goals, IDT's watermarks,
    pgdat_free_space_enough). An access costs the guest the same on both nodes: QEMU's
    TCG emulates both in the host's memory (the HMAT's 100/300 ns and 20/5 GB/s only
    tell the kernel which tier is which), so both tiers get HMAT's node 0 figures and
    the workload's own per-op cost carries the measured op rate."""
    knobs = g.get("knobs") or {}
    z = (g.get("zoneinfo") or {}).get("0")
    node0 = z["managed"] * PAGE if z else room_bytes(g)
    cap_pages = node0 // PAGE
    wm = tuple(min(z[k] / cap_pages, 0.49) for k in ("min", "low", "high")) \
        if watermarks and z else (0.005, 0.01, 0.015)
    return Machine(
        name="qemu-guest" if watermarks else "qemu-guest-sim-watermarks",
        tiers=[Tier("node0", "dram", node0, 100, 100, 20e9, 20e9, 0, True),
               Tier("node1", "cxl", 1024 * MIB, 100, 100, 20e9, 20e9, 0, False)],
        demotion=[0, 1], cores_per_socket=2, watermarks=wm, migrate_bw=migrate_bw,
        hint_fault_s=hint_fault_s, first_touch_s=first_touch_s, pte_walk_s=pte_walk_s,
        pte_update_s=pte_update_s, demotion_enabled=bool(knobs.get("demotion_enabled", True)),
        description="the tests/guest QEMU machine")


def machine_from_spec(spec: dict) -> Machine:
    """The Machine a Linux run's record gives (`machine_spec`: the daemon's machine from
    the guest's topology, HMAT figures included)."""
    d = dict(spec, tiers=[Tier(**t) for t in spec["tiers"]])
    d["antagonist"] = {int(k): v for k, v in (d.get("antagonist") or {}).items()}
    d["watermarks"] = tuple(d["watermarks"])
    if d.get("dram_cache"):
        d["dram_cache"] = CacheSpec(**d["dram_cache"])
    return Machine(**d)


def room_bytes(g: dict) -> int:
    """What node 0 had for the workload: the guest's free memory before it; in the
    exec cases, what it had at ready (`_room_at_ready`: tierlab exec's own process,
    interpreter and numpy, holds node 0 beside it and is not migrated), or for runs
    without that measure the cold range and 16 MiB."""
    if g["case"].startswith("exec-"):
        if g.get("node0_room_at_ready"):
            return g["node0_room_at_ready"] * PAGE
        return (g["sizes"]["cold_mib"] + 16) * MIB
    return g["sizes"]["node0_free_mib"] * MIB


def others_pages(g: dict, machine: Machine) -> int:
    """Node 0's pages held by the kernel, the initramfs and other processes: the node
    less the workload's room, taken from the mirror's free memory for the whole run
    (`Memory.held`, frames that take capacity but are not the process's)."""
    return max(machine.tiers[0].capacity_pages - room_bytes(g) // PAGE, 0)


def idle_pages(g: dict) -> int:
    """Of those, the pages on node 0's LRU lists before the workload started (the
    guest's rootfs is the initramfs in tmpfs: shmem pages on the anon LRU, ~120 MiB):
    nobody touches them again, so reclaim demotes them before the workload's and a
    paddr DAMON finds them cold (`Memory.idle`; not in the exec cases, whose reclaim
    is off and whose DAMON watches the workload's virtual addresses). 0 when the guest
    did not report them."""
    lru = ((g.get("nodes_before") or {}).get("N0") or {}).get("lru_kb") or {}
    return (lru.get("anon", 0) + lru.get("file", 0)) * 1024 // PAGE


def masim_config(g: dict, path: Path, windows: int = 1, move_ms: float = 0) -> Path:
    """hotcold as masim: the cold region (~1 op/s), then the hot window(s); a moving
    hot set is one phase per move, every window first touched in the first phase. The
    simulation starts when the mechanism went on, `lag` seconds into hotcold's clock."""
    s = g["sizes"]
    hot = g["hot_pages"] * PAGE
    regions = [f"cold, {s['cold_mib'] * MIB}"] + [f"w{i}, {hot}" for i in range(windows)]
    secs = min(s["seconds"], g["run_s"] + 5)  # a static hot range ran until an event
    end = secs * 1000 - g["lag"] * 1000
    step = move_ms if windows > 1 and move_ms else secs * 1000
    cuts = [c - g["lag"] * 1000 for c in np.arange(step, secs * 1000, step)]
    bounds = [0.0] + [c for c in cuts if 0 < c < end] + [end]
    first = int((g["lag"] * 1000) // step)  # the window hot when the simulation starts
    ws = g["write_share"]
    phases = []
    for j, (a, b) in enumerate(zip(bounds, bounds[1:])):
        w = (first + j) % windows
        lines = [f"p{j}", str(max(int(round(b - a)), 1)), "cold, 1, 64, 1e-7, ro",
                 f"w{w}, 1, 64, {1 - ws:.4f}, ro", f"w{w}, 1, 64, {ws:.4f}, wo"]
        if j == 0:  # hotcold fills every window before it starts
            lines += [f"w{i}, 1, 64, 1e-9, ro" for i in range(windows) if i != w]
        phases.append("\n".join(lines))
    path.write_text("# generated by scripts/sim_vs_kernel.py from the guest's hotcold run\n"
                    + "\n".join(regions) + "\n\n" + "\n\n".join(phases) + "\n")
    return path


def sim_policy(case: Case, g: dict) -> str:
    if case.tiering == "kernel":
        # Debian's 6.12 kernels reclaim with the multi-gen LRU (CONFIG_LRU_GEN_ENABLED=y;
        # the smoke scenario reports /sys/kernel/mm/lru_gen/enabled)
        k = g["knobs"]
        return ("autonuma-tiering-mglru:scan_size={s}MiB,scan_delay={d}ms,"
                "scan_period_min={a}ms,scan_period_max={b}ms,hot_threshold={h}ms,"
                "rate_limit_mbps={r}").format(
            s=k["scan_size_mb"], d=k["scan_delay_ms"], a=k["scan_period_min_ms"],
            b=k["scan_period_max_ms"], h=k["hot_threshold_ms"],
            r=k["promote_rate_limit_MBps"])
    if case.tiering == "damon":
        goals = all(x.get("accepted") for x in g.get("damon_goals") or [{}])
        opts = ",".join(f"{k}={v}" for k, v in DAMON.items())
        return f"damon-tiering:{opts},goals={'on' if goals else 'off'}"
    # tierlab exec runs the policy on the kernel's DAMON: the young filter is off there
    if case.policy == "damon-tiering":
        return "damon-tiering:young=off"
    # IDT's region monitor, without idle page tracking in the guest (no user-space
    # checks counted), ran on the kernel's DAMON with its intervals: idt as idt-damon,
    # tierlab's regions from the kernel's DAMON
    on_damon = ((g.get("exec_policy_stats") or {}).get("monitor") or {}).get("checks") == 0
    if case.policy == "idt":
        return "idt:monitor=damon" if on_damon else "idt"
    # and without uncore counters: tierlab's load curves are off there; it started with
    # hotcold and watched the fill, which the mirror's set-up is (headroom=attach)
    if case.policy.startswith("tierlab:"):
        return case.policy + ",balance=off,headroom=attach" + \
            (",monitor=damon" if on_damon else "")
    return case.policy


def trace_path(case: Case) -> Path:
    """The recording a replay case replays (the repository's tests/data/traces)."""
    return ROOT / "tests" / "data" / "traces" / f"{case.args['trace']}.npz"


def calibration(migrate_bw_mib: float = MIGRATE_BW_MIB, hint_fault_us: float = HINT_FAULT_US,
                first_touch_us: float = FIRST_TOUCH_US, pte_ns: float = PTE_NS,
                pte_slot_ns: float = PTE_SLOT_NS,
                kernel_migrate_bw_mib: float = KERNEL_MIGRATE_BW_MIB) -> dict:
    """The mirrored machine's copy speeds, hint-fault, first-touch and PTE-scan costs
    (guest_machine's keywords, and `kernel_migrate_bw`): the scan's walk per PTE slot,
    its change per PTE; a migration by move_pages(2) (the exec cases) and one by the
    kernel's own paths (the kernel and DAMON cases: `machine_for`)."""
    return dict(migrate_bw=migrate_bw_mib * MIB, hint_fault_s=hint_fault_us * 1e-6,
                first_touch_s=first_touch_us * 1e-6, pte_walk_s=pte_slot_ns * 1e-9,
                pte_update_s=pte_ns * 1e-9, kernel_migrate_bw=kernel_migrate_bw_mib * MIB)


def machine_for(case: Case, machine: dict) -> dict:
    """`guest_machine`'s keywords for `case`: the copy speed of the mechanism that moves
    its pages, the kernel's own (kernel_migrate_bw) or tierlab exec's move_pages(2)."""
    m = dict(machine)
    kernel_bw = m.pop("kernel_migrate_bw", None)
    if case.tiering != "exec" and kernel_bw is not None:
        m["migrate_bw"] = kernel_bw
    return m


def simulate(case: Case, g: dict, out: Path, **machine) -> dict:
    """The case's policy on the mirrored machine: the hot pages' share on node 0, pages
    promoted and demoted, every 0.5 s. One thread whose ops cost what makes the
    simulated run as fast as the guest's: the guest's average op rate includes the
    stalls the simulator charges itself (hint faults, synchronous copies), so a first
    run with the guest's rate is followed by one whose per-op cost is corrected by the
    difference (a moving hot set then moves at the guest's times)."""
    ns = 1e9 / g["ops_per_s"] - 100
    hot = None
    if case.workload == "replay":  # the replayer's hot pages, by its own ranking
        r = case.args
        rt = replay_export.replay_arrays(trace_path(case))
        hot = np.sort(replay_export.hot_pages(rt, r["copies"], r["hot_pages"]))
    s = _simulate(case, g, out, ns, hot, **machine)
    # the op's whole cost (compute + 100 ns of memory) scales with the rate's miss
    ns2 = (ns + 100) * s["ops_per_s"] / g["ops_per_s"] - 100
    if abs(ns2 - ns) > 0.02 * ns and ns2 > 1:
        s = _simulate(case, g, out, ns2, hot, **machine)
    return s


def _simulate(case: Case, g: dict, out: Path, ns: float, hot, **machine) -> dict:
    rate = f"threads=1,mlp=1,compute_ns={max(ns, 1):.4g}"
    if case.workload == "replay":
        r = case.args
        trace = trace_path(case)
        # the replayer's one thread interleaves its copies: they share it
        wl = (f"trace:{trace},copies={r['copies']},per_window={r['per_window']},"
              f"copy_threads=no,{rate}")
    else:
        k, mv = case.args.get("windows", 1), case.args.get("move_ms", 0)
        cfg = masim_config(g, out / f"{case.name}.cfg", k, mv)
        wl = f"masim:{cfg},aps={g['ops_per_s']:.6g},{rate}"
    m = guest_machine(g, **machine_for(case, machine))
    sim = api.simulation(machine=m, workload=wl, policy=sim_policy(case, g),
                         alloc="dram-preferred")
    sim.mem.held[0] += others_pages(g, m)
    if g.get("exec_daemon_steps"):  # tierlab exec's thread: its steps take their time
        sim.daemon = DaemonSteps.from_linux(g["exec_daemon_steps"],
                                            PAGE / machine_for(case, machine)["migrate_bw"])
    if g.get("exec_machine_spec"):  # the machine tierlab exec's policy was given
        sim.policy_machine = machine_from_spec(g["exec_machine_spec"])
    if case.tiering != "exec":  # what the kernel's reclaim and paddr DAMON see
        sim.mem.idle[0] = min(idle_pages(g), sim.mem.held[0])
    if case.workload != "replay":
        w = sim.workload
        starts, ends = w.region_start[1:], w.region_end[1:]
        windows = np.arange(starts[0], ends[-1])

        def bind(now):
            """hotcold binds its hot windows to node 1 (--hot-node 1): the mirror's first
            touch puts those that fit above node 0's watermark there; they go back,
            uncounted, before anything runs. In the exec cases the policy ran during
            hotcold's fill: each window and the cold range then start with as many
            pages on node 0 as hotcold found there at ready (`ready_nodes`)."""
            on0 = windows[sim.mem.node[windows] == 0]
            if on0.size:
                sim.teleport(on0, np.ones(on0.size, np.uint8), reason="hotcold mbind")
            at_ready = g.get("ready_nodes") if case.tiering == "exec" else None
            if at_ready:
                _place_as_at_ready(sim, at_ready, w.region_start, w.region_end)
        sim.every(1e9, bind, offset=0.0, daemon=False)
    series = {"t": [], "hot_fast": [], "promoted": [], "demoted": []}
    scanner = getattr(sim.policy, "scanner", None) if case.tiering == "kernel" else None
    if scanner is not None:
        series.update({k: [] for k in (*SCAN_COUNTERS, "scan_passes")})
    if scanner is not None:  # the kernel cases run the multi-gen LRU model
        series["agings"] = []
    base = []
    span = max(g["run_s"] - g["lag"], 1.0)  # the guest's run after the mechanism went on
    done = {}

    def sample(now):
        if now <= span + 1e-9:
            done["work"], done["at"] = sim.work, now
        if case.workload == "replay":
            pages = hot
        else:
            i = int((now + g["lag"]) * 1000 // mv) % k if k > 1 and mv else 0
            pages = np.arange(starts[i], ends[i])
        if not base:  # after bind()
            base.extend((sim.stats.promotions, sim.stats.demotions))
        series["t"].append(round(now, 3))
        series["hot_fast"].append(
            float(np.count_nonzero(sim.mem.node[pages] == 0)) / len(pages))
        if case.workload != "replay" and k > 1:  # every window's share, for the guest's
            series.setdefault("windows", []).append(
                [round(float(np.count_nonzero(sim.mem.node[a:b] == 0)) / (b - a), 5)
                 for a, b in zip(starts, ends)])
        series["promoted"].append(int(sim.stats.promotions - base[0]))
        series["demoted"].append(int(sim.stats.demotions - base[1]))
        if scanner is not None:
            series["hint_faults"].append(int(scanner.hf.faults))
            series["pte_updates"].append(int(scanner.ptes_updated))
            series["candidates"].append(int(sim.policy.nr_cand))
            series["scan_passes"].append(int(scanner.seq))
        if "agings" in series:
            series["agings"].append(int(getattr(sim.policy, "agings", 0)))

    sim.every(0.5, sample, offset=0.0)
    rec = sim.run()
    return dict(policy=sim_policy(case, g), workload=wl, throughput=rec["throughput"],
                compute_ns=round(ns, 1), ops_per_s=done["work"] / max(done["at"], 1e-9),
                **series)


# -- the comparison ---------------------------------------------------------------------
def gaps(g: dict, s: dict) -> dict:
    """Largest gap of the hot share at every whole second after the first, from 2 s (the
    last sample at or before it on each side, on the window the guest's sample measured,
    `_sim_share`; a second whose last guest sample is older than FRESH_S is not
    compared, and `seconds` counts those compared of all), and the
    relative gaps of the promotion and demotion counters at the kernel's last counter
    sample."""
    end = min(g["t"][-1], s["t"][-1])
    secs = np.arange(2, int(end) + 1)
    d = np.array([abs(_fresh(g["t"], g["hot_fast"], t) - _sim_share(g, s, t))
                  for t in secs], dtype=float)
    hot = np.nanmax(d) if np.isfinite(d).any() else float("nan")
    tc = min(g["ct"][-1], s["t"][-1])
    out = {"hot_share": round(float(hot), 3), "at": round(float(tc), 1),
           "seconds": [int(np.isfinite(d).sum()), len(secs)]}
    for key in ("promoted", "demoted"):
        k, m = _step(g["ct"], g[key], tc), _step(s["t"], s[key], tc)
        out[key] = {"kernel": int(k), "sim": int(m),
                    "gap": _count_gap(k, m)}
    out["verdict"] = "agrees" if _meets(out) else "misses"
    return out


def _place_as_at_ready(sim, at_ready: dict, starts, ends) -> None:
    """Region 0 (cold) and 1.. (the hot windows) with the share of their pages on node 0
    that hotcold's ready-nodes line gave (each region's first pages: its accesses are
    uniform); cold pages go down first to make the room."""
    counts = [at_ready["cold"]] + list(at_ready["windows"])
    want = [round((e - s) * c[0] / max(sum(c), 1)) for s, e, c in zip(starts, ends, counts)]
    for i in sorted(range(len(want)), key=lambda i: i > 0):  # the cold range first
        pages = np.arange(starts[i], ends[i])
        on0 = pages[sim.mem.node[pages] == 0]
        down = on0[want[i]:]
        if down.size:
            sim.teleport(down, np.ones(down.size, np.uint8), reason="hotcold at ready")
        up = pages[sim.mem.node[pages] == 1][:max(want[i] - min(on0.size, want[i]), 0)]
        up = up[:max(int(sim.mem.free[0] - sim.mem.wmark_min[0]), 0)]
        if up.size:
            sim.teleport(up, np.zeros(up.size, np.uint8), reason="hotcold at ready")


def _sim_share(g: dict, s: dict, t: float) -> float:
    """The simulator's hot share at second t: of the window the guest's last sample
    measured, when both sides record windows (a moving hot set: a sample just before a
    move measures the old window, and its time stamp, taken after the query, can fall
    after the move), else of its own current window."""
    if "window" in g and "windows" in s:
        i = _last(g["t"], t)
        if i >= 0:
            return s["windows"][max(_last(s["t"], t), 0)][g["window"][i]]
    return _step(s["t"], s["hot_fast"], t)


def _count_gap(kernel: float, sim: float) -> float | None:
    """The simulator's counter relative to the kernel's; 0 when both counted fewer than
    MIN_COUNT pages, None when only the kernel's is that small."""
    if kernel >= MIN_COUNT:
        return round((sim - kernel) / kernel, 3)
    return 0.0 if sim < MIN_COUNT else None


def _within(c: dict) -> bool:
    """A counter's gap is known and within COUNTER_GAP."""
    return c["gap"] is not None and abs(c["gap"]) <= COUNTER_GAP


def _meets(g: dict) -> bool:
    """The targets: the hot share within HOT_GAP, both counters within COUNTER_GAP."""
    return g["hot_share"] <= HOT_GAP and _within(g["promoted"]) and _within(g["demoted"])


def _seconds(curves: list) -> np.ndarray:
    """The whole seconds from 2 that every (t, y) curve reaches."""
    end = min(t[-1] for t, _ in curves)
    return np.arange(2, int(end) + 1)


def _at(curves: list, secs, pick=_step) -> np.ndarray:
    """Each curve's last sample at or before each second: (curves, seconds)."""
    return np.array([[pick(t, y, x) for x in secs] for t, y in curves], dtype=float)


def summary(runs: list) -> dict:
    """A case's repeats together: each side's counters over the runs (mean, lowest,
    highest), the gap of the simulator's mean from the kernel's, the kernel's own
    spread (highest less lowest over the mean), and for the hot share the largest gap
    between two of the kernel's own runs and the simulator's mean curve's largest
    distance outside the band the kernel's runs span (each simulated run read on the
    windows its kernel run measured). A case agrees when it meets the
    targets; it is within the kernel's spread when its misses are no larger than the
    kernel's own disagreement with itself (counters inside the kernel's range, the hot
    share within HOT_GAP of the kernel's band)."""
    n = len(runs)
    kc = [(r["guest"]["t"], r["guest"]["hot_fast"]) for r in runs]
    sc = [(r["sim"]["t"], r["sim"]["hot_fast"]) for r in runs]
    secs = _seconds(kc + sc)
    k = _at(kc, secs, _fresh)
    # each simulated run on its kernel run's windows (`_sim_share`), then their mean
    m = np.array([[_sim_share(r["guest"], r["sim"], t) for t in secs] for r in runs],
                 dtype=float).mean(axis=0)
    both = np.isfinite(k).sum(axis=0) >= 2  # two of the kernel's runs have a fresh sample
    lo, hi = np.fmin.reduce(k, axis=0), np.fmax.reduce(k, axis=0)  # NaN only if all are
    out_of = np.maximum(np.maximum(lo - m, 0), np.maximum(m - hi, 0))
    out = {"repeats": n,
           "hot_share": round(float(np.mean([r["gaps"]["hot_share"] for r in runs])), 3),
           "hot_share_runs": [r["gaps"]["hot_share"] for r in runs],
           "kernel_hot_spread": round(float((hi - lo)[both].max()), 3)
           if n > 1 and both.any() else None,
           "hot_outside": round(float(np.nanmax(out_of)), 3)
           if np.isfinite(out_of).any() else None}
    for key in ("promoted", "demoted"):
        kv = np.array([r["gaps"][key]["kernel"] for r in runs], dtype=float)
        sv = np.array([r["gaps"][key]["sim"] for r in runs], dtype=float)
        km = kv.mean()
        out[key] = {"kernel": int(round(km)), "kernel_min": int(kv.min()),
                    "kernel_max": int(kv.max()), "sim": int(round(sv.mean())),
                    "sim_min": int(sv.min()), "sim_max": int(sv.max()),
                    # a count of a few pages has no meaningful relative gap
                    "gap": _count_gap(km, sv.mean()),
                    "kernel_spread": round((kv.max() - kv.min()) / km, 3) if km else None,
                    "inside": bool(kv.min() <= sv.mean() <= kv.max())}
    spread = n > 1 and out["hot_outside"] is not None and out["hot_outside"] <= HOT_GAP \
        and all(out[c]["inside"] or _within(out[c]) for c in ("promoted", "demoted"))
    out["verdict"] = ("agrees" if _meets(out) else "within the kernel's spread" if spread
                      else "misses")
    return out


def plot(case: Case, runs: list, path: Path) -> None:
    """The hot share and the counters over time, every repeat: the kernel's runs in
    one colour, the simulator's in another."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(1, 2, figsize=(11, 3.8))
    pol = runs[0]["sim"]["policy"].split(":")[0]
    for i, r in enumerate(runs):
        g, s = r["guest"], r["sim"]
        first = i == 0
        ax[0].plot(g["t"], g["hot_fast"], "o-", ms=2.5, color="C0", alpha=0.8,
                   label=f"kernel (guest, {len(runs)} runs)" if first else None)
        ax[0].plot(s["t"], s["hot_fast"], "-", color="C1", alpha=0.8,
                   label=f"simulator: {pol}" if first else None)
        ax[1].plot(g["ct"], g["promoted"], "o-", ms=2.5, color="C0", alpha=0.8,
                   label="kernel promoted" if first else None)
        ax[1].plot(g["ct"], g["demoted"], "s-", ms=2.5, color="C2", alpha=0.8,
                   label="kernel demoted" if first else None)
        ax[1].plot(s["t"], s["promoted"], "-", color="C1", alpha=0.8,
                   label="simulator promoted" if first else None)
        ax[1].plot(s["t"], s["demoted"], "--", color="C3", alpha=0.8,
                   label="simulator demoted" if first else None)
    ax[0].set_xlabel("seconds since the mechanism went on")
    ax[0].set_ylabel("hot pages on node 0 (share)")
    ax[0].set_ylim(0, 1.05)
    ax[0].legend(fontsize=7, loc="lower right")
    ax[1].set_xlabel("seconds since the mechanism went on")
    ax[1].set_ylabel("pages (4 KiB)")
    ax[1].legend(fontsize=7, loc="upper left")
    fig.suptitle(f"{case.name}: the guest's kernel against the simulator", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _describe(case: Case, g: dict) -> str:
    s = g["sizes"] or {}
    if case.workload == "replay":
        r = case.args
        return (f"replay of tests/data/traces/{r['trace']}.npz, {r['copies']} copies, "
                f"{r['per_window']:,} accesses a copy per window, its {g['hot_pages']:,} "
                f"most accessed pages as the hot set; the kernel's default first touch")
    if case.workload == "moving":
        a = case.args
        return (f"hotcold, {a['windows']} hot windows of {a['hot_mib']} MiB first touched "
                f"on node 1, the hot one moving every {a['move_ms'] / 1000:g} s, cold "
                f"{s.get('cold_mib', '?')} MiB on node 0, {a['seconds']} s")
    return (f"hotcold, hot {s.get('hot_mib')} MiB first touched on node 1, cold "
            f"{s.get('cold_mib')} MiB on node 0; until 90% of the hot range is on node 0")


def _cell(c: dict) -> str:
    """A counter's cell: the kernel's mean [lowest-highest] / the simulator's (gap)."""
    gap = "-" if c["gap"] is None else f"{100 * c['gap']:+.0f}%"
    spread = (f" [{c['kernel_min']:,}-{c['kernel_max']:,}]"
              if c.get("kernel_max", c["kernel"]) != c.get("kernel_min", c["kernel"]) else "")
    return f"{c['kernel']:,}{spread} / {c['sim']:,} ({gap})"


def report(results: dict, out: Path, calib: dict) -> None:
    rows = ["| case | kernel mechanism | simulator policy | workload | runs | largest "
            "hot-share gap | the kernel's own | outside the kernel's band | promotions: "
            "kernel [range] / sim (gap) | demotions: kernel [range] / sim (gap) | verdict |",
            "|---|---|---|---|---:|---:|---:|---:|---:|---:|---|"]
    sections = []
    ticks = {x["guest"].get("ticker_us") for r in results.values() for x in r["runs"]}
    ticker = ""
    if len(ticks) == 1 and (ticks & {None, 0}) == set():
        ticker = (f"; every CPU switches address space every {min(ticks) / 1000:g} ms "
                  "(`tick`, `--ticker-us`): TCG's TLB otherwise keeps a PTE accessed bit that "
                  "DAMON or the multi-gen LRU cleared from being set again "
                  "(tests/guest/README.md, \"The emulator's TLB\")")
    for name, r in results.items():
        case, sm, runs = CASES[name], r["summary"], r["runs"]
        g, s = runs[0]["guest"], runs[0]["sim"]
        mech = {"kernel": "NUMA balancing mode 2 + kswapd (MGLRU)",
                "damon": "DAMOS migrate_hot/cold (paddr)",
                "exec": f"`tierlab exec --policy {case.policy}`"}[case.tiering]

        def num(x):
            return "-" if x is None else f"{x:.2f}"
        rows.append(f"| {name} | {mech} | `{s['policy'].split(':')[0]}` | {case.workload} | "
                    f"{sm['repeats']} | {num(sm['hot_share'])} | "
                    f"{num(sm['kernel_hot_spread'])} | {num(sm['hot_outside'])} | "
                    f"{_cell(sm['promoted'])} | {_cell(sm['demoted'])} | {sm['verdict']} |")
        def commits(side):
            return ", ".join(sorted({x[side].get("commit", "?") for x in runs}))
        made = f"guests at {commits('guest')}, simulations at {commits('sim')}"
        rates = ", ".join(f"{x['guest']['ops_per_s']:.3g}" for x in runs)
        logs = ", ".join(f"`{Path(x['guest']['log']).name}`" for x in runs)
        at = ", ".join(f"{x['gaps']['at']}" for x in runs)
        sections.append(f"""## {name}

{_describe(case, g)}; ops/s measured in the guest: {rates} (guest logs {logs}; {made}).
Simulator: `{s['policy']}`. Largest hot-share gap by run: {", ".join(
            f"{x:.2f}" for x in sm["hot_share_runs"])}; seconds compared (of those both
sides reached): {", ".join(f"{a} of {b}" for a, b in (x["gaps"].get("seconds", ["?", "?"])
                                                     for x in runs))}.

![{name}]({name}.png)

Counters compared at {at} s.{_state_line(runs)}{_steps_line(runs, calib['migrate_bw_mib'])}
""")
        if g.get("damon_goals"):
            refused = [x["metric"] for x in g["damon_goals"] if not x.get("accepted")]
            if refused:
                sections[-1] += (f" The guest kernel refused the quota goal metrics "
                                 f"{', '.join(refused)} (they arrive in Linux 6.16), so both "
                                 f"sides ran the schemes without goals (`goals=off`).")
    text = f"""# The simulator against the kernel

`.venv/bin/python scripts/sim_vs_kernel.py --out docs/sim-vs-kernel --repeats N` (`--case
NAME` for one). Targets: the hot pages' share on node 0 within {HOT_GAP} at every second
after the first, the promotion and demotion counters within {100 * COUNTER_GAP:.0f}%.
Every case ran N times, each run in a fresh guest beside its own simulation (calibrated
from that run); the table gives the mean of the runs' largest hot-share gaps, the
largest gap between two of the kernel's own runs, how far the simulator's mean curve
leaves the band of the kernel's runs, and each counter's mean over the runs with the
kernel's range. A second whose last guest sample is older than {FRESH_S:g} s is not
compared (the guest's sampler stalls while a kdamond migrates). A case is *within the
kernel's spread* when it misses the targets by no more than the kernel disagrees with
itself: both counters inside the kernel's range (or within {100 * COUNTER_GAP:.0f}%) and the hot
share within {HOT_GAP} of the kernel's band. A counter under {MIN_COUNT} pages on both sides
agrees (a few pages either way).

**Guest**: Debian's 6.12 kernel in QEMU (TCG, one host thread for both vCPUs), node 0
with the 2 CPUs and 512 MiB, node 1 CPU-less with 1 GiB in a lower tier (HMAT){ticker}. **One
calibration for every case**: node 0 = the guest's node 0 (its managed pages), of which
the workload has the free memory it found (in the exec cases what it had at hotcold's
ready, tierlab exec's own process holding node 0 beside it) and the rest is held by others, the kernel's watermarks (/proc/zoneinfo)
and demotion switch (the exec cases run with demotion_enabled off), the same access cost on both nodes (TCG emulates both in host memory),
the guest's copy speed {calib.get('kernel_migrate_bw_mib', calib['migrate_bw_mib']):g} MiB/s
in the kernel's own migrations and {calib['migrate_bw_mib']:g} MiB/s by move_pages(2) (the exec
cases), hint-fault cost
{calib['hint_fault_us']:g} us, first-touch cost {calib.get('first_touch_us', 0):g} us
PTE-scan costs {calib.get('pte_slot_ns', 20):g} ns a PTE slot walked and
{calib.get('pte_ns', 70):g} ns a changed PTE, and node 0's pages on the LRU lists before
the workload started (the initramfs's tmpfs: reclaim demotes them first, `Memory.idle`)
(scripts/sim_vs_kernel.py says how they were found). Measured in each run: the
workload's per-op cost makes the simulated run as fast as the guest's, and in the exec
cases the simulated policy's steps take as long as tierlab exec's thread took (per kind
of timer, and per page moved: the run's `daemon_steps`, `engine.DaemonSteps`; given in
each exec case's section), the policy is told the machine tierlab exec's was (its
record's `machine_spec`: the guest's HMAT) and starts from where hotcold's fill left each
range (`ready-nodes`). Run it on an idle
host: under TCG the guest's kernel slows with the host's load, its timers do not. What
each miss comes from, where it is known: docs/linux.md, "The simulator against the
kernel".

{chr(10).join(rows)}

{chr(10).join(sections)}
"""
    (out / "README.md").write_text(text)


#: the mechanisms' own counts a kernel case shows beside the counters, each side read at
#: the counters' time: (key in the guest's and the simulator's series, what it counts)
STATE = (("hint_faults", "NUMA hint faults"), ("pte_updates", "PTEs made PROT_NONE"),
         ("scan_passes", "scan passes over the address space (numa_scan_seq)"),
         ("agings", "node 0's multi-gen LRU agings (max_seq)"))


def _steps_line(runs: list, migrate_bw_mib: float = MIGRATE_BW_MIB) -> str:
    """tierlab exec's step times by run (`DaemonSteps.from_linux` of its record, a page's
    move at the calibration's move_pages speed where every step moved pages), where the
    run recorded them."""
    parts = []
    for r in runs:
        steps = r["guest"].get("exec_daemon_steps")
        if not steps:
            return ""
        d = DaemonSteps.from_linux(steps, PAGE / (migrate_bw_mib * MIB))
        n = {k: c["steps"] for k, c in steps.items()}
        parts.append(", ".join(f"{k} {d.compute[k]:.2f} s ({n[k]} steps)" for k in
                               sorted(steps)) + f", {1e3 * d.page_seconds:.2f} ms a page")
    return " tierlab exec's steps by run, each kind's step and a page moved: " + \
        "; ".join(parts) + "."


def _state_line(runs: list) -> str:
    """The mechanisms' counts by run, kernel / simulator, where both sides have them."""
    parts = []
    for key, what in STATE:
        have = [r for r in runs if key in r["guest"] and key in r["sim"]]
        if len(have) < len(runs):
            continue
        pairs = []
        for r in have:
            g, sm, t = r["guest"], r["sim"], r["gaps"]["at"]
            pairs.append(f"{_step(g['ct'], g[key], t):,} / {_step(sm['t'], sm[key], t):,}")
        parts.append(f"{what}: {', '.join(pairs)}")
    return (" Kernel / simulator by run: " + "; ".join(parts) + ".") if parts else ""


def _commit() -> str:
    """The repository's commit, with "+changes" when tracked files differ from it."""
    def git(*args):
        return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True,
                              text=True, check=True).stdout.strip()
    try:
        rev = git("rev-parse", "--short", "HEAD")
        return rev + ("+changes" if git("status", "--porcelain", "--untracked-files=no")
                      else "")
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def _runs(entry: dict) -> list:
    """A case's saved runs (a record of one run, before --repeats, is its one run)."""
    return entry["runs"] if "runs" in entry else [entry]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="docs/sim-vs-kernel", help="output directory")
    ap.add_argument("--case", action="append", choices=list(CASES),
                    help="run this case (repeatable; default: all)")
    ap.add_argument("--repeats", type=int, default=1, metavar="N",
                    help="run each case N times, each in a fresh guest beside its own "
                    "simulation; the table gives the kernel's spread (default 1)")
    ap.add_argument("--guest-json", help="reuse the guest runs saved in an earlier data.json "
                    "(its runs of a case before new ones; read again from their logs where "
                    "these are still in .cache/guest/logs)")
    ap.add_argument("--report-only", action="store_true",
                    help="no guest, no simulation: compare the runs saved in --out's data.json "
                    "again and rewrite its README.md and figures")
    ap.add_argument("--migrate-bw", type=float, default=MIGRATE_BW_MIB, metavar="MIB_S",
                    help="the guest's copy speed of one thread migrating by move_pages(2), "
                    f"as tierlab exec does (default {MIGRATE_BW_MIB:g} MiB/s: MIGRATE_BW_MIB)")
    ap.add_argument("--kernel-migrate-bw", type=float, default=KERNEL_MIGRATE_BW_MIB,
                    metavar="MIB_S",
                    help="the guest's copy speed of the kernel's own migrations (a hint "
                    "fault's promotion, kswapd's demotion, DAMOS) (default "
                    f"{KERNEL_MIGRATE_BW_MIB:g} MiB/s: KERNEL_MIGRATE_BW_MIB)")
    ap.add_argument("--hint-fault-us", type=float, default=HINT_FAULT_US, metavar="US",
                    help="the guest's cost of one NUMA hint fault (default "
                    f"{HINT_FAULT_US:g} us: HINT_FAULT_US)")
    ap.add_argument("--first-touch-us", type=float, default=FIRST_TOUCH_US, metavar="US",
                    help="the guest's cost of a page's first touch (default "
                    f"{FIRST_TOUCH_US:g} us: FIRST_TOUCH_US)")
    ap.add_argument("--pte-ns", type=float, default=PTE_NS, metavar="NS",
                    help="the guest's cost of one PTE's change of protection (default "
                    f"{PTE_NS:g} ns: PTE_NS; the smoke scenario's ptecost measures it)")
    ap.add_argument("--pte-slot-ns", type=float, default=PTE_SLOT_NS, metavar="NS",
                    help="the guest's NUMA scan's walk of one PTE slot (default "
                    f"{PTE_SLOT_NS:g} ns: PTE_SLOT_NS, from the scan's passes in "
                    "kernel-replay's fill)")
    ap.add_argument("--ticker-us", type=int, default=TICKER_US, metavar="US",
                    help="every guest CPU switches address space every US us, so that "
                    "the emulator's TLB lets PTE accessed bits be set again as a real "
                    f"CPU's does (default {TICKER_US}: TICKER_US; 0: off)")
    a = ap.parse_args()
    if a.repeats < 1:
        ap.error(f"--repeats {a.repeats}: give 1 or more")
    if a.ticker_us < 0:
        ap.error(f"--ticker-us {a.ticker_us}: give 0 (off) or more")
    out = Path(a.out)
    if not out.is_absolute():
        out = ROOT / out
    out.mkdir(parents=True, exist_ok=True)
    saved = json.loads(Path(a.guest_json).read_text())["cases"] if a.guest_json else {}
    old = out / "data.json"
    results = json.loads(old.read_text()).get("cases", {}) if old.exists() else {}
    results = {k: dict(runs=_runs(v), summary=v.get("summary") or summary(_runs(v)))
               for k, v in results.items()}
    if a.report_only:
        if not results:
            ap.error(f"--report-only: {old} holds no runs")
        calib = json.loads(old.read_text()).get("calibration", {})
        for name, r in results.items():
            runs = [dict(x, gaps=gaps(x["guest"], x["sim"])) for x in r["runs"]]
            results[name] = dict(runs=runs, summary=summary(runs))
            plot(CASES[name], runs, out / f"{name}.png")
        (out / "data.json").write_text(json.dumps(dict(calibration=calib, cases=results),
                                                  indent=1))
        report(results, out, calib)
        print(f"wrote {out / 'README.md'}")
        return 0
    calib = dict(migrate_bw_mib=a.migrate_bw, hint_fault_us=a.hint_fault_us,
                 first_touch_us=a.first_touch_us, pte_ns=a.pte_ns, pte_slot_ns=a.pte_slot_ns,
                 kernel_migrate_bw_mib=a.kernel_migrate_bw, ticker_us=a.ticker_us)
    machine = calibration(a.migrate_bw, a.hint_fault_us, a.first_touch_us, a.pte_ns,
                          a.pte_slot_ns, a.kernel_migrate_bw)
    rev = _commit()
    failed = []
    for name in a.case or list(CASES):
        case = CASES[name]
        guests = [reread_guest(case, r["guest"]) for r in _runs(saved[name])] \
            if name in saved else []
        runs = []
        for i in range(max(a.repeats, len(guests))):
            print(f"sim_vs_kernel: {name}, run {i + 1} of {max(a.repeats, len(guests))}",
                  flush=True)
            try:
                g = guests[i] if i < len(guests) else dict(boot_guest(case, a.ticker_us),
                                                           commit=rev)
            except GuestFailed as e:
                print(f"  {e}", flush=True)
                failed.append(f"{name} (run {i + 1})")
                continue
            s = simulate(case, g, out, **machine)
            runs.append(dict(guest=g, sim=dict(s, commit=rev), gaps=gaps(g, s)))
            print(f"  {json.dumps(runs[-1]['gaps'])}", flush=True)
            results[name] = dict(runs=runs, summary=summary(runs))
            results = {k: results[k] for k in CASES if k in results}
            (out / "data.json").write_text(json.dumps(dict(calibration=calib, cases=results),
                                                      indent=1))
        if runs:
            plot(case, runs, out / f"{name}.png")
    report(results, out, calib)
    if failed:
        print(f"sim_vs_kernel: the guest failed in {', '.join(failed)}")
        return 1
    print(f"wrote {out / 'README.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
