"""DamonSysfs against a fake DAMON sysfs tree, and against the real kernel when it
offers DAMON sysfs with vaddr and a free kdamond slot."""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

from tierlab.errors import TierlabError
from tierlab.linux.damon_sysfs import (ADMIN, U32_MAX, U64_MAX, DamonSysfs,
                                       damon_available, read_tried_regions)


class FakeKernel:
    """A temp-dir tree shaped like /sys/kernel/mm/damon/admin whose `write` acts like
    Linux 6.12's mm/damon/sysfs.c: nr_* files rebuild their children (nr_kdamonds
    only while no kdamond runs), state commands start/stop the fake kdamond and
    materialise tried_regions from `self.regions`."""

    def __init__(self, root, avail=("vaddr", "fvaddr", "paddr")):
        self.root = str(root)
        self.admin = os.path.join(self.root, ADMIN)
        self.kd = os.path.join(self.admin, "kdamonds")
        os.makedirs(self.kd)
        self._put(os.path.join(self.kd, "nr_kdamonds"), 0)
        self.avail = avail
        self.regions: list[tuple[int, int, int, int]] = []
        self.log: list[tuple[str, str]] = []
        self.deny = False
        self.busy_on = False
        self.dead: set[int] = set()
        self.commits = 0
        self._next_pid = 500

    # -- tree ----------------------------------------------------------------------------
    @staticmethod
    def _put(path, value):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(f"{value}\n")

    def get(self, *parts) -> str:
        with open(os.path.join(self.kd, *parts)) as f:
            return f.read().strip()

    def _children(self, parent, n, make):
        for name in os.listdir(parent):
            if name.isdigit():
                shutil.rmtree(os.path.join(parent, name))
        for i in range(n):
            make(os.path.join(parent, str(i)))

    def _kdamond(self, d):
        self._put(os.path.join(d, "state"), "off")
        self._put(os.path.join(d, "pid"), -1)
        self._put(os.path.join(d, "contexts", "nr_contexts"), 0)

    def _context(self, d):
        self._put(os.path.join(d, "avail_operations"), " ".join(self.avail))
        self._put(os.path.join(d, "operations"), "vaddr")
        for f, v in (("sample_us", 5000), ("aggr_us", 100000), ("update_us", 1000000)):
            self._put(os.path.join(d, "monitoring_attrs", "intervals", f), v)
        self._put(os.path.join(d, "monitoring_attrs", "nr_regions", "min"), 10)
        self._put(os.path.join(d, "monitoring_attrs", "nr_regions", "max"), 1000)
        self._put(os.path.join(d, "targets", "nr_targets"), 0)
        self._put(os.path.join(d, "schemes", "nr_schemes"), 0)

    def _target(self, d):
        self._put(os.path.join(d, "pid_target"), 0)
        self._put(os.path.join(d, "regions", "nr_regions"), 0)

    def _scheme(self, d):
        self._put(os.path.join(d, "action"), "willneed")
        self._put(os.path.join(d, "apply_interval_us"), 0)
        for what in ("sz", "nr_accesses", "age"):
            for b in ("min", "max"):
                self._put(os.path.join(d, "access_pattern", what, b), 0)
        self._put(os.path.join(d, "tried_regions", "total_bytes"), 0)

    # -- the kernel's side of write(2) ---------------------------------------------------
    def write(self, path: str, text: str) -> None:
        if self.deny:
            raise PermissionError(errno.EACCES, "Permission denied")
        if not os.path.isfile(path):
            raise FileNotFoundError(errno.ENOENT, "No such file or directory")
        self.log.append((os.path.relpath(path, self.kd), text))
        parent, name = os.path.split(path)
        makers = {"nr_contexts": self._context, "nr_targets": self._target,
                  "nr_schemes": self._scheme}
        if name == "nr_kdamonds":
            if self.running():
                raise OSError(errno.EBUSY, "Device or resource busy")
            self._children(parent, int(text), self._kdamond)
        elif name in makers:
            n = int(text)
            if name == "nr_contexts" and n not in (0, 1):
                raise OSError(errno.EINVAL, "Invalid argument")
            self._children(parent, n, makers[name])
        elif name == "state":
            self._command(parent, text)
            return
        self._put(path, text)

    def running(self) -> list[int]:
        n = int(self.get("nr_kdamonds"))
        return [i for i in range(n) if self.get(str(i), "state") == "on"]

    def _command(self, kdir, cmd):
        state = os.path.join(kdir, "state")
        on = self.get(kdir, "state") == "on"
        ctx = os.path.join(kdir, "contexts", "0")
        if cmd == "on":
            if on or self.busy_on:
                raise OSError(errno.EBUSY, "Device or resource busy")
            if self.get(kdir, "contexts", "nr_contexts") != "1":
                raise OSError(errno.EINVAL, "Invalid argument")
            ops = self.get(ctx, "operations")
            if ops not in self.avail:
                raise OSError(errno.EINVAL, "Invalid argument")
            if ops != "paddr":
                pid = int(self.get(ctx, "targets", "0", "pid_target"))
                if pid in self.dead:
                    raise OSError(errno.EINVAL, "Invalid argument")
            self._next_pid += 1
            self._put(state, "on")
            self._put(os.path.join(kdir, "pid"), self._next_pid)
        elif cmd == "off":
            if not on:
                raise OSError(errno.EPERM, "Operation not permitted")
            self._put(state, "off")
            self._put(os.path.join(kdir, "pid"), -1)
        elif cmd in ("commit", "update_schemes_tried_regions",
                     "clear_schemes_tried_regions"):
            if not on:
                raise OSError(errno.EINVAL, "Invalid argument")
            if cmd == "commit":
                self.commits += 1
                return
            tried = os.path.join(ctx, "schemes", "0", "tried_regions")
            regions = self.regions if cmd == "update_schemes_tried_regions" else []
            self._children(tried, 0, None)
            for i, r in enumerate(regions):
                for f, v in zip(("start", "end", "nr_accesses", "age"), r):
                    self._put(os.path.join(tried, str(i), f), v)
            self._put(os.path.join(tried, "total_bytes"), sum(e - s for s, e, *_ in regions))
        else:
            raise OSError(errno.EINVAL, "Invalid argument")

    # -- others' kdamonds and the target -------------------------------------------------
    def add_foreign(self, running: bool, configured: bool = True) -> int:
        """Another user's kdamond, written straight into the tree (not through write)."""
        n = int(self.get("nr_kdamonds"))
        self._put(os.path.join(self.kd, "nr_kdamonds"), n + 1)
        d = os.path.join(self.kd, str(n))
        self._kdamond(d)
        if configured:
            self._put(os.path.join(d, "contexts", "nr_contexts"), 1)
            self._context(os.path.join(d, "contexts", "0"))
            self._put(os.path.join(d, "contexts", "0", "operations"), "paddr")
        if running:
            self._put(os.path.join(d, "state"), "on")
            self._put(os.path.join(d, "pid"), 77)
        return n

    def target_exit(self):
        for i in self.running():
            self._put(os.path.join(self.kd, str(i), "state"), "off")

    def snapshot(self, index: int) -> dict[str, str]:
        out = {}
        top = os.path.join(self.kd, str(index))
        for dirpath, _, files in os.walk(top):
            for f in files:
                p = os.path.join(dirpath, f)
                with open(p) as fh:
                    out[os.path.relpath(p, top)] = fh.read()
        return out


