"""IDT's PPO agent: the paper's state/action/reward, gradients against finite
differences, learning a crafted bandit, save/load."""
from __future__ import annotations

import numpy as np
import pytest

from tierlab.policies.idt.agent import (N_ACTIONS, PPOAgent, age_thres_for, reward,
                                        reward_paper, state_of)


def test_state_action_reward_are_the_papers():
    ages = np.arange(0, 101)
    assert np.allclose(state_of(ages), [0, 25, 50, 75, 100])
    assert np.allclose(state_of([]), 0)
    s = state_of(ages)
    assert [age_thres_for(a, s) for a in range(3)] == [50, 75, 100]
    assert age_thres_for(0, np.zeros(5)) == 1  # floored at 1
    # the paper's r = log(demoted_pages / slow_hit), +1 against log 0
    assert reward_paper(99, 0) == pytest.approx(np.log(100))
    assert reward_paper(99, 9) == pytest.approx(np.log(10))
    assert reward_paper(9, 99) == pytest.approx(np.log(0.1))
    assert reward_paper(0, 0) == 0.0
    # the public code's, an option (reward=public)
    assert reward(0, 0) == pytest.approx(-1.0)
    assert reward(99, 0) == pytest.approx(np.log(100) - 1)
    assert reward(9, 99) == pytest.approx(np.log(0.1) - 1)


def _batch(agent, n=6, seed=1):
    rng = np.random.default_rng(seed)
    states = rng.uniform(0, 200, (n, 5))
    actions = rng.integers(0, N_ACTIONS, n)
    # old log-probs from a slightly different policy, so ratios differ from 1 and some
    # (but not all) terms are clipped
    p = np.array([agent.probs(s) for s in states])
    old = np.log(p[np.arange(n), actions]) + rng.uniform(-0.5, 0.5, n)
    adv = rng.normal(0, 1, n)
    ret = rng.normal(0, 1, n)
    return states, actions, old, adv, ret


@pytest.mark.parametrize("which", ["actor", "critic"])
def test_gradients_match_finite_differences(which):
    agent = PPOAgent(seed=3)
    for net in (agent.actor, agent.critic):  # weights of a trained size, not ~0
        for k in net.p:
            net.p[k] += np.random.default_rng(7).normal(0, 0.3, net.p[k].shape)
    args = _batch(agent)
    _, _, g_a, g_c = agent.losses(*args, grads=True)
    net, g, li = (agent.actor, g_a, 0) if which == "actor" else (agent.critic, g_c, 1)
    eps = 1e-6
    checked = 0
    for k, w in net.p.items():
        for idx in list(np.ndindex(w.shape))[::7]:
            old = w[idx]
            w[idx] = old + eps
            up = agent.losses(*args)[li]
            w[idx] = old - eps
            down = agent.losses(*args)[li]
            w[idx] = old
            num = (up - down) / (2 * eps)
            assert g[k][idx] == pytest.approx(num, rel=1e-4, abs=1e-7), (k, idx)
            checked += 1
    assert checked > 30


def test_learns_a_bandit_where_one_action_pays():
    """Action 2 (age_thres = max) earns +1, the others -1: PPO must come to prefer it."""
    agent = PPOAgent(seed=0, explore=0.0)
    s = np.array([1.0, 5.0, 10.0, 20.0, 40.0])
    p0 = agent.probs(s)[2]
    for _ in range(200):
        a = agent.act(0, s)
        agent.give_reward(0, 1.0 if a == 2 else -1.0, s)
    assert agent.updates == 50
    assert p0 < 0.5 < 0.8 < agent.probs(s)[2]


def test_exploration_rate():
    agent = PPOAgent(seed=0, explore=1.0, learn=False)
    s = np.full(5, 3.0)
    acts = [agent.act(0, s, greedy=True) for _ in range(3000)]
    counts = np.bincount(acts, minlength=3) / 3000
    assert np.allclose(counts, 1 / 3, atol=0.04)
    agent.explore = 0.0
    assert {agent.act(0, s, greedy=True) for _ in range(50)} == {int(np.argmax(agent.probs(s)))}


def test_rewards_complete_the_pending_decision_per_node():
    agent = PPOAgent(seed=0, buffer=4)
    s = np.ones(5)
    assert agent.give_reward(0, 1.0, s) is False  # nothing pending
    for node in (0, 1):
        agent.act(node, s)
    assert not agent.give_reward(1, 0.5, s) and not agent.give_reward(0, 0.5, s)
    assert len(agent.done) == 2 and agent.updates == 0
    for node in (0, 1):
        agent.act(node, s)
    agent.give_reward(0, 0.5, s)
    assert agent.give_reward(1, 0.5, s) and agent.updates == 1 and agent.done == []


def test_save_and_load_round_trip(tmp_path):
    a = PPOAgent(seed=5)
    s = np.array([0.0, 2.0, 4.0, 8.0, 16.0])
    for i in range(12):
        act = a.act(0, s)
        a.give_reward(0, float(act == 1), s)
    path = a.save(tmp_path / "agent.npz")
    b = PPOAgent(seed=99).load(path)
    assert np.allclose(a.probs(s), b.probs(s)) and a.value(s) == pytest.approx(b.value(s))
    assert b.updates == a.updates == 3 and b.opt_a.t == a.opt_a.t
    with pytest.raises(ValueError, match="hidden layers"):
        PPOAgent(hidden=(8, 8)).load(path)
