"""IDT's demotion agent: PPO over three age-threshold actions (HPDC'24 and its slides,
"RL: Design"; public code scale-snu/IDT).

- state: min, q1, q2, q3, max of the ages of a node's regions at or below the access
  threshold (`state_of`); the network sees log1p of them, since ages span 0..10^4
  aggregations and PPO's small networks train poorly on raw magnitudes;
- actions: 0, 1, 2 = age_thres q2, q3, max of that distribution (floored at 1,
  `age_thres_for`); 5% random actions at inference (`explore`);
- reward, per node and decision: the paper's r = log(demoted_pages / slow_hit) as
  ln((demoted + 1) / (slow_hit + 1)) (`reward_paper`, the default), or the public
  code's ln((demoted + 1) / (promoted + 1)) - 1 (`reward`); policy.py says what each
  decision is credited with;
- PPO (Schulman et al. 2017) with the paper's settings: actor and critic of two hidden
  layers, 16 and 32 units (tanh), lr 0.01 (Adam), gamma 0.9, GAE lambda 1.0, clip 0.3,
  an experience buffer of 4 decisions (one update every 4), online learning.

Pure numpy: the networks are tiny, and their gradients are checked against finite
differences in tests/test_idt_agent.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

N_STATE = 5
N_ACTIONS = 3
ACTIONS = ("q2", "q3", "max")
REWARDS = ("paper", "public")


def state_of(ages) -> np.ndarray:
    """(min, q1, q2, q3, max) of the eligible regions' ages; zeros if there are none."""
    ages = np.asarray(ages, dtype=float)
    if ages.size == 0:
        return np.zeros(N_STATE)
    return np.percentile(ages, [0, 25, 50, 75, 100])


def age_thres_for(action: int, state) -> int:
    """The age threshold an action stands for: q2, q3 or max of the state, at least 1."""
    return max(int(round(float(state[2 + int(action)]))), 1)


def reward(demoted: int, promoted: int) -> float:
    """The public code's ln((demoted + 1) / (promoted + 1)) - 1: demote much, but not
    what comes back."""
    return float(np.log((demoted + 1.0) / (promoted + 1.0)) - 1.0)


def reward_paper(demoted: int, slow_hit: int) -> float:
    """The paper's r(t) = log(demoted_pages(t) / slow_hit(t)) (slides, "RL: Design"),
    with +1 on both sides so that a decision that demoted nothing, or whose pages were
    never seen accessed below, gets a finite reward: demote much that stays cold."""
    return float(np.log((demoted + 1.0) / (slow_hit + 1.0)))


class MLP:
    """tanh MLP with a linear output layer; parameters in one dict (W0, b0, W1, ...)."""

    def __init__(self, sizes, rng: np.random.Generator, out_scale: float = 1.0):
        self.sizes = tuple(int(s) for s in sizes)
        self.p = {}
        for i, (a, b) in enumerate(zip(self.sizes[:-1], self.sizes[1:])):
            gain = out_scale if i == len(self.sizes) - 2 else 1.0
            self.p[f"W{i}"] = rng.normal(0.0, gain / np.sqrt(a), (a, b))
            self.p[f"b{i}"] = np.zeros(b)

    @property
    def nlayers(self) -> int:
        return len(self.sizes) - 1

    def forward(self, x):
        """Outputs for a batch x (n, in), and the activations backward() needs."""
        acts = [np.atleast_2d(x)]
        h = acts[0]
        for i in range(self.nlayers):
            z = h @ self.p[f"W{i}"] + self.p[f"b{i}"]
            h = np.tanh(z) if i < self.nlayers - 1 else z
            acts.append(h)
        return h, acts

    def backward(self, acts, dout) -> dict:
        """Gradients of sum(dout * output) with respect to every parameter."""
        g = {}
        d = dout
        for i in reversed(range(self.nlayers)):
            g[f"W{i}"] = acts[i].T @ d
            g[f"b{i}"] = d.sum(axis=0)
            if i:
                d = (d @ self.p[f"W{i}"].T) * (1.0 - acts[i] ** 2)
        return g


