"""Sample where a hotcold process's hot and cold ranges live, and the tiering counters.

    python3 placement.py --ready FILE_OR_JSON [--pid PID] [--interval-ms 500] [--prefix P]
        [--until-hot-on N0 --until-fraction 0.9 --after 5]

--ready is hotcold's ready line (a file, waited for, or the JSON text); it gives the pid and
the [start, end) of both ranges (a ready line without them, as replay's, gets only the
counters). While the pid lives, every interval prints one JSON line:

    {"t": s since first sample, "uptime": s, "maps_uptime": s (the page walk's middle),
     "counters_uptime": s (when the counters were read), "hot": {"N0": pages, "N1": pages},
     "cold": {...}, "all": {...}, "vmstat": {"pgpromote_success": n, "pgdemote_kswapd": n, ...},
     "free": {"N0": pages, ...}, "sched": {"numa_scan_seq": n, "runtime_ms": ms},
     "lru_gen": {"N0": [[seq, age_ms, anon pages], ...], ...}}

Page counts come from /proc/PID/numa_maps (4 KiB pages, summed over every VMA that starts
inside the range, so a range split by mbind/madvise still adds up; "all": every VMA);
vmstat values are the absolute /proc/vmstat counters; "free" each node's MemFree
(/sys/devices/system/node/nodeN/meminfo); "sched" the process's NUMA-scan passes over its
address space (mm->numa_scan_seq) and CPU time (se.sum_exec_runtime), from
/proc/PID/sched; "lru_gen" the multi-gen LRU's generations of each node, oldest first,
summed over memcgs (/sys/kernel/debug/lru_gen), when debugfs shows it. Standard library
only: runs on the guest's python and on the host.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time

VMSTAT_KEYS = ("pgpromote_success", "pgpromote_candidate", "pgdemote_kswapd", "pgdemote_direct",
               "pgdemote_khugepaged", "pgmigrate_success", "pgmigrate_fail",
               "numa_pages_migrated", "numa_hint_faults", "numa_pte_updates")
_NODE = re.compile(r"\bN(\d+)=(\d+)")


def read_vmstat(path: str = "/proc/vmstat") -> dict:
    out = {}
    with open(path) as f:
        for line in f:
            k, _, v = line.partition(" ")
            if k in VMSTAT_KEYS:
                out[k] = int(v)
    return out


def memory_nodes(path: str = "/sys/devices/system/node/has_memory") -> list:
    """Node ids with memory ("0-1,3" -> [0, 1, 3]); [] when unknown."""
    try:
        with open(path) as f:
            spec = f.read().strip()
    except OSError:
        return []
    nodes = []
    for part in filter(None, spec.split(",")):
        lo, _, hi = part.partition("-")
        nodes.extend(range(int(lo), int(hi or lo) + 1))
    return nodes


def parse_numa_maps(text: str, ranges: dict, nodes=()) -> dict:
    """{name: {"N0": pages, ...}} for VMAs whose start lies in each [start, end) range;
    every node in `nodes` is present (0 when the range has no page there)."""
    out = {name: {f"N{n}": 0 for n in nodes} for name in ranges}
    for line in text.splitlines():
        head = line.split(" ", 1)[0]
        try:
            start = int(head, 16)
        except ValueError:
            continue
        for name, (lo, hi) in ranges.items():
            if lo <= start < hi:
                counts = out[name]
                for node, n in _NODE.findall(line):
                    counts["N" + node] = counts.get("N" + node, 0) + int(n)
    return out


def node_totals(text: str, nodes=()) -> dict:
    """{"N0": pages, ...} over every VMA of a numa_maps text."""
    out = {f"N{n}": 0 for n in nodes}
    for node, n in _NODE.findall(text):
        out["N" + node] = out.get("N" + node, 0) + int(n)
    return out


def read_free(nodes, root: str = "/sys/devices/system/node") -> dict:
    """{"N0": free pages, ...} from each node's meminfo (MemFree, kB)."""
    out = {}
    for n in nodes:
        try:
            with open(f"{root}/node{n}/meminfo") as f:
                for line in f:
                    if "MemFree:" in line:
                        out[f"N{n}"] = int(line.split()[-2]) // 4
        except (OSError, ValueError, IndexError):
            continue
    return out


def parse_sched(text: str) -> dict:
    """{"numa_scan_seq": n, "runtime_ms": ms} of a /proc/PID/sched text (those it shows)."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(":")
        k = k.strip()
        try:
            if k == "mm->numa_scan_seq":
                out["numa_scan_seq"] = int(v)
            elif k == "se.sum_exec_runtime":
                out["runtime_ms"] = float(v)
        except ValueError:
            continue
    return out


def read_sched(pid: int) -> dict:
    try:
        with open(f"/proc/{pid}/sched") as f:
            return parse_sched(f.read())
    except OSError:
        return {}


def parse_lru_gen(text: str) -> dict:
    """{"N0": [[seq, age_ms, anon], ...], ...} from /sys/kernel/debug/lru_gen: every
    memcg's generations of a node, summed by seq (one memcg in the guest)."""
    out, node = {}, None
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == "node":
            node = out.setdefault(f"N{f[1]}", {})
        elif node is not None and len(f) >= 3 and f[0].isdigit():
            seq = int(f[0])
            age, anon = node.get(seq, (0, 0))
            node[seq] = (max(age, int(f[1])), anon + int(f[2].rstrip("x")))
    return {k: [[s, a, n] for s, (a, n) in sorted(v.items())] for k, v in out.items()}


