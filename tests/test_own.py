"""tierlab's own policy (issue 21): `tierlab` (policies/own.py)."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

import tierlab
from tierlab.errors import TierlabError
from tierlab.policies import POLICIES

from conftest import HotCold
from test_engine import check_invariants, simulate, small_machine


def slow_hotcold(**kw):
    """HotCold at 20 us of compute per update (~4e5 updates/s): cold pages are touched
    tens of times a second and hot ones thousands, so DAMON's 10 ms samples (which
    saturate near 300 accesses/s per page) can tell them apart; ~100 simulated s."""
    kw.setdefault("work", 4e7)
    return HotCold(n=3000, compute_ns=20000.0, **kw)


def test_uniform_access_moves_nothing():
    """No region is significantly hotter than another: the static placement stays."""
    wl = slow_hotcold(hot=300, hot_frac=0.0)  # every page at the same rate
    sim, rec = simulate(small_machine(dram_pages=900, slow_pages=4000), wl, "tierlab")
    check_invariants(sim)
    assert rec["promotions"] == 0 and rec["demotions"] <= 0.01 * 3000
    _, st = simulate(small_machine(dram_pages=900, slow_pages=4000), wl, "static")
    assert rec["throughput"] >= 0.98 * st["throughput"]


def test_hot_set_in_the_slow_tier_is_promoted_without_churn():
    wl = slow_hotcold(hot=300)
    m = small_machine(dram_pages=900, slow_pages=4000)
    sim, rec = simulate(m, wl, "tierlab", seed=1)
    check_invariants(sim)
    hot = np.arange(2700, 3000)  # HotCold's first hot range
    assert np.mean(sim.node_of(hot) == 0) >= 0.9
    assert rec["migrated_bytes"] <= 3 * 3000 * 4096
    best = simulate(m, wl, "oracle", seed=1)[1]
    assert rec["throughput"] >= 0.9 * best["throughput"]
    assert rec["throughput"] <= best["throughput"] * 1.005


def test_moving_hot_set_is_followed():
    wl = slow_hotcold(hot=300, phases=3, work=1.2e8)
    sim, rec = simulate(small_machine(dram_pages=900, slow_pages=4000), wl, "tierlab",
                        seed=2)
    lo = (3000 - 300 * 3) % (3000 - 300 + 1)  # the last phase's hot range
    assert np.mean(sim.node_of(np.arange(lo, lo + 300)) == 0) >= 0.8
    assert rec["pingpong"] <= 0.05 * rec["promotions"] + 10


def test_loaded_top_tier_caps_its_access_share():
    """Colloid's signal: with the top node's bandwidth mostly taken by a co-runner its
    loaded latency exceeds the next node's, and the cap comes down."""
    wl = slow_hotcold(hot=300)
    m = replace(small_machine(dram_pages=900, slow_pages=4000, tiers=4), antagonist={0: 0.9})
    sim, rec = simulate(m, wl, "tierlab", seed=1)
    check_invariants(sim)
    assert rec["policy_stats"]["budget_share"] < 1.0


def test_every_move_is_explained(tmp_path):
    path = tmp_path / "explain.jsonl"
    rec = tierlab.run(machine="optane-2tier", workload="gups:hotset", policy="tierlab",
                      scale=1 / 256, explain=str(path))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    moves = [m for ln in lines for m in ln["moves"]]
    assert moves and rec["promotions"] > 0
    for m in moves:
        assert m["reason"] and m["cost_s"] > 0 and np.isfinite(m["gain_s"])
        if m["reason"] != "displaced by a hotter region":
            assert m["gain_s"] > m["cost_s"]  # admitted because its gain repays its cost


def test_deterministic_per_seed():
    wl = slow_hotcold(hot=300, phases=2)
    m = small_machine(dram_pages=900, slow_pages=4000)
    a, b = (simulate(m, wl, "tierlab", seed=4)[1] for _ in range(2))
    for k in ("throughput", "promotions", "demotions", "migrated_bytes"):
        assert a[k] == b[k]


@pytest.mark.parametrize("spec", ["tierlab:margin=0", "tierlab:margin=x"])
def test_bad_margin_is_named(spec):
    with pytest.raises(TierlabError, match="margin"):
        POLICIES.create(spec)


def test_deferred_moves_count_up_per_page_across_splits():
    """The ski-rental horizon: a region's count of aggregations it has wanted to move
    follows its pages when regions split and merge, and restarts when it stops."""
    pol = POLICIES.get("tierlab")()
    arr = np.array
    got = pol._wanting(arr([0, 100]), arr([100, 200]), arr([True, False]))
    assert list(got) == [0, 0]
    # [0, 100) wanted once; split at 50 and merged with half of the idle one
    got = pol._wanting(arr([0, 50, 150]), arr([50, 150, 200]), arr([True, True, True]))
    assert list(got) == [1.0, 0.5, 0.0]
    got = pol._wanting(arr([0, 50, 150]), arr([50, 150, 200]), arr([True, False, True]))
    assert list(got) == [2.0, 0.0, 1.0]
    got = pol._wanting(arr([0, 50, 150]), arr([50, 150, 200]), arr([True, True, True]))
    assert list(got) == [3.0, 0.0, 2.0]
