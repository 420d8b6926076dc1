"""DAMON through its sysfs interface (Documentation/admin-guide/mm/damon/usage.rst,
Linux 6.12): one kdamond, one context, one target process, one match-everything
"stat" scheme whose tried regions are the monitoring results.

What the 6.12 kernel does, beyond usage.rst, that this module relies on:

* `kdamonds/nr_kdamonds` (mm/damon/sysfs.c, damon_sysfs_kdamonds_add_dirs) fails
  with EBUSY while any kdamond runs, and any accepted write removes every
  `kdamonds/<N>/` directory and creates fresh ones: raising it by one resets the
  staged (not running) configuration of the idle kdamonds too. So `start()` first
  reuses an empty slot (state off, `contexts/nr_contexts` 0), else appends one when
  no kdamond runs, else refuses; `stop()` shrinks `nr_kdamonds` back only when the
  slot was appended, is the last one and every other slot is off and empty, and
  otherwise leaves the slot off and empty (`nr_contexts` 0) for the next user.
* "on" with a `pid_target` that names no process fails with EINVAL (not ESRCH); with
  an operations set the kernel lacks (`avail_operations`) also EINVAL; EBUSY when
  the kdamond already runs or an exclusive in-kernel DAMON user (DAMON_RECLAIM,
  DAMON_LRU_SORT) does. "off" on a stopped kdamond fails with EPERM (core.c,
  __damon_stop), so EPERM there does not mean "not root". Commands other than
  on/off (commit, update_schemes_*) fail with EINVAL when the kdamond is off and
  EBUSY while another sysfs command is pending; they return once the kdamond has
  handled them (update_schemes_tried_regions waits for one scheme apply pass, about
  one aggregation interval).
* With vaddr the kdamond stops by itself once its target exits (state reads "off").
* `tried_regions/<N>/nr_accesses` is `nr_accesses_bp / 10000` (sysfs-schemes.c,
  damon_sysfs_scheme_region_alloc, since 6.7). `nr_accesses_bp` is a pseudo-moving
  sum of the per-sample access checks over the last aggregation window, in basis
  points of one sample, so the file is in samples per aggregation interval
  (0..aggr_us/sample_us), neither a percentage nor scaled, rounded down. The scheme
  applies at aggregation boundaries (apply_interval_us 0), where the moving sum
  equals the count of the aggregation that just completed. `age` is in
  aggregation intervals; `start`/`end` are virtual addresses (vaddr) in bytes.
  The access_pattern `nr_accesses` bounds are in the same samples unit.
"""
from __future__ import annotations

import atexit
import errno
import os
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..errors import TierlabError

ADMIN = "sys/kernel/mm/damon/admin"
OPERATIONS = ("vaddr", "fvaddr", "paddr")
U32_MAX = 2**32 - 1
U64_MAX = 2**64 - 1
_FIELDS = ("start", "end", "nr_accesses", "age")
_BUSY_TRIES = 20


def _read(path: str) -> str:
    fd = os.open(path, os.O_RDONLY)
    try:
        return os.read(fd, 4096).decode().strip()
    finally:
        os.close(fd)


def sysfs_write(path: str, text: str) -> None:
    """One write(2) of `text` to a sysfs file; the kernel's error comes back as OSError."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True, eq=False)
class Regions:
    """DAMON's regions in address order: byte ranges [start, end), nr_accesses in
    samples per aggregation interval (at most `max_nr_accesses`), age in aggregation
    intervals."""

    start: np.ndarray
    end: np.ndarray
    nr_accesses: np.ndarray
    age: np.ndarray
    max_nr_accesses: int = 0

    def __len__(self) -> int:
        return int(self.start.size)

    @property
    def size(self) -> np.ndarray:
        return self.end - self.start


def read_tried_regions(path: str, max_nr_accesses: int = 0) -> Regions:
    """Parse a `schemes/<N>/tried_regions/` directory: list it once, then one
    os.open/os.read per small file relative to the directory's descriptor."""
    dfd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        names = [n for n in os.listdir(dfd) if n.isdigit()]
        vals = []
        append = vals.append
        rd, op, cl, flags = os.read, os.open, os.close, os.O_RDONLY
        try:
            for name in names:
                for f in _FIELDS:
                    fd = op(f"{name}/{f}", flags, dir_fd=dfd)
                    try:
                        append(int(rd(fd, 64)))
                    finally:
                        cl(fd)
        except FileNotFoundError:
            raise TierlabError(f"{path} changed while being read: another DAMON user "
                               "wrote this kdamond's state file") from None
    finally:
        os.close(dfd)
    a = np.array(vals, dtype=np.int64).reshape(len(names), 4)
    a = a[np.argsort(a[:, 0], kind="stable")]
    return Regions(a[:, 0].copy(), a[:, 1].copy(), a[:, 2].copy(), a[:, 3].copy(),
                   int(max_nr_accesses))


