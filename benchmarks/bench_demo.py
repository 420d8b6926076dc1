"""DESIGN.md target: the default demo (`make demo`) under 60 s wall.

    .venv/bin/python benchmarks/bench_demo.py

Runs `make demo` itself (after the venv exists) into a temporary directory, end to
end, and reports its wall time and the CPU time of its processes (on a busy machine
the wall time is the CPU time shared with the others).
"""
from __future__ import annotations

import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    with tempfile.TemporaryDirectory() as d:
        t = time.perf_counter()
        subprocess.run(["make", "-s", "-C", str(ROOT), "demo", f"OUT={d}"], check=True,
                       stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"demo wall: {wall:.1f} s, CPU {ru.ru_utime + ru.ru_stime:.1f} s, load "
          f"{os.getloadavg()[0]:.1f} (target < 60 s: {'met' if wall < 60 else 'NOT met'})")
    return 0 if wall < 60 else 1


if __name__ == "__main__":
    sys.exit(main())
