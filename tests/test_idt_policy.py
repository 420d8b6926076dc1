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
from tierlab.field import range_pages

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


def test_prp_fires_with_a_fixed_threshold_and_reports_its_accuracy():
    """The paper's PRP (a fixed threshold on the [0, 2] distance scale) promotes a
    neighbour after many ARPs and its accuracy is resolved per run; the public code's
    rule (prp_rule=public: the threshold tightens to each accepted distance for the
    rest of the run) fires far less."""
    from tierlab import api
    st = {}
    for p in ("idt", "idt:prp_rule=public"):
        r = api.run(machine="optane-4tier", workload="gups:dynamic,move=30s",
                    policy=p, scale=1 / 256)
        st[p] = r["policy_stats"]
    paper = st["idt"]
    assert paper["arp"] > 0 and paper["prp"] > 10
    assert paper["prp_resolved"] > 0 and 0 <= paper["prp_accuracy"] <= 1
    assert paper["prp_hits"] <= paper["prp_resolved"] <= paper["prp"]
    assert st["idt:prp_rule=public"]["prp"] < paper["prp"] / 2
    with pytest.raises(TierlabError, match="prp_rule"):
        api.make_policy("idt:prp_rule=sometimes")
    with pytest.raises(TierlabError, match="prp_thres"):
        api.make_policy("idt:prp_thres=5")


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


@pytest.mark.parametrize("rule,ages,demoted", [
    ("paper", [20] * 10, 6),  # nr < (0 + 20) / 2 strictly, and age >= age_thres (10)
    ("paper", [20] * 3 + [5] * 7, 3),  # age still counts in aggressive mode
    ("public", [0] * 10, 7),  # nr <= 10, age ignored (the earlier rule)
])
def test_watermark_transition_to_aggressive_mode(rule, ages, demoted):
    """free < critical_wmark (1%): the access threshold becomes (min + max) / 2 (the
    backup slide "Aggressive Demotion": strict, and age > age_thres still required);
    regions meeting it are demoted, coldest first."""
    regs = [(i * 102, (i + 1) * 102) for i in range(10)]
    nr = [0, 0, 2, 4, 6, 8, 10, 12, 14, 20]
    sim, pol = _crafted(f"idt-norl,aggressive={rule}", 1020, regs, nr, ages)  # 0.4% free
    node, r = _node_now(sim, pol)
    entry = {"nodes": {}}
    pol._demote_node(0, r, node, np.array(nr), np.array(ages), entry)
    e = entry["nodes"][0]
    assert e["aggressive"] and e["access_thres"] == 10
    assert e["eligible"] == (7 if rule == "public" else 6)
    after, _ = _node_now(sim, pol)
    assert after.tolist() == [1] * demoted + [0] * (10 - demoted)


def test_free_at_exactly_the_critical_watermark_is_not_aggressive():
    """Aggressive only below critical_wmark: ARP fills the top node up to exactly 1%
    free (its acceptance limit), which must not set off an aggressive pass."""
    regs = [(i * 100, (i + 1) * 100) for i in range(10)]
    nr = [0, 0, 2, 4, 6, 8, 10, 12, 14, 20]
    sim, pol = _crafted("idt-norl", 1000, regs, nr, [20] * 10)
    sim.mem.place_range(1000, 1014, 0)  # 10 pages free of 1024: 0.98%
    sim.mem.release_range(1012, 1014)  # 12 free: 1.17%
    node, r = _node_now(sim, pol)
    entry = {"nodes": {}}
    pol._demote_node(0, r, node, np.array(nr), np.full(10, 20), entry)
    assert not entry["nodes"][0]["aggressive"]


def test_a_region_demoted_in_a_pass_is_not_promoted_back_in_it():
    """IDT zeroes nr_accesses of a migrated region: ARP promotes a demoted region once
    it is seen accessed on the lower node, not on the accesses it had before demotion
    (which would move it back and forth in one aggregation)."""
    regs = [(i * 102, (i + 1) * 102) for i in range(10)]
    nr = [0, 0, 2, 4, 6, 8, 10, 12, 14, 20]
    sim, pol = _crafted("idt-damon,age_thres=10", 1020, regs, nr, [20] * 10)  # 0.4% free
    pol._on_aggregation(pol.monitor, 1.0)
    after, _ = _node_now(sim, pol)
    assert after.tolist() == [1] * 6 + [0] * 4
    assert pol.counts["arp"] == 0 and pol.counts["demoted"] == 6 * 102


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


