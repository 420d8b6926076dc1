"""tierlab.jit: kernels compiled at their first call with their helpers bound
compiled wherever the helpers live, the fallback without numba, and the LLVM
intrinsics against their Python forms."""
import importlib
import sys

import numpy as np
import pytest

from tierlab import jit

needs_numba = pytest.mark.skipif(not jit.numba_jit(), reason="needs numba")

HELPERS = '''
from tierlab.jit import helper


@helper(inline=True)
def twice(x):
    return 2 * x


@helper
def twice_plus_one(x):
    return twice(x) + 1
'''

KERNELS = '''
import numpy as np
from tierlab.jit import kernel
from {helpers} import twice_plus_one


def _fill_numpy(out):
    out[:] = 2 * np.arange(out.shape[0]) + 1


@kernel(numpy=_fill_numpy)
def fill(out):
    for i in range(out.shape[0]):
        out[i] = twice_plus_one(i)
'''


@pytest.fixture
def plugin_modules(tmp_path, monkeypatch):
    """Two throwaway modules: helpers in one, a kernel calling them in the other."""
    name = f"jit_case_{tmp_path.name}".replace("-", "_")
    (tmp_path / f"{name}_helpers.py").write_text(HELPERS)
    (tmp_path / f"{name}_kernels.py").write_text(KERNELS.format(helpers=f"{name}_helpers"))
    monkeypatch.syspath_prepend(str(tmp_path))
    h = importlib.import_module(f"{name}_helpers")
    k = importlib.import_module(f"{name}_kernels")
    yield h, k
    for m in (h, k):
        sys.modules.pop(m.__name__, None)


@needs_numba
def test_helpers_of_another_module_are_bound_compiled_once(plugin_modules):
    """A kernel's first call binds the helpers its source names, and theirs, compiled
    in the modules that name them: one compiled function per helper for all."""
    h, k = plugin_modules
    out = np.zeros(5, np.int64)
    k.fill(out)
    assert out.tolist() == [1, 3, 5, 7, 9]
    assert hasattr(k.twice_plus_one, "py_func")  # bound in the kernel's module
    assert h.twice is jit.compiled(h.twice.py_func)  # bound in its own module, once
    assert k.twice_plus_one is jit.compiled(k.twice_plus_one.py_func)


def test_without_numba_a_kernel_runs_its_numpy_form(plugin_modules, monkeypatch):
    h, k = plugin_modules
    monkeypatch.setattr(jit, "_jit", False)
    monkeypatch.setattr(k.fill, "_k", None)
    assert k.fill.compiled() is k._fill_numpy
    out = np.zeros(4, np.int64)
    k.fill(out)
    assert out.tolist() == [1, 3, 5, 7]


def test_cache_dir_is_named_by_the_kernel_modules(tmp_path, monkeypatch):
    """The cache directory is under the user's cache, named by a digest of the modules
    that declare compiled code: the same name twice; an unwritable cache gives None."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    a, b = jit.cache_dir(), jit.cache_dir()
    assert a == b and a.parent == tmp_path / "tierlab" / "numba" and a.is_dir()
    (tmp_path / "ro").write_text("a file, not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "ro"))
    assert jit.cache_dir() is None


@needs_numba
def test_trailing_zeros_compiled_and_in_python():
    """The hands' lowest-set-bit index: LLVM's cttz (what the kernels call) and the
    Python form agree on every single bit and on random words, the top bit included."""
    cttz = jit._llvm_cttz()
    rng = np.random.default_rng(5)
    words = [np.uint64(1) << np.uint64(b) for b in range(64)]
    words += [np.uint64(w) | np.uint64(1) << np.uint64(63) for w in
              rng.integers(1, 2**63, 200, dtype=np.uint64)]
    words += list(rng.integers(1, 2**63, 200, dtype=np.uint64))
    for w in words:
        want = (int(w) & -int(w)).bit_length() - 1
        assert int(cttz(np.uint64(w))) == jit.cttz(np.uint64(w)) == want


@needs_numba
def test_bitlen_intrinsic_is_the_bit_length():
    """LLVM's ctlz as the bit length of non-negative int64s (MEMTIS's bins): every
    power of two, its neighbours, zero and the largest."""
    bitlen = jit._llvm_bitlen()
    xs = [0, 1, 2**63 - 1] + [v for b in range(63) for v in (2**b - 1, 2**b, 2**b + 1)]
    for x in xs:
        assert int(bitlen(np.int64(x))) == jit.bitlen(np.int64(x)) == int(x).bit_length()


@needs_numba
def test_mulhi_and_bitcasts_compiled_and_in_python():
    """The 128-bit product's high word and the float64 <-> uint64 bitcasts, compiled
    (called from a kernel, as the PCG64 step and the fault calendar call them)."""
    import numba
    mulhi, f2u, u2f = (jit.compiled(f) for f in (jit.mulhi, jit.f2u, jit.u2f))

    @numba.njit
    def both(a, b, x):
        return mulhi(a, b), f2u(x), u2f(f2u(x))

    rng = np.random.default_rng(3)
    for a, b in rng.integers(0, 2**63, (50, 2), dtype=np.uint64):
        x = float(rng.normal() * 1e6)
        hi, bits, back = both(np.uint64(a) * np.uint64(2), np.uint64(b), x)
        assert int(hi) == (2 * int(a) % 2**64) * int(b) >> 64 == int(jit.mulhi(
            np.uint64(a) * np.uint64(2), np.uint64(b)))
        assert int(bits) == int(jit.f2u(x)) and back == x == float(jit.u2f(jit.f2u(x)))
