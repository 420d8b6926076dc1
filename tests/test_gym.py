"""tierlab.gym: IDT's demotion decision as a gymnasium environment."""
from __future__ import annotations

import numpy as np
import pytest

gymnasium = pytest.importorskip("gymnasium")
from gymnasium.utils.env_checker import check_env  # noqa: E402

import tierlab  # noqa: E402
import tierlab.gym  # noqa: E402

# gups:dynamic: the hot set moves, so demotion decides all run long (on gups:hotset
# IDT's regions, scaled with the miniature, settle the hot set in one decision)
KW = dict(machine="optane-2tier", workload="gups:dynamic", scale=1 / 64,
          policy="idt-damon")


def _episode(env, pick, seed=0):
    obs, _ = env.reset(seed=seed)
    steps, total, acts = 0, 0.0, []
    while True:
        a = pick(obs)
        acts.append(a)
        obs, r, term, trunc, info = env.step(a)
        assert env.observation_space.contains(obs) and not trunc
        steps += 1
        total += r
        if term:
            return steps, total, info["record"], acts


def test_episode_runs_the_workload_to_the_end():
    env = tierlab.gym.IDTDemotionEnv(**KW)
    steps, total, rec, _ = _episode(env, lambda o: 1)
    assert steps > 5 and np.isfinite(total)
    assert rec["work"] > 0 and rec["policy"] == "idt-damon,weights=none"
    # a fixed action through the env is the static ablation of the same run
    ref = tierlab.run(machine="optane-2tier", workload="gups:dynamic", scale=1 / 64,
                      policy="idt-static-q3,monitor=damon,weights=none")
    assert rec["throughput"] == pytest.approx(ref["throughput"], rel=1e-9)


def test_same_seed_same_episode_and_reset_midway():
    env = tierlab.gym.IDTDemotionEnv(**KW)
    rng = np.random.default_rng(0)
    choice = rng.integers(0, 3, 10_000)
    it = iter(choice)
    a = _episode(env, lambda o: int(next(it)))
    env.reset(seed=1)
    env.step(0)  # abandon an episode in the middle
    it = iter(choice)
    b = _episode(env, lambda o: int(next(it)))
    assert a[0] == b[0] and a[1] == pytest.approx(b[1])
    env.close()


def test_passes_gymnasiums_checker():
    env = tierlab.gym.IDTDemotionEnv(**KW)
    check_env(env, skip_render_check=True)
    env.close()