def read_lru_gen(path: str = "/sys/kernel/debug/lru_gen") -> dict | None:
    try:
        with open(path) as f:
            return parse_lru_gen(f.read())
    except OSError:
        return None


DAMON = "/sys/kernel/mm/damon/admin/kdamonds"


def read_damos_stats(root: str = DAMON) -> dict:
    """{kdamond: {"action": .., "sz_applied": bytes, ...}} of each running kdamond's first
    scheme, after asking it to refresh them (`update_schemes_stats`)."""
    out = {}
    try:
        names = sorted(x for x in os.listdir(root) if x.isdigit())
    except OSError:
        return out
    for k in names:
        base = f"{root}/{k}"
        try:
            with open(f"{base}/state", "w") as f:
                f.write("update_schemes_stats")
            sch = f"{base}/contexts/0/schemes/0"
            with open(f"{sch}/action") as f:
                rec = {"action": f.read().strip()}
            for key in ("nr_tried", "sz_tried", "nr_applied", "sz_applied", "qt_exceeds"):
                with open(f"{sch}/stats/{key}") as f:
                    rec[key] = int(f.read())
        except OSError:
            continue
        out[k] = rec
    return out


def load_ready(spec: str, timeout: float = 120.0) -> dict:
    if spec.lstrip().startswith("{"):
        return json.loads(spec)
    deadline = time.monotonic() + timeout
    while not os.path.exists(spec):
        if time.monotonic() > deadline:
            sys.exit(f"placement: no ready file {spec} after {timeout:.0f} s")
        time.sleep(0.05)
    with open(spec) as f:
        return json.loads(f.read())


def uptime() -> float:
    try:
        with open("/proc/uptime") as f:
            return float(f.read().split()[0])
    except OSError:
        return time.monotonic()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ready", required=True, help="hotcold ready line: file path or JSON")
    ap.add_argument("--pid", type=int, help="process to sample (default: the ready line's pid)")
    ap.add_argument("--interval-ms", type=float, default=500)
    ap.add_argument("--prefix", default="", help="printed before every JSON line")
    ap.add_argument("--kind", default="", help='add "kind": KIND as the first key')
    ap.add_argument("--count", type=int, default=0, help="stop after this many samples (0: until exit)")
    ap.add_argument("--until-hot-on", default="", metavar="NODE",
                    help="stop once --until-fraction of the hot range's pages are on NODE "
                         "(N0, ...) and --after more samples are taken: an event, not a time")
    ap.add_argument("--until-fraction", type=float, default=0.9)
    ap.add_argument("--after", type=int, default=5)
    ap.add_argument("--damos", action="store_true",
                    help="add each kdamond's scheme stats (DAMON sysfs) to every sample")
    a = ap.parse_args(argv)
    ready = load_ready(a.ready)
    pid = a.pid or ready["pid"]
    # a ready line without ranges (replay, a moving hot set: they report their hot pages'
    # nodes themselves) gets the counters only
    ranges = {k: tuple(ready[k]) for k in ("hot", "cold") if k in ready}
    nodes = memory_nodes()
    t0, n = None, 0
    reached = None  # samples taken when the hot range first reached the fraction
    period = a.interval_ms / 1000.0
    next_t = time.monotonic()
    while True:
        before = uptime()
        try:
            with open(f"/proc/{pid}/numa_maps") as f:
                text = f.read()
        except (FileNotFoundError, ProcessLookupError):
            break
        if not text:          # exiting process: numa_maps reads empty
            break
        now = time.monotonic()
        t0 = now if t0 is None else t0
        rec = {"kind": a.kind} if a.kind else {}
        # the page walk of a big process takes a while under TCG: `maps_uptime` is the
        # middle of it, when the placement was read
        rec.update(t=round(now - t0, 3), uptime=uptime())
        rec["maps_uptime"] = round((before + rec["uptime"]) / 2, 3)
        rec.update(parse_numa_maps(text, ranges, nodes))
        rec["all"] = node_totals(text, nodes)
        rec["vmstat"] = read_vmstat()
        rec["free"] = read_free(nodes)
        rec["sched"] = read_sched(pid)
        gens = read_lru_gen()
        if gens is not None:
            rec["lru_gen"] = gens
        if a.damos:
            # update_schemes_stats waits for the kdamond (busy while it migrates): the
            # counters are as of `counters_uptime`, when it answered
            rec["damos"] = read_damos_stats()
        rec["counters_uptime"] = uptime()
        print(a.prefix + json.dumps(rec, separators=(",", ":")), flush=True)
        n += 1
        if a.count and n >= a.count:
            break
        if a.until_hot_on and reached is None:
            hot = rec.get("hot", {})
            total = sum(hot.values())
            if total and hot.get(a.until_hot_on, 0) >= a.until_fraction * total:
                reached = n
        if reached is not None and n - reached >= a.after:
            break
        next_t += period
        time.sleep(max(0.0, next_t - time.monotonic()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
