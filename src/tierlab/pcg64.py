"""numpy's PCG64 stream drawn inside compiled code: the same doubles as
`Generator.random()` and the same state after (`_pcg_take` and `_pcg_put` move the
state between a Generator and a kernel), and the jump-ahead of `advance`."""
from __future__ import annotations

import numpy as np

from .jit import helper, mulhi, numba_jit


@helper(inline=True)
def _pcg_step(hi, lo, ahi, alo, chi, clo):
    # the 128-bit LCG state (hi, lo) times (ahi, alo) plus (chi, clo), modulo 2^128
    nlo = lo * alo
    nhi = mulhi(lo, alo) + lo * ahi + hi * alo
    slo = nlo + clo
    return nhi + chi + (np.uint64(1) if slo < nlo else np.uint64(0)), slo


@helper(inline=True)
def _pcg_double(hi, lo):
    # PCG64's XSL-RR output of state (hi, lo), its top 53 bits as a double in [0, 1)
    # (numpy's `random()`)
    x = hi ^ lo
    r = hi >> np.uint64(58)
    v = (x >> r) | (x << ((np.uint64(64) - r) & np.uint64(63)))
    return np.float64(v >> np.uint64(11)) * (1.0 / 9007199254740992.0)


@helper
def _pcg64_fill(st, jump, u, m):
    # u[:m] = the next m doubles of numpy's PCG64 `random()` from state st (high,
    # low; advanced). jump[k] = (A, C) of k + 1 steps (A = mult^(k+1), C = inc (1 +
    # mult + ... + mult^k), each as high, low): four states are taken from one, so
    # four multiplies run side by side instead of one after another
    hi, lo = st[0], st[1]
    i = 0
    while i + 4 <= m:
        for k in range(4):
            nh, nl = _pcg_step(hi, lo, jump[k, 0], jump[k, 1], jump[k, 2], jump[k, 3])
            u[i + k] = _pcg_double(nh, nl)
        hi, lo = nh, nl
        i += 4
    while i < m:
        hi, lo = _pcg_step(hi, lo, jump[0, 0], jump[0, 1], jump[0, 2], jump[0, 3])
        u[i] = _pcg_double(hi, lo)
        i += 1
    st[0] = hi
    st[1] = lo


@helper
def _pcg_advance(hi, lo, q, jump):
    # the state (hi, lo) q steps on (jump[0]: one step's A, C): Brown's jump-ahead,
    # O(log q) 128-bit multiplies (numpy's PCG64 `advance`)
    z = np.uint64(0)
    ah, al, ch, cl = z, np.uint64(1), z, z  # the steps so far: A = 1, C = 0
    mh, ml, ph, pl = jump[0, 0], jump[0, 1], jump[0, 2], jump[0, 3]
    while q > 0:
        if q & 1:
            ah, al = _pcg_step(ah, al, mh, ml, z, z)
            ch, cl = _pcg_step(ch, cl, mh, ml, ph, pl)
        m1 = ml + np.uint64(1)  # (A + 1), for C of twice the steps: C (A + 1)
        ph, pl = _pcg_step(ph, pl, mh + (np.uint64(1) if m1 == z else z), m1, z, z)
        mh, ml = _pcg_step(mh, ml, mh, ml, z, z)
        q >>= 1
    return _pcg_step(hi, lo, ah, al, ch, cl)


#: PCG_DEFAULT_MULTIPLIER_128, numpy's PCG64 step's multiplier
PCG_MULT = 0x2360ED051FC65DA44385DF649FCCF645


_M64, _M128 = (1 << 64) - 1, (1 << 128) - 1


_pcg_jumps = {}


def pcg64_jump(inc: int) -> np.ndarray:
    """`_pcg64_fill`'s table for a PCG64 stream of increment inc: row k holds A =
    PCG_MULT^(k+1) and C = inc (1 + PCG_MULT + ... + PCG_MULT^k) modulo 2^128 (k + 1
    steps of the LCG from one state), each as (high, low) uint64."""
    t = _pcg_jumps.get(inc)
    if t is None:
        rows, a, c = [], 1, 0
        for _ in range(4):
            a, c = a * PCG_MULT & _M128, (c * PCG_MULT + inc) & _M128
            rows.append([a >> 64, a & _M64, c >> 64, c & _M64])
        t = _pcg_jumps[inc] = np.array(rows, np.uint64)
    return t


def _pcg_take(rng):
    """rng's PCG64 state as the kernels step it ((high, low) uint64 and `pcg64_jump`'s
    table) with what `_pcg_put` needs to put it back; None without numba or where the
    bit generator is not PCG64."""
    bg = rng.bit_generator
    if not numba_jit() or type(bg) is not np.random.PCG64:
        return None
    state = bg.state
    s, inc = state["state"]["state"], state["state"]["inc"]
    return bg, state, np.array([s >> 64, s & _M64], np.uint64), pcg64_jump(inc)


def _pcg_put(bg, state, st, _jump) -> None:
    """Put back the state `_pcg_take` took, as the kernels left it in st."""
    state["state"]["state"] = (int(st[0]) << 64) | int(st[1])
    bg.state = state
