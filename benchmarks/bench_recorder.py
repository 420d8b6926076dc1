"""`tierlab trace record` overhead: pagegrind vs native on memory-bound programs.

    .venv/bin/python benchmarks/bench_recorder.py [--updates M] [--passes P] [--mib S]
        [--window N] [--repeat R]

Builds pagegrind, compiles two C programs with gcc -O2 and times each natively, under
``valgrind --tool=none`` (Valgrind's floor) and under pagegrind (recording a .pg):

- gups: random read-modify-write of 8-byte words over a S MiB array (default 256 MiB,
  M = 50 million updates: 100 million data accesses), like HPCC RandomAccess;
- stream: P passes (default 3) of a summing sweep over the same array.

Prints each time (best of --repeat runs) and the ratio to native; the target is
pagegrind < 10x native. Both programs include filling the array (page faults).
The .npz conversion (`record`) is timed separately: it does not touch the program.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tierlab.tracing.record import TOOL, _valgrind, build_recorder  # noqa: E402
from tierlab.workloads.trace import convert_pagegrind  # noqa: E402

SRC = r"""
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    const char *mode = argv[1];
    size_t n = (size_t)atol(argv[2]) << 17;          /* MiB -> 8-byte words */
    long iters = atol(argv[3]);
    uint64_t *a = malloc(n * sizeof *a);
    uint64_t x = 88172645463325252ULL, sum = 0;
    if (!a)
        return 1;
    for (size_t i = 0; i < n; i++)
        a[i] = i;
    if (strcmp(mode, "gups") == 0) {
        for (long k = 0; k < iters; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            a[x & (n - 1)] ^= x;
        }
    } else {
        for (long p = 0; p < iters; p++)
            for (size_t i = 0; i < n; i++)
                sum += a[i];
    }
    printf("%llu\n", (unsigned long long)(sum + a[x & (n - 1)]));
    return 0;
}
"""


def timed(argv, env=None) -> float:
    t = time.perf_counter()
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=env)
    return time.perf_counter() - t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--updates", type=float, default=50.0, help="gups updates, millions")
    ap.add_argument("--passes", type=int, default=3, help="stream passes")
    ap.add_argument("--mib", type=int, default=256, help="array size in MiB (power of 2)")
    ap.add_argument("--window", type=int, default=10_000_000, help="pagegrind --window")
    ap.add_argument("--repeat", type=int, default=2, help="runs per timing (best kept)")
    a = ap.parse_args()
    exe = build_recorder()
    vg = _valgrind()
    env = dict(os.environ, VALGRIND_LIB=str(exe.parent))
    worst = 0.0
    with tempfile.TemporaryDirectory() as d:
        prog = Path(d) / "membench"
        (Path(d) / "membench.c").write_text(SRC)
        subprocess.run(["gcc", "-O2", "-o", str(prog), str(prog) + ".c"], check=True)
        cases = [("gups", int(a.updates * 1e6)), ("stream", a.passes)]
        print(f"array {a.mib} MiB, window {a.window}; times in s (ratio to native)")
        for name, iters in cases:
            args = [str(prog), name, str(a.mib), str(iters)]
            pg = Path(d) / f"{name}.pg"
            native = min(timed(args) for _ in range(a.repeat))
            none = min(timed([vg, "--tool=none", "-q", *args]) for _ in range(a.repeat))
            rec = min(timed([vg, f"--tool={TOOL}", "-q", f"--window={a.window}",
                             f"--out={pg}", *args], env=env) for _ in range(a.repeat))
            t = time.perf_counter()
            tr = convert_pagegrind(pg, Path(d) / f"{name}.npz")
            conv = time.perf_counter() - t
            worst = max(worst, rec / native)
            print(f"{name:6s}: native {native:6.2f}  none {none:6.2f} ({none / native:4.1f}x)"
                  f"  pagegrind {rec:6.2f} ({rec / native:4.1f}x)  "
                  f"[{tr.total_accesses / 1e6:.0f} M accesses, {tr.nwindows} windows; "
                  f".npz conversion {conv:.2f} s]")
    ok = worst < 10
    print(f"worst pagegrind/native: {worst:.1f}x (target < 10x: {'met' if ok else 'NOT met'})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