class Adam:
    """Adam (Kingma & Ba) over a parameter dict, updated in place."""

    def __init__(self, params: dict, lr: float, b1=0.9, b2=0.999, eps=1e-8):
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps
        self.m = {k: np.zeros_like(v) for k, v in params.items()}
        self.v = {k: np.zeros_like(v) for k, v in params.items()}
        self.t = 0

    def step(self, params: dict, grads: dict) -> None:
        self.t += 1
        for k, g in grads.items():
            self.m[k] = self.b1 * self.m[k] + (1 - self.b1) * g
            self.v[k] = self.b2 * self.v[k] + (1 - self.b2) * g * g
            mh = self.m[k] / (1 - self.b1 ** self.t)
            vh = self.v[k] / (1 - self.b2 ** self.t)
            params[k] -= self.lr * mh / (np.sqrt(vh) + self.eps)


def _softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=-1, keepdims=True)


@dataclass
class Step:
    """One decision: what the agent saw and did; `reward` arrives one interval later."""
    node: int
    state: np.ndarray
    action: int
    logp: float
    value: float
    reward: float | None = None
    next_state: np.ndarray | None = None


@dataclass
class PPOAgent:
    """The PPO agent shared by every node (each node's decisions form its own sequence).

    `act(node, state)` picks an action; `give_reward(node, r, next_state)` completes that
    node's pending decision; every `buffer` completed decisions the agent trains
    `epochs` passes of clipped PPO on them (advantages by GAE over each node's
    sequence, bootstrapped with the critic at the last next_state)."""

    hidden: tuple = (16, 32)
    lr: float = 0.01
    gamma: float = 0.9
    lam: float = 1.0
    clip: float = 0.3
    buffer: int = 4
    epochs: int = 4
    explore: float = 0.05
    value_coef: float = 0.5
    entropy_coef: float = 0.01
    learn: bool = True
    seed: int = 0
    updates: int = field(default=0, init=False)

    def __post_init__(self):
        self.rng = np.random.default_rng(self.seed)
        sizes = (N_STATE, *self.hidden)
        self.actor = MLP((*sizes, N_ACTIONS), self.rng, out_scale=0.01)
        self.critic = MLP((*sizes, 1), self.rng)
        self.opt_a = Adam(self.actor.p, self.lr)
        self.opt_c = Adam(self.critic.p, self.lr)
        self.pending: dict[int, Step] = {}
        self.done: list[Step] = []

    # -- acting -------------------------------------------------------------------
    @staticmethod
    def features(states) -> np.ndarray:
        return np.log1p(np.maximum(np.atleast_2d(np.asarray(states, dtype=float)), 0.0))

    def probs(self, state) -> np.ndarray:
        logits, _ = self.actor.forward(self.features(state))
        return _softmax(logits)[0]

    def value(self, state) -> float:
        v, _ = self.critic.forward(self.features(state))
        return float(v[0, 0])

    def act(self, node: int, state, greedy: bool = False) -> int:
        """Choose an action for `node`: with probability `explore` a uniform one, else
        sampled from the policy (or its argmax when `greedy`)."""
        state = np.asarray(state, dtype=float)
        p = self.probs(state)
        if self.rng.random() < self.explore:
            a = int(self.rng.integers(N_ACTIONS))
        elif greedy:
            a = int(np.argmax(p))
        else:
            a = int(self.rng.choice(N_ACTIONS, p=p))
        self.pending[node] = Step(node, state, a, float(np.log(p[a] + 1e-12)),
                                  self.value(state))
        return a

    def give_reward(self, node: int, r: float, next_state) -> bool:
        """Complete `node`'s pending decision; returns True if the agent trained."""
        step = self.pending.pop(node, None)
        if step is None:
            return False
        step.reward = float(r)
        step.next_state = np.asarray(next_state, dtype=float)
        self.done.append(step)
        if self.learn and len(self.done) >= self.buffer:
            self.train(self.done)
            self.done = []
            return True
        return False

    # -- learning -------------------------------------------------------------------
    def advantages(self, steps: list[Step]):
        """GAE(gamma, lambda) per node sequence; returns (advantages, returns)."""
        adv = np.zeros(len(steps))
        for node in {s.node for s in steps}:
            idx = [i for i, s in enumerate(steps) if s.node == node]
            gae = 0.0
            for i in reversed(idx):
                s = steps[i]
                delta = s.reward + self.gamma * self.value(s.next_state) - s.value
                gae = delta + self.gamma * self.lam * gae
                adv[i] = gae
        ret = adv + np.array([s.value for s in steps])
        return adv, ret

    def losses(self, states, actions, old_logp, adv, ret, grads: bool = False):
        """PPO's clipped surrogate (+ entropy bonus) and the critic's squared error, both
        averaged over the batch; with `grads`, also their parameter gradients."""
        x = self.features(states)
        n = len(actions)
        logits, acts_a = self.actor.forward(x)
        p = _softmax(logits)
        logp = np.log(p[np.arange(n), actions] + 1e-12)
        ratio = np.exp(logp - old_logp)
        lo, hi = 1 - self.clip, 1 + self.clip
        surr = np.minimum(ratio * adv, np.clip(ratio, lo, hi) * adv)
        ent = -(p * np.log(p + 1e-12)).sum(axis=1)
        l_pi = -(surr.mean() + self.entropy_coef * ent.mean())
        v, acts_c = self.critic.forward(x)
        l_v = self.value_coef * np.mean((v[:, 0] - ret) ** 2)
        if not grads:
            return l_pi, l_v
        # d surr / d logp: ratio * adv where the unclipped term is the active minimum
        unclipped = (ratio * adv <= np.clip(ratio, lo, hi) * adv)
        d_logp = np.where(unclipped, ratio * adv, 0.0) / n
        onehot = np.zeros_like(p)
        onehot[np.arange(n), actions] = 1.0
        d_logits = -(d_logp[:, None] * (onehot - p))
        # entropy: dH/dz_j = -p_j (log p_j + H)
        d_ent = -p * (np.log(p + 1e-12) + ent[:, None])
        d_logits -= self.entropy_coef * d_ent / n
        g_a = self.actor.backward(acts_a, d_logits)
        d_v = (2 * self.value_coef / n) * (v[:, 0] - ret)
        g_c = self.critic.backward(acts_c, d_v[:, None])
        return l_pi, l_v, g_a, g_c

    def train(self, steps: list[Step]) -> None:
        adv, ret = self.advantages(steps)
        if len(steps) > 1 and adv.std() > 1e-8:
            adv = (adv - adv.mean()) / adv.std()
        states = np.array([s.state for s in steps])
        actions = np.array([s.action for s in steps])
        old = np.array([s.logp for s in steps])
        for _ in range(self.epochs):
            _, _, g_a, g_c = self.losses(states, actions, old, adv, ret, grads=True)
            self.opt_a.step(self.actor.p, g_a)
            self.opt_c.step(self.critic.p, g_c)
        self.updates += 1

    # -- persistence ------------------------------------------------------------------
    def state_dict(self) -> dict:
        d = {f"actor.{k}": v for k, v in self.actor.p.items()}
        d.update({f"critic.{k}": v for k, v in self.critic.p.items()})
        for name, opt in (("opt_a", self.opt_a), ("opt_c", self.opt_c)):
            d.update({f"{name}.m.{k}": v for k, v in opt.m.items()})
            d.update({f"{name}.v.{k}": v for k, v in opt.v.items()})
            d[f"{name}.t"] = np.array(opt.t)
        d["updates"] = np.array(self.updates)
        d["hidden"] = np.array(self.hidden)
        return d

    def save(self, path) -> Path:
        """Weights and optimiser state (an .npz), so a run can continue learning."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "wb") as f:
            np.savez(f, **self.state_dict())
        return path

    def load(self, path) -> "PPOAgent":
        with np.load(Path(path)) as z:
            if tuple(z["hidden"]) != tuple(self.hidden):
                raise ValueError(f"{path}: hidden layers {tuple(z['hidden'])}, "
                                 f"expected {tuple(self.hidden)}")
            for net, pre in ((self.actor, "actor"), (self.critic, "critic")):
                for k in net.p:
                    net.p[k] = z[f"{pre}.{k}"].copy()
            for name, opt, net in (("opt_a", self.opt_a, self.actor),
                                   ("opt_c", self.opt_c, self.critic)):
                opt.m = {k: z[f"{name}.m.{k}"].copy() for k in net.p}
                opt.v = {k: z[f"{name}.v.{k}"].copy() for k in net.p}
                opt.t = int(z[f"{name}.t"])
            self.updates = int(z["updates"])
        return self
