"""Run every benchmark (`make bench`); figures go into docs/benchmarks.md by hand,
with the command that produced them."""
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
for script in ("bench_demo.py", "bench_scale.py", "bench_suite.py"):
    print(f"== {script}")
    subprocess.run([sys.executable, str(HERE / script)], check=False)