@pytest.fixture
def fake(tmp_path):
    return FakeKernel(tmp_path)


def damon(fake, pid=None, **kw):
    return DamonSysfs(os.getpid() if pid is None else pid, root=fake.root,
                      writer=fake.write, **kw)


def dead_pid() -> int:
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


# -- setup ---------------------------------------------------------------------------------
def test_start_writes_the_context(fake):
    d = damon(fake, sample_us=5000, aggr_us=100000, update_us=1000000,
              min_nr_regions=10, max_nr_regions=1000).start()
    assert d.index == 0 and fake.get("nr_kdamonds") == "1"
    c = ("0", "contexts", "0")
    assert fake.get("0", "contexts", "nr_contexts") == "1"
    assert fake.get(*c, "operations") == "vaddr"
    assert fake.get(*c, "monitoring_attrs", "intervals", "sample_us") == "5000"
    assert fake.get(*c, "monitoring_attrs", "intervals", "aggr_us") == "100000"
    assert fake.get(*c, "monitoring_attrs", "intervals", "update_us") == "1000000"
    assert fake.get(*c, "monitoring_attrs", "nr_regions", "min") == "10"
    assert fake.get(*c, "monitoring_attrs", "nr_regions", "max") == "1000"
    assert fake.get(*c, "targets", "nr_targets") == "1"
    assert fake.get(*c, "targets", "0", "pid_target") == str(os.getpid())
    assert fake.get(*c, "schemes", "nr_schemes") == "1"
    s = (*c, "schemes", "0")
    assert fake.get(*s, "action") == "stat"
    for what, hi in (("sz", U64_MAX), ("nr_accesses", U32_MAX), ("age", U32_MAX)):
        assert fake.get(*s, "access_pattern", what, "min") == "0"
        assert fake.get(*s, "access_pattern", what, "max") == str(hi)
    assert fake.get("0", "state") == "on"
    assert fake.log[0] == ("nr_kdamonds", "1")
    assert fake.log[-1] == ("0/state", "on")
    assert d.alive()
    d.stop()


