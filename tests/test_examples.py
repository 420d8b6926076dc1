"""The worked example of docs/writing-a-policy.md, examples/twice_accessed.py, run as a
user runs a plugin: from its file, with --import, on the process pool."""
import json
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "twice_accessed.py"


def test_the_worked_example_runs_as_a_plugin(tmp_path):
    r = subprocess.run([sys.executable, "-m", "tierlab", "compare", "--import", EXAMPLE,
                        "--machine", "optane-2tier", "--scale", "1/256", "--workloads",
                        "gups:hotset", "--policies", "static,twice-accessed", "--jobs", "2",
                        "--out", "out"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    by = {x["policy"]: x for x in json.loads((tmp_path / "out" / "results.json")
                                             .read_text())}
    twice = by["twice-accessed"]
    assert twice["promotions"] > 0 and twice["policy_stats"]["promoted"] > 0
    assert twice["throughput"] > 1.3 * by["static"]["throughput"]   # the hot set moved up
    assert twice["slow_share"] < 0.5 * by["static"]["slow_share"]
