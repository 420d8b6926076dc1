"""NUMA system calls through libc's syscall(2): move_pages(2), set_mempolicy(2),
mbind(2) and get_mempolicy(2) (numbers from arch/x86/entry/syscalls/syscall_64.tbl and
include/uapi/asm-generic/unistd.h; constants from include/uapi/linux/mempolicy.h).

Page arrays are numpy buffers handed to the kernel as they are: no per-page Python.
"""
from __future__ import annotations

import ctypes
import errno
import os
import platform
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from ..errors import TierlabError
from .procfs import TargetExited, pid_alive
from .topology import Topology, format_list, node_kind, parse_list

_NR = {"x86_64": {"move_pages": 279, "set_mempolicy": 238, "mbind": 237, "get_mempolicy": 239},
       "aarch64": {"move_pages": 239, "set_mempolicy": 237, "mbind": 235, "get_mempolicy": 236}}

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

# memory policy modes
MPOL_DEFAULT = 0
MPOL_PREFERRED = 1
MPOL_BIND = 2
MPOL_INTERLEAVE = 3
MPOL_LOCAL = 4
MPOL_PREFERRED_MANY = 5
MPOL_WEIGHTED_INTERLEAVE = 6
# mode flags, OR'd into the mode
MPOL_F_STATIC_NODES = 1 << 15
MPOL_F_RELATIVE_NODES = 1 << 14
MPOL_F_NUMA_BALANCING = 1 << 13
MPOL_MODE_FLAGS = MPOL_F_STATIC_NODES | MPOL_F_RELATIVE_NODES | MPOL_F_NUMA_BALANCING
# get_mempolicy flags
MPOL_F_NODE = 1 << 0
MPOL_F_ADDR = 1 << 1
MPOL_F_MEMS_ALLOWED = 1 << 2
# mbind / move_pages flags
MPOL_MF_STRICT = 1 << 0
MPOL_MF_MOVE = 1 << 1
MPOL_MF_MOVE_ALL = 1 << 2

MODE_NAMES = {MPOL_DEFAULT: "default", MPOL_PREFERRED: "preferred", MPOL_BIND: "bind",
              MPOL_INTERLEAVE: "interleave", MPOL_LOCAL: "local",
              MPOL_PREFERRED_MANY: "preferred-many",
              MPOL_WEIGHTED_INTERLEAVE: "weighted-interleave"}

#: node mask size for get_mempolicy(2): enough for any MAX_NUMNODES (NODES_SHIFT <= 10
#: on x86_64 and arm64)
_GET_BITS = 4096
#: status of a page the kernel left unreported (see `move_pages`)
_UNSET = np.iinfo(np.int32).min

_libc = None


def _syscall(name: str, *args) -> tuple[int, int]:
    """(return value, errno) of syscall(2) `name`."""
    global _libc
    arch = platform.machine()
    if arch not in _NR:
        raise TierlabError(f"unsupported architecture {arch!r}: NUMA system call numbers "
                           f"are known for {', '.join(_NR)}")
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
    ctypes.set_errno(0)
    ret = _libc.syscall(ctypes.c_long(_NR[arch][name]), *args)
    return ret, (ctypes.get_errno() if ret < 0 else 0)


def _ptr(a: np.ndarray | None) -> ctypes.c_void_p:
    return ctypes.c_void_p(None if a is None else a.ctypes.data)


def _memory_nodes() -> list[int] | None:
    try:
        return parse_list(Path("/sys/devices/system/node/has_memory").read_text())
    except OSError:
        return None


