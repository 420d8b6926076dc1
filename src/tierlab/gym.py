"""`tierlab.gym`: IDT's per-node demotion decision as a gymnasium environment, so
agents from other libraries can be trained and compared with IDT's own PPO agent.

    import tierlab.gym
    env = tierlab.gym.IDTDemotionEnv(machine="optane-4tier", workload="gups:hotset",
                                      scale=1/64)
    obs, info = env.reset(seed=0)
    while True:
        obs, reward, terminated, truncated, info = env.step(env.action_space.sample())
        if terminated:
            break
    print(info["record"]["throughput"])

- observation: IDT's state for the controlled node, (min, q1, q2, q3, max) of the ages
  (in aggregation intervals) of its regions at or below the access threshold;
- actions (Discrete(3)): age_thres = q2, q3 or max of that distribution;
- reward: ln((demoted + 1) / (promoted + 1)) - 1 for the previous decision (ARP
  promotions of regions this node demoted count as promoted);
- one step per aggregation interval (1 s) in which the node's demotion is on; the
  episode ends with the workload's work (`info["record"]` is then the run record).

Other nodes with demotion on are decided by `others` (a fixed action index, or "ppo"
for IDT's shipped agent). The simulation runs in a worker thread that waits for each
action, so a step costs one aggregation of simulation.
"""
from __future__ import annotations

import queue
import threading

import numpy as np

from . import api
from .policies.idt.agent import ACTIONS, N_STATE, PPOAgent

try:
    import gymnasium
    from gymnasium import spaces
except ImportError as e:  # pragma: no cover - gymnasium is in the test extras
    raise ImportError("tierlab.gym needs gymnasium: pip install 'tierlab[gym]'") from e


class _Stop(Exception):
    """Raised inside the simulation thread when the environment is closed or reset."""


class _Bridge:
    """Stands in for IDT's agent: the controlled node's decisions go to the env."""

    def __init__(self, env, node: int, others):
        self.env, self.node = env, node
        self.others = others
        self.pending: dict = {}
        self.updates = 0
        self.explore = 0.0
        self.reward = 0.0

    def act(self, node: int, state) -> int:
        if node != self.node:
            a = self.others.act(node, state) if isinstance(self.others, PPOAgent) \
                else int(self.others)
            self.pending[node] = a
            return a
        self.pending[node] = True
        self.env._out.put(("obs", np.asarray(state, dtype=np.float32), self.reward))
        self.reward = 0.0
        msg = self.env._in.get()
        if msg is None:
            raise _Stop()
        return int(msg)

    def give_reward(self, node: int, r: float, next_state) -> bool:
        self.pending.pop(node, None)
        if node == self.node:
            self.reward += float(r)
        elif isinstance(self.others, PPOAgent):
            self.others.give_reward(node, r, next_state)
        return False


class IDTDemotionEnv(gymnasium.Env):
    """IDT's demotion age threshold for one node as a gymnasium environment."""

    metadata = {"render_modes": []}

    def __init__(self, machine="optane-4tier", workload="gups:hotset", scale=1 / 64,
                 node: int = 0, policy: str = "idt", alloc="dram-preferred",
                 others="ppo"):
        self.machine, self.workload, self.scale = machine, workload, float(scale)
        self.node, self.policy, self.alloc = int(node), policy, alloc
        if others != "ppo" and int(others) not in range(len(ACTIONS)):
            raise ValueError(f"others={others!r}: 'ppo' or an action 0..{len(ACTIONS) - 1}")
        self.others = others
        # ages are counted in aggregation intervals: 1e7 is 115 days at IDT's 1 s
        self.observation_space = spaces.Box(0.0, 1e7, (N_STATE,), dtype=np.float32)
        self.action_space = spaces.Discrete(len(ACTIONS))
        self._thread = None
        self._last_obs = np.zeros(N_STATE, dtype=np.float32)

    def _worker(self, sim) -> None:
        try:
            rec = sim.run()
        except _Stop:
            return
        except Exception as e:  # surface simulation errors in the caller's thread
            self._out.put(("error", e, 0.0))
            return
        self._out.put(("done", rec, 0.0))

    def _next(self):
        kind, payload, r = self._out.get()
        if kind == "error":
            raise payload
        if kind == "done":
            self._thread = None
            return self._last_obs, r, True, {"record": payload}
        self._last_obs = payload
        return payload, r, False, {}

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.close()
        self._in, self._out = queue.Queue(), queue.Queue()
        seed = 0 if seed is None else int(seed)
        sim = api.simulation(self.machine, self.workload, self.policy + ",weights=none",
                             self.alloc, seed=seed, scale=self.scale)
        others = PPOAgent(learn=False, explore=0.0, seed=seed).load(
            _shipped()) if self.others == "ppo" else int(self.others)
        sim.policy.agent_factory = lambda: _Bridge(self, self.node, others)
        self._thread = threading.Thread(target=self._worker, args=(sim,), daemon=True)
        self._thread.start()
        obs, _, done, info = self._next()
        if done:
            raise RuntimeError(f"node {self.node} never had demotion on in this run")
        return obs, info

    def step(self, action):
        if self._thread is None:
            raise RuntimeError("call reset() first (the episode is over)")
        self._in.put(int(action))
        obs, r, done, info = self._next()
        return obs, float(r), done, False, info

    def close(self):
        if self._thread is not None:
            self._in.put(None)
            self._thread.join()
            self._thread = None


def _shipped():
    from .policies.idt.policy import SHIPPED_WEIGHTS
    return SHIPPED_WEIGHTS
