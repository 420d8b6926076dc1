"""move_pages(2) and the mempolicy calls on this host (one node, root), the bandwidth
limiter on a fake clock, nodemasks, and allocation policies on fixture topologies."""
from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tierlab.errors import TierlabError
from tierlab.linux import syscalls as sc
from tierlab.linux.topology import discover

FIX = Path(__file__).parent / "fixtures"
P = sc.PAGE_SIZE


def test_query_own_pages(buf):
    _, addrs = buf
    st = sc.move_pages(os.getpid(), addrs, None)
    assert st.dtype == np.int32 and len(st) == 64
    assert (st[::2] == 0).all() and (st[1::2] == -errno.ENOENT).all()
    assert len(sc.move_pages(0, addrs[:0])) == 0


def test_move_to_node0(buf):
    _, addrs = buf
    st = sc.move_pages(0, addrs, 0)
    assert (st[::2] == 0).all() and (st[1::2] == -errno.ENOENT).all()
    r = sc.move_pages_batched(os.getpid(), addrs, 0, batch=10)
    assert r.moved == 32 and r.counts == {"ok": 32, "busy": 0, "nomem": 0, "gone": 32, "other": 0}
    assert r.bytes == 32 * P and r.seconds >= 0 and (r.status == st).all()


def test_move_to_missing_node(buf):
    _, addrs = buf
    with pytest.raises(TierlabError, match=r"bad node 5: not an online memory node"):
        sc.move_pages(0, addrs, 5)
    with pytest.raises(TierlabError, match="2 target nodes for 64 pages"):
        sc.move_pages(0, addrs, [0, 0])


def test_unknown_pid(buf):
    _, addrs = buf
    pid = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1
    with pytest.raises(TierlabError, match=f"^no process {pid}$"):
        sc.move_pages(pid, addrs, None)
    with pytest.raises(TierlabError, match=f"no process {pid}"):
        sc.move_pages_batched(pid, addrs, 0)


class FakeClock:
    def __init__(self):
        self.t, self.slept = 100.0, []

    def __call__(self):
        return self.t

    def sleep(self, d):
        self.slept.append(d)
        self.t += d


def test_bandwidth_limit_and_busy_retry(monkeypatch):
    calls = []

    def fake_move(pid, addrs, node, flags=sc.MPOL_MF_MOVE):
        calls.append(len(addrs))
        st = np.full(len(addrs), node, dtype=np.int32)
        if len(calls) == 1:
            st[:3] = -errno.EBUSY  # three busy pages in the first batch, retried at the end
        if len(calls) == 2:
            st[0], st[1], st[2] = -errno.ENOMEM, -errno.EFAULT, -errno.EACCES
        return st

    monkeypatch.setattr(sc, "move_pages", fake_move)
    clk = FakeClock()
    addrs = np.arange(10 * 512, dtype=np.uint64) * np.uint64(P)
    rate = 512 * P  # one batch per second
    r = sc.move_pages_batched(1, addrs, 1, batch=512, bw_limit_bytes_s=rate,
                              clock=clk, sleep=clk.sleep)
    assert calls == [512] * 10 + [3]
    # the first batch rides on the full bucket; each later one waits a second, the
    # 3-page retry 3/512 s
    assert r.seconds == pytest.approx(9 + 3 / 512)
    assert sum(clk.slept) == pytest.approx(r.seconds)
    assert r.counts == {"ok": 5117, "busy": 0, "nomem": 1, "gone": 1, "other": 1}
    assert r.moved == 5117 and r.bytes == 5117 * P

    calls.clear()
    clk2 = FakeClock()
    r = sc.move_pages_batched(1, addrs, 1, batch=512, clock=clk2, sleep=clk2.sleep)
    assert clk2.slept == [] and r.seconds == 0
    with pytest.raises(TierlabError, match="bad migration bandwidth limit 0"):
        sc.move_pages_batched(1, addrs, 1, bw_limit_bytes_s=0)
    with pytest.raises(TierlabError, match="bad move batch 0"):
        sc.move_pages_batched(1, addrs, 1, batch=0)


def test_a_target_exiting_part_way_keeps_the_moves_done(monkeypatch):
    """A target that exits during the third batch: the two batches before it moved, and
    `TargetExited` carries their statuses (the rest -ENOENT), so the daemon counts
    those pages as moved (`RealKernel.move`) instead of all of them as gone; the same
    in the busy pages' retry, where the first pass's statuses stand."""
    from types import SimpleNamespace

    from tierlab.linux.kernel import RealKernel
    from tierlab.linux.procfs import TargetExited
    calls = []

    def fake_move(pid, addrs, node, flags=sc.MPOL_MF_MOVE):
        calls.append(len(addrs))
        if len(calls) == exit_at:
            raise TargetExited(f"process {pid} exited during move_pages")
        st = np.full(len(addrs), node, dtype=np.int32)
        st[:2] = -errno.EBUSY if len(calls) == 1 else node
        return st

    monkeypatch.setattr(sc, "move_pages", fake_move)
    addrs = np.arange(5 * 512, dtype=np.uint64) * np.uint64(P)
    # exits in the third batch (the two busy pages of the first not yet retried), or in
    # the retry of those two after all five batches
    for exit_at, moved, busy in ((3, 2 * 512 - 2, 2), (6, 5 * 512 - 2, 0)):
        calls.clear()
        with pytest.raises(TargetExited) as e:
            sc.move_pages_batched(1, addrs, 1, batch=512)
        st = e.value.status
        assert (st == 1).sum() == moved and (st == -errno.EBUSY).sum() == busy
        assert (st == -errno.ENOENT).sum() == len(st) - moved - busy
        calls.clear()
        k = SimpleNamespace(pid=1, batch=512, bw_limit=None)
        np.testing.assert_array_equal(RealKernel.move(k, addrs, 1), st)


