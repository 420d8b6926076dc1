"""DESIGN.md target: the default demo (`make demo`) under 60 s wall.

    .venv/bin/python benchmarks/bench_demo.py

Times the same command `make demo` runs (after the venv exists), end to end.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main():
    with tempfile.TemporaryDirectory() as d:
        cmd = [str(ROOT / ".venv/bin/tierlab"), "compare", "--machine", "optane-2tier",
               "--scale", "1/8", "--workloads", "gups:uniform,gups:hotset,gups:dynamic",
               "--policies", "static,oracle", "--baseline", "static", "--out", d]
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        wall = time.perf_counter() - t
    print(f"demo wall: {wall:.1f} s (target < 60 s: {'met' if wall < 60 else 'NOT met'})")
    return 0 if wall < 60 else 1


if __name__ == "__main__":
    sys.exit(main())
