"""Guest (QEMU) tests: marker, build-or-skip, and a pool that boots each selected scenario
once (its tests share the GuestRun), optionally several guests at a time.

A test asks for a boot with `@pytest.mark.guest("NAME")` and the `guest_run` fixture; NAME
is a key of harness.TEST_BOOTS. Deselect them all with `-m "not guest"`.
Env: TIERLAB_GUEST_PARALLEL=N guests at once (default 1: on the 2-vCPU CI host two TCG
guests took as long as one after the other, 71 vs 73 s, and made timings noisier),
TIERLAB_GUEST_ECHO=1 (console to stdout).
"""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import pytest

# `import harness` from here and from the test modules (appended: never shadows tests/conftest.py)
if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.append(str(Path(__file__).resolve().parent))
import harness  # noqa: E402

BOOTS, ORDER = harness.TEST_BOOTS, harness.TEST_ORDER


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "guest(name): boots the Linux 6.12 test guest (QEMU TCG, node 0 with the "
                   "CPUs + CPU-less node 1) with harness.TEST_BOOTS[name]; "
                   "builds it first with tests/guest/setup.sh")


def _wanted(items) -> list:
    names = set()
    for it in items:
        m = it.get_closest_marker("guest")
        if m and m.args:
            names.add(m.args[0])
    if "daemon-exec" in names and not harness.tierlab_exec_available():
        names.discard("daemon-exec")     # its test skips; do not boot for it
    return [n for n in ORDER if n in names] + sorted(names - set(ORDER))


class GuestPool:
    """Boots the wanted scenarios, at most `parallel` at a time; `get(name)` waits for one."""

    def __init__(self, names: list, parallel: int):
        self.names, self.parallel = names, max(1, parallel)
        self.runs: dict = {}
        self.errors: dict = {}
        self.done = {n: threading.Event() for n in names}
        self._thread = threading.Thread(target=self._schedule, daemon=True)
        self._thread.start()

    def _schedule(self):
        sem = threading.Semaphore(self.parallel)

        def one(name):
            try:
                spec = dict(BOOTS[name])
                self.runs[name] = harness.start(spec.pop("scenario"), tag=name, **spec).wait()
            except Exception as e:  # noqa: BLE001 - reported by get()
                self.errors[name] = e
            finally:
                sem.release()
                self.done[name].set()

        for name in self.names:
            sem.acquire()
            threading.Thread(target=one, args=(name,), daemon=True).start()

    def get(self, name: str) -> harness.GuestRun:
        if name not in self.done:
            raise KeyError(f"guest boot {name!r} was not scheduled (marker missing?)")
        self.done[name].wait()
        if name in self.errors:
            raise self.errors[name]
        return self.runs[name]


_pool: GuestPool | None = None
_pool_lock = threading.Lock()


@pytest.fixture(scope="session")
def guest_built():
    """Build the guest (or skip when QEMU cannot run here); build errors fail."""
    ok, why = harness.ensure_built()
    if not ok:
        pytest.skip(f"QEMU guest cannot run here: {why}")
    return True


@pytest.fixture
def guest_run(request, guest_built):
    """The GuestRun of this test's @pytest.mark.guest(NAME) boot (shared by its tests)."""
    global _pool
    m = request.node.get_closest_marker("guest")
    if not m or not m.args:
        pytest.fail("guest_run needs @pytest.mark.guest(NAME)")
    with _pool_lock:
        if _pool is None:
            wanted = _wanted(request.session.items)
            if m.args[0] not in wanted:
                wanted.append(m.args[0])
            par = int(os.environ.get("TIERLAB_GUEST_PARALLEL", "1"))
            _pool = GuestPool(wanted, par)
    return _pool.get(m.args[0])
