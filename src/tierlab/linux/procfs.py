"""Readers of /proc and of the idle page bitmap.

- /proc/PID/maps and /proc/PID/numa_maps: Documentation/filesystems/proc.rst;
- /proc/vmstat counters: include/linux/vm_event_item.h, mm/vmstat.c;
- /proc/PID/pagemap: Documentation/admin-guide/mm/pagemap.rst (bit 63 present, 62
  swapped, 61 file/shared-anon, 56 exclusively mapped, 55 soft-dirty, 0-54 PFN, which
  reads as zero without CAP_SYS_ADMIN);
- /sys/kernel/mm/page_idle/bitmap: Documentation/admin-guide/mm/idle_page_tracking.rst.
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import TierlabError

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")

PM_PRESENT = np.uint64(1 << 63)
PM_SWAP = np.uint64(1 << 62)
PM_FILE = np.uint64(1 << 61)
PM_MMAP_EXCLUSIVE = np.uint64(1 << 56)
PM_SOFT_DIRTY = np.uint64(1 << 55)
PM_PFN_MASK = np.uint64((1 << 55) - 1)

IDLE_BITMAP = "sys/kernel/mm/page_idle/bitmap"
#: bitmap words between two PFN runs below which `set_idle`/`read_idle` cover the gap
#: with the same pread/pwrite instead of starting a new one
_IDLE_GAP_WORDS = 512

MIGRATION_COUNTERS = ("pgpromote_success", "pgdemote_kswapd", "pgdemote_direct",
                      "pgdemote_khugepaged", "pgmigrate_success", "pgmigrate_fail",
                      "numa_pages_migrated", "numa_hint_faults")


class TargetExited(TierlabError):
    """The target process exited (or is exiting: its memory is gone) during a call: the
    normal end of a run, not a failure."""


#: PF_EXITING in /proc/PID/stat's flags: set as a task starts exiting, before its mm
#: goes (do_exit), so move_pages then fails with EINVAL, not ESRCH
PF_EXITING = 0x4


def _proc(pid, name: str) -> Path:
    return Path(f"/proc/{pid}/{name}")


def _proc_error(pid, path: Path, e: OSError) -> TierlabError:
    if isinstance(e, FileNotFoundError) or not Path(f"/proc/{pid}").exists():
        return TargetExited(f"no process {pid}")
    if isinstance(e, PermissionError):
        return TierlabError(f"not permitted to read {path}: run as root")
    return TierlabError(f"cannot read {path}: {e.strerror}")


def _read_proc(pid, name: str) -> str:
    path = _proc(pid, name)
    try:
        return path.read_text()
    except OSError as e:
        raise _proc_error(pid, path, e) from None


@dataclass(frozen=True)
class Vma:
    """One line of /proc/PID/maps: [start, end), perms such as "rw-p", file offset and
    path ("" for anonymous memory, "[heap]", "[stack]", "[anon:NAME]", a file)."""

    start: int
    end: int
    perms: str
    offset: int
    path: str

    @property
    def pages(self) -> int:
        return (self.end - self.start) // PAGE_SIZE


def parse_maps(text: str) -> list[Vma]:
    """The lines of a maps file ("start-end perms offset dev inode [path]")."""
    out = []
    for line in text.splitlines():
        parts = line.split(maxsplit=5)
        if len(parts) < 5:
            continue
        lo, _, hi = parts[0].partition("-")
        out.append(Vma(int(lo, 16), int(hi, 16), parts[1], int(parts[2], 16),
                       parts[5].strip() if len(parts) > 5 else ""))
    return out


def read_maps(pid) -> list[Vma]:
    """/proc/PID/maps as Vma records, in address order."""
    return parse_maps(_read_proc(pid, "maps"))


def anon_writable(vmas: list[Vma]) -> list[Vma]:
    """Private writable anonymous mappings (perms rw-p; no path, [heap] or [anon:NAME]):
    the memory a tiering daemon manages. [stack], [vvar], [vdso], [vsyscall] and file
    mappings are left out."""
    return [v for v in vmas
            if v.perms[:2] == "rw" and v.perms[3:4] == "p"
            and (v.path == "" or v.path == "[heap]" or v.path.startswith("[anon:"))]


@dataclass
class NumaMap:
    """One line of /proc/PID/numa_maps: the mapping's policy ("default", "bind:0-1",
    "prefer (many):1", ...), pages per node (N<node>=), anon=, dirty=, the page size,
    the file (file=) and every other key (mapped=, mapmax=, swapcache=, active=,
    writeback=; bare words heap, stack, huge as 1)."""

    start: int
    policy: str
    nodes: dict[int, int] = field(default_factory=dict)
    anon: int = 0
    dirty: int = 0
    kernelpagesize_kB: int = 0
    path: str = ""
    other: dict[str, int] = field(default_factory=dict)

    @property
    def pages(self) -> int:
        """Resident pages (of kernelpagesize_kB) over all nodes."""
        return sum(self.nodes.values())


_TWO_WORD_POLICIES = ("prefer (many)", "weighted interleave")
#: numa_maps escapes "\n\t= " in file names as octal (seq_file_path)
_OCTAL = re.compile(r"\\([0-7]{3})")


def parse_numa_maps(text: str) -> dict[int, NumaMap]:
    """numa_maps lines -> {VMA start: NumaMap} (fs/proc/task_mmu.c show_numa_map)."""
    out = {}
    for line in text.splitlines():
        addr, _, rest = line.partition(" ")
        if not rest:
            continue
        cut = next((len(p) for p in _TWO_WORD_POLICIES if rest.startswith(p)), 0)
        end = rest.find(" ", cut)
        policy, rest = (rest, "") if end < 0 else (rest[:end], rest[end + 1:])
        e = NumaMap(int(addr, 16), policy)
        for tok in rest.split():
            key, eq, val = tok.partition("=")
            if not eq:
                e.other[key] = 1
            elif key == "file":
                e.path = _OCTAL.sub(lambda m: chr(int(m.group(1), 8)), val)
            elif key[0] == "N" and key[1:].isdigit():
                e.nodes[int(key[1:])] = int(val)
            elif key in ("anon", "dirty", "kernelpagesize_kB"):
                setattr(e, key, int(val))
            else:
                e.other[key] = int(val)
        out[e.start] = e
    return out


def read_numa_maps(pid) -> dict[int, NumaMap]:
    """/proc/PID/numa_maps keyed by VMA start address."""
    return parse_numa_maps(_read_proc(pid, "numa_maps"))


def parse_vmstat(text: str) -> dict[str, int]:
    """"name value" lines -> {name: value}."""
    out = {}
    for line in text.splitlines():
        k, _, v = line.partition(" ")
        if v.strip().lstrip("-").isdigit():
            out[k] = int(v)
    return out


def parse_zoneinfo(text: str) -> dict[int, dict[str, int]]:
    """Per node, the sums over its zones that manage pages of `pages free`, `min`,
    `low`, `high` and `managed` (/proc/zoneinfo; the watermarks of
    Documentation/mm/physical_memory.rst). Empty zones are skipped: they still list
    watermarks (ZONE_MOVABLE shows 32) that no allocation meets."""
    zones: list[tuple[int, dict[str, int]]] = []
    for line in text.splitlines():
        if line.startswith("Node "):
            zones.append((int(line.split(",")[0].split()[1]),
                          dict(free=0, min=0, low=0, high=0, managed=0)))
            continue
        parts = line.split()
        if not zones or len(parts) < 2:
            continue
        z = zones[-1][1]
        if parts[0] == "pages" and parts[1] == "free" and len(parts) > 2:
            z["free"] = int(parts[2])
        elif parts[0] in ("min", "low", "high", "managed") and parts[1].isdigit():
            z[parts[0]] = int(parts[1])  # per-cpu lines read "high:  N", with a colon
    out: dict[int, dict[str, int]] = {}
    for nid, z in zones:
        tot = out.setdefault(nid, dict(free=0, min=0, low=0, high=0, managed=0))
        if z["managed"] > 0:
            for k in tot:
                tot[k] += z[k]
    return out


def read_zoneinfo(root="/") -> dict[int, dict[str, int]]:
    """/proc/zoneinfo, summed per node (pages)."""
    try:
        return parse_zoneinfo(Path(root, "proc/zoneinfo").read_text())
    except OSError as e:
        raise TierlabError(f"cannot read {Path(root, 'proc/zoneinfo')}: {e.strerror}") from None


def read_vmstat(root="/") -> dict[str, int]:
    """ROOT/proc/vmstat as a dict of ints."""
    path = Path(root) / "proc/vmstat"
    try:
        return parse_vmstat(path.read_text())
    except OSError as e:
        raise TierlabError(f"cannot read {path}: {e.strerror}") from None


def migration_counters(d: dict[str, int]) -> dict[str, int]:
    """The promotion, demotion and migration counters of a vmstat dict; a counter the
    kernel does not have (older kernel, CONFIG_NUMA_BALANCING off) reads 0."""
    return {k: int(d.get(k, 0)) for k in MIGRATION_COUNTERS}


def read_pagemap(pid, start: int, end: int) -> np.ndarray:
    """The raw 64-bit /proc/PID/pagemap entries of the pages in [start, end) (widened
    to page boundaries), read with one pread."""
    first, last = start // PAGE_SIZE, -(-end // PAGE_SIZE)
    n = max(last - first, 0)
    path = _proc(pid, "pagemap")
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError as e:
        raise _proc_error(pid, path, e) from None
    try:
        data = os.pread(fd, n * 8, first * 8)
    except OSError as e:
        raise _proc_error(pid, path, e) from None
    finally:
        os.close(fd)
    out = np.zeros(n, dtype=np.uint64)
    got = np.frombuffer(data, dtype=np.uint64)
    out[:len(got)] = got
    return out


def pagemap_present(pid, start: int, end: int) -> np.ndarray:
    """Bool per page of [start, end): present in RAM (pagemap bit 63)."""
    return (read_pagemap(pid, start, end) & PM_PRESENT) != 0


def pagemap_pfns(raw: np.ndarray) -> np.ndarray:
    """PFNs of pagemap entries (0 where not present, or without CAP_SYS_ADMIN)."""
    raw = np.asarray(raw, dtype=np.uint64)
    return np.where((raw & PM_PRESENT) != 0, raw & PM_PFN_MASK, np.uint64(0))


def idle_page_tracking_available(root="/") -> bool:
    """True if ROOT/sys/kernel/mm/page_idle/bitmap exists and is writable
    (CONFIG_IDLE_PAGE_TRACKING, root)."""
    path = Path(root) / IDLE_BITMAP
    return path.is_file() and os.access(path, os.W_OK)


def _word_runs(pfns: np.ndarray, gap_words: int = _IDLE_GAP_WORDS):
    """Bitmap words of `pfns`: unique words, the bit mask of each, each PFN's word
    index, and [begin, end) runs of words at most `gap_words` apart, which share one
    read or write."""
    words = pfns >> np.uint64(6)
    uw, inv = np.unique(words, return_inverse=True)
    masks = np.zeros(len(uw), dtype=np.uint64)
    np.bitwise_or.at(masks, inv, np.left_shift(np.uint64(1), pfns & np.uint64(63)))
    cut = np.flatnonzero(np.diff(uw) > gap_words) + 1
    begins = np.concatenate([[0], cut]).astype(np.int64)
    ends = np.concatenate([cut, [len(uw)]]).astype(np.int64)
    return uw, masks, inv.reshape(-1), zip(begins.tolist(), ends.tolist())


def _open_bitmap(bitmap, flags: int) -> int:
    path = Path(bitmap)
    try:
        return os.open(path, flags)
    except FileNotFoundError:
        raise TierlabError(f"idle page tracking is not available: {path} is missing "
                           f"(kernel without CONFIG_IDLE_PAGE_TRACKING)") from None
    except PermissionError:
        raise TierlabError(f"not permitted to use {path}: run as root") from None


def set_idle(pfns, bitmap="/" + IDLE_BITMAP) -> None:
    """Mark the pages `pfns` idle: write their bits, 64 PFNs per 8-byte word; zero bits
    leave other pages alone (mm/page_idle.c, page_idle_bitmap_write)."""
    pfns = np.asarray(pfns, dtype=np.uint64).reshape(-1)
    if len(pfns) == 0:
        return
    uw, masks, _, runs = _word_runs(pfns)
    fd = _open_bitmap(bitmap, os.O_WRONLY)
    try:
        for a, b in runs:
            base = int(uw[a])
            buf = np.zeros(int(uw[b - 1]) - base + 1, dtype=np.uint64)
            buf[(uw[a:b] - np.uint64(base)).astype(np.int64)] = masks[a:b]
            os.pwrite(fd, buf.tobytes(), base * 8)
    except OSError as e:
        raise TierlabError(f"cannot write {bitmap}: {e.strerror}") from None
    finally:
        os.close(fd)


def read_idle(pfns, bitmap="/" + IDLE_BITMAP,
              gap_words: int = _IDLE_GAP_WORDS) -> np.ndarray:
    """Bool per PFN: still idle (not accessed since `set_idle`). Reading also clears
    the accessed bits of the mapping PTEs into the idle flag (page_idle_bitmap_read);
    PFNs past the end of memory read as not idle. Words up to `gap_words` apart are read
    in one pread; the kernel looks up every page of a word it reads and walks the
    reverse map of each one flagged idle, so a sampler of sparse pages reads only the
    words it needs (`gap_words=1`)."""
    pfns = np.asarray(pfns, dtype=np.uint64).reshape(-1)
    if len(pfns) == 0:
        return np.zeros(0, dtype=bool)
    uw, _, inv, runs = _word_runs(pfns, gap_words)
    vals = np.zeros(len(uw), dtype=np.uint64)
    fd = _open_bitmap(bitmap, os.O_RDONLY)
    try:
        for a, b in runs:
            base = int(uw[a])
            n = int(uw[b - 1]) - base + 1
            got = np.frombuffer(os.pread(fd, n * 8, base * 8), dtype=np.uint64)
            buf = np.zeros(n, dtype=np.uint64)
            buf[:len(got)] = got
            vals[a:b] = buf[(uw[a:b] - np.uint64(base)).astype(np.int64)]
    except OSError as e:
        raise TierlabError(f"cannot read {bitmap}: {e.strerror}") from None
    finally:
        os.close(fd)
    return ((vals[inv] >> (pfns & np.uint64(63))) & np.uint64(1)).astype(bool)


def pid_alive(pid) -> bool:
    """True if process `pid` exists, is not a zombie and is not exiting (/proc/PID/stat
    state and flags)."""
    try:
        stat = _proc(pid, "stat").read_text()
    except OSError:
        return False
    fields = stat[stat.rfind(")") + 2:].split()
    return fields[0] not in ("Z", "X", "x") and not int(fields[6]) & PF_EXITING


def process_name(pid) -> str:
    """The command name of `pid` (/proc/PID/comm)."""
    return _read_proc(pid, "comm").strip()