def test_read_regions_in_address_order(fake):
    regs = [(0x7000_0000 + i * 0x10000, 0x7000_0000 + (i + 1) * 0x10000, i % 21, i)
            for i in range(50)]
    fake.regions = [regs[i] for i in np.random.default_rng(1).permutation(50)]
    with damon(fake, sample_us=5000, aggr_us=100000) as d:
        r = d.read_regions()
    assert ("0/state", "update_schemes_tried_regions") in fake.log
    assert len(r) == 50 and r.max_nr_accesses == 20
    want = np.array(regs, dtype=np.int64)
    np.testing.assert_array_equal(r.start, want[:, 0])
    np.testing.assert_array_equal(r.end, want[:, 1])
    np.testing.assert_array_equal(r.nr_accesses, want[:, 2])
    np.testing.assert_array_equal(r.age, want[:, 3])
    assert (r.size == 0x10000).all()


def test_read_regions_empty(fake):
    with damon(fake) as d:
        r = d.read_regions()
    assert len(r) == 0 and r.start.dtype == np.int64


def test_stop_restores_nr_kdamonds_and_is_idempotent(fake):
    d = damon(fake).start()
    d.stop()
    assert fake.get("nr_kdamonds") == "0"
    assert ("0/state", "off") in fake.log
    n = len(fake.log)
    d.stop()
    d.stop()
    assert len(fake.log) == n and not d.alive()
    damon(fake).stop()


def test_context_manager(fake):
    with damon(fake) as d:
        assert d.alive() and fake.running() == [0]
    assert fake.get("nr_kdamonds") == "0" and not d.alive()


def test_start_twice_is_one_kdamond(fake):
    d = damon(fake).start()
    d.start()
    assert fake.get("nr_kdamonds") == "1"
    d.stop()


# -- other users' kdamonds -----------------------------------------------------------------
def test_running_foreign_kdamond_is_left_untouched(fake):
    k = fake.add_foreign(running=True)
    before = fake.snapshot(k)
    with pytest.raises(TierlabError, match=r"kdamond 0 \(pid 77\) running.*EBUSY"):
        damon(fake).start()
    assert fake.log == [] and fake.snapshot(k) == before
    ok, why = damon_available(fake.root)
    assert not ok and "kdamond 0 (pid 77)" in why


def test_idle_empty_slot_is_reused_next_to_a_running_foreign_one(fake):
    k = fake.add_foreign(running=True)
    fake.add_foreign(running=False, configured=False)
    before = fake.snapshot(k)
    assert damon_available(fake.root) == (True, "")
    with damon(fake) as d:
        assert d.index == 1 and fake.running() == [0, 1]
    assert fake.get("nr_kdamonds") == "2"
    assert fake.get("1", "state") == "off" and fake.get("1", "contexts", "nr_contexts") == "0"
    assert fake.snapshot(k) == before
    assert not any(p == "nr_kdamonds" or p.startswith("0/") for p, _ in fake.log)


def test_appended_slot_left_empty_when_others_staged_config_meanwhile(fake):
    fake.add_foreign(running=False, configured=True)
    d = damon(fake).start()
    assert d.index == 1 and fake.get("nr_kdamonds") == "2"
    fake._put(os.path.join(fake.kd, "0", "contexts", "nr_contexts"), 1)
    d.stop()
    assert fake.get("nr_kdamonds") == "2"
    assert fake.get("1", "state") == "off" and fake.get("1", "contexts", "nr_contexts") == "0"
    with damon(fake) as d2:
        assert d2.index == 1
    assert fake.get("nr_kdamonds") == "2"


