"""`tierlab reproduce idt --sensitivity`: IDT's sensitivity grids at a tiny size (the
shape of the outputs, not the paper's numbers)."""
from __future__ import annotations

import csv
import json
import re
import subprocess
import sys

from tierlab.cli import main
from tierlab.reports.repro_idt_sensitivity import (DEFAULT, SENS_WORKLOADS, count_runs,
                                                   reproduce_idt_sensitivity)

#: ~3 simulated seconds of GUPS in a 64 MiB miniature: a fraction of a CPU second a run
TINY = ["gups:hotset,updates=5e8"]
TINY_SCALE = 1 / 1024
SUB = dict(samples=["10ms", "20ms"], aggrs=["1s", "2s"], demotes=["10%", "20%"],
           criticals=["1%", "2%"])


def test_sub_grid_outputs(tmp_path):
    done = []
    path = reproduce_idt_sensitivity(tmp_path, TINY_SCALE, TINY, jobs=1,
                                     on_done=lambda j, r: done.append(j.policy), **SUB)
    # 4 + 4 cells, the default cell run once for both grids
    assert len(done) == 7 == count_runs(TINY, **SUB)
    for f in ("README.md", "results.json", "results.csv",
              "idt-sensitivity-intervals.png", "idt-sensitivity-wmarks.png"):
        assert (tmp_path / f).stat().st_size > 0, f
    assert path == tmp_path / "README.md"
    for png in tmp_path.glob("*.png"):
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    doc = json.loads((tmp_path / "results.json").read_text())
    assert len(doc["records"]) == 7 and doc["workloads"] == TINY
    a, b = doc["grids"]
    assert (a["row"], a["col"], b["row"], b["col"]) == ("sample", "aggr", "demote_wmark",
                                                        "critical_wmark")
    for g, (rk, ck), default in ((a, ("sample", "aggr"), DEFAULT[:2]),
                                 (b, ("demote_wmark", "critical_wmark"), DEFAULT[2:])):
        cells = {(c[rk], c[ck]): c for c in g["cells"]}
        assert set(cells) == {(r, c) for r in g["rows"] for c in g["cols"]}
        assert len(cells) == 4
        assert cells[default]["performance"] == 1.0
        assert cells[default]["per_workload"] == {TINY[0]: 1.0}
        assert all(c["performance"] > 0 for c in cells.values())
        lo, hi = g["span"]
        assert lo <= 1.0 <= hi
        assert cells[tuple(g["best"])]["performance"] == hi
    # both grids' default cells are the same run
    assert {c["policy"] for c in a["cells"]} & {c["policy"] for c in b["cells"]} == \
        {"idt:sample=10ms,aggr=1s,demote_wmark=10%,critical_wmark=1%"}

    rows = list(csv.DictReader((tmp_path / "results.csv").open()))
    # per grid: 4 cells x (1 workload + the geomean row)
    assert len(rows) == 16
    assert {r["workload"] for r in rows} == {TINY[0], "geomean"}
    defaults = [r for r in rows if r["default"] == "1"]
    assert len(defaults) == 4 and all(float(r["normalised"]) == 1.0 for r in defaults)

    text = (tmp_path / "README.md").read_text()
    assert "| sample \\ aggr | 1s | 2s |" in text
    assert "| demote_wmark \\ critical_wmark | 1% | 2% |" in text
    for r in ("10ms", "20ms", "10%", "20%"):
        assert f"\n| {r} | " in text
    # the default cell, exactly 1, in both tables (bold if it is the best)
    assert len(re.findall(r"\| (\*\*)?1\.00(\*\*)? † \|", text)) == 2
    assert text.count("**") >= 4      # a best cell in bold in each
    assert "at scale 1/1024;" in text
    assert "0.86-1.00" in text and "0.84-1.00" in text   # the paper's spans beside ours
    assert "idt-sensitivity-intervals.png" in text and "idt-sensitivity-wmarks.png" in text


def test_default_workloads_are_three_representative_ones():
    assert SENS_WORKLOADS == ["gups:hotset", "ycsb:d", "masim:tiering"]
    assert count_runs(None) == (16 + 9 - 1) * 3


def test_cli_runs_the_full_grid(tmp_path, capsys):
    """The CLI's dispatch: the whole 16 + 9 grid (24 distinct cells) on the tiny run."""
    assert main(["reproduce", "idt", "--sensitivity", "--out", str(tmp_path), "--scale",
                 "1/1024", "--workloads", TINY[0], "--jobs", "2", "--seeds", "0"]) == 0
    doc = json.loads((tmp_path / "results.json").read_text())
    assert [len(g["cells"]) for g in doc["grids"]] == [16, 9]
    assert len(doc["records"]) == 24 and doc["scale"] == 1 / 1024
    got = capsys.readouterr()
    assert "wrote" in got.out
    # issue 49: the run count first, then one line per run, then the summary
    lines = got.err.strip().splitlines()
    assert lines[0] == "24 runs on 2 process(es)", lines[:3]
    assert lines[1].startswith("[1/24] ") and lines[24].startswith("[24/24] ")
    assert lines[-1].startswith("reproduce idt: 24 run(s) made in ")
    # the experiment as run, beside the results: run again from it, nothing is new
    exp = (tmp_path / "experiment.toml").read_text()
    assert 'name = "idt"' in exp and "sensitivity = true" in exp and "seeds = [0]" in exp
    assert main(["reproduce", str(tmp_path / "experiment.toml"), "--resume",
                 str(tmp_path)]) == 0
    assert "reproduce idt: 0 run(s) made in " in capsys.readouterr().err


def test_sensitivity_with_another_reproduction_is_a_one_line_error(tmp_path):
    p = subprocess.run([sys.executable, "-m", "tierlab", "reproduce", "hemem",
                        "--sensitivity", "--out", str(tmp_path / "x")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "--sensitivity applies to idt only" in p.stderr and "'hemem'" in p.stderr
    assert "Traceback" not in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "x").exists()
