"""IDT's policy rules (demotion watermarks, whole-region moves, ARP charged to the
demoting node, the ablations) and its place between static and oracle. The monitor is
plain DAMON with IDT's intervals (`idt-damon`) so that these tests pin the policy
alone; tests/test_idt_monitor.py pins IDT's own monitor."""
from __future__ import annotations

import numpy as np
import pytest

import tierlab
from tierlab.engine import Simulation
from tierlab.errors import TierlabError
from tierlab.field import RateField
from tierlab.policies import ALLOCS, POLICIES
from tierlab.policies.idt.policy import range_pages

from conftest import HotCold
from test_engine import check_invariants, small_machine


def _sim(policy="idt-damon", alloc="dram-preferred", tiers=2, **wl):
    m = small_machine(dram_pages=1024, slow_pages=8192, tiers=tiers)
    params = {"n": 4096, "hot": 512, "hot_frac": 1 - 1e-9, "work": 4e9}  # cold: untouched
    params.update(wl)
    return Simulation(m, HotCold(**params), POLICIES.create(policy),
                      ALLOCS.create(alloc), seed=0)


def test_range_pages():
    assert range_pages([2, 10], [5, 12]).tolist() == [2, 3, 4, 10, 11]
    assert range_pages([], []).size == 0


def test_no_demotion_above_the_demotion_watermark():
    """A fast node with more than demote_wmark free is left alone."""
    sim = _sim(n=600, hot=100)  # 600 pages fit in 1024 with > 10% free
    rec = sim.run()
    assert rec["policy_stats"]["demoted"] == 0 and rec["policy_stats"]["decisions"] == 0


def test_demotes_whole_regions_and_promotes_the_hot_set():
    """Hot set first-touched into the slow tier: IDT demotes cold regions from the full
    DRAM node and ARP/misplaced promotion brings the hot pages up."""
    sim = _sim()
    rec = sim.run()
    check_invariants(sim)
    st = rec["policy_stats"]
    assert st["demoted"] > 0 and st["decisions"] > 0
    hot = np.arange(4096 - 512, 4096)
    assert np.mean(sim.mem.node[hot] == 0) > 0.8
    free = sim.mem.free[0] / sim.mem.capacity[0]
    assert free >= 0.005  # demotion keeps room; promotions stop at 1% free


class Alternating(HotCold):
    """The hot range alternates between the first 512 pages (first-touched in DRAM)
    and the last 512 (first-touched in the slow tier), so demoted regions turn hot."""

    def field(self, k, n):
        f = super().field(0, n)
        if k % 2:
            return f
        return RateField.from_segments([0, self.hot], [self.hot, n], f.read[::-1],
                                       f.write[::-1], self.npages)


def test_arp_is_charged_to_the_node_that_demoted():
    m = small_machine(dram_pages=1024, slow_pages=8192)
    wl = Alternating(n=4096, hot=512, hot_frac=1 - 1e-9, work=1.2e10, phases=6)
    sim = Simulation(m, wl, POLICIES.create("idt-damon"), ALLOCS.create("dram-preferred"))
    sim.run()
    check_invariants(sim)
    pol = sim.policy
    assert pol.counts["arp"] > 0 and pol.counts["demoted"] > 0
    # every IDT demotion mark belongs to a node that has a lower node
    marks = np.unique(pol.demoted_by[pol.demoted_by > 0]) - 1
    assert set(marks.tolist()) <= set(pol.path[:-1])


@pytest.mark.parametrize("policy,action", [("idt-static-q2", "q2"), ("idt-static-q3", "q3"),
                                           ("idt-static-max", "max")])
def test_static_ablations_use_one_action(policy, action):
    sim = _sim(policy=policy + ",monitor=damon,weights=none")
    sim.run()
    acts = sim.policy.stats()["actions"]
    assert acts[action] > 0 and sum(acts.values()) == acts[action]
    assert sim.policy.agent.updates == 0


def test_norl_keeps_age_thres_10_and_noprp_never_prps():
    m = small_machine(dram_pages=1024, slow_pages=8192)
    wl = Alternating(n=4096, hot=512, hot_frac=1 - 1e-9, work=1.2e10, phases=6)
    runs = {}
    for p in ("idt-norl", "idt-noprp"):
        sim = Simulation(m, wl, POLICIES.create(p + ",monitor=damon"),
                         ALLOCS.create("dram-preferred"))
        sim.run()
        runs[p] = sim.policy
    assert sum(runs["idt-norl"].stats()["actions"].values()) == 0
    assert runs["idt-norl"].fixed_age_thres == 10 and runs["idt-norl"].counts["decisions"]
    assert runs["idt-noprp"].counts["prp"] == 0 and runs["idt-noprp"].counts["arp"] > 0


