"""Shared by bench_memsim.py and bench_scale.py: run one policy per fresh process and
measure its wall time, CPU time (user + sys of that process, from getrusage) and peak
RSS (ru_maxrss); print one table; optionally profile one policy in-process (cProfile)
and keep each run record (to compare results before and after a change)."""
from __future__ import annotations

import argparse
import cProfile
import io
import json
import multiprocessing as mp
import pstats
import resource
import time
from pathlib import Path

#: run-record fields that must stay identical for the same seed (wall_seconds is not)
RESULT_KEYS = ("sim_seconds", "throughput", "promotions", "demotions", "pingpong",
               "migrated_bytes", "monitor_cpu_seconds", "migration_cpu_seconds",
               "app_stall_seconds", "reclaim_pages", "tier_access_share")


#: policy_stats counters of per-page work the simulation does one page at a time (hint
#: faults, PTEs armed, PEBS samples, pages a scanner checked); with the pages migrated
#: they make a run's `events`, the work a cost that "follows events" follows
EVENT_KEYS = ("hint_faults", "armed", "armed_pages", "samples", "scanned",
              "scanned_pages", "young_checks", "pte_checks", "mglru_evict_checked")


def events(rec: dict) -> int:
    """Page events of a run record: pages promoted and demoted, plus the policy's
    counters of `EVENT_KEYS`. Not every policy counts every kind (kswapd's LRU scans
    are not in policy_stats), so compare one policy's runs with each other, not
    policies."""
    ps = rec.get("policy_stats") or {}
    return int(rec.get("promotions", 0) + rec.get("demotions", 0)
               + sum(ps.get(k, 0) for k in EVENT_KEYS))


def host_calibration(repeats: int = 3) -> float:
    """CPU seconds this host takes for a fixed mix of the simulator's kinds of work
    (numpy's argsort of 4 M doubles, a gather of 4 M random entries, 2 M iterations of
    the interpreter), the best of `repeats`: figures from different hosts compare
    after division by it (docs/benchmarks.md)."""
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.random(1 << 22)
    idx = rng.integers(0, x.shape[0], x.shape[0])
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        np.argsort(x)
        float(x[idx].sum())
        s = 0
        for i in range(1 << 21):
            s += i
        best = min(best, time.process_time() - t0)
    return best


def registered_policies() -> list[str]:
    import tierlab.policies  # noqa: F401  (imports every policy module)
    from tierlab.policies.base import POLICIES
    return sorted(POLICIES.names())


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _child(run_kwargs: dict, npages: int, q) -> None:
    import tierlab
    try:
        cpu0, t0 = _cpu(), time.perf_counter()
        rec = tierlab.run(**run_kwargs)
        wall, cpu = time.perf_counter() - t0, _cpu() - cpu0
        rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        rec.pop("series", None)
        q.put({"policy": run_kwargs["policy"], "ok": True, "pages": npages,
               "sim_seconds": rec["sim_seconds"], "wall_s": wall, "cpu_s": cpu,
               "peak_rss_gib": rss / 2**30, "bytes_per_page": rss / npages,
               "events": events(rec), "record": rec})
    except Exception as e:  # report and go on with the next policy
        na = "memory-mode machine" in str(e)  # Johnny Cache's policies need a DRAM cache
        q.put({"policy": run_kwargs["policy"], "ok": False, "na": na,
               "error": "n/a (needs a memory-mode machine)" if na else repr(e)})


def _child_cpu(pid: int) -> float:
    """CPU seconds (user + sys) a live process has used so far, from /proc/PID/stat."""
    import os
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return float("nan")


def run_isolated(run_kwargs: dict, npages: int, timeout: float | None = None,
                 cpu_limit: float | None = None) -> dict:
    """One run in a fresh process; past `timeout` seconds of wall or `cpu_limit`
    seconds of its CPU (load-independent) it is stopped and reported as such, with the
    CPU it had used."""
    import queue
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(run_kwargs, npages, q))
    t0 = time.monotonic()
    p.start()
    while True:
        try:
            r = q.get(timeout=1.0)
            break
        except queue.Empty:
            wall, cpu = time.monotonic() - t0, _child_cpu(p.pid)
            over = ("wall", timeout) if timeout is not None and wall > timeout else \
                ("CPU", cpu_limit) if cpu_limit is not None and cpu > cpu_limit else None
            if over is None and p.is_alive():
                continue
            if over is None:  # exited: its result may still be in the pipe
                try:
                    r = q.get(timeout=5.0)
                    break
                except queue.Empty:
                    pass
            p.kill()
            why = f"stopped after {over[1]:g} s {over[0]}" if over else "died"
            r = {"policy": run_kwargs["policy"], "ok": False,
                 "error": f"{why} (not met; {cpu:.1f} s CPU, {wall:.1f} s wall)"}
            break
    p.join()
    return r