def test_stop_leaves_a_rebuilt_tree_alone(fake):
    d = damon(fake).start()
    fake.target_exit()
    fake.write(os.path.join(fake.kd, "nr_kdamonds"), "3")
    n = len(fake.log)
    d.stop()
    assert len(fake.log) == n and fake.get("nr_kdamonds") == "3"


# -- the target's exit and errors ---------------------------------------------------------
def test_alive_turns_false_when_the_target_exits(fake):
    d = damon(fake).start()
    fake.target_exit()
    assert not d.alive()
    with pytest.raises(TierlabError, match="kdamond 0 is not running"):
        d.read_regions()
    d.stop()
    assert ("0/state", "off") not in fake.log
    assert fake.get("nr_kdamonds") == "0"


def test_dead_pid(fake):
    with pytest.raises(TierlabError, match=r"^no process \d+ for DAMON to monitor$"):
        damon(fake, pid=dead_pid()).start()
    assert fake.log == []


def test_kernel_rejects_the_pid_on(fake):
    fake.dead.add(os.getpid())
    with pytest.raises(TierlabError, match="rejected kdamond 0's configuration"):
        damon(fake).start()
    assert fake.get("nr_kdamonds") == "0"


def test_not_root(fake):
    fake.deny = True
    with pytest.raises(TierlabError, match="needs root"):
        damon(fake).start()


def test_busy(fake):
    fake.busy_on = True
    with pytest.raises(TierlabError, match=r"busy \(EBUSY\).*'on'"):
        damon(fake).start()
    assert fake.get("nr_kdamonds") == "0"


def test_no_vaddr_in_avail_operations(tmp_path):
    fake = FakeKernel(tmp_path, avail=("paddr",))
    with pytest.raises(TierlabError, match="CONFIG_DAMON_VADDR"):
        damon(fake).start()
    assert fake.get("nr_kdamonds") == "0"
    fake.add_foreign(running=False)
    ok, why = damon_available(fake.root)
    assert not ok and why.startswith("no 'vaddr' in DAMON avail_operations (paddr)")
    assert damon_available(fake.root, ops="paddr") == (True, "")


def test_paddr_needs_no_pid(tmp_path):
    fake = FakeKernel(tmp_path, avail=("paddr",))
    with damon(fake, pid=0, ops="paddr") as d:
        assert d.alive()
    assert not any("pid_target" in p for p, _ in fake.log)


def test_no_damon_sysfs(tmp_path):
    ok, why = damon_available(str(tmp_path))
    assert not ok and "CONFIG_DAMON_SYSFS" in why and "\n" not in why
    with pytest.raises(TierlabError, match="CONFIG_DAMON_SYSFS"):
        DamonSysfs(os.getpid(), root=str(tmp_path)).start()


@pytest.mark.parametrize("kw, msg", [
    (dict(sample_us=200000, aggr_us=100000), "exceeds the aggregation"),
    (dict(min_nr_regions=2), "nr_regions"),
    (dict(min_nr_regions=100, max_nr_regions=50), "nr_regions"),
    (dict(sample_us=0), "positive"),
    (dict(ops="pvaddr"), "unknown DAMON operations 'pvaddr'"),
])
def test_bad_arguments(fake, kw, msg):
    with pytest.raises(TierlabError, match=msg):
        damon(fake, **kw)


def test_update_attrs_commits_online(fake):
    with damon(fake) as d:
        d.update_attrs(sample_us=10000, aggr_us=200000, max_nr_regions=500)
        c = ("0", "contexts", "0", "monitoring_attrs")
        assert fake.get(*c, "intervals", "sample_us") == "10000"
        assert fake.get(*c, "intervals", "aggr_us") == "200000"
        assert fake.get(*c, "nr_regions", "max") == "500"
        assert fake.log[-1] == ("0/state", "commit") and fake.commits == 1
        with pytest.raises(TierlabError, match="exceeds"):
            d.update_attrs(sample_us=300000)
        fake.regions = [(4096, 8192, 3, 1)]
        assert d.read_regions().max_nr_accesses == 20