def test_rl_agent_learns_online():
    sim = _sim(phases=3)
    sim.run()
    assert sim.policy.agent.updates > 0
    assert sum(sim.policy.stats()["actions"].values()) == sim.policy.counts["decisions"]


def test_explain_log_names_state_action_reward_and_moves():
    got = []
    sim = _sim(policy="idt-damon")
    sim.policy.explain = got.append
    sim.run()
    decided = [e for e in got if any("action" in v for v in e["nodes"].values())]
    assert decided
    node = next(v for e in decided for v in e["nodes"].values() if "action" in v)
    for key in ("free", "state", "action", "age_thres", "eligible", "demoted_pages",
                "demoted_regions"):
        assert key in node
    assert any("reward" in v for e in got for v in e["nodes"].values())


def test_bad_parameters():
    with pytest.raises(TierlabError, match="demote_wmark"):
        POLICIES.create("idt-damon,demote_wmark=lots")
    with pytest.raises(TierlabError, match="critical_wmark"):
        POLICIES.create("idt-damon,demote_wmark=1%,critical_wmark=5%")


@pytest.mark.parametrize("machine", ["optane-2tier", "optane-4tier"])
def test_between_static_and_oracle_on_gups_hotset(machine):
    run = lambda p: tierlab.run(machine=machine, workload="gups:hotset", policy=p,  # noqa
                                scale=1 / 64)["throughput"]
    static, oracle, idt = run("static"), run("oracle"), run("idt-damon")
    assert 1.2 * static < idt <= 1.005 * oracle


def test_same_seed_same_record():
    a = tierlab.run(machine="optane-4tier", workload="gups:hotset", policy="idt-damon",
                    scale=1 / 64, seed=4)
    b = tierlab.run(machine="optane-4tier", workload="gups:hotset", policy="idt-damon",
                    scale=1 / 64, seed=4)
    strip = lambda r: {k: v for k, v in r.items() if k != "wall_seconds"}  # noqa
    assert strip(a) == strip(b)


def test_runs_start_from_the_shipped_weights_and_keep_learning(tmp_path):
    from tierlab.policies.idt.policy import SHIPPED_WEIGHTS
    assert SHIPPED_WEIGHTS.exists()
    sim = _sim(policy="idt-damon")
    sim.policy.attach(sim)
    start = sim.policy.agent.updates
    assert start > 0  # pre-trained
    sim = tierlab.api.simulation("optane-4tier", "gups:hotset", "idt-damon", scale=1 / 64)
    sim.run()
    assert sim.policy.agent.updates > start
    with pytest.raises(TierlabError, match="no file"):
        _sim(policy=f"idt-damon,weights={tmp_path / 'none.npz'}").run()


def test_prp_threshold_reset_option():
    """Literal rule: PRP's threshold tightens to each accepted distance for the whole
    run, so PRP fires rarely; prp_reset=aggregation starts from 5 each aggregation."""
    from tierlab import api
    counts = {}
    for p in ("idt", "idt:prp_reset=aggregation"):
        r = api.run(machine="optane-4tier", workload="gups:hotset", policy=p, scale=1 / 64)
        counts[p] = r["policy_stats"]["prp"]
    assert counts["idt"] <= 3
    assert counts["idt:prp_reset=aggregation"] > 10 * counts["idt"]
    with pytest.raises(TierlabError, match="prp_reset"):
        api.make_policy("idt:prp_reset=sometimes")


def _crafted(policy, fill, regions, nr, age, slow=()):
    """An attached policy on a 2-tier machine whose fast node holds pages [0, fill) and
    whose monitor shows the given regions (start, end), nr_accesses and ages; ranges in
    `slow` are placed on the slow node."""
    sim = _sim(policy)
    pol = sim.policy
    pol.attach(sim)
    sim.mem.place_range(0, fill, 0)
    for a, b in slow:
        sim.mem.place_range(a, b, 1)
    s, e = zip(*regions)
    pol.monitor.set_regions(list(s), list(e), nr, age)
    return sim, pol


