"""A target that exits while the backend works on it ends the run normally (issue 19's
guest flake): move_pages on an exiting process fails with EINVAL, not ESRCH. Real
short-lived children on this host; every wait is on an event (the child's exit), none
on a timing."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from tierlab import api
from tierlab.linux import daemon, procfs, syscalls, topology
from tierlab.linux.backend import LinuxSim
from tierlab.linux.kernel import RealKernel

#: a child that maps and touches 64 anonymous pages, says where they are, and exits
#: when its stdin closes
CHILD = """
import mmap, sys
m = mmap.mmap(-1, 64 * 4096, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
for i in range(0, 64 * 4096, 4096):
    m[i] = 1
import ctypes
print(ctypes.addressof(ctypes.c_char.from_buffer(m)), flush=True)
sys.stdin.read()
"""


def _zombie(child: subprocess.Popen) -> None:
    """Wait until `child` has exited, without reaping it: /proc/PID stays, its memory
    is gone (the state a target is in while the daemon still looks at it)."""
    os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)


@pytest.fixture
def child():
    p = subprocess.Popen([sys.executable, "-c", CHILD], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, text=True)
    start = int(p.stdout.readline())
    yield p, start + np.arange(64, dtype=np.uint64) * np.uint64(4096)
    if p.poll() is None:
        p.kill()
    p.wait()


def test_move_pages_on_an_exited_process_is_target_exited(child):
    p, va = child
    assert (syscalls.move_pages(p.pid, va, None) >= 0).all()
    p.stdin.close()
    _zombie(p)
    assert not procfs.pid_alive(p.pid)
    with pytest.raises(procfs.TargetExited, match=f"process {p.pid} exited"):
        syscalls.move_pages(p.pid, va, None)  # EINVAL: a zombie has no mm
    p.wait()
    with pytest.raises(procfs.TargetExited, match=f"no process {p.pid}"):
        syscalls.move_pages(p.pid, va, 0)  # ESRCH


def test_real_kernel_sees_an_exited_target_as_empty(child):
    p, va = child
    k = RealKernel(p.pid, topology.discover())
    assert k.vmas() and k.alive()
    p.stdin.close()
    _zombie(p)
    assert not k.alive()
    assert (k.query(va) == -errno.ENOENT).all()
    assert (k.move(va, 0) == -errno.ENOENT).all()
    p.wait()
    assert k.vmas() == [] and (k.query(va) == -errno.ENOENT).all()


def test_daemon_on_a_target_that_exits_ends_normally(child):
    p, _ = child
    topo = topology.discover()
    sim = LinuxSim(topology.to_machine(topo), topo.node_ids, RealKernel(p.pid, topo),
                   api.make_policy("static"))
    assert sim.space.used >= 64
    p.stdin.close()
    _zombie(p)
    sim.refresh()  # move_pages of every managed page, on a zombie
    lines = []
    rec = daemon.Daemon(sim, "static", echo=lines.append).run()
    assert rec["stop_reason"] == "target exited"
    assert lines[-1].startswith("stopped: target exited")


@pytest.mark.skipif(os.geteuid() != 0, reason="tierlab exec needs root")
def test_exec_returns_the_childs_status_and_writes_results(tmp_path, monkeypatch):
    """`tierlab exec` of a program that exits at once (before, during or after the
    backend's first calls): its exit status, and results.json written."""
    def one_node(policy, tier_order=None, topo=None):
        topo = topology.discover()
        return topo, topology.to_machine(topo), api.make_policy(policy)

    monkeypatch.setattr(daemon, "prepare", one_node)
    lines = []
    rc = daemon.run_exec([sys.executable, "-c", "import sys; sys.exit(3)"], "static",
                         out=tmp_path, echo=lines.append, interval=0.05)
    assert rc == 3, lines
    rec = json.loads((tmp_path / "results.json").read_text())[0]
    assert rec["exit_code"] == 3 and rec["stop_reason"] == "target exited"
