"""scripts/sim_vs_kernel.py's reading of an exec run and its mirror's start, on crafted
records: tierlab exec's clock, the room node 0 had at hotcold's ready, the machine the
daemon's policy was given, the placement the fill left, the counters' gaps."""
from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest

from tierlab import api
from tierlab.machines import load_machine

_spec = importlib.util.spec_from_file_location(
    "sim_vs_kernel", Path(__file__).parents[1] / "scripts" / "sim_vs_kernel.py")
svk = importlib.util.module_from_spec(_spec)
sys.modules.setdefault("sim_vs_kernel", svk)  # its dataclasses look their module up
_spec.loader.exec_module(svk)


class Run:
    def __init__(self, results):
        self.results = results

    def of(self, kind):
        return [r for r in self.results if r.get("kind") == kind]

    def one(self, kind, **match):
        got = [r for r in self.of(kind) if all(r.get(k) == v for k, v in match.items())]
        return got[-1] if got else None


def test_exec_clock_is_its_first_interval_lines_uptime():
    """The daemon's t=0 is when its first interval line came (uptime 10.19 less its
    t), not the exec command's start (4.25: the interpreter loads first)."""
    run = Run([{"kind": "exec-command", "uptime": 4.25},
               {"kind": "exec-line", "line": "note: damon-tiering: young=off", "uptime": 9.8},
               {"kind": "exec-line", "line": "t=   0.0s  promoted: -  demoted: -",
                "uptime": 10.19},
               {"kind": "exec-line", "line": "t=   1.4s  promoted: -", "uptime": 10.87}])
    assert svk._exec_clock(run) == pytest.approx(10.19)
    assert svk._exec_clock(Run(run.results[:2])) == 4.25  # no interval line: the start


def test_room_at_ready_gives_back_what_moved_before_the_first_sample():
    """At ready: 1,000 hot and 40,000 cold pages on node 0; at the first sample 5,000
    more hot ones (promoted since) and 2,000 fewer cold ones (demoted), 10,000 free:
    free at ready was 10,000 + 5,000 - 2,000."""
    at_ready = {"windows": [[1000, 15384], [0, 16384]], "cold": [40000, 0]}
    first = {"free": {"N0": 10000}, "hot": {"N0": 6000}, "cold": {"N0": 38000}}
    assert svk._room_at_ready(at_ready, [first]) == 1000 + 40000 + 13000
    assert svk._room_at_ready(None, [first]) is None


def test_machine_from_spec_is_the_machine_the_record_gave():
    m = load_machine("optane-4tier")
    spec = json.loads(json.dumps(asdict(m)))  # through results.json
    back = svk.machine_from_spec(spec)
    assert asdict(back) == asdict(m)


def test_the_mirror_starts_where_the_fill_left_each_range():
    """Cold range 0..3000 and two windows of 1,000: at ready the cold range had 2,000
    of its pages on node 0, window 1 half of its own, window 2 none."""
    sim = api.simulation(machine="optane-2tier", workload="gups:uniform", policy="static",
                         scale=1 / 256)
    sim._apply_change(next(iter(sim.workload.changes())))
    starts, ends = np.array([0, 3000, 4000]), np.array([3000, 4000, 5000])
    sim.teleport(np.arange(0, 5000), np.ones(5000, np.uint8))
    sim.teleport(np.arange(3000), np.zeros(3000, np.uint8))
    svk._place_as_at_ready(sim, {"cold": [2000, 1000], "windows": [[500, 500], [0, 1000]]},
                           starts, ends)
    on0 = [int((sim.mem.node[s:e] == 0).sum()) for s, e in zip(starts, ends)]
    assert on0 == [2000, 500, 0]


def test_counts_of_a_few_pages_on_both_sides_agree():
    assert svk._count_gap(0, 36) == 0.0
    assert svk._count_gap(0, 500) is None
    assert svk._count_gap(1000, 1100) == pytest.approx(0.1)