def _node_now(sim, pol):
    regs = pol.monitor.regions
    return sim.mem.node[(regs.start + regs.end - 1) // 2].astype(np.int64), regs


def test_watermark_transition_to_aggressive_mode():
    """free <= critical_wmark (1%): the access threshold becomes (min + max) / 2 and age
    no longer matters; every region at or below it is demoted, coldest first."""
    regs = [(i * 102, (i + 1) * 102) for i in range(10)]
    nr = [0, 0, 2, 4, 6, 8, 10, 12, 14, 20]
    sim, pol = _crafted("idt-norl", 1020, regs, nr, [0] * 10)  # 4 pages free: 0.4%
    node, r = _node_now(sim, pol)
    entry = {"nodes": {}}
    pol._demote_node(0, r, node, np.array(nr), np.zeros(10, dtype=np.int64), entry)
    e = entry["nodes"][0]
    assert e["aggressive"] and e["access_thres"] == 10 and e["eligible"] == 7
    after, _ = _node_now(sim, pol)
    assert after.tolist() == [1] * 7 + [0] * 3


def test_a_region_demoted_in_a_pass_is_not_promoted_back_in_it():
    """IDT zeroes nr_accesses of a migrated region: ARP promotes a demoted region once
    it is seen accessed on the lower node, not on the accesses it had before demotion
    (which would move it back and forth in one aggregation)."""
    regs = [(i * 102, (i + 1) * 102) for i in range(10)]
    nr = [0, 0, 2, 4, 6, 8, 10, 12, 14, 20]
    sim, pol = _crafted("idt-norl", 1020, regs, nr, [0] * 10)  # aggressive: 0.4% free
    pol._on_aggregation(pol.monitor, 1.0)
    after, _ = _node_now(sim, pol)
    assert after.tolist() == [1] * 7 + [0] * 3
    assert pol.counts["arp"] == 0 and pol.counts["demoted"] == 7 * 102


def test_watermark_transition_to_normal_demotion_uses_min_and_age():
    """critical_wmark < free <= demote_wmark: threshold = min nr_accesses, and a region
    must also be at least age_thres old (10 under idt-norl)."""
    regs = [(0, 243), (243, 486), (486, 729), (729, 973)]
    nr, age = [0, 0, 0, 3], [20, 5, 15, 30]
    sim, pol = _crafted("idt-norl", 973, regs, nr, age)  # 51 pages free: 5%
    node, r = _node_now(sim, pol)
    entry = {"nodes": {}}
    pol._demote_node(0, r, node, np.array(nr), np.array(age), entry)
    assert not entry["nodes"][0]["aggressive"] and entry["nodes"][0]["access_thres"] == 0
    after, _ = _node_now(sim, pol)
    assert after.tolist() == [1, 0, 1, 0]


def test_prp_picks_the_nearest_by_address_gap_and_history_and_tightens():
    """PRP: among lower-node regions near the ARP region, the nearest by normalised
    address gap + normalised Hamming distance of histories is promoted if under the
    threshold, which then becomes that distance. A top-node region is never chosen."""
    regs = [(1000, 1010), (1010, 1020), (1020, 1030), (1100, 1110), (1200, 1210)]
    sim, pol = _crafted("idt", 0, regs, [5, 0, 0, 0, 0], [0] * 5,
                        slow=[(1020, 1030), (1100, 1110), (1200, 1210)])
    sim.mem.place_range(1000, 1020, 0)  # the ARP region and a top-node neighbour
    full = np.uint64(0xFFFFFFFFFFFFFFFF)
    pol.monitor._set_hist(np.array([full, full, np.uint64(0xFFFFFFFF), full,
                                    np.uint64(0)], dtype=np.uint64))
    node, r = _node_now(sim, pol)
    pol._prp(0, r, node)
    after, _ = _node_now(sim, pol)
    # (1020, 1030): 10 pages away, 32 bits apart -> ~0.5; (1100, 1110): 90 pages away,
    # the same history -> 90 / window
    assert after.tolist() == [0, 0, 1, 0, 1]
    assert pol.counts["prp"] == 1
    assert pol.prp_thres == pytest.approx(90 / pol.prp_window)
    node, r = _node_now(sim, pol)
    pol._prp(0, r, node)  # the next best (0.5) is now above the tightened threshold
    after, _ = _node_now(sim, pol)
    assert after.tolist() == [0, 0, 1, 0, 1] and pol.counts["prp"] == 1
