"""The console examples of README.md and docs/*.md (the `tierlab` and `make` lines of
their sh and console blocks) run as written, at their own scale, from a fresh process:
each either runs here, its error line as the doc prints it, or is listed in
NOT_RUNNABLE with why. A new example must be one or the other."""
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
#: (file, the example's first words) -> why it does not run in make test
NOT_RUNNABLE = {
    ("README.md", "make demo"): "the demo itself: 30 runs, about 2 min "
                                "(benchmarks/bench_demo.py times it)",
    ("README.md", "make test"): "the test suite itself",
    ("README.md", "tierlab compare --machine optane-4tier --scale 1/64"):
        "39 runs, IDT's with its full-scale regions: minutes; the tour's table is its "
        "output",
    ("docs/baselines.md", "tierlab compare --machine optane-4tier --workloads @baselines"):
        "64 runs over the @baselines suite: minutes (docs/benchmarks.md, 'The baselines "
        "suite')",
    ("docs/cluster.md", "tierlab compare"): "a sweep interrupted with ^C and resumed: "
                                            "tests/test_cluster.py interrupts and resumes one",
    ("docs/nomad.md", "tierlab compare"): "24 runs of YCSB up to 28 M records: minutes; "
                                          "docs/nomad-compare holds its output",
}


def examples() -> list:
    """(file, command, the lines the doc prints after it) of every example."""
    out = []
    for f in [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md")):
        for block in re.findall(r"```(?:sh|bash|console|shell)\n(.*?)```", f.read_text(),
                                re.S):
            lines = block.replace("\\\n", " ").splitlines()
            for i, line in enumerate(lines):
                cmd = " ".join(line.strip().removeprefix("$ ").split())
                if cmd.startswith(("tierlab ", "make ")):
                    shown = []
                    for nxt in lines[i + 1:]:
                        if nxt.startswith("$ ") or nxt.strip().startswith("tierlab "):
                            break
                        shown.append(nxt)
                    out.append((str(f.relative_to(ROOT)), cmd.split(" #")[0], shown))
    return out


def skipped(doc: str, cmd: str):
    return next((why for (d, head), why in NOT_RUNNABLE.items()
                 if d == doc and cmd.startswith(head)), None)


RUNNABLE = [e for e in examples() if skipped(e[0], e[1]) is None]


def test_every_example_runs_or_says_why_not():
    found = examples()
    assert len(found) >= 14
    assert len(RUNNABLE) >= 5
    for (doc, head) in NOT_RUNNABLE:  # every exemption still names an example
        assert any(d == doc and c.startswith(head) for d, c, _ in found), (doc, head)


@pytest.mark.parametrize("doc,cmd,shown", RUNNABLE, ids=[f"{d}: {c[:60]}" for d, c, _
                                                          in RUNNABLE])
def test_the_example_runs_as_the_doc_shows(tmp_path, doc, cmd, shown):
    args = shlex.split(cmd)[1:]
    # paths of the repository (examples/...) stay its; DIR and outputs go to tmp_path
    args = [str(ROOT / a) if (ROOT / a).exists() and "/" in a else
            ("out-dir" if a == "DIR" else a) for a in args]
    r = subprocess.run([sys.executable, "-m", "tierlab", *args], cwd=tmp_path,
                       capture_output=True, text=True)
    errors = [x for x in shown if x.startswith("tierlab: error:")]
    if errors:  # an example of a refusal: the doc's line, exit status 2
        assert r.returncode == 2 and r.stderr.strip().splitlines() == errors, r.stderr
    else:
        assert r.returncode == 0, r.stderr[-2000:]
