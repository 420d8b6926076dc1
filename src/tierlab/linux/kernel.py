"""`KernelOps` on the running kernel: /proc, move_pages(2), node meminfo, DAMON sysfs."""
from __future__ import annotations

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
    `syscalls.move_pages_batched`), None for none.
    """

    def __init__(self, pid: int, topo: topology.Topology, bw_limit: float | None = None,
                 batch: int = 512, root: str = "/"):
        self.pid, self.topo, self.bw_limit, self.batch, self.root = (
            int(pid), topo, bw_limit, int(batch), root)
        self.idle_page_tracking = procfs.idle_page_tracking_available(root)

    def vmas(self):
        return [(v.start, v.end) for v in procfs.anon_writable(procfs.read_maps(self.pid))]

    def query(self, va: np.ndarray) -> np.ndarray:
        out = np.empty(len(va), dtype=np.int32)
        for s in range(0, len(va), QUERY_BATCH):
            out[s:s + QUERY_BATCH] = syscalls.move_pages(self.pid, va[s:s + QUERY_BATCH], None)
        return out

    def move(self, va: np.ndarray, node: int) -> np.ndarray:
        return syscalls.move_pages_batched(self.pid, va, node, batch=self.batch,
                                           bw_limit_bytes_s=self.bw_limit).status

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