def test_prp_picks_the_nearest_on_one_scale_and_tightens_only_under_the_public_rule():
    """PRP: among lower-node regions near the ARP region, the nearest by address gap /
    prp_window + Hamming(histories) / history bits (each in [0, 1]) is promoted if
    under prp_thres, on the same scale. A top-node region is never chosen. Under
    prp_rule=public the threshold then becomes that distance."""
    regs = [(1000, 1010), (1010, 1020), (1020, 1030), (1100, 1110), (1200, 1210)]
    full = np.uint64(0xFFFFFFFFFFFFFFFF)
    hist = np.array([full, full, np.uint64(0xFFFFFFFF), full, np.uint64(0)],
                    dtype=np.uint64)
    for rule in ("fixed", "public"):
        sim, pol = _crafted(f"idt,prp_rule={rule},prp_window=400KiB,prp_thres=0.6", 0,
                            regs, [5, 0, 0, 0, 0], [0] * 5,
                            slow=[(1020, 1030), (1100, 1110), (1200, 1210)])
        sim.mem.place_range(1000, 1020, 0)  # the ARP region and a top-node neighbour
        pol.monitor._hist = hist.copy()
        assert pol.prp_window == 100
        node, r = _node_now(sim, pol)
        d = pol.prp_distance(0, np.array([2, 3, 4]), r)
        # 10 pages away and 32 of 64 bits apart; 90 pages, same history; 190 pages
        # (capped at the window) and every bit apart
        assert d.tolist() == pytest.approx([0.1 + 0.5, 0.9, 1.0 + 1.0])
        pol._prp(0, r, node)
        after, _ = _node_now(sim, pol)
        assert after.tolist() == [0, 0, 1, 1, 1]  # 0.6 is not under 0.6: nothing
        pol.prp_thres = 0.95
        pol._prp(0, r, node)
        after, _ = _node_now(sim, pol)
        assert after.tolist() == [0, 0, 0, 1, 1] and pol.counts["prp"] == 1
        assert pol.prp_thres == (pytest.approx(0.6) if rule == "public" else 0.95)
        node, r = _node_now(sim, pol)
        pol._prp(0, r, node)  # next: (1100, 1110) at 0.9
        after, _ = _node_now(sim, pol)
        assert after.tolist() == ([0, 0, 0, 1, 1] if rule == "public" else
                                  [0, 0, 0, 0, 1])


def _sampled(policy="idt-norl,prp=off", fill=1020):
    """A policy on IDT's own monitor with ten 102-page regions, the first `fill`
    pages on the fast node and the rest on the slow one."""
    regs = [(i * 102, (i + 1) * 102) for i in range(12)]
    sim, pol = _crafted(policy, fill, regs, [0] * 12, [20] * 12, slow=[(fill, 1224)])
    return sim, pol


def test_arp_promotes_at_the_sampling_interval():
    """A region IDT demoted is promoted in the very sampling interval it is seen
    accessed (IDT's public code promotes in its sampling path), not at the next
    aggregation; its slow hit is credited to the decision that demoted it."""
    sim, pol = _sampled(fill=800)
    mon = pol.monitor
    pol.demoted_by[102 * 9:102 * 10] = 1  # region 9 sits below: node 0 demoted it
    pol.demoted_in[102 * 9:102 * 10] = 3
    pol._cons[(0, 3)] = [102, 0, 0]
    acc = np.zeros(12, dtype=bool)
    acc[[9, 10]] = True  # 10 is below too, but IDT did not demote it: not ARP
    mon.on_sample(acc, acc, np.arange(12) * 102, np.arange(12) * 102, 0.01)
    node, _ = _node_now(sim, pol)
    assert node[9] == 0 and node[10] == 1 and pol.counts["arp"] == 1
    assert pol._cons[(0, 3)] == [102, 102, 102]  # demoted, slow_hit, promoted
    assert mon.nr_aggregations == 0


def test_arp_respects_the_critical_watermark():
    """No ARP promotion that would leave the top node under 1% free."""
    sim, pol = _sampled(fill=1020)  # 4 of 1024 pages free
    pol.demoted_by[102 * 10:102 * 11] = 1
    acc = np.zeros(12, dtype=bool)
    acc[10] = True
    pol.monitor.on_sample(acc, acc, np.arange(12) * 102, np.arange(12) * 102, 0.01)
    node, _ = _node_now(sim, pol)
    assert node[10] == 1 and pol.counts["arp"] == 0


@pytest.mark.parametrize("rule", ["paper", "public"])
def test_each_decision_is_rewarded_for_its_own_consequences(rule):
    """A node's decision k is rewarded at its next decision with the pages it demoted
    and the slow hits (paper) or ARP promotions (public) of exactly those pages; slow
    hits on pages an earlier decision demoted are not charged to it."""
    from tierlab.policies.idt.agent import reward, reward_paper
    sim, pol = _sampled(f"idt,reward={rule},age_thres=1", fill=1020)
    given = []
    pol.agent.act = lambda n, s: 0
    pol.agent.pending = {}
    pol.agent.give_reward = lambda n, r, s: given.append(r)
    mon = pol.monitor
    # an old demotion (decision 1 of node 0) sits on region 11
    pol.demoted_by[102 * 11:] = 1
    pol.demoted_in[102 * 11:] = 1
    pol._decision[0] = 1
    nr = np.array([0, 0] + [5] * 10)
    mon.set_regions([i * 102 for i in range(12)], [(i + 1) * 102 for i in range(12)],
                    nr, [20] * 12)
    node, r = _node_now(sim, pol)
    pol._demote_node(0, r, node, nr, np.full(12, 20), None)  # decision 2
    assert pol._decision[0] == 2 and pol._cons[(0, 2)][0] == 204
    pol.agent.pending = {0: object()}
    acc = np.zeros(12, dtype=bool)
    acc[[0, 11]] = True  # region 0 (decision 2's) and 11 (decision 1's) seen below
    mon.on_sample(acc, acc, np.arange(12) * 102, np.arange(12) * 102, 0.01)
    node, r = _node_now(sim, pol)
    pol._demote_node(0, r, node, nr, np.full(12, 20), None)
    want = reward_paper(204, 102) if rule == "paper" else reward(204, 102)
    assert given == [pytest.approx(want)]


def test_gamma_is_a_parameter():
    assert POLICIES.create("idt,gamma=0").gamma == 0.0
    with pytest.raises(TierlabError, match="gamma"):
        POLICIES.create("idt,gamma=2")