def test_token_bucket_refills_while_idle():
    clk = FakeClock()
    b = sc.TokenBucket(100.0, 200.0, clk, clk.sleep)
    b.take(200)
    assert clk.slept == []
    clk.t += 1.0  # 100 bytes of tokens come back
    b.take(150)
    assert clk.slept == [pytest.approx(0.5)]


def test_nodemask():
    words, maxnode = sc.nodemask([0])
    assert words.tolist() == [1] and maxnode == 65
    words, maxnode = sc.nodemask([1, 3, 64, 130, 3])
    assert words.dtype == np.uint64 and words.tolist() == [0b1010, 1, 4]
    assert maxnode == 3 * 64 + 1
    assert sc.nodes_of_mask(words) == [1, 3, 64, 130]
    w, _ = sc.nodemask([1023])
    assert len(w) == 16 and sc.nodes_of_mask(w) == [1023]
    assert sc.nodemask([])[0].tolist() == [0]
    with pytest.raises(TierlabError, match="bad node -1"):
        sc.nodemask([-1])


def test_set_mempolicy_in_child():
    code = ("from tierlab.linux import syscalls as s\n"
            "s.set_mempolicy(s.MPOL_PREFERRED, [0]); p = s.get_mempolicy()\n"
            "print(p.mode_name, p.nodes)\n"
            "s.set_mempolicy(s.MPOL_BIND | s.MPOL_F_STATIC_NODES, [0]); p = s.get_mempolicy()\n"
            "print(p.mode_name, p.flags == s.MPOL_F_STATIC_NODES, p.nodes)\n"
            "s.set_mempolicy(s.MPOL_DEFAULT); p = s.get_mempolicy()\n"
            "print(p.mode_name, p.nodes)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.splitlines()
    assert out == ["preferred [0]", "bind True [0]", "default []"]
    assert sc.get_mempolicy().mode == sc.MPOL_DEFAULT


def test_mbind(buf):
    a, _ = buf
    addr = a.ctypes.data
    assert sc.get_mempolicy(addr).mode == sc.MPOL_DEFAULT
    sc.mbind(addr, 64 * P, sc.MPOL_BIND, [0], sc.MPOL_MF_MOVE)
    p = sc.get_mempolicy(addr)
    assert (p.mode, p.nodes) == (sc.MPOL_BIND, [0])
    with pytest.raises(TierlabError, match="mode bind and nodes 5 failed"):
        sc.mbind(addr, 64 * P, sc.MPOL_BIND, [5])
    sc.mbind(addr, 64 * P, sc.MPOL_DEFAULT)
    assert sc.get_mempolicy(addr).mode == sc.MPOL_DEFAULT


@pytest.mark.parametrize("root,expect", [
    ("qemu2", {"dram-preferred": ("preferred", [0]), "dram-always": ("bind", [0]),
               "pm-preferred": ("preferred", [1]), "pm-always": ("bind", [1])}),
    ("optane4", {"dram-preferred": ("preferred", [0]), "dram-always": ("bind", [0, 1]),
                 "pm-preferred": ("preferred", [2]), "pm-always": ("bind", [2, 3])}),
    ("single", {"dram-preferred": ("preferred", [0]), "dram-always": ("bind", [0]),
                "pm-preferred": ("preferred", [0]), "pm-always": ("bind", [0])}),
])
def test_alloc_mempolicy(root, expect):
    topo = discover(FIX / root)
    for name, (mode, nodes) in expect.items():
        a = sc.alloc_mempolicy(name, topo)
        assert (a.mode_name, a.nodes) == (mode, nodes), name


def test_alloc_mempolicy_unknown():
    with pytest.raises(TierlabError, match=r"'numa-first' is unknown; valid: dram-always, "
                                           r"dram-preferred, pm-always, pm-preferred"):
        sc.alloc_mempolicy("numa-first", discover(FIX / "qemu2"))


def test_alloc_mempolicy_applies_in_child():
    code = ("from tierlab.linux import syscalls as s, topology as t\n"
            "s.alloc_mempolicy('dram-always', t.discover('/')).apply()\n"
            "p = s.get_mempolicy(); print(p.mode_name, p.nodes)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[0] == "bind" and out[1].startswith("[")
