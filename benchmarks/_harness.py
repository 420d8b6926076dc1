"""Shared by bench_memsim.py and bench_scale.py: run one policy per fresh process and
measure its wall time, CPU time (user + sys of that process, from getrusage) and peak
RSS (ru_maxrss); print one table; optionally profile one policy in-process (cProfile)
and keep each run record (to compare results before and after a change)."""
from __future__ import annotations

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
               "record": rec})
    except Exception as e:  # report and go on with the next policy
        na = "memory-mode machine" in str(e)  # Johnny Cache's policies need a DRAM cache
        q.put({"policy": run_kwargs["policy"], "ok": False, "na": na,
               "error": "n/a (needs a memory-mode machine)" if na else repr(e)})


def run_isolated(run_kwargs: dict, npages: int, timeout: float | None = None) -> dict:
    """One run in a fresh process; past `timeout` seconds of wall it is stopped and
    reported as such."""
    import queue
    ctx = mp.get_context("spawn")
    q = ctx.Queue()
    p = ctx.Process(target=_child, args=(run_kwargs, npages, q))
    p.start()
    try:
        r = q.get(timeout=timeout)
    except queue.Empty:
        p.kill()
        r = {"policy": run_kwargs["policy"], "ok": False,
             "error": f"stopped after {timeout:g} s wall (not met)"}
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
    head = "| policy | simulated s | wall s | CPU s | peak RSS GiB | bytes/page |"
    out = [head, "|---|---|---|---|---|---|"]
    for r in rows:
        if not r["ok"]:
            out.append(f"| {r['policy']} | {'' if r.get('na') else 'error: '}{r['error']} "
                       "| | | | |")
            continue
        out.append(f"| {r['policy']} | {r['sim_seconds']:.0f} | {r['wall_s']:.1f} | "
                   f"{r['cpu_s']:.1f} | {r['peak_rss_gib']:.2f} | "
                   f"{r['bytes_per_page']:.1f} |")
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
