"""tierlab's own policy (issue 21): `tierlab` (policies/own.py)."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

import tierlab
from tierlab.errors import TierlabError
from tierlab.machines.machine import Machine, Tier
from tierlab.engine import Simulation
from tierlab.policies import ALLOCS, POLICIES
from tierlab.policies.loadbalance import LoadCurves, plan

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


def test_a_co_runner_is_background_not_ours():
    """A co-runner holding half the top node's bandwidth is fitted as background (b),
    not as our load: the node is not emptied as we leave it, and the hot set stays."""
    wl = slow_hotcold(hot=300)
    m = replace(small_machine(dram_pages=900, slow_pages=4000, tiers=4), antagonist={0: 0.5})
    sim, rec = simulate(m, wl, "tierlab", seed=1)
    check_invariants(sim)
    assert sim.policy.curves.b[0] == pytest.approx(0.5, abs=0.05)
    assert np.mean(sim.node_of(np.arange(2700, 3000)) == 0) >= 0.8
    off = simulate(m, wl, "tierlab:balance=off", seed=1)[1]
    assert rec["throughput"] >= 0.98 * off["throughput"]


def test_a_moving_hot_set_under_a_co_runner_is_followed_without_ping_pong():
    """gups:dynamic under Colloid's 2x antagonist (half the DRAM node's bandwidth):
    the top node queues and each new hot set is brought up only until the marginal
    latencies meet. Each move's gain is taken where the decision's earlier moves left
    the load, so the moves of one decision do not overshoot together and the next one
    does not move them back (before: 3.6-4.1x the footprint, 37k-40k pages moved back
    soon after)."""
    for seed in (0, 1):
        rec = tierlab.run(machine="optane-2tier:antagonist=dram@50%",
                          workload="gups:dynamic", policy="tierlab", scale=1 / 256,
                          seed=seed)
        assert rec["pingpong"] <= 0.01 * rec["promotions"]
        assert rec["migrated_bytes"] <= 3 * rec["footprint_bytes"]


def test_uniform_access_on_saturated_slow_nodes_is_balanced_despite_copy_stall():
    """Uniform GUPS on optane-4tier: first touch leaves the Optane nodes saturated. A
    shed's copies are priced with the stall their traffic causes there, which one
    aggregation's gain does not repay; the load that has held for t is expected to
    hold about t more (the node's load age), so the balance still spreads it (with a
    one-aggregation horizon the run stayed at static's 0.93 of the oracle)."""
    got = {p: tierlab.run(machine="optane-4tier", workload="gups:uniform", policy=p,
                          scale=1 / 256)["throughput"] for p in ("tierlab", "static",
                                                                  "oracle")}
    assert got["tierlab"] >= 0.98 * got["oracle"]
    assert got["tierlab"] >= 1.03 * got["static"]


def three_tiers(bw):
    """Local DRAM, remote DRAM and Optane, each node with `bw` bytes/s of read and
    write bandwidth (Optane 1/2.7 of it for reads, 1/8 for writes)."""
    ts = [Tier("dram0", "dram", 900 * 4096, 81, 86, bw, bw, 0, True),
          Tier("dram1", "dram", 900 * 4096, 81, 86, bw, bw, 1, True),
          Tier("optane", "optane", 8000 * 4096, 305, 100, bw / 2.7, bw / 8, 0, False)]
    return Machine("three", ts, demotion=[0, 1, 2])


def marginal_spread(rec, machine):
    """Largest over smallest marginal latency (M/D/1: L0 (1 + 1 / (1 - u)^2) / 2 at
    the run's mean utilisation) over the nodes that served 1% of the accesses."""
    m = [machine.read_latency_ns(i) * (1 + 1 / (1 - min(rec["mean_util"][t.name], 0.999))
                                       ** 2) / 2
         for i, t in enumerate(machine.tiers) if rec["tier_access_share"][t.name] >= 0.01]
    return max(m) / min(m)


def test_saturated_top_node_spreads_load_over_three_tiers():
    """The top node's bandwidth cannot carry the hot set: the balance spreads its load
    over the three nodes until their marginal latencies meet, and beats the hits
    placement (every hot page in the top node) by far, within 10% of the oracle."""
    m = three_tiers(60e6)
    wl = HotCold(n=3000, hot=300, compute_ns=20000.0, work=4e7)
    sim, rec = simulate(m, wl, "tierlab", seed=1)
    check_invariants(sim)
    hits = simulate(m, wl, "tierlab:balance=off", seed=1)[1]
    best = simulate(m, wl, "oracle", seed=1)[1]
    assert rec["policy_stats"]["spread_pages"] > 0
    assert rec["throughput"] >= 1.1 * hits["throughput"]
    assert 0.9 * best["throughput"] <= rec["throughput"] <= best["throughput"] * 1.005
    assert marginal_spread(rec, m) < 2.0 < 10.0 < marginal_spread(hits, m)


def test_balance_draws_pages_when_it_cannot_read_every_node(monkeypatch):
    """Past SAMPLE monitored pages the rebalance counts each node's pages on a sample
    and draws the pages it moves from the whole span: the sheds move the planned
    number of pages, not the sample's share of them."""
    import tierlab.policies.own as own
    m = three_tiers(60e6)
    wl = HotCold(n=3000, hot=300, compute_ns=20000.0, work=4e7)
    full = simulate(m, wl, "tierlab", seed=1)[1]
    monkeypatch.setattr(own, "SAMPLE", 300)
    sim, rec = simulate(m, wl, "tierlab", seed=1)
    check_invariants(sim)
    hits = simulate(m, wl, "tierlab:balance=off", seed=1)[1]
    assert rec["policy_stats"]["spread_pages"] >= 0.5 * full["policy_stats"]["spread_pages"]
    assert rec["throughput"] >= 1.1 * hits["throughput"]


def test_load_curves_fit_slope_and_background():
    """Counters from u = b + a v with a = 1.5 and b = 0.3 on node 0 (a co-runner),
    a = 1 elsewhere: the fit finds both once the reads have varied."""
    L0 = np.array([80e-9, 130e-9, 300e-9])
    cv = LoadCurves(L0, [1e9, 1e9, 4e8], [8e8, 8e8, 1e8])
    a, b = np.array([1.5, 1.0, 1.0]), np.array([0.3, 0.0, 0.0])
    rng = np.random.default_rng(0)
    for _ in range(20):
        R = rng.uniform(1e6, 4e6, 3)
        W = 0.2 * R
        u = b + a * (cv.kr * R + cv.kw * W)
        lat = L0 * (1 + u / (2 * (1 - u)))
        cv.update(R, W, lat)
    assert cv.a[0] == pytest.approx(1.5, rel=0.02)
    assert cv.b[0] == pytest.approx(0.3, abs=0.02)
    assert cv.b[1:] == pytest.approx([0, 0], abs=0.02)
    assert cv.latency(0, R[0], W[0]) == pytest.approx(lat[0], rel=1e-6)


def curves_at(R, W=None):
    cv = LoadCurves([80e-9, 130e-9, 300e-9], [1e9, 1e9, 4e8], [8e8, 8e8, 1e8])
    R = np.asarray(R, dtype=float)
    W = np.zeros(3) if W is None else np.asarray(W, dtype=float)
    u = cv.kr * R + cv.kw * W
    cv.update(R, W, cv.L0 * (1 + u / (2 * (1 - u))))
    return cv


def test_plan_sheds_a_saturated_node_until_marginals_meet():
    """A crafted state: node 0 at 96% utilisation, the others idle with room. The plan
    moves shares of node 0 away, each move saving stall, until the marginal latencies
    of the loaded nodes are within 30% (they differ by 60x before)."""
    cv = curves_at([1.5e7, 1e5, 1e4])
    before = [cv.marginal(n) for n in range(3)]
    assert max(before) / min(before) > 50
    moves, R, W = plan(cv, [10000, 10000, 10000], [1e6, 1e6, 1e6], np.ones(3), 1e-6,
                       1.0, 10**6)
    assert moves and all(saved > 0 and n == 0 for n, _, _, _, _, saved, _ in moves)
    after = curves_at(R, W)
    m = [after.marginal(n) for n in range(3) if R[n] > 0.05 * R.sum()]
    assert max(m) / min(m) < 1.3
    assert R.sum() == pytest.approx(1.5e7 + 1.1e5)


def test_plan_leaves_a_balanced_or_costly_state_alone():
    cv = curves_at([1.5e7, 1e5, 1e4])
    assert plan(cv, [10000] * 3, [1e6] * 3, np.ones(3), 1e-6, 1.0, 0)[0] == []  # no budget
    assert plan(cv, [10000] * 3, [1e6] * 3, np.ones(3), 1e3, 1.0, 10**6)[0] == []  # costly
    cv = curves_at([3e6, 1e5, 1e4])  # no queueing to speak of: the fast node is best
    assert plan(cv, [10000] * 3, [1e6] * 3, np.ones(3), 1e-6, 1.0, 10**6)[0] == []


def test_copy_stall_is_the_stall_a_copys_traffic_adds():
    """A page copied to or from a node is PAGE bytes of background traffic there (the
    engine's copies in flight: PAGE / read_bw of utilisation for a second); its cost
    to us is our stall's growth under that utilisation, small on an idle node and
    hundreds of times the CPU copy near saturation."""
    from tierlab.units import PAGE
    R = np.array([0.96e9 / 64, 0.5e9 / 64, 0.01 * 4e8 / 64])
    cv = curves_at(R)
    cs = cv.copy_stall()
    for n in range(3):
        bump = PAGE / [1e9, 1e9, 4e8][n] * 1e-3  # a thousandth of a page, for a derivative
        b = cv.b.copy()
        cv.b[n] += bump
        after = cv.stall(n, R[n], 0.0)
        cv.b = b
        assert cs[n] == pytest.approx((after - cv.stall(n, R[n], 0.0)) / 1e-3, rel=0.01)
    assert cs[0] > 100 * cs[1] > 100 * 1e-6 and cs[2] < 1e-6


def test_plan_on_saturated_nodes_does_not_trade_load_back():
    """Every node near saturation: one share of node 1 goes to node 2, and the copies'
    own traffic (`copy_stall`) keeps the plan from sending a share of node 2 straight
    back, which the CPU cost of a copy alone did not."""
    cv = curves_at([0.96e9 / 64, 0.95e9 / 64, 0.9 * 4e8 / 64])
    moves, _, _ = plan(cv, [10000] * 3, [1e6] * 3, np.ones(3), 1e-6, 1.0, 10**6)
    pairs = [(n, m) for n, m, *_ in moves]
    assert pairs and not any((m, n) in pairs for n, m in pairs)
    for n, m, x, to, d, saved, cost in moves:
        assert cost >= x * cv.copy_stall()[[n, m]].sum() * 0.5


def test_every_move_is_explained(tmp_path):
    path = tmp_path / "explain.jsonl"
    rec = tierlab.run(machine="optane-2tier", workload="gups:hotset", policy="tierlab",
                      scale=1 / 256, explain=str(path))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    moves = [m for ln in lines for m in ln["moves"]]
    assert moves and rec["promotions"] > 0
    for ln in lines[1:]:  # every node's load and what the balance aimed for
        assert [n["node"] for n in ln["nodes"]] == [0, 1]
        for n in ln["nodes"]:
            assert n["loaded_ns"] >= 81 and 0 <= n["util"] < 1 and n["reads_per_s"] >= 0
            assert n["marginal_ns"] >= n["loaded_ns"] * (1 - 1e-9)
        assert ln["aimed_util"] is None or len(ln["aimed_util"]) == 2
    for m in moves:
        assert m["reason"] and m["cost_s"] > 0 and np.isfinite(m["gain_s"])
        if not m["reason"].startswith("displaced"):
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


def test_headroom_lets_a_growing_heaps_newest_pages_land_in_the_top_node():
    """YCSB D inserts its hottest records into new pages: with the headroom they are
    first-touched in DRAM (kswapd hardly demotes) instead of waiting in Optane for the
    next decision."""
    on, off = (tierlab.run("optane-2tier", "ycsb:d", f"tierlab:headroom={h}",
                           scale=1 / 512, seed=0) for h in ("on", "off"))
    assert on["throughput"] >= 1.1 * off["throughput"]
    assert on["migrations_by_reason"].get("reclaim", 0) \
        <= 0.1 * off["migrations_by_reason"]["reclaim"]


def test_headroom_changes_nothing_where_the_heap_does_not_grow():
    wl = slow_hotcold(hot=300, phases=2)
    m = small_machine(dram_pages=900, slow_pages=4000)
    on, off = (simulate(m, wl, f"tierlab:headroom={h}", seed=3)[1] for h in ("on", "off"))
    for k in ("throughput", "promotions", "demotions", "migrated_bytes"):
        assert on[k] == off[k]


def test_headroom_attach_counts_the_set_up_as_growth():
    """`headroom=attach`: the heap's growth counts from the policy's start, so the
    first decision keeps room for the set-up's pages (a quarter of the top node at
    most) as a daemon that watched its program fill the heap does; `on` keeps none at
    the first decision (it has no earlier count) and none later on a static heap."""
    wl = slow_hotcold(hot=300, phases=2)
    m = small_machine(dram_pages=900, slow_pages=4000)
    kept = {}
    for h in ("on", "attach"):
        sim = Simulation(m, wl, POLICIES.create(f"tierlab:headroom={h}"),
                         ALLOCS.create("dram-preferred"), seed=3)
        real, got = sim.policy._reserve, []
        sim.policy._reserve = lambda total, real=real, got=got: got.append(real(total)) \
            or got[-1]
        sim.run()
        kept[h] = got
    assert kept["on"] and not any(kept["on"])
    assert kept["attach"][0] == int(0.25 * 900) and not any(kept["attach"][4:])


def test_bad_headroom_is_named():
    with pytest.raises(TierlabError, match="headroom.*on, off, attach"):
        POLICIES.create("tierlab:headroom=maybe")


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