def move_pages(pid: int, addrs, nodes=None, flags: int = MPOL_MF_MOVE) -> np.ndarray:
    """move_pages(2): move the pages at `addrs` of process `pid` to `nodes` (one node
    per page, or one for all), or with nodes=None report the node each page is on.

    Returns the int32 status per page: its node, or -errno (-ENOENT not present,
    -EFAULT zero page or unmapped, -EBUSY, -ENOMEM, -EACCES shared page without
    MPOL_MF_MOVE_ALL). When migration fails for some pages the kernel returns their
    number and leaves the statuses of that batch unwritten (mm/migrate.c,
    do_pages_move); those pages are queried again and get their node if they reached
    the target, else -EBUSY. Whole-call failures raise TierlabError.
    """
    addrs = np.ascontiguousarray(addrs, dtype=np.uint64)
    n = len(addrs)
    status = np.full(n, _UNSET, dtype=np.int32)
    if n == 0:
        return status
    if nodes is not None:
        try:
            nodes = np.ascontiguousarray(np.broadcast_to(np.asarray(nodes, dtype=np.int32), (n,)))
        except ValueError:
            raise TierlabError(f"move_pages: {np.size(nodes)} target nodes for {n} pages") from None
    ret, err = _syscall("move_pages", ctypes.c_long(pid), ctypes.c_ulong(n), _ptr(addrs),
                        _ptr(nodes), _ptr(status), ctypes.c_long(flags))
    if ret < 0 and nodes is not None and err in (errno.ENOMEM, errno.EBUSY, errno.EAGAIN):
        # the target node ran out of memory (or pages were busy) part-way: a refusal of
        # the pages not moved, not a failure of the call; where they are is asked below
        status[:] = _UNSET
        ret, fail_code = 0, -err
    else:
        fail_code = -errno.EBUSY
    if ret < 0:
        raise _move_error(pid, err, nodes, flags)
    unset = status == _UNSET
    if unset.any():
        where = move_pages(pid, addrs[unset], None)
        want = nodes[unset] if nodes is not None else where
        status[unset] = np.where((where == want) | (where < 0), where, fail_code)
    return status


def _move_error(pid: int, err: int, nodes, flags: int) -> TierlabError:
    if err == errno.ESRCH:
        return TargetExited(f"no process {pid}")
    if err == errno.EINVAL and not pid_alive(pid):
        return TargetExited(f"process {pid} exited during move_pages")
    if err == errno.EPERM:
        return TierlabError(f"not permitted to move pages of {pid}: run as root")
    asked = [] if nodes is None else np.unique(nodes).tolist()
    mem = _memory_nodes()
    if err == errno.ENODEV:
        bad = [x for x in asked if mem is None or x not in mem] or asked
        known = f" (memory nodes: {format_list(mem)})" if mem is not None else ""
        return TierlabError(f"bad node {','.join(map(str, bad))}: not an online memory "
                            f"node{known}")
    if err == errno.EACCES:
        return TierlabError(f"node(s) {format_list(asked)} not allowed by the cpuset of "
                            f"process {pid}")
    if err == errno.EINVAL:
        return TierlabError(f"move_pages of {pid} rejected (flags {flags:#x}; a kernel "
                            f"thread?): {os.strerror(err)}")
    return TierlabError(f"move_pages of {pid} failed: {os.strerror(err)}")


@dataclass
class MoveResult:
    """Outcome of `move_pages_batched`: pages on the target afterwards (`moved`,
    including pages already there), statuses by class, bytes moved, seconds spent."""

    moved: int = 0
    counts: dict = field(default_factory=lambda: dict.fromkeys(
        ("ok", "busy", "nomem", "gone", "other"), 0))
    bytes: int = 0
    seconds: float = 0.0
    status: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int32))


class TokenBucket:
    """Token bucket of `rate` bytes/s holding at most `burst` bytes; `take(n)` sleeps
    until n bytes of tokens are there. rate None = no limit."""

    def __init__(self, rate: float | None, burst: float, clock: Callable[[], float],
                 sleep: Callable[[float], None]):
        self.rate, self.burst, self.clock, self.sleep = rate, burst, clock, sleep
        self.tokens = burst
        self.last = clock()

    def _refill(self) -> None:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.last) * self.rate)
        self.last = now

    def take(self, n: float) -> None:
        if self.rate is None:
            return
        self._refill()
        if self.tokens < n:
            self.sleep((n - self.tokens) / self.rate)
            self._refill()
        self.tokens -= n