@dataclass(frozen=True)
class _Slot:
    index: int
    state: str
    pid: int
    nr_contexts: int

    @property
    def empty(self) -> bool:
        return self.state == "off" and self.nr_contexts == 0


def _survey(kdamonds: str) -> list[_Slot]:
    n = int(_read(os.path.join(kdamonds, "nr_kdamonds")))
    slots = []
    for i in range(n):
        d = os.path.join(kdamonds, str(i))
        try:
            pid = int(_read(os.path.join(d, "pid")))
        except (OSError, ValueError):
            pid = -1
        slots.append(_Slot(i, _read(os.path.join(d, "state")), pid,
                           int(_read(os.path.join(d, "contexts", "nr_contexts")))))
    return slots


def _avail_operations(kdamonds: str, slots: list[_Slot]) -> list[str] | None:
    for s in slots:
        if s.nr_contexts:
            p = os.path.join(kdamonds, str(s.index), "contexts", "0", "avail_operations")
            try:
                return _read(p).split()
            except OSError:
                continue
    return None


def _no_slot_reason(running: list[_Slot]) -> str:
    who = ", ".join(f"kdamond {s.index} (pid {s.pid})" for s in running)
    return (f"{who} running and no idle empty kdamond slot: the kernel refuses to "
            "change nr_kdamonds while any kdamond runs (EBUSY)")


def damon_available(root: str = "/", ops: str = "vaddr") -> tuple[bool, str]:
    """Whether `DamonSysfs(ops=ops, root=root).start()` can work here, and if not a
    one-line reason. Reads only; `avail_operations` is checked when some kdamond
    already has a context (the file exists only inside a context directory)."""
    admin = os.path.join(root, ADMIN)
    shown = "/" + ADMIN
    if not os.path.isdir(admin):
        return False, (f"no DAMON sysfs at {shown}: kernel built without "
                       "CONFIG_DAMON_SYSFS (or sysfs not mounted)")
    kd = os.path.join(admin, "kdamonds")
    nr = os.path.join(kd, "nr_kdamonds")
    if not os.access(nr, os.R_OK | os.W_OK):
        return False, f"DAMON sysfs at {shown} is not writable: run as root"
    try:
        slots = _survey(kd)
    except PermissionError:
        return False, f"DAMON sysfs at {shown} is not readable: run as root"
    except (OSError, ValueError) as e:
        return False, f"cannot read DAMON sysfs at {shown}: {e}"
    problems = []
    avail = _avail_operations(kd, slots)
    if avail is not None and ops not in avail:
        problems.append(f"no '{ops}' in DAMON avail_operations ({' '.join(avail)}): "
                        f"kernel built without CONFIG_DAMON_{ops.upper()}")
    running = [s for s in slots if s.state != "off"]
    if running and not any(s.empty for s in slots):
        problems.append(_no_slot_reason(running))
    return (not problems), "; ".join(problems)


def _check_attrs(sample_us, aggr_us, update_us, min_nr, max_nr) -> None:
    if min(sample_us, aggr_us, update_us) <= 0:
        raise TierlabError(f"DAMON intervals must be positive (sample {sample_us} us, "
                           f"aggregation {aggr_us} us, update {update_us} us)")
    if sample_us > aggr_us:
        raise TierlabError(f"DAMON sampling interval {sample_us} us exceeds the "
                           f"aggregation interval {aggr_us} us")
    if min_nr < 3 or min_nr > max_nr:
        raise TierlabError(f"DAMON nr_regions needs 3 <= min <= max, got min {min_nr} "
                           f"max {max_nr}")


