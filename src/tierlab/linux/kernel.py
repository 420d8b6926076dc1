"""`KernelOps` on the running kernel: /proc, move_pages(2), node meminfo, DAMON sysfs."""
from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np

from . import procfs, syscalls, topology
from .backend import KernelOps
from .damon_sysfs import DamonSysfs, damon_available
from ..errors import TierlabError
from ..units import PAGE

#: pages per move_pages(2) query call when reading placement
QUERY_BATCH = 1 << 16


class RealKernel(KernelOps):
    """One target process on this machine.

    `bw_limit`: migration bandwidth cap in bytes/s (token bucket in
    `syscalls.move_pages_batched`), None for none. Once the target has exited (found
    when a call fails), it has no mappings and no pages: the run ends normally.
    """

    def __init__(self, pid: int, topo: topology.Topology, bw_limit: float | None = None,
                 batch: int = 512, root: str = "/"):
        self.pid, self.topo, self.bw_limit, self.batch, self.root = (
            int(pid), topo, bw_limit, int(batch), root)
        self.idle_page_tracking = procfs.idle_page_tracking_available(root)

    def vmas(self):
        try:
            maps = procfs.read_maps(self.pid)
        except procfs.TargetExited:
            return []
        return [(v.start, v.end) for v in procfs.anon_writable(maps)]

    def query(self, va: np.ndarray) -> np.ndarray:
        out = np.empty(len(va), dtype=np.int32)
        try:
            for s in range(0, len(va), QUERY_BATCH):
                out[s:s + QUERY_BATCH] = syscalls.move_pages(self.pid, va[s:s + QUERY_BATCH],
                                                             None)
        except procfs.TargetExited:
            out[:] = -errno.ENOENT
        return out

    def move(self, va: np.ndarray, node: int) -> np.ndarray:
        try:
            return syscalls.move_pages_batched(self.pid, va, node, batch=self.batch,
                                               bw_limit_bytes_s=self.bw_limit).status
        except procfs.TargetExited as e:
            # the batches moved before the target exited did move: their statuses stand
            got = getattr(e, "status", None)
            return got if got is not None else np.full(len(va), -errno.ENOENT, np.int32)

    def free_pages(self) -> dict[int, int]:
        return {n: b // PAGE for n, b in topology.refresh_free(self.topo, self.root).items()}

    def alive(self) -> bool:
        return procfs.pid_alive(self.pid)

    def watermarks(self):
        z = procfs.read_zoneinfo(self.root)
        return {n: (z[n]["min"], z[n]["low"], z[n]["high"]) for n in self.topo.node_ids
                if n in z}

    def damon(self, **attrs):
        ok, why = damon_available(self.root)
        if not ok:
            raise TierlabError(f"this policy needs DAMON: {why}")
        return DamonSysfs(self.pid, root=self.root, **attrs)

    # -- idle page tracking (Documentation/admin-guide/mm/idle_page_tracking.rst) ----
    #: pages between two wanted ones below which one pagemap read covers the gap
    PAGEMAP_GAP_PAGES = 512
    #: /proc/kpageflags bits (Documentation/admin-guide/mm/pagemap.rst)
    KPF_COMPOUND_HEAD = 15
    KPF_THP = 22

    def pfns(self, va: np.ndarray) -> np.ndarray:
        """The PFN whose idle bit stands for the page at each address, 0 where not
        present: the page's own, or for a PMD-mapped transparent huge page its head's
        (the kernel keeps the idle flag on the head only; a tail always reads "not
        idle"). /proc/PID/pagemap with one pread per run of close pages; a page whose
        PFN has its address's offset in 2 MiB is checked in /proc/kpageflags at the
        would-be head (KPF_THP and KPF_COMPOUND_HEAD). Smaller multi-size THPs are
        not recognised (their tails would read as accessed)."""
        va = np.asarray(va, dtype=np.uint64).reshape(-1)
        out = np.zeros(va.size, dtype=np.uint64)
        if va.size == 0:
            return out
        vpn = (va // np.uint64(PAGE)).astype(np.int64)
        order = np.argsort(vpn, kind="stable")
        sv = vpn[order]
        cut = np.flatnonzero(np.diff(sv) > self.PAGEMAP_GAP_PAGES) + 1
        for a, b in zip([0, *cut.tolist()], [*cut.tolist(), sv.size]):
            lo = int(sv[a])
            raw = procfs.read_pagemap(self.pid, lo * PAGE, (int(sv[b - 1]) + 1) * PAGE)
            out[order[a:b]] = procfs.pagemap_pfns(raw)[sv[a:b] - lo]
        off = (vpn & 511).astype(np.uint64)
        cand = (out != 0) & ((out & np.uint64(511)) == off)
        if not cand.any():
            return out
        head = out - off
        heads = np.unique(head[cand])
        flags = self._kpageflags(heads)
        want = np.uint64((1 << self.KPF_COMPOUND_HEAD) | (1 << self.KPF_THP))
        thp = (flags & want) == want
        cand[cand] = thp[np.searchsorted(heads, head[cand])]
        return np.where(cand, head, out)

    def _kpageflags(self, pfns: np.ndarray) -> np.ndarray:
        """/proc/kpageflags of each PFN (one pread each: THP heads are 512 apart)."""
        path = Path(self.root, "proc/kpageflags")
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as e:
            raise TierlabError(f"cannot read {path}: {e.strerror} (root needed)") from None
        try:
            got = b"".join(os.pread(fd, 8, int(p) * 8).ljust(8, b"\0")
                           for p in pfns.tolist())
        except OSError as e:
            raise TierlabError(f"cannot read {path}: {e.strerror}") from None
        finally:
            os.close(fd)
        return np.frombuffer(got, dtype=np.uint64)

    def set_idle(self, pfns: np.ndarray) -> None:
        """Mark the pages idle: procfs.set_idle, one pwrite per group of close words
        (the kernel skips zero bits: page_idle_bitmap_write)."""
        procfs.set_idle(pfns, Path(self.root, procfs.IDLE_BITMAP))

    def idle(self, pfns: np.ndarray) -> np.ndarray:
        """Bool per PFN: still idle since `set_idle` (bit set), i.e. not accessed;
        only the bitmap words holding the PFNs are read (procfs.read_idle)."""
        return procfs.read_idle(pfns, Path(self.root, procfs.IDLE_BITMAP), gap_words=1)
