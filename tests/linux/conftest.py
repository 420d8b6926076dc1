"""Shared fixtures of the Linux-layer tests."""
from __future__ import annotations

import mmap

import numpy as np
import pytest

PAGE = mmap.PAGESIZE


@pytest.fixture
def buf():
    """64 private anonymous pages, no THP; even pages touched, odd pages never.
    Yields the byte array and each page's address."""
    m = mmap.mmap(-1, 64 * PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    m.madvise(mmap.MADV_NOHUGEPAGE)
    a = np.frombuffer(m, dtype=np.uint8)
    a[::2 * PAGE] = 1
    addrs = a.ctypes.data + np.arange(64, dtype=np.uint64) * np.uint64(PAGE)
    yield a, addrs
    del a
