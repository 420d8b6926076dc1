"""Returning freed heap memory to the kernel (glibc's malloc_trim).

Arrays below glibc's mmap threshold (up to 32 MiB once it adapts) come from the heap,
and freeing them leaves holes that stay resident: a structure rebuilt from many small
arrays into a few large (mmapped) ones holds both at once. `trim` asks glibc to give
the free pages back (`malloc_trim(0)` releases whole free pages anywhere in the heap,
glibc >= 2.8); elsewhere it does nothing. Results never depend on it, only peak RSS.

`base_pages`: numpy asks for transparent huge pages on every large array
(madvise(MADV_HUGEPAGE)); a run turns that off while it builds and runs its
simulation. Results never depend on it either, only the time first touches take.
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os

_trim = None


def trim() -> None:
    """Give free heap pages back to the kernel, where the C library can."""
    global _trim
    if _trim is None:
        try:
            _trim = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
            _trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):
            _trim = False
    if _trim:
        _trim(0)


#: set to 1 to keep numpy's huge-page advice during runs
HUGEPAGE_ENV = "TIERLAB_MADVISE_HUGEPAGE"


@contextlib.contextmanager
def base_pages():
    """numpy's MADV_HUGEPAGE advice off for the block, then as it was. On the project's
    reference machine (a VM whose free 2 MiB blocks go back to its host, virtio-balloon
    free page reporting) touching a fresh huge page cost 0.16-2.3 ns a byte against a
    steady 0.4 for 4 KiB pages, and runs took 13-20% less CPU without the advice
    (autonuma-tiering at 10x bench_memsim: 26.7 -> 21.5 s; docs/benchmarks.md).
    `TIERLAB_MADVISE_HUGEPAGE=1` keeps the advice (a machine where huge pages fault
    fast and the per-page arrays' TLB misses dominate)."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # numpy < 2
        from numpy.core.multiarray import _set_madvise_hugepage
    if os.environ.get(HUGEPAGE_ENV, "0").strip() not in ("", "0"):
        yield
        return
    was = _set_madvise_hugepage(False)
    try:
        yield
    finally:
        _set_madvise_hugepage(was)
