"""IDT's region monitor on the Linux backend through idle page tracking
(linux/idle_sampler.py), on a fake kernel with page frames and an idle bitmap, and
RealKernel's pagemap/bitmap methods (the bitmap as a file; THP heads on this host)."""
from __future__ import annotations

import mmap
import os

import numpy as np
import pytest

from tierlab import api
from tierlab.errors import TierlabError
from tierlab.linux import procfs
from tierlab.linux.backend import LinuxSim
from tierlab.linux.daemon import Daemon
from tierlab.linux.idle_sampler import IdleSampler
from tierlab.linux.kernel import RealKernel
from tierlab.monitors import MONITORS
from tierlab.units import PAGE

from .test_backend import Clock, FakeProcess, machine2


class IdleProcess(FakeProcess):
    """FakeProcess with page frames (shuffled; a new one when a page moves) and an idle
    bitmap; `touch()` is the workload between two samples: every hot page is accessed
    (its idle bit cleared), no cold page is."""

    idle_page_tracking = True

    def __init__(self, clock, **kw):
        super().__init__(clock, **kw)
        self.vpn = np.array(sorted(self.page_node), dtype=np.int64)
        self.pfn = (np.random.default_rng(7).permutation(self.vpn.size) + 0x1000).astype(
            np.uint64)
        self.next_pfn = int(self.pfn.max()) + 1
        self.bits = np.zeros(1 << 20, dtype=bool)
        self.hot_mask = (self.vpn >= self.hot[0] // PAGE) & (self.vpn < self.hot[1] // PAGE)
        self.sets = self.reads = self.pfn_reads = 0

    def pfns(self, va):
        self.pfn_reads += 1
        v = np.asarray(va, dtype=np.int64) // PAGE
        k = np.minimum(np.searchsorted(self.vpn, v), self.vpn.size - 1)
        return np.where(self.vpn[k] == v, self.pfn[k], np.uint64(0))

    def set_idle(self, pfns):
        self.sets += 1
        self.bits[np.asarray(pfns, dtype=np.int64)] = True

    def idle(self, pfns):
        self.reads += 1
        return self.bits[np.asarray(pfns, dtype=np.int64)].copy()

    def touch(self):
        self.bits[self.pfn[self.hot_mask].astype(np.int64)] = False

    def move(self, va, node):
        st = super().move(va, node)
        k = np.searchsorted(self.vpn, np.asarray(va, dtype=np.int64)[st == node] // PAGE)
        self.pfn[k] = np.arange(self.next_pfn, self.next_pfn + k.size, dtype=np.uint64)
        self.next_pfn += k.size
        return st


def monitored(min_nr=10, max_nr=100, policy="static", **mon_kw):
    """A LinuxSim on an IdleProcess (pages 0-1499 cold, 1500-1699 hot in the index
    space) with an idt-regions monitor attached; returns sim, proc, clock, mon, sampler."""
    clock = Clock()
    proc = IdleProcess(clock)
    sim = LinuxSim(machine2(), proc.ids, proc, api.make_policy(policy), clock=clock)
    mon = MONITORS.create("idt-regions", min_nr_regions=min_nr, max_nr_regions=max_nr,
                          **mon_kw)
    mon.attach(sim)
    sampler = sim._timers[-1][3].__self__
    return sim, proc, clock, mon, sampler


def advance(sim, proc, clock, seconds, step=0.01, until=None):
    for _ in range(round(seconds / step)):
        clock.sleep(step)
        proc.touch()
        sim.run_due()
        if until is not None and until():
            return


def test_attach_uses_the_idle_bitmap_not_damon():
    sim, proc, _, mon, sampler = monitored()
    assert isinstance(sampler, IdleSampler) and proc.damons == []
    assert sim.monitors["idt-regions"] is mon and mon.nr_regions == 10
    assert proc.sets == 1 and proc.pfn_reads == 1  # first pages set idle at attach


def test_hot_regions_reach_max_and_cold_regions_zero():
    sim, proc, clock, mon, sampler = monitored()
    advance(sim, proc, clock, 6.0)
    r = mon.regions
    hot = r.start >= 1500
    cold = r.end <= 1500
    assert hot.any() and cold.any()
    assert r.nr_accesses[hot].min() >= 0.9 * mon.max_nr_accesses
    assert r.nr_accesses[cold].max() == 0
    assert mon.nr_aggregations == 6
    # per sample interval: one read and one write of the bitmap, pagemap per aggregation
    assert proc.sets == proc.reads + 1 == 601
    assert proc.pfn_reads == 1 + 6
    assert sim.stats.monitor_cpu_seconds > 0 and mon.checks > 0


def test_regions_straddling_hot_and_cold_are_split_at_the_sampling_interval():
    """Only the region holding the hot/cold boundary has disagreeing samples; it is cut
    at each interval they disagree (IDT: "split region when the access status of the
    sampling pages differs at sample_interval"), here between its two sampled pages
    (`split_at=between`), so the boundary is found within the first aggregation, and
    the merge rejoins the pieces on either side of it once the histories they kept
    from before the cut are gone (64 bits here: 1,024 would take 10 s)."""
    sim, proc, clock, mon, _ = monitored(split_at="between", history_bits=64)
    start = mon._s.copy()
    assert any(s < 1500 < e for s, e in zip(mon._s, mon._e))
    advance(sim, proc, clock, 2.0, until=lambda: mon.nr_aggregations == 1)
    assert mon.splits >= 1
    for k in range(2, 5):
        advance(sim, proc, clock, 2.0, until=lambda k=k: mon.nr_aggregations == k)
        for s_, e_ in ((mon.regions.start, mon.regions.end), (mon._s, mon._e)):
            assert not any(s < 1500 < e for s, e in zip(s_, e_))
            assert 1500 in set(s_.tolist())
    assert len(mon.regions) <= len(start) + 1


def test_coarser_sampling_keeps_nr_accesses_in_sample_interval_units():
    """At 50 ms ticks only 20 samples fit in an aggregation; nr_accesses is scaled to
    the monitor's 10 ms interval (max 100)."""
    sim, proc, clock, mon, _ = monitored()
    sampler = IdleSampler(sim, mon, min_sample_s=0.05)
    assert sampler.period == pytest.approx(0.05)
    sim._timers.clear()
    sampler.start()
    advance(sim, proc, clock, 3.0)
    r = mon.regions
    assert r.nr_accesses[r.start >= 1500].min() == mon.max_nr_accesses == 100
    assert r.nr_accesses[r.end <= 1500].max() == 0
    assert proc.reads == 60
    with pytest.raises(TierlabError, match="min_sample_s"):
        IdleSampler(sim, mon, min_sample_s=0)


def test_pfns_are_read_again_after_a_migration():
    """Pages moved between aggregations get new frames: the sampler re-reads pagemap
    before its next draw, and the moved hot pages still read as accessed."""
    sim, proc, clock, mon, sampler = monitored()
    advance(sim, proc, clock, 1.5)
    reads = proc.pfn_reads
    hot = np.arange(1500, 1700)
    assert sim.migrate(hot, 0) == 200
    advance(sim, proc, clock, 0.01)
    assert proc.pfn_reads == reads + 1
    assert np.array_equal(sampler._pfn[hot], proc.pfn[proc.hot_mask])
    advance(sim, proc, clock, 2.5)
    r = mon.regions
    assert r.nr_accesses[r.start >= 1500].min() >= 90


def test_no_page_frame_numbers_is_a_clear_error():
    clock = Clock()
    proc = IdleProcess(clock)
    proc.pfns = lambda va: np.zeros(len(va), dtype=np.uint64)  # pagemap without root
    sim = LinuxSim(machine2(), proc.ids, proc, api.make_policy("static"), clock=clock)
    with pytest.raises(TierlabError, match="CAP_SYS_ADMIN"):
        MONITORS.create("idt-regions").attach(sim)


def test_idt_runs_on_idle_page_tracking_and_promotes_the_hot_range():
    clock = Clock()
    proc = IdleProcess(clock)
    sim = LinuxSim(machine2(), proc.ids, proc, api.make_policy("idt"), clock=clock)
    lines = []

    def sleep(dt):
        clock.sleep(dt)
        proc.touch()

    rec = Daemon(sim, "idt", interval=1.0, duration=20.0, echo=lines.append,
                 sleep=sleep).run()
    hot = [p for p in proc.page_node if proc.hot[0] // PAGE <= p < proc.hot[1] // PAGE]
    assert sum(proc.page_node[p] == 0 for p in hot) >= 0.9 * len(hot), lines
    assert rec["promotions"] >= 0.9 * len(hot)
    assert any("promoted: 2->0" in ln for ln in lines)
    assert not any("DAMON" in n for n in sim.notes) and proc.damons == []
    assert type(sim.policy.monitor).__name__ == "IdtRegions"
    assert proc.reads >= 1900 and rec["monitor_cpu_seconds"] > 0
    assert len(proc.page_node) == 1700
    r = sim.policy.monitor.regions
    assert r.nr_accesses[r.start >= 1500].min() >= 90  # still hot on the new frames


def test_without_idle_page_tracking_idt_says_it_uses_damon():
    clock = Clock()
    proc = IdleProcess(clock)
    proc.idle_page_tracking = False
    sim = LinuxSim(machine2(), proc.ids, proc, api.make_policy("idt"), clock=clock)
    Daemon(sim, "idt", duration=2.0, echo=lambda m: None, sleep=clock.sleep).run()
    assert any("kernel's DAMON" in n and "page_idle" in n for n in sim.notes)
    assert proc.damons and proc.sets == 0


def test_without_idle_page_tracking_tierlab_reads_one_page_a_sample():
    """tierlab's IDT monitor fed by the kernel's DAMON: the run says so, and its rate
    estimates count the one page a region the kernel checks each sample, not IDT's
    two."""
    clock = Clock()
    proc = IdleProcess(clock)
    proc.idle_page_tracking = False
    sim = LinuxSim(machine2(), proc.ids, proc, api.make_policy("tierlab"), clock=clock)
    assert sim.policy.monitor.pages_per_sample == 2
    Daemon(sim, "tierlab", duration=2.0, echo=lambda m: None, sleep=clock.sleep).run()
    assert any("kernel's DAMON" in n and "page_idle" in n for n in sim.notes)
    assert proc.damons and sim.policy.monitor.pages_per_sample == 1


# -- RealKernel ------------------------------------------------------------------------
def test_real_kernel_idle_bits_through_the_bitmap_file(tmp_path):
    bm = tmp_path / procfs.IDLE_BITMAP
    bm.parent.mkdir(parents=True)
    bm.write_bytes(bytes(8 * 1024))  # 65536 PFNs
    k = RealKernel(os.getpid(), None, root=tmp_path)
    assert k.idle_page_tracking
    pf = np.array([5, 63, 64, 640, 641, 9000, 65000], dtype=np.uint64)
    k.set_idle(pf)
    probe = np.concatenate((pf, [6, 65, 9001, 70000])).astype(np.uint64)  # 70000: past end
    assert k.idle(probe).tolist() == [True] * 7 + [False] * 4
    assert k.idle(np.zeros(0, dtype=np.uint64)).size == 0
    with pytest.raises(TierlabError, match="not available"):
        RealKernel(os.getpid(), None, root=tmp_path / "none").idle(pf)


def test_real_kernel_pfns_map_thp_subpages_to_the_head(tmp_path, monkeypatch):
    """Pages whose frames have their address's offset in 2 MiB and whose would-be head
    is a THP head (kpageflags) map to the head; others keep their own frame."""
    base = 0x4000_0000 // PAGE  # a 2 MiB aligned page number
    thp_head, other = 0x20000, 0x30000
    frames = {base + i: thp_head + i for i in range(512)}  # a THP
    frames.update({base + 512 + i: other + i for i in range(512)})  # contiguous 4K pages
    frames[base + 1030] = 0x50007  # a lone page with a mismatched offset

    def read_pagemap(pid, start, end):
        pages = range(start // PAGE, end // PAGE)
        return np.array([(frames[p] | (1 << 63)) if p in frames else 0 for p in pages],
                        dtype=np.uint64)

    monkeypatch.setattr(procfs, "read_pagemap", read_pagemap)
    flags = np.zeros(0x60000, dtype=np.uint64)
    flags[thp_head] = (1 << 15) | (1 << 22)
    flags[thp_head + 1:thp_head + 512] = (1 << 16) | (1 << 22)
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/kpageflags").write_bytes(flags.tobytes())
    k = RealKernel(os.getpid(), None, root=tmp_path)
    pages = np.array([base, base + 7, base + 511, base + 512, base + 600, base + 1030,
                      base + 1031], dtype=np.int64)
    got = k.pfns((pages * PAGE).astype(np.uint64)).tolist()
    assert got == [thp_head, thp_head, thp_head, other, other + 88, 0x50007, 0]


def _own_pages(advice):
    n = 8 << 20
    m = mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(advice)
    buf = np.frombuffer(m, dtype=np.uint8)
    buf[::PAGE] = 1
    base = buf.ctypes.data
    return m, buf, (base + np.arange(n // PAGE) * PAGE).astype(np.uint64)


def test_real_kernel_pfns_on_this_process():
    """This host's pagemap and kpageflags (no idle bitmap here): a MADV_NOHUGEPAGE
    mapping keeps one frame per page; THP-backed 2 MiB blocks map to their head. The
    host may migrate a page between two pagemap entries' reads (this VM runs kdamond
    and compaction), so that a freed frame shows twice: up to five reads."""
    k = RealKernel(os.getpid(), None)
    m, buf, va = _own_pages(mmap.MADV_NOHUGEPAGE)
    pf = k.pfns(va)
    if not pf.any() or not os.access("/proc/kpageflags", os.R_OK):
        pytest.skip("pagemap frames or kpageflags need root")
    for _ in range(4):
        if np.unique(pf).size == va.size and pf.all():
            break
        pf = k.pfns(va)
    assert np.unique(pf).size == va.size and pf.all()
    m2, buf2, va2 = _own_pages(mmap.MADV_HUGEPAGE)
    pf2 = k.pfns(va2)
    raw = procfs.pagemap_pfns(procfs.read_pagemap(os.getpid(), int(va2[0]),
                                                  int(va2[-1]) + PAGE))
    thp = 0
    vpn = (va2 // np.uint64(PAGE)).astype(np.int64)
    for b in np.unique(vpn // 512):
        sel = vpn // 512 == b
        if sel.sum() == 512 and np.unique(pf2[sel]).size == 1:
            head = pf2[sel][0]
            assert head % 512 == 0 and np.array_equal(raw[sel], head + np.arange(512))
            thp += 1
        else:
            assert np.array_equal(pf2[sel], raw[sel])
    if thp == 0:
        pytest.skip("no transparent huge page obtained")
    del buf, buf2