def move_pages_batched(pid: int, addrs, dst_node: int, batch: int = 512,
                       bw_limit_bytes_s: float | None = None,
                       clock: Callable[[], float] = time.monotonic,
                       sleep: Callable[[float], None] = time.sleep,
                       flags: int = MPOL_MF_MOVE) -> MoveResult:
    """Move `addrs` of `pid` to `dst_node` with move_pages(2), `batch` pages per call,
    at most `bw_limit_bytes_s` bytes/s (token bucket, burst one batch; charged per page
    asked for). Pages reported busy (-EBUSY, -EAGAIN) are retried once at the end.
    Classes: ok (on dst_node), busy, nomem, gone (-ENOENT, -EFAULT), other. If the
    target exits part way, `TargetExited` carries `status`: the batches done keep
    theirs (those pages did move), the rest read -ENOENT."""
    if int(batch) < 1:
        raise TierlabError(f"bad move batch {batch!r}: must be >= 1")
    if bw_limit_bytes_s is not None and bw_limit_bytes_s <= 0:
        raise TierlabError(f"bad migration bandwidth limit {bw_limit_bytes_s!r}: must be > 0")
    batch = int(batch)
    addrs = np.ascontiguousarray(addrs, dtype=np.uint64)
    t0 = clock()
    bucket = TokenBucket(bw_limit_bytes_s, batch * PAGE_SIZE, clock, sleep)
    status = np.empty(len(addrs), dtype=np.int32)

    def run(idx: np.ndarray | None) -> None:
        n = len(addrs) if idx is None else len(idx)
        for s in range(0, n, batch):
            sel = slice(s, s + batch) if idx is None else idx[s:s + batch]
            part = addrs[sel]
            bucket.take(len(part) * PAGE_SIZE)
            try:
                status[sel] = move_pages(pid, part, dst_node, flags)
            except TargetExited as e:
                status[slice(s, None) if idx is None else idx[s:]] = -errno.ENOENT
                e.status = status
                raise

    run(None)
    busy = np.flatnonzero((status == -errno.EBUSY) | (status == -errno.EAGAIN))
    if len(busy):
        run(busy)
    ok = status == dst_node
    classes = {"ok": ok,
               "busy": (status == -errno.EBUSY) | (status == -errno.EAGAIN),
               "nomem": status == -errno.ENOMEM,
               "gone": (status == -errno.ENOENT) | (status == -errno.EFAULT)}
    counts = {k: int(v.sum()) for k, v in classes.items()}
    counts["other"] = len(status) - sum(counts.values())
    moved = counts["ok"]
    return MoveResult(moved, counts, moved * PAGE_SIZE, clock() - t0, status)


