"""The run's memory settings (`tierlab.heap`): they change how memory is mapped, never
what a run computes."""
from __future__ import annotations

import numpy as np

import tierlab
from tierlab import heap

try:
    from numpy._core.multiarray import _set_madvise_hugepage
except ImportError:  # numpy < 2
    from numpy.core.multiarray import _set_madvise_hugepage


def _advice() -> bool:
    was = _set_madvise_hugepage(True)
    _set_madvise_hugepage(was)
    return was


def test_base_pages_turns_the_advice_off_and_restores_it(monkeypatch):
    monkeypatch.delenv(heap.HUGEPAGE_ENV, raising=False)
    for before in (True, False):
        _set_madvise_hugepage(before)
        with heap.base_pages():
            assert _advice() is False
        assert _advice() is before
    _set_madvise_hugepage(True)
    try:  # restored when the block raises too
        with heap.base_pages():
            raise KeyError
    except KeyError:
        pass
    assert _advice() is True
    monkeypatch.setenv(heap.HUGEPAGE_ENV, "1")
    with heap.base_pages():
        assert _advice() is True


def test_a_run_gives_the_same_record_with_or_without_huge_pages(monkeypatch):
    """A run inside base_pages (the default) and one keeping numpy's advice agree on
    every field but the wall time, and the caller's setting is left as it was."""
    kw = dict(machine="optane-2tier", workload="gups:hotset", policy="autonuma-tiering",
              scale=1 / 256, seed=4)
    _set_madvise_hugepage(True)
    monkeypatch.delenv(heap.HUGEPAGE_ENV, raising=False)
    a = tierlab.run(**kw)
    assert _advice() is True
    monkeypatch.setenv(heap.HUGEPAGE_ENV, "1")
    b = tierlab.run(**kw)
    for r in (a, b):
        r.pop("wall_seconds", None)
    assert a == b
    assert np.isfinite(a["throughput"])
