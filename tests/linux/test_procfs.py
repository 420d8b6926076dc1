"""/proc readers on this process, vmstat from a fixture and the host, idle page
bitmap word grouping on a plain file."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from tierlab.errors import TierlabError
from tierlab.linux import procfs as pf

FIX = Path(__file__).parent / "fixtures"
P = pf.PAGE_SIZE
NO_PID = int(Path("/proc/sys/kernel/pid_max").read_text()) + 1


@pytest.fixture
def base(buf):
    """The address of the shared 64-page buffer (tests/linux/conftest.py)."""
    return buf[0].ctypes.data


def test_maps_of_self(base):
    vmas = pf.read_maps(os.getpid())
    mine = [v for v in vmas if v.start <= base < v.end]
    assert len(mine) == 1 and mine[0].perms == "rw-p" and mine[0].path == ""
    anon = pf.anon_writable(vmas)
    assert mine[0] in anon
    assert not any(v.path.startswith(("[stack", "[vvar", "[vdso", "[vsyscall", "/"))
                   for v in anon)
    assert all(v.perms.startswith("rw") and v.perms[3] == "p" for v in anon)


def test_parse_maps_and_filter():
    text = ("00400000-00452000 r-xp 00000000 08:02 173521 /usr/bin/dbus-daemon\n"
            "00e03000-00e24000 rw-p 00000000 00:00 0 [heap]\n"
            "7f0000000000-7f0000100000 rw-p 00000000 00:00 0\n"
            "7f0000100000-7f0000200000 rw-p 00000000 00:00 0 [anon:jemalloc]\n"
            "7f0000200000-7f0000300000 rw-s 00000000 00:01 99 /dev/zero (deleted)\n"
            "7f0000300000-7f0000400000 rw-p 00001000 08:02 1234 /lib/x y.so\n"
            "7ffc00000000-7ffc00021000 rw-p 00000000 00:00 0 [stack]\n"
            "7ffc00100000-7ffc00104000 r--p 00000000 00:00 0 [vvar]\n"
            "ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0 [vsyscall]\n")
    vmas = pf.parse_maps(text)
    assert vmas[5].path == "/lib/x y.so" and vmas[5].offset == 0x1000
    assert vmas[2].pages == 0x100000 // P
    assert [v.path for v in pf.anon_writable(vmas)] == ["[heap]", "", "[anon:jemalloc]"]


def test_numa_maps_of_self(base):
    nm = pf.read_numa_maps("self")
    e = nm[base]
    assert e.policy == "default" and e.anon == 32 and e.dirty == 32
    assert e.nodes == {0: 32} and e.pages == 32 and e.kernelpagesize_kB == P // 1024


def test_parse_numa_maps():
    text = ("00400000 default file=/usr/bin/my\\040cat mapped=8 N0=8 kernelpagesize_kB=4\n"
            "01c1e000 default heap anon=37 dirty=37 active=0 N0=30 N1=7 kernelpagesize_kB=4\n"
            "7f10 prefer (many):0-1 anon=3 dirty=3 N1=3 kernelpagesize_kB=4\n"
            "7f20 bind=static:1 anon=512 dirty=512 N1=512 kernelpagesize_kB=2048\n"
            "7f30 weighted interleave:0-1 anon=2 dirty=2 N0=1 N1=1 kernelpagesize_kB=4\n"
            "7f40 interleave:0-1\n")
    nm = pf.parse_numa_maps(text)
    assert nm[0x400000].path == "/usr/bin/my cat" and nm[0x400000].other == {"mapped": 8}
    heap = nm[0x1c1e000]
    assert heap.nodes == {0: 30, 1: 7} and heap.anon == 37 and heap.other["heap"] == 1
    assert nm[0x7f10].policy == "prefer (many):0-1" and nm[0x7f10].nodes == {1: 3}
    assert nm[0x7f20].policy == "bind=static:1" and nm[0x7f20].kernelpagesize_kB == 2048
    assert nm[0x7f30].policy == "weighted interleave:0-1" and nm[0x7f30].pages == 2
    assert nm[0x7f40].policy == "interleave:0-1" and nm[0x7f40].nodes == {}


def test_vmstat():
    d = pf.read_vmstat(FIX / "qemu2")
    assert d["nr_free_pages"] == 220053
    c = pf.migration_counters(d)
    assert c == {"pgpromote_success": 1536, "pgdemote_kswapd": 40960, "pgdemote_direct": 512,
                 "pgdemote_khugepaged": 0, "pgmigrate_success": 43008, "pgmigrate_fail": 17,
                 "numa_pages_migrated": 1536, "numa_hint_faults": 30000}
    assert pf.parse_vmstat("nr_foo 3\nbad line\nnr_neg -2\n\n") == {"nr_foo": 3, "nr_neg": -2}
    host = pf.read_vmstat()
    assert host["nr_free_pages"] > 0
    assert set(pf.migration_counters(host)) == set(pf.MIGRATION_COUNTERS)
    assert pf.migration_counters({}) == dict.fromkeys(pf.MIGRATION_COUNTERS, 0)
    with pytest.raises(TierlabError, match="cannot read"):
        pf.read_vmstat(FIX / "single")


def test_pagemap_of_self(base):
    present = pf.pagemap_present(os.getpid(), base, base + 64 * P)
    assert present.dtype == np.bool_ and len(present) == 64
    assert present[::2].all() and not present[1::2].any()
    raw = pf.read_pagemap("self", base + 1, base + 3 * P - 1)  # widened to pages 0..2
    assert raw.dtype == np.uint64 and len(raw) == 3
    pfns = pf.pagemap_pfns(raw)
    assert pfns[1] == 0 and (raw[1] & pf.PM_SWAP) == 0
    if os.geteuid() == 0:
        assert pfns[0] > 0 and pfns[2] > 0 and pfns[0] != pfns[2]


def test_idle_page_tracking(tmp_path):
    assert isinstance(pf.idle_page_tracking_available(), bool)
    assert pf.idle_page_tracking_available(tmp_path) is False
    bm = tmp_path / "bitmap"
    bm.write_bytes(bytes(8 * 4096))
    pfns = np.array([5, 0, 63, 64, 130, 64 * 700 + 3, 64 * 4000, 5], dtype=np.uint64)
    pf.set_idle(pfns, bm)
    words = np.frombuffer(bm.read_bytes(), dtype=np.uint64)
    assert words[0] == (1 << 0) | (1 << 5) | (1 << 63) and words[1] == 1 and words[2] == 4
    assert words[700] == 8 and words[4000] == 1 and np.count_nonzero(words) == 5
    probe = np.concatenate([pfns, np.array([1, 65, 64 * 700 + 4, 64 * 9000], dtype=np.uint64)])
    assert pf.read_idle(probe, bm).tolist() == [True] * 8 + [False] * 4
    assert len(pf.read_idle([], bm)) == 0
    with pytest.raises(TierlabError, match="idle page tracking is not available"):
        pf.read_idle([1], tmp_path / "missing")


def test_pid_alive_and_name():
    assert pf.pid_alive(os.getpid()) and pf.process_name(os.getpid()).startswith("python")
    assert not pf.pid_alive(NO_PID)
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.monotonic() + 30
    while pf.pid_alive(child.pid) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert Path(f"/proc/{child.pid}").exists()  # a zombie until waited for
    assert not pf.pid_alive(child.pid)
    child.wait()


def test_unknown_pid():
    for call in (lambda: pf.read_maps(NO_PID), lambda: pf.read_numa_maps(NO_PID),
                 lambda: pf.read_pagemap(NO_PID, 0, P), lambda: pf.process_name(NO_PID)):
        with pytest.raises(TierlabError, match=f"^no process {NO_PID}$"):
            call()


ZONEINFO = """Node 0, zone      DMA
  per-node stats
      nr_inactive_anon 8
  pages free     3776
        boost    0
        min      186
        low      232
        high     278
        spanned  4095
        present  3998
        managed  3840
        cma      0
        protection: (0, 443, 443, 443, 443)
  pagesets
    cpu: 0
              count: 0
              high:  0
Node 0, zone    DMA32
  pages free     77078
        min      5519
        low      6898
        high     8277
        managed  115336
    cpu: 0
              high:  6237
Node 0, zone  Movable
  pages free     0
        min      32
        low      32
        high     32
        managed  0
Node 1, zone    DMA32
  pages free     250234
        min      11189
        low      13986
        high     16783
        managed  257995
"""


def test_zoneinfo_sums_managed_zones_per_node():
    from tierlab.linux.procfs import parse_zoneinfo
    z = parse_zoneinfo(ZONEINFO)
    # per-cpu "high:" lines and the empty Movable zone's watermarks are not counted
    assert z[0] == dict(free=3776 + 77078, min=186 + 5519, low=232 + 6898,
                        high=278 + 8277, managed=3840 + 115336)
    assert z[1]["min"] == 11189 and z[1]["free"] == 250234