class DamonSysfs:
    """One kdamond monitoring process `pid` (usage.rst, "sysfs Interface").

    `root` prefixes every sysfs path (tests use a fake tree); `writer(path, text)`
    does every write, raising OSError with the kernel's errno on failure (tests pass
    a fake kernel that also materialises the directories and tried regions)."""

    def __init__(self, pid: int, sample_us: int = 5000, aggr_us: int = 100000,
                 update_us: int = 1000000, min_nr_regions: int = 10,
                 max_nr_regions: int = 1000, ops: str = "vaddr", root: str = "/",
                 writer: Callable[[str, str], None] | None = None):
        if ops not in OPERATIONS:
            raise TierlabError(f"unknown DAMON operations {ops!r}; valid: "
                               f"{', '.join(OPERATIONS)}")
        self.attrs = dict(sample_us=int(sample_us), aggr_us=int(aggr_us),
                          update_us=int(update_us), min_nr_regions=int(min_nr_regions),
                          max_nr_regions=int(max_nr_regions))
        _check_attrs(*self.attrs.values())
        self.pid = int(pid)
        self.ops = ops
        self.root = root
        self.kdamonds = os.path.join(root, ADMIN, "kdamonds")
        self._writer = writer or sysfs_write
        self.index: int | None = None
        self._appended = False
        self._configured = False
        self._nr_kdamonds = 0

    # -- paths and writes ----------------------------------------------------------------
    def _kd(self, *parts) -> str:
        return os.path.join(self.kdamonds, str(self.index), *parts)

    def _ctx(self, *parts) -> str:
        return self._kd("contexts", "0", *parts)

    def _shown(self, path: str) -> str:
        return "/" + os.path.relpath(path, self.root)

    def _write(self, path: str, value) -> None:
        """Write one value; EBUSY on a state file (another sysfs command pending) is
        retried briefly, any other failure becomes a one-line TierlabError."""
        text = str(value)
        tries = _BUSY_TRIES if path.endswith("state") else 1
        for attempt in range(tries):
            try:
                self._writer(path, text)
                return
            except OSError as e:
                if e.errno == errno.EBUSY and attempt + 1 < tries:
                    time.sleep(0.01)
                    continue
                raise self._error(e, path, text) from None

    def _error(self, e: OSError, path: str, text: str) -> TierlabError:
        shown = self._shown(path)
        k = f"kdamond {self.index}"
        if e.errno in (errno.EACCES, errno.EPERM):
            return TierlabError(f"permission denied writing {shown}: DAMON sysfs needs "
                                "root (CAP_SYS_ADMIN)")
        if e.errno == errno.ENOENT:
            return TierlabError(f"{shown} does not exist: this kernel's DAMON sysfs "
                                "lacks it")
        if path.endswith("state"):
            if text == "on" and e.errno in (errno.EINVAL, errno.ESRCH):
                if self.ops != "paddr" and not _pid_exists(self.pid):
                    return TierlabError(f"no process {self.pid} for DAMON to monitor")
                return TierlabError(f"the kernel rejected {k}'s configuration (EINVAL): "
                                    f"is '{self.ops}' in its avail_operations?")
            if e.errno == errno.EBUSY:
                return TierlabError(f"DAMON is busy (EBUSY) writing {text!r} to {shown}: "
                                    "the kdamond already runs, an exclusive in-kernel "
                                    "DAMON user (DAMON_RECLAIM, DAMON_LRU_SORT) runs, or "
                                    "another sysfs command is pending")
            if e.errno == errno.EINVAL:
                return TierlabError(f"{k} is not running (target exited or DAMON "
                                    f"stopped): {text!r} rejected")
        if e.errno == errno.EBUSY:
            return TierlabError(f"DAMON sysfs busy (EBUSY) writing {text!r} to {shown}: "
                                "a kdamond is running")
        return TierlabError(f"writing {text!r} to {shown} failed: {e.strerror}")

    # -- life cycle ------------------------------------------------------------------------
    def start(self) -> "DamonSysfs":
        """Take a kdamond slot, write the context and turn it on."""
        if self.index is not None:
            return self
        ok, why = damon_available(self.root, self.ops)
        if not ok:
            raise TierlabError(why)
        if self.ops != "paddr" and not _pid_exists(self.pid):
            raise TierlabError(f"no process {self.pid} for DAMON to monitor")
        slots = _survey(self.kdamonds)
        free = [s for s in slots if s.empty]
        if free:
            self.index = free[0].index
        else:
            running = [s for s in slots if s.state != "off"]
            if running:
                raise TierlabError(_no_slot_reason(running))
            self._write(os.path.join(self.kdamonds, "nr_kdamonds"), len(slots) + 1)
            self.index, self._appended = len(slots), True
        self._nr_kdamonds = int(_read(os.path.join(self.kdamonds, "nr_kdamonds")))
        try:
            self._configure()
            self._write(self._kd("state"), "on")
            state = _read(self._kd("state"))
            if state != "on":
                raise TierlabError(f"kdamond {self.index} did not start (state {state})")
            self._configured = True
        except BaseException:
            self._release()
            raise
        atexit.register(self.stop)
        return self

    def _configure(self) -> None:
        w = self._write
        w(self._kd("contexts", "nr_contexts"), 1)
        avail = _read(self._ctx("avail_operations")).split()
        if self.ops not in avail:
            raise TierlabError(f"no '{self.ops}' in DAMON avail_operations "
                               f"({' '.join(avail)}): kernel built without "
                               f"CONFIG_DAMON_{self.ops.upper()}")
        w(self._ctx("operations"), self.ops)
        self._write_attrs()
        w(self._ctx("targets", "nr_targets"), 1)
        if self.ops != "paddr":
            w(self._ctx("targets", "0", "pid_target"), self.pid)
        w(self._ctx("schemes", "nr_schemes"), 1)
        s = ("schemes", "0")
        w(self._ctx(*s, "action"), "stat")
        for what, hi in (("sz", U64_MAX), ("nr_accesses", U32_MAX), ("age", U32_MAX)):
            w(self._ctx(*s, "access_pattern", what, "min"), 0)
            w(self._ctx(*s, "access_pattern", what, "max"), hi)

    def _write_attrs(self) -> None:
        a = self.attrs
        for f in ("sample_us", "aggr_us", "update_us"):
            self._write(self._ctx("monitoring_attrs", "intervals", f), a[f])
        self._write(self._ctx("monitoring_attrs", "nr_regions", "min"), a["min_nr_regions"])
        self._write(self._ctx("monitoring_attrs", "nr_regions", "max"), a["max_nr_regions"])

    def _still_ours(self) -> bool:
        """Whether our slot still holds what we wrote: a nr_kdamonds write by someone
        else (possible once our kdamond is off) rebuilds every slot."""
        try:
            if int(_read(os.path.join(self.kdamonds, "nr_kdamonds"))) != self._nr_kdamonds:
                return False
            if not self._configured:
                return True
            if int(_read(self._kd("contexts", "nr_contexts"))) != 1:
                return False
            if _read(self._ctx("operations")) != self.ops:
                return False
            return (self.ops == "paddr"
                    or int(_read(self._ctx("targets", "0", "pid_target"))) == self.pid)
        except (OSError, ValueError):
            return False

    def _release(self) -> None:
        """Turn our kdamond off and give the slot back; never raises."""
        if self.index is None or not self._still_ours():
            self.index, self._configured = None, False
            return
        try:
            if _read(self._kd("state")) != "off":
                self._writer(self._kd("state"), "off")
        except OSError:
            pass
        try:
            slots = _survey(self.kdamonds)
            others = [s for s in slots if s.index != self.index]
            if (self._appended and self.index == len(slots) - 1
                    and all(s.empty for s in others)):
                self._writer(os.path.join(self.kdamonds, "nr_kdamonds"), str(self.index))
            else:
                self._writer(self._kd("contexts", "nr_contexts"), "0")
        except (OSError, ValueError):
            pass
        self.index, self._configured = None, False

    def stop(self) -> None:
        """"off", then shrink nr_kdamonds back or leave an off, empty slot. Idempotent;
        only os-level calls, so safe from a signal handler or atexit."""
        if self.index is None:
            return
        atexit.unregister(self.stop)
        self._release()

    def __enter__(self) -> "DamonSysfs":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- running ---------------------------------------------------------------------------
    def alive(self) -> bool:
        """Whether our kdamond runs; with vaddr it stops when the target exits."""
        if self.index is None:
            return False
        try:
            return _read(self._kd("state")) == "on"
        except OSError:
            return False

    def read_regions(self) -> Regions:
        """"update_schemes_tried_regions", then the scheme's tried regions."""
        if self.index is None:
            raise TierlabError("DAMON is not started")
        self._write(self._kd("state"), "update_schemes_tried_regions")
        a = self.attrs
        return read_tried_regions(self._ctx("schemes", "0", "tried_regions"),
                                  a["aggr_us"] // a["sample_us"])

    def update_attrs(self, sample_us: int | None = None, aggr_us: int | None = None,
                     update_us: int | None = None, min_nr_regions: int | None = None,
                     max_nr_regions: int | None = None) -> None:
        """Change the monitoring attributes; online through "commit" when running."""
        new = dict(self.attrs)
        for k, v in (("sample_us", sample_us), ("aggr_us", aggr_us),
                     ("update_us", update_us), ("min_nr_regions", min_nr_regions),
                     ("max_nr_regions", max_nr_regions)):
            if v is not None:
                new[k] = int(v)
        _check_attrs(*new.values())
        self.attrs = new
        if self.index is not None:
            self._write_attrs()
            self._write(self._kd("state"), "commit")