def profile(run_kwargs: dict, top: int = 30) -> None:
    import tierlab
    pr = cProfile.Profile(time.process_time)  # CPU time: other load inflates wall
    t0, c0 = time.perf_counter(), _cpu()
    pr.enable()
    tierlab.run(**run_kwargs)
    pr.disable()
    print(f"# profile of {run_kwargs['policy']}: wall {time.perf_counter() - t0:.1f} s, "
          f"CPU {_cpu() - c0:.1f} s (profiled)")
    for key in ("tottime", "cumulative"):
        s = io.StringIO()
        pstats.Stats(pr, stream=s).sort_stats(key).print_stats(top)
        print(s.getvalue())


def table(rows: list[dict], wall_limit: float, rss_limit_gib: float | None = None,
          bpp_limit: float | None = None) -> str:
    head = ("| policy | simulated s | wall s | CPU s | peak RSS GiB | bytes/page | "
            "events M | CPU ns/event |")
    out = [f"host calibration: {host_calibration():.2f} s (`_harness.host_calibration`)",
           head, "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if not r["ok"]:
            out.append(f"| {r['policy']} | {'' if r.get('na') else 'error: '}{r['error']} "
                       "| | | | | | |")
            continue
        ev = r.get("events", 0)
        out.append(f"| {r['policy']} | {r['sim_seconds']:.0f} | {r['wall_s']:.1f} | "
                   f"{r['cpu_s']:.1f} | {r['peak_rss_gib']:.2f} | "
                   f"{r['bytes_per_page']:.1f} | {ev / 1e6:.1f} | "
                   f"{1e9 * r['cpu_s'] / ev if ev else float('nan'):.0f} |")
    ok = [r for r in rows if r["ok"]]
    rows = [r for r in rows if not r.get("na")]  # the counts are over applicable policies
    met = lambda f: sum(1 for r in ok if f(r))
    out.append(f"wall <= {wall_limit:g} s: {met(lambda r: r['wall_s'] <= wall_limit)}"
               f"/{len(rows)}; CPU <= {wall_limit:g} s: "
               f"{met(lambda r: r['cpu_s'] <= wall_limit)}/{len(rows)}")
    if rss_limit_gib is not None:
        out.append(f"peak RSS <= {rss_limit_gib:g} GiB: "
                   f"{met(lambda r: r['peak_rss_gib'] <= rss_limit_gib)}/{len(rows)}")
    if bpp_limit is not None:
        out.append(f"bytes/page <= {bpp_limit:g}: "
                   f"{met(lambda r: r['bytes_per_page'] <= bpp_limit)}/{len(rows)}")
    return "\n".join(out)


def save_records(rows: list[dict], path: str | None) -> None:
    if path:
        Path(path).write_text("\n".join(json.dumps(r, default=str) for r in rows) + "\n")


def parser(doc: str, knob: str, default: float, help_: str) -> argparse.ArgumentParser:
    """The benchmarks' shared options, plus their one scenario knob (`--seconds`,
    `--updates-x`)."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--policies", default="all", help="comma-separated, or all (default)")
    ap.add_argument(knob, type=float, default=default, help=help_)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--profile", metavar="POLICY", help="profile one policy in-process")
    ap.add_argument("--records", metavar="FILE", help="write each run record (JSON lines)")
    ap.add_argument("--timeout", type=float, help="stop a policy's run after this wall s")
    ap.add_argument("--cpu-limit", type=float,
                    help="stop a policy's run after this much of its CPU time (s)")
    return ap


def run_policies(a, kwargs_of, npages: int) -> list[dict] | None:
    """`--profile P`: profile P in-process (returns None); else run every policy of
    `--policies` in its own process, printing one line each, and return the rows."""
    if a.profile:
        profile(kwargs_of(a.profile))
        return None
    pols = registered_policies() if a.policies == "all" else a.policies.split(",")
    rows = []
    for p in pols:
        r = run_isolated(kwargs_of(p), npages, a.timeout, a.cpu_limit)
        rows.append(r)
        print(f"# {p}: " + (f"wall {r['wall_s']:.1f} s, CPU {r['cpu_s']:.1f} s, peak RSS "
                            f"{r['peak_rss_gib']:.2f} GiB" if r["ok"] else r["error"]),
              flush=True)
    return rows
