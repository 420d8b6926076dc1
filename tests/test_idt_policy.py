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
from tierlab.field import RateField, range_pages
from tierlab.policies import ALLOCS, POLICIES

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
    sim = tierlab.api.simulation("optane-4tier", "gups:hotset", "idt", scale=1 / 64)
    sim.run()
    assert sim.policy.agent.updates > start
    with pytest.raises(TierlabError, match="no file"):
        _sim(policy=f"idt-damon,weights={tmp_path / 'none.npz'}").run()


def test_prp_fires_and_reports_its_accuracy_and_the_public_rule_fires_less():
    """PRP on the [0, 2] distance scale with a fixed threshold (prp_rule=sum) promotes
    neighbours after ARPs and its accuracy is resolved per run; the public code's rule
    (the default: its distance, a threshold that starts at 5 and tightens to each
    accepted distance for the rest of the run) fires less (335 against 397 at seed 0)."""
    from tierlab import api
    st = {}
    for p in ("idt:prp_rule=sum", "idt"):
        r = api.run(machine="optane-4tier", workload="gups:dynamic,move=30s",
                    policy=p, scale=1 / 256)
        st[p] = r["policy_stats"]
    fixed = st["idt:prp_rule=sum"]
    assert fixed["arp"] > 0 and fixed["prp"] > 10
    assert fixed["prp_resolved"] > 0 and 0 <= fixed["prp_accuracy"] <= 1
    assert fixed["prp_hits"] <= fixed["prp_resolved"] <= fixed["prp"]
    assert st["idt"]["prp"] < fixed["prp"]
    with pytest.raises(TierlabError, match="prp_rule"):
        api.make_policy("idt:prp_rule=sometimes")
    with pytest.raises(TierlabError, match="prp_thres"):
        api.make_policy("idt:prp_rule=sum,prp_thres=5")


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


def _prp_state(rule, hist_rows, thres):
    """ARP region (1000, 1010) on the top node beside a top-node neighbour (1010,
    1020); lower-node regions 10, 90 and 190 pages away. prp_window 400 KiB = 100
    pages (the address unit 1 page), histories of 1,024 bits from `hist_rows` (1:
    every bit set, 0: none, 0.5: the first 512)."""
    from test_idt_monitor import ring
    regs = [(1000, 1010), (1010, 1020), (1020, 1030), (1100, 1110), (1200, 1210)]
    sim, pol = _crafted(f"idt,prp_rule={rule},prp_window=400KiB,prp_thres={thres}", 0,
                        regs, [5, 0, 0, 0, 0], [0] * 5,
                        slow=[(1020, 1030), (1100, 1110), (1200, 1210)])
    sim.mem.place_range(1000, 1020, 0)
    full = (1 << 1024) - 1
    pol.monitor._hist = ring([{1: full, 0: 0, 0.5: (1 << 512) - 1}[x] for x in hist_rows],
                             1024)
    assert pol.prp_window == 100 and pol.prp_unit == 1
    return sim, pol


def test_prp_does_nothing_when_the_nearest_region_is_on_the_top_node():
    """PRP searches every region in the window, whatever its node; when the nearest
    one already sits at or above the ARP region's node, nothing is promoted
    (idt-promote.c: "don't promote if searched region is in upper tier"), even though
    a lower-node region is close enough to pass the threshold."""
    # the public rule ranks deviations from the candidates' means: the top-node
    # neighbour is nearest when its history distance is the mean one
    for rule, thres, rows in (("sum", 1.9, [1, 1, 1, 1, 1]),
                              ("public", 1e12, [1, 0.5, 1, 0, 0])):
        sim, pol = _prp_state(rule, rows, thres)
        node, r = _node_now(sim, pol)
        near = pol._prp_near(0, r)
        assert near.tolist() == [1, 2, 3]  # 190 pages away is out of the window
        d = pol.prp_distance(0, near, r)
        assert int(np.argmin(d)) == 0  # the top-node neighbour
        pol._prp(0, r, node)
        after, _ = _node_now(sim, pol)
        assert after.tolist() == [0, 0, 1, 1, 1] and pol.counts["prp"] == 0


def test_prp_sum_rule_picks_the_nearest_on_its_own_scale():
    """prp_rule=sum: address gap / prp_window + Hamming / history bits, each in
    [0, 1]; the nearest lower-node region is promoted only if strictly under the fixed
    threshold, which never changes."""
    sim, pol = _prp_state("sum", [1, 0, 0.5, 1, 0], 0.6)
    node, r = _node_now(sim, pol)
    d = pol.prp_distance(0, np.array([1, 2, 3]), r)
    # adjacent and every bit apart; 10 pages away and 512 of 1,024 bits; 90, same
    assert d.tolist() == pytest.approx([1.0, 0.1 + 0.5, 0.9])
    pol._prp(0, r, node)
    assert _node_now(sim, pol)[0].tolist() == [0, 0, 1, 1, 1]  # 0.6 is not under 0.6
    pol.prp_thres = 0.95
    pol._prp(0, r, node)
    assert _node_now(sim, pol)[0].tolist() == [0, 0, 0, 1, 1] and pol.counts["prp"] == 1
    assert pol.prp_thres == 0.95