def test_update_attrs_before_start(fake):
    d = damon(fake)
    d.update_attrs(aggr_us=50000)
    assert fake.log == []
    with d:
        assert fake.get("0", "contexts", "0", "monitoring_attrs", "intervals",
                        "aggr_us") == "50000"


def test_read_10000_regions_fast(fake):
    n = 10_000
    step = 1 << 16
    fake.regions = [(0x5555_0000_0000 + i * step, 0x5555_0000_0000 + (i + 1) * step,
                     i % 20, i % 7) for i in range(n)]
    with damon(fake) as d:
        d.read_regions()
        tried = os.path.join(fake.kd, "0", "contexts", "0", "schemes", "0", "tried_regions")
        t = time.perf_counter()
        r = read_tried_regions(tried, 20)
        dt = time.perf_counter() - t
    print(f"\nread_tried_regions: {n} regions in {dt * 1e3:.0f} ms")
    assert len(r) == n and (np.diff(r.start) == step).all()
    assert dt < 5.0


# -- the real kernel -----------------------------------------------------------------------
REAL_ADMIN = "/" + ADMIN


def test_real_damon_available_reports_one_line():
    if not os.path.isdir(REAL_ADMIN):
        pytest.skip(f"no {REAL_ADMIN} on this host")
    ok, why = damon_available()
    print(f"\ndamon_available(): {ok} {why!r}")
    assert isinstance(ok, bool) and "\n" not in why and (ok or why)


def test_real_refusal_writes_nothing():
    """Where another user's kdamond runs and no slot is free, start() must refuse
    before any write (a writer that fails the test guards the real sysfs)."""
    if not os.path.isdir(REAL_ADMIN) or not os.access(REAL_ADMIN, os.W_OK):
        pytest.skip(f"no writable {REAL_ADMIN} on this host")
    ok, why = damon_available(ops="paddr")
    if ok or "running" not in why:
        pytest.skip("no foreign running kdamond blocking nr_kdamonds here")
    writes = []
    d = DamonSysfs(os.getpid(), ops="paddr", writer=lambda p, t: writes.append((p, t)))
    with pytest.raises(TierlabError, match="running"):
        d.start()
    assert writes == []


HOTCOLD = r"""
import ctypes, mmap
import numpy as np
size = 64 << 20
bufs = [mmap.mmap(-1, size), mmap.mmap(-1, size)]
hot, cold = (np.frombuffer(b, dtype=np.uint8) for b in bufs)
cold[::4096] = 1
hot[::4096] = 1
print(ctypes.addressof(ctypes.c_char.from_buffer(bufs[0])),
      ctypes.addressof(ctypes.c_char.from_buffer(bufs[1])), flush=True)
while True:
    hot[::4096] += 1
"""


def _real_read(path):
    with open(path) as f:
        return f.read().strip()


def _mean_nr_accesses(r, lo, hi):
    s = np.maximum(r.start, lo)
    e = np.minimum(r.end, hi)
    w = np.clip(e - s, 0, None)
    assert w.sum() > 0, "no DAMON region overlaps the buffer"
    return float((r.nr_accesses * w).sum() / w.sum())


def test_real_vaddr_hot_beats_cold():
    ok, why = damon_available(ops="vaddr")
    if not ok:
        pytest.skip(f"real DAMON vaddr unavailable: {why}")
    size = 64 << 20
    proc = subprocess.Popen([sys.executable, "-c", HOTCOLD], stdout=subprocess.PIPE,
                            text=True)
    d = None
    try:
        hot, cold = (int(x) for x in proc.stdout.readline().split())
        d = DamonSysfs(proc.pid, sample_us=5000, aggr_us=100000).start()
        index = d.index
        time.sleep(2.0)
        assert d.alive()
        r = d.read_regions()
        h = _mean_nr_accesses(r, hot, hot + size)
        c = _mean_nr_accesses(r, cold, cold + size)
        print(f"\nreal DAMON: {len(r)} regions; hot {h:.1f}, cold {c:.1f} "
              f"of {r.max_nr_accesses} samples per aggregation")
        assert h > c
        d.stop()
        kd = os.path.join(REAL_ADMIN, "kdamonds")
        n = int(_real_read(os.path.join(kd, "nr_kdamonds")))
        assert index >= n or _real_read(os.path.join(kd, str(index), "state")) == "off"
    finally:
        if d is not None:
            d.stop()
        proc.kill()
        proc.wait()
