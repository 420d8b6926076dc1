"""Instructions a policy's run executes, counted by valgrind (cachegrind's `I refs`):
a figure that does not move with the host's load, for before/after comparisons of a
speed-up where CPU time does not settle (on the project's 2-core VM the same run's CPU
time varies by a third from one minute to the next, and by as much again when the
other core is busy). It counts instructions, not time: cache misses and mispredicted
branches are not in it, so a change made for those shows in CPU time or not at all.

    .venv/bin/python benchmarks/bench_instructions.py --policies autonuma-tiering
        [--seconds 8] [--top 12]

Each policy runs bench_scale.py's scenario (110 GiB gups:dynamic on optane-4tier)
for `--seconds` simulated seconds twice under valgrind: first with `--tool=none`, so
numba's on-disk cache holds every kernel the run compiles for the CPU valgrind shows
(its features differ from the host's, so a native run's cache entries do not serve),
then with `--tool=cachegrind --cache-sim=no` (about 40 times slower than native), the
count: the run, not the compiler.
Prints each run's instructions, in total and for the functions valgrind can name
(numpy's and CPython's; numba's compiled kernels are the unnamed `???`). Needs the
Debian package `valgrind`. To compare two trees, run it in each:
`PYTHONPATH=src .venv/bin/python benchmarks/bench_instructions.py ...`.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent

CHILD = """
import sys
sys.path.insert(0, {here!r})
import bench_scale, tierlab
tierlab.run(**bench_scale.kwargs({policy!r}, {seconds!r}, {seed!r}))
"""


def _run(script: Path, valgrind: list[str]) -> subprocess.CompletedProcess:
    # a script file, not -c: cachegrind writes the command line into its output, and
    # cg_annotate refuses one that spans lines
    return subprocess.run(valgrind + [sys.executable, str(script)], capture_output=True,
                          text=True)


def _top(out: Path, n: int) -> list[tuple[int, str]]:
    """The n functions with the most instructions (cg_annotate's table)."""
    text = subprocess.run(["cg_annotate", str(out)], capture_output=True,
                          text=True).stdout
    rows = []
    for line in text.splitlines():
        m = re.match(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(\S.*)$", line)
        if m and "PROGRAM TOTALS" not in line:
            rows.append((int(m.group(1).replace(",", "")), m.group(2)))
    return rows[:n]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--policies", required=True, help="comma-separated policy names")
    ap.add_argument("--seconds", type=float, default=8.0,
                    help="simulated seconds of bench_scale's scenario (default 8)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--top", type=int, default=12,
                    help="functions to list per run (default 12; 0: none)")
    a = ap.parse_args()
    if shutil.which("valgrind") is None:
        print("bench_instructions: valgrind not found (Debian package valgrind)",
              file=sys.stderr)
        return 2
    if not a.seconds > 0:
        print(f"bench_instructions: bad --seconds {a.seconds!r}: expected > 0",
              file=sys.stderr)
        return 2
    sys.path.insert(0, str(HERE))
    from _harness import registered_policies
    names = [p.strip() for p in a.policies.split(",") if p.strip()]
    valid = registered_policies()
    bad = [p for p in names if p not in valid]
    if bad or not names:
        print(f"bench_instructions: bad --policies {a.policies!r}: valid: "
              f"{', '.join(valid)}", file=sys.stderr)
        return 2
    print("| policy | simulated s | instructions (G) |")
    print("|---|---:|---:|")
    tops = {}
    with tempfile.TemporaryDirectory() as tmp:
        for policy in names:
            script = Path(tmp) / "run.py"
            script.write_text(CHILD.format(here=str(HERE), policy=policy,
                                           seconds=a.seconds, seed=a.seed))
            warm = _run(script, ["valgrind", "--tool=none"])
            if warm.returncode:
                print(f"bench_instructions: {policy}: the warm-up run failed:\n"
                      f"{warm.stderr.strip()}", file=sys.stderr)
                return 2
            out = Path(tmp) / f"{policy}.cg"
            r = _run(script, ["valgrind", "--tool=cachegrind", "--cache-sim=no",
                            f"--cachegrind-out-file={out}"])
            m = re.search(r"I\s+refs:\s+([\d,]+)", r.stderr)
            if r.returncode or not m:
                print(f"bench_instructions: {policy}: the valgrind run failed:\n"
                      f"{r.stderr.strip()[-2000:]}", file=sys.stderr)
                return 2
            ir = int(m.group(1).replace(",", ""))
            print(f"| {policy} | {a.seconds:g} | {ir / 1e9:.2f} |", flush=True)
            if a.top:
                tops[policy] = _top(out, a.top)
    for policy, rows in tops.items():
        print(f"\n{policy}: the functions with the most instructions (G)")
        for ir, name in rows:
            print(f"  {ir / 1e9:8.3f}  {name[:110]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
