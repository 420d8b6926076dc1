"""numba in one place: kernels compiled at their first call, the helpers they call
compiled before them, LLVM intrinsics, the cache, and the fallback without numba.

A module declares its compiled code where it is used:

    @helper(inline=True)          # called by kernels by its global name
    def _upper(a, x, lo, hi): ...

    @kernel(numpy=_similar_pairs_numpy)
    def _similar_pairs(h, ...): ...   # valid Python; a `Kernel`, compiled when called

At a kernel's first call every helper its source names (and theirs, transitively) is
compiled and bound in the caller's module, wherever the helper is defined, so one
helper is one compiled function for every module. Without numba (the QEMU guest's
trimmed Python, which runs only the Linux backend) a kernel runs its numpy form where
it has one, else its Python source (correct, slow), and helpers stay Python.

numba caches machine code per source file and notices only that file's changes, not a
helper's in another file; the cache therefore lives in a directory named by the digest
of every module that declares compiled code (`cache_dir`), so any change to one of
them starts a fresh cache (about a second of compile a kernel at first use).
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
from pathlib import Path

import numpy as np

_jit = None
_MARK = "__tierlab_helper__"
_bound = {}  # id(Python source) -> compiled helper


def numba_jit():
    """numba's njit (cached, no GIL), or False where numba is not installed."""
    global _jit
    if _jit is None:
        try:
            import numba
        except ImportError:
            _jit = False
            return _jit
        _numba_arrays()
        where = cache_dir()
        if where is not None and not os.environ.get("NUMBA_CACHE_DIR"):
            numba.config.CACHE_DIR = str(where)
        _jit = numba.njit(cache=True, nogil=True, error_model="numpy")
    return _jit


def cache_dir() -> Path | None:
    """Where compiled kernels are cached: <user cache>/tierlab/numba/<digest of the
    modules that import this one>; None where it cannot be created (numba then caches
    beside the sources). Directories unused for 30 days are removed."""
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tierlab" / \
        "numba"
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    for p in sorted(pkg.rglob("*.py")):
        text = p.read_bytes()
        if b"jit import" in text or p.name == "jit.py":
            h.update(str(p.relative_to(pkg)).encode() + b"\0" + text)
    where = root / h.hexdigest()[:16]
    try:
        where.mkdir(parents=True, exist_ok=True)
        os.utime(where)
        old = time.time() - 30 * 86400
        for d in root.iterdir():
            if d != where and d.is_dir() and d.stat().st_mtime < old:
                _remove_tree(d)
    except OSError:
        return None
    return where


def _remove_tree(d: Path) -> None:
    for p in sorted(d.rglob("*"), reverse=True):
        (p.rmdir if p.is_dir() else p.unlink)()
    d.rmdir()


class _NoScipyLinalg:
    """An import finder under which scipy.linalg cannot be imported."""

    def find_spec(self, name, path=None, target=None):
        if name == "scipy.linalg":
            raise ImportError("scipy.linalg: not for numba's BLAS check")
        return None


def _numba_arrays() -> None:
    """Load numba's array functions without their BLAS check: at its first compile or
    cache load numba imports scipy.linalg to learn whether np.dot and np.linalg can be
    compiled (numba.np.arraymath `_check_blas`), 0.3-0.4 s of CPU at every start of a
    process, and no kernel here uses them. With that import failing numba takes BLAS
    for absent; scipy.linalg imports as usual afterwards (the oracle's optimizer)."""
    if "scipy.linalg" in sys.modules:
        return
    block = _NoScipyLinalg()
    sys.meta_path.insert(0, block)
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        sys.meta_path.remove(block)


def helper(fn=None, *, inline: bool = False, compiled=None):
    """Mark fn as a helper kernels call by its global name. `inline`: compiled inline
    into its callers at numba's IR level (worth it for small helpers called per page or
    per word); `compiled`: a factory of its compiled form (an LLVM intrinsic) used
    instead of compiling its Python source."""
    def mark(f):
        setattr(f, _MARK, (inline, compiled))
        return f
    return mark(fn) if fn is not None else mark


def compiled(fn):
    """The compiled form of helper fn (once per helper, whichever module asks; a test
    calls a helper compiled through it)."""
    got = _bound.get(id(fn))
    if got is None:
        inline, factory = getattr(fn, _MARK)
        if factory is not None:
            got = factory()
        else:
            _bind(fn)
            if inline:
                import numba
                got = numba.njit(cache=True, nogil=True, inline="always",
                                 error_model="numpy")(fn)
            else:
                got = numba_jit()(fn)
        _bound[id(fn)] = got
    return got


def _bind(fn) -> None:
    """Put the compiled form of every helper fn's source names into fn's module."""
    g = fn.__globals__
    for name in fn.__code__.co_names:
        obj = g.get(name)
        # a helper's Python source (a compiled one carries the mark too, and py_func)
        if hasattr(obj, _MARK) and not hasattr(obj, "py_func"):
            g[name] = compiled(obj)


