"""`tierlab daemon` and `tierlab exec`: a registered policy managing a real process.

The loop: every timer the policy and its monitors registered (`sim.every`) runs in
real time; every `interval` one line says what moved (pages promoted and demoted per
pair of nodes), where the target's memory is, and which moves the kernel refused.
The loop ends when the target exits, after `duration`, or on SIGINT/SIGTERM; the
kdamonds it started are stopped in every case (also at interpreter exit). Nothing
here writes to the target's memory: move_pages(2) copies a page and switches the
mapping atomically, so killing the daemon at any point leaves the target's data
intact (the kernel finishes or abandons a page move on its own).
"""
from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import time
from dataclasses import asdict
from pathlib import Path

from ..errors import TierlabError
from ..reports.results import jsonable
from ..units import PAGE
from .backend import LinuxSim


def _fmt_pages(n: int) -> str:
    b = n * PAGE
    for unit, k in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if b >= k:
            return f"{b / k:.1f} {unit}"
    return f"{b} B"


class Daemon:
    """One policy on one process (`LinuxSim`), driven in real time."""

    def __init__(self, sim: LinuxSim, policy_name: str, interval: float = 1.0,
                 duration: float | None = None, echo=print, alloc: str = "-",
                 target: str = "", sleep=time.sleep):
        if interval <= 0:
            raise TierlabError(f"--interval {interval}: must be > 0")
        self.sim, self.policy_name, self.interval = sim, policy_name, float(interval)
        self.duration, self.echo, self.alloc, self.target = duration, echo, alloc, target
        self.sleep = sleep
        self.stop_reason: str | None = None
        self.series = {"t": [], "resident_pages": [], "promotions": [], "demotions": []}
        self._last_moves: dict = {}
        self._last_failed: dict = {}

    def request_stop(self, reason: str) -> None:
        self.stop_reason = self.stop_reason or reason

    def run(self) -> dict:
        sim = self.sim
        next_report = self.interval
        self._cpu0 = time.process_time()
        self._managed_max = 0
        try:
            attached = self._guarded(lambda: sim.policy.attach(sim))
            self._report(0.0)
            while attached and self.stop_reason is None:
                if not sim.kernel.alive():
                    self.request_stop("target exited")
                    break
                now = sim.now
                if self.duration is not None and now >= self.duration:
                    self.request_stop("duration reached")
                    break
                wake = min(sim.next_due(), next_report)
                if self.duration is not None:
                    wake = min(wake, self.duration)
                if wake > now:
                    self.sleep(min(max(wake - now, 1e-3), 0.2))
                    continue
                if not self._guarded(sim.run_due):
                    break
                if sim.now >= next_report:
                    if not self._guarded(sim.refresh):
                        break
                    self._report(sim.now)
                    next_report += self.interval * max(1, int((sim.now - next_report)
                                                              // self.interval) + 1)
        finally:
            sim.close()
        self.echo(f"stopped: {self.stop_reason}; promoted {sim.stats.promotions} pages, "
                  f"demoted {sim.stats.demotions} pages in {sim.now:.1f} s")
        return self.record()

    def _guarded(self, fn) -> bool:
        """fn(); False (and the stop reason set) if the target exited meanwhile: a
        vanished or exiting process makes move_pages fail with EINVAL or ESRCH, DAMON
        and /proc reads with ENOENT, which are then not errors."""
        try:
            fn()
        except (TierlabError, OSError):
            if self.sim.kernel.alive():
                raise
            self.request_stop("target exited")
            return False
        return True

    def _report(self, t: float) -> None:
        sim = self.sim
        res = sim.mem.resident_per_node()
        self._managed_max = max(getattr(self, "_managed_max", 0), int(res.sum()))
        self.series["t"].append(round(t, 3))
        self.series["resident_pages"].append([int(x) for x in res])
        self.series["promotions"].append(sim.stats.promotions)
        self.series["demotions"].append(sim.stats.demotions)
        moves = {k: v - self._last_moves.get(k, 0) for k, v in sim.stats.moves.items()}
        self._last_moves = dict(sim.stats.moves)
        fails = {k: v - self._last_failed.get(k, 0) for k, v in sim.stats.failed.items()}
        self._last_failed = dict(sim.stats.failed)
        rank = {n: i for i, n in enumerate(sim.machine.demotion)}
        up = [f"{sim.node_ids[a]}->{sim.node_ids[b]} {_fmt_pages(n)}"
              for (a, b), n in sorted(moves.items()) if n and rank[b] < rank[a]]
        down = [f"{sim.node_ids[a]}->{sim.node_ids[b]} {_fmt_pages(n)}"
                for (a, b), n in sorted(moves.items()) if n and rank[b] > rank[a]]
        tot = max(int(res.sum()), 1)
        where = " ".join(f"N{sim.node_ids[i]} {100 * r / tot:.0f}%"
                         for i, r in enumerate(res.tolist()))
        line = (f"t={t:6.1f}s  promoted: {', '.join(up) or '-'}  demoted: "
                f"{', '.join(down) or '-'}  resident {_fmt_pages(int(res.sum()))}: {where}")
        bad = {k: v for k, v in fails.items() if v}
        if bad:
            line += "  refused: " + ", ".join(f"{k} {v}" for k, v in sorted(bad.items()))
        self.echo(line)

    def record(self) -> dict:
        """A results.json record with the simulator's keys where they mean the same
        (throughput is the application's business: not measured here)."""
        sim, st = self.sim, self.sim.stats
        res = sim.mem.resident_per_node()
        tot = max(int(res.sum()), 1)
        return {
            "machine": sim.machine.name,
            "workload": self.target,
            "policy": self.policy_name,
            "alloc": self.alloc,
            "seed": sim.seed,
            "backend": "linux",
            "sim_seconds": float(sim.now),
            "stop_reason": self.stop_reason,
            "promotions": int(st.promotions),
            "demotions": int(st.demotions),
            "migrated_bytes": int(st.migrated_bytes),
            "monitor_cpu_seconds": float(st.monitor_cpu_seconds),
            "migration_cpu_seconds": float(st.migration_cpu_seconds),
            "migrations_by_reason": dict(st.by_reason),
            "moves": {f"{sim.node_ids[a]}->{sim.node_ids[b]}": n
                      for (a, b), n in sorted(st.moves.items())},
            "refused": dict(st.failed),
            "resident_share": {f"N{sim.node_ids[i]}": r / tot
                               for i, r in enumerate(res.tolist())},
            "unmanaged_bytes": int(sim.space.unmanaged_bytes),
            # the daemon's own CPU (this process: policy, DAMON sysfs reads, move_pages;
            # the kernel's kdamond is not in it) and the memory it managed at most
            "daemon_cpu_seconds": time.process_time() - getattr(self, "_cpu0",
                                                                time.process_time()),
            "managed_bytes_max": int(max(getattr(self, "_managed_max", 0), tot) * PAGE),
            "notes": list(sim.notes),
            "policy_stats": jsonable(sim.policy.stats()),
            # each kind of timer's steps: how long the daemon took, with and without
            # moves (LinuxSim.daemon_steps)
            "daemon_steps": jsonable(sim.daemon_steps),
            # the machine the policy was given (linux/topology.py to_machine)
            "machine_spec": jsonable(asdict(sim.machine)),
            "series": self.series,
        }


def write_record(rec: dict, out: Path) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    p = out / "results.json"
    p.write_text(json.dumps([rec], indent=1))
    return p


class _Signals:
    """SIGINT/SIGTERM ask the daemon to stop (and are passed on to a child we started);
    the previous handlers come back on exit."""

    def __init__(self, daemon: Daemon, child: subprocess.Popen | None = None):
        self.daemon, self.child, self.old = daemon, child, {}

    def __enter__(self):
        for sig in (signal.SIGINT, signal.SIGTERM):
            self.old[sig] = signal.signal(sig, self._handle)
        return self

    def _handle(self, signum, frame):
        if self.child is not None and self.child.poll() is None:
            self.child.send_signal(signum)  # exec: the child decides; we follow it
            return
        self.daemon.request_stop(signal.Signals(signum).name)

    def __exit__(self, *exc):
        for sig, h in self.old.items():
            signal.signal(sig, h)
        return False


def check_can_manage(pid: int | None, root: str = "/") -> None:
    """The real backend's one-line refusals: unknown pid, not root."""
    if pid is not None and not Path(root, "proc", str(pid)).exists():
        raise TierlabError(f"no process {pid}")
    if os.geteuid() != 0:
        raise TierlabError("tierlab daemon needs root (move_pages(2) on another process "
                           "and DAMON's sysfs): run it with sudo")


def prepare(policy: str, tier_order: str | None = None, topo=None):
    """Everything checked before touching a process: the topology (two nodes at
    least), the machine it describes, and the policy (not the oracle)."""
    from .. import api
    from . import topology
    pol = api.make_policy(policy)
    if getattr(pol, "uses_true_rates", False):
        raise TierlabError(f"policy {policy!r} reads the workload's true rates: it exists "
                           "only in the simulator")
    topo = topo or topology.discover(tier_order=tier_order)
    if len(topo.nodes) < 2:
        raise TierlabError(f"only one NUMA node ({topo.nodes[0].id}): there is nothing "
                           "to tier on this machine")
    return topo, topology.to_machine(topo), pol


def run_daemon(pid: int, policy: str, interval=1.0, duration=None, out=None,
               tier_order=None, bw_limit=None, echo=print, alloc="-", child=None,
               topo=None) -> dict:
    """Manage process `pid` until it exits (or duration, or a signal)."""
    from .kernel import RealKernel
    from .procfs import process_name
    if child is None:
        check_can_manage(pid)
    topo, machine, pol = prepare(policy, tier_order, topo)
    kernel = RealKernel(pid, topo, bw_limit=bw_limit)
    name = process_name(pid)
    sim = LinuxSim(machine, topo.node_ids, kernel, pol)
    sim.echo = lambda m: echo("note: " + m)
    atexit.register(sim.close)
    d = Daemon(sim, policy, interval=interval, duration=duration, echo=echo, alloc=alloc,
               target=f"pid:{pid} ({name}) on {socket.gethostname()}")
    try:
        with _Signals(d, child):
            rec = d.run()
    finally:
        atexit.unregister(sim.close)
    if out is not None:
        echo(f"wrote {write_record(rec, Path(out))}")
    return rec


def run_exec(cmd: list[str], policy: str, alloc: str = "dram-preferred", out=None,
             echo=print, **kw) -> int:
    """Start `cmd` under allocation policy `alloc` (set_mempolicy before exec, so it
    holds from the first allocation) and manage it with `policy` until it exits;
    returns its exit status (128 + signal if a signal ended it, as a shell says)."""
    from .syscalls import alloc_mempolicy
    if not cmd:
        raise TierlabError("tierlab exec: no command given (tierlab exec ... -- CMD ARGS)")
    check_can_manage(None)
    topo, _, _ = prepare(policy, kw.get("tier_order"))
    mp = alloc_mempolicy(alloc, topo)
    try:
        child = subprocess.Popen(cmd, preexec_fn=mp.apply)
    except (FileNotFoundError, PermissionError) as e:
        raise TierlabError(f"cannot run {cmd[0]!r}: {e.strerror}") from None
    echo(f"started pid {child.pid} ({' '.join(cmd)}) with {alloc} ({mp.mode_name} "
         f"nodes {','.join(map(str, mp.nodes)) or '-'}) under {policy}")
    try:
        rec = run_daemon(child.pid, policy, alloc=alloc, child=child, topo=topo,
                         echo=echo, out=None, **kw)
    except TierlabError as e:
        echo(f"tierlab: {e}; pid {child.pid} keeps running, unmanaged")
        child.wait()
        raise
    rc = child.wait()
    rc = rc if rc >= 0 else 128 - rc
    rec["exit_code"] = rc
    if out is not None:
        echo(f"wrote {write_record(rec, Path(out))}")
    return rc
