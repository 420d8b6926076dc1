"""Returning freed heap memory to the kernel (glibc's malloc_trim).

Arrays below glibc's mmap threshold (up to 32 MiB once it adapts) come from the heap,
and freeing them leaves holes that stay resident: a structure rebuilt from many small
arrays into a few large (mmapped) ones holds both at once. `trim` asks glibc to give
the free pages back (`malloc_trim(0)` releases whole free pages anywhere in the heap,
glibc >= 2.8); elsewhere it does nothing. Results never depend on it, only peak RSS.
"""
from __future__ import annotations

import ctypes
import ctypes.util

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