class Kernel:
    """A compiled kernel: `py`, its Python source, compiled by numba at the first call
    (its helpers bound first); without numba `numpy` (its numpy form) or `py`."""

    __slots__ = ("py", "numpy", "_k")

    def __init__(self, py, numpy=None):
        self.py, self.numpy, self._k = py, numpy, None

    def __repr__(self) -> str:
        return f"<kernel {self.py.__module__}.{self.py.__name__}>"

    def compiled(self):
        """What a call runs: the compiled kernel, or its fallback without numba."""
        k = self._k
        if k is None:
            jit = numba_jit()
            if jit:
                _bind(self.py)
                k = jit(self.py)
            else:
                k = self.numpy or self.py
            self._k = k
        return k

    def __call__(self, *args):
        k = self._k
        return (k if k is not None else self.compiled())(*args)


def kernel(fn=None, *, numpy=None):
    """Declare a kernel (`Kernel`) from its Python source; `numpy`: its numpy form,
    run without numba."""
    def make(f):
        return Kernel(f, numpy)
    return make(fn) if fn is not None else make


# -- LLVM intrinsics: one instruction each where numba's arithmetic takes several ------
def _llvm_cttz():
    """`cttz` as LLVM's count-trailing-zeros (tzcnt), where a de Bruijn multiply and a
    table load took three instructions (a node bitmap's next page, `engine.pagemap`)."""
    import numba
    from llvmlite import ir
    from numba.core.extending import intrinsic

    @intrinsic
    def cttz_(typingctx, x):
        def codegen(context, builder, sig, args):
            return builder.cttz(args[0], ir.Constant(ir.IntType(1), 1))
        return numba.types.uint64(numba.types.uint64), codegen

    return numba.njit(lambda x: cttz_(x))


@helper(compiled=_llvm_cttz)
def cttz(x):
    """The index of the lowest set bit of a nonzero uint64."""
    return (int(x) & -int(x)).bit_length() - 1


def _llvm_bitlen():
    """`bitlen` as 64 minus LLVM's count-leading-zeros (lzcnt), where MEMTIS's bins
    shifted a count right once per bit."""
    import numba
    from llvmlite import ir
    from numba.core.extending import intrinsic

    @intrinsic
    def ctlz(typingctx, x):
        def codegen(context, builder, sig, args):
            return builder.ctlz(args[0], ir.Constant(ir.IntType(1), 0))
        return numba.types.int64(numba.types.int64), codegen

    return numba.njit(lambda x: 64 - ctlz(x))


@helper(compiled=_llvm_bitlen)
def bitlen(x):
    """The bit length of a non-negative int64."""
    return int(x).bit_length()


def _llvm_mulhi():
    """`mulhi` as one LLVM 128-bit multiply (mul/mulx), for the PCG64 step."""
    import numba
    from llvmlite import ir
    from numba.core.extending import intrinsic

    @intrinsic
    def mulhi_(typingctx, a, b):
        def codegen(context, builder, sig, args):
            i128 = ir.IntType(128)
            p = builder.mul(builder.zext(args[0], i128), builder.zext(args[1], i128))
            return builder.trunc(builder.lshr(p, ir.Constant(i128, 64)), ir.IntType(64))
        return numba.types.uint64(numba.types.uint64, numba.types.uint64), codegen

    return numba.njit(lambda a, b: mulhi_(a, b))


@helper(compiled=_llvm_mulhi)
def mulhi(a, b):
    """The high 64 bits of the 128-bit product of two uint64."""
    return np.uint64((int(a) * int(b)) >> 64)


def _llvm_bitcast(src: str):
    """A bitcast between float64 and uint64 as LLVM's bitcast (no instruction), for
    the fault calendar's 48-bit works."""
    import numba
    from llvmlite import ir
    from numba.core.extending import intrinsic

    if src == "f":
        @intrinsic
        def cast(typingctx, x):
            def codegen(context, builder, sig, args):
                return builder.bitcast(args[0], ir.IntType(64))
            return numba.types.uint64(numba.types.float64), codegen
    else:
        @intrinsic
        def cast(typingctx, x):
            def codegen(context, builder, sig, args):
                return builder.bitcast(args[0], ir.DoubleType())
            return numba.types.float64(numba.types.uint64), codegen
    return cast


@helper(compiled=lambda: _llvm_bitcast("f"))
def f2u(x):
    """The bits of a float64, as a uint64."""
    return np.float64(x).view(np.uint64)


@helper(compiled=lambda: _llvm_bitcast("u"))
def u2f(b):
    """The float64 of 64 bits."""
    return np.uint64(b).view(np.float64)