def nodemask(nodes) -> tuple[np.ndarray, int]:
    """Node ids -> (unsigned long words, maxnode) for set_mempolicy(2) and mbind(2):
    node n is bit n % 64 of word n // 64, and maxnode is the bit count + 1 because the
    kernel reads maxnode - 1 bits (mm/mempolicy.c get_nodes; libnuma passes the same)."""
    ids = np.asarray(list(nodes) if nodes is not None else [], dtype=np.int64)
    if len(ids) and ids.min() < 0:
        raise TierlabError(f"bad node {int(ids.min())}: node ids are >= 0")
    words = np.zeros(int(ids.max()) // 64 + 1 if len(ids) else 1, dtype=np.uint64)
    np.bitwise_or.at(words, ids // 64, np.left_shift(np.uint64(1), (ids % 64).astype(np.uint64)))
    return words, 64 * len(words) + 1


def nodes_of_mask(words: np.ndarray) -> list[int]:
    """The node ids set in a little-endian array of unsigned long mask words."""
    bits = np.unpackbits(np.ascontiguousarray(words, dtype="<u8").view(np.uint8),
                         bitorder="little")
    return np.flatnonzero(bits).tolist()


def _mask_arg(nodes) -> tuple[np.ndarray | None, int]:
    if nodes is None or len(list(nodes)) == 0:
        return None, 0
    return nodemask(nodes)


def _policy_error(call: str, mode: int, nodes, err: int) -> TierlabError:
    name = MODE_NAMES.get(mode & ~MPOL_MODE_FLAGS, str(mode))
    mem = _memory_nodes()
    known = f" (memory nodes: {format_list(mem)})" if mem is not None else ""
    asked = format_list([] if nodes is None else list(nodes)) or "none"
    return TierlabError(f"{call} with mode {name} and nodes {asked} failed: "
                        f"{os.strerror(err)}{known}")


def set_mempolicy(mode: int, nodes=None) -> None:
    """set_mempolicy(2) for the calling thread (inherited by children across fork and
    exec); `mode` may carry MPOL_F_STATIC_NODES / MPOL_F_RELATIVE_NODES."""
    mask, maxnode = _mask_arg(nodes)
    ret, err = _syscall("set_mempolicy", ctypes.c_long(mode), _ptr(mask), ctypes.c_ulong(maxnode))
    if ret < 0:
        raise _policy_error("set_mempolicy", mode, nodes, err)


def mbind(addr: int, length: int, mode: int, nodes=None, flags: int = 0) -> None:
    """mbind(2): policy `mode` on nodes for [addr, addr + length); flags MPOL_MF_STRICT,
    MPOL_MF_MOVE, MPOL_MF_MOVE_ALL also move pages already there."""
    mask, maxnode = _mask_arg(nodes)
    ret, err = _syscall("mbind", ctypes.c_ulong(addr), ctypes.c_ulong(length),
                        ctypes.c_long(mode), _ptr(mask), ctypes.c_ulong(maxnode),
                        ctypes.c_ulong(flags))
    if ret < 0:
        raise _policy_error(f"mbind at {addr:#x}+{length:#x}", mode, nodes, err)


@dataclass(frozen=True)
class Mempolicy:
    """A policy read back by get_mempolicy(2): base mode, mode flags, nodes."""

    mode: int
    flags: int
    nodes: list[int]

    @property
    def mode_name(self) -> str:
        return MODE_NAMES.get(self.mode, str(self.mode))


def get_mempolicy(addr: int | None = None) -> Mempolicy:
    """get_mempolicy(2): the calling thread's policy, or with `addr` the policy of the
    mapping holding that address (MPOL_F_ADDR)."""
    mode = ctypes.c_int(0)
    words = np.zeros(_GET_BITS // 64, dtype=np.uint64)
    flags = 0 if addr is None else MPOL_F_ADDR
    ret, err = _syscall("get_mempolicy", ctypes.byref(mode), _ptr(words),
                        ctypes.c_ulong(_GET_BITS + 1), ctypes.c_ulong(addr or 0),
                        ctypes.c_ulong(flags))
    if ret < 0:
        where = "" if addr is None else f" at {addr:#x}"
        raise TierlabError(f"get_mempolicy{where} failed: {os.strerror(err)}")
    return Mempolicy(mode.value & ~MPOL_MODE_FLAGS, mode.value & MPOL_MODE_FLAGS,
                     nodes_of_mask(words))


@dataclass(frozen=True)
class MempolicyArgs:
    """set_mempolicy(2) arguments standing for an allocation policy."""

    alloc: str
    mode: int
    nodes: list[int]

    @property
    def mode_name(self) -> str:
        return MODE_NAMES[self.mode]

    def apply(self) -> None:
        """Set it on the calling thread (e.g. in the child before exec)."""
        set_mempolicy(self.mode, self.nodes)


def _kernel_allocs(fast: list[int], slow: list[int], order: list[int]) -> dict:
    return {"dram-preferred": (MPOL_PREFERRED, fast[:1] or order[:1]),
            "dram-always": (MPOL_BIND, fast or order[:1]),
            "pm-preferred": (MPOL_PREFERRED, slow[:1] or order[-1:]),
            "pm-always": (MPOL_BIND, slow or order[-1:])}


def alloc_mempolicy(alloc_name: str, topo: Topology) -> MempolicyArgs:
    """The kernel memory policy closest to tierlab allocation policy `alloc_name`
    (policies/alloc.py, HPDC'23); "DRAM" nodes are the nodes of kind dram in tier
    order, "PM" the others (with none, the last node of the tier order).

    - dram-preferred: MPOL_PREFERRED on the fastest node; the kernel falls back along
      that node's zonelist (by distance) when it is full.
    - dram-always: MPOL_BIND on the DRAM nodes. When they are full the kernel reclaims
      them (demoting cold pages down the tiers if demotion_enabled, else swapping or
      OOM-killing) instead of falling back to PM as the simulator does at the min
      watermark.
    - pm-preferred: MPOL_PREFERRED on the first PM node.
    - pm-always: MPOL_BIND on the PM nodes; the kernel OOM-kills when they are full,
      where the simulator falls back to DRAM.
    """
    from ..policies.alloc import ALLOCS

    fast = [i for i in topo.tier_order if node_kind(topo, topo.node(i)) == "dram"]
    slow = [i for i in topo.tier_order if i not in fast]
    table = _kernel_allocs(fast, slow, list(topo.tier_order))
    valid = [n for n in ALLOCS.names() if n in table]
    if alloc_name not in valid:
        why = ("has no kernel memory policy equivalent" if alloc_name in ALLOCS.names()
               else "is unknown")
        raise TierlabError(f"allocation policy {alloc_name!r} {why}; valid: {', '.join(valid)}")
    mode, nodes = table[alloc_name]
    return MempolicyArgs(alloc_name, mode, list(nodes))