def test_prp_public_rule_is_the_codes_distance_and_running_threshold():
    """prp_rule=public (the default): v = gap in address units, a = Hamming distance;
    with the candidates' integer means m and variances s (each + 1), distance =
    s_v (a - m_a)^2 + s_a (v - m_v)^2 (idt-promote.c `idt_promote_prp`). Here a = 1024,
    512, 0 and v = 0, 10, 90: m_a = 513, m_v = 34, s_a = 174,764, s_v = 1,623. The
    nearest is promoted if <= the threshold, which becomes that distance."""
    sim, pol = _prp_state("public", [1, 0, 0.5, 1, 0], 5)
    node, r = _node_now(sim, pol)
    d = pol.prp_distance(0, np.array([1, 2, 3]), r)
    assert d.tolist() == [625826567, 100665687, 975183191]
    pol._prp(0, r, node)
    assert _node_now(sim, pol)[0].tolist() == [0, 0, 1, 1, 1] and pol.prp_thres == 5
    pol.prp_thres = 2e8
    pol._prp(0, r, node)
    assert _node_now(sim, pol)[0].tolist() == [0, 0, 0, 1, 1] and pol.counts["prp"] == 1
    assert pol.prp_thres == 100665687


def _sampled(policy="idt-norl,prp=off", fill=1020):
    """A policy on IDT's own monitor with ten 102-page regions, the first `fill`
    pages on the fast node and the rest on the slow one."""
    regs = [(i * 102, (i + 1) * 102) for i in range(12)]
    sim, pol = _crafted(policy, fill, regs, [0] * 12, [20] * 12, slow=[(fill, 1224)])
    return sim, pol


def test_arp_promotes_at_the_sampling_interval():
    """A region IDT demoted is promoted in the very sampling interval it is seen
    accessed (IDT's public code promotes in its sampling path), not at the next
    aggregation; its slow hit is credited to the decision that demoted it. Under
    arp=demoted a region IDT did not demote stays below."""
    sim, pol = _sampled("idt-norl,prp=off,arp=demoted", fill=800)
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


def test_arp_promotes_a_region_kswapd_put_below():
    """The public code ARP-promotes any accessed region off the default node
    (`IS_DEMOTED(r)` is `r->nid != IDT_DEFAULT_NODE`): one that kswapd or first touch
    put on the lower node is promoted in the interval it is seen, charged to no
    decision; the decision that demoted another region keeps its own account."""
    sim, pol = _sampled(fill=800)
    pol._cons[(0, 3)] = [102, 0, 0]
    acc = np.zeros(12, dtype=bool)
    acc[10] = True  # on the slow node; IDT never demoted it
    pol.monitor.on_sample(acc, acc, np.arange(12) * 102, np.arange(12) * 102, 0.01)
    node, _ = _node_now(sim, pol)
    assert node[10] == 0 and node[11] == 1 and pol.counts["arp"] == 1
    assert pol._cons[(0, 3)] == [102, 0, 0] and pol.counts["slow_hit"] == 102


@pytest.mark.parametrize("misplaced", ["off", "on"])
def test_no_misplaced_pass_takes_the_room_arp_needs(misplaced):
    """The public code has no misplaced-region pass (ARP covers every region off the
    top node): an accessed region on the slow node that IDT never demoted stays there
    at the aggregation, for ARP to promote when it is sampled; misplaced=on (the
    earlier rule) promotes it at the aggregation."""
    sim, pol = _sampled(f"idt-norl,prp=off,misplaced={misplaced}", fill=800)
    mon = pol.monitor
    nr = np.zeros(12, dtype=np.int64)
    nr[10] = 5  # below, accessed, never demoted by IDT
    mon.set_regions([i * 102 for i in range(12)], [(i + 1) * 102 for i in range(12)],
                    nr, [0] * 12)
    mon._in_aggr = True
    pol._on_aggregation(mon, 1.0)
    mon._in_aggr = False
    node, _ = _node_now(sim, pol)
    assert node[10] == (0 if misplaced == "on" else 1)
    assert pol.counts["misplaced"] == (1 if misplaced == "on" else 0)


@pytest.mark.parametrize("fallback,want", [("all", [1] * 10), ("bounded", [1] + [0] * 9)])
def test_an_aggressive_pass_that_demoted_nothing_demotes_every_region(fallback, want):
    """free < critical_wmark and no region old enough: the public code then demotes
    every region of the node (idt.c `idt_demote`, "Try demote all regions");
    fallback=bounded stops once free is back at demote_wmark (98 pages here: one
    region, the coldest)."""
    regs = [(i * 102, (i + 1) * 102) for i in range(10)]
    nr = [0, 0, 2, 4, 6, 8, 10, 12, 14, 20]
    sim, pol = _crafted(f"idt-norl,fallback={fallback}", 1020, regs, nr, [5] * 10)
    node, r = _node_now(sim, pol)
    entry = {"nodes": {}}
    pol._demote_node(0, r, node, np.array(nr), np.full(10, 5), entry)
    assert entry["nodes"][0]["aggressive"] and entry["nodes"][0]["eligible"] == 6
    after, _ = _node_now(sim, pol)
    assert after.tolist() == want and pol.counts["fallback"] == 1


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
