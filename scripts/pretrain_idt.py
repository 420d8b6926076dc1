"""Pre-train IDT's PPO agent on GUPS (uniform, hot set, moving hot set), as the paper
does before its runs (ALGORITHMS.md "RL agent"), and write the weights tierlab ships.

    .venv/bin/python scripts/pretrain_idt.py [--rounds 3] [--scale 1/64] \
        [--policy idt] [--out src/tierlab/data/idt/ppo_gups.npz]

Each round runs the three GUPS patterns in turn on optane-4tier with one agent that
keeps learning across the runs (weights carried from run to run); exploration stays at
its 5%. Prints per run the throughput, the actions taken and the agent's updates.
"""
from __future__ import annotations

import argparse
import json
import tempfile
from fractions import Fraction
from pathlib import Path

import tierlab.api as api

PATTERNS = ("gups:uniform", "gups:hotset", "gups:dynamic")
DEFAULT_OUT = Path(__file__).resolve().parents[1] / "src/tierlab/data/idt/ppo_gups.npz"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--scale", default="1/64")
    ap.add_argument("--policy", default="idt")
    ap.add_argument("--machine", default="optane-4tier")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    a = ap.parse_args()
    scale = float(Fraction(a.scale))
    with tempfile.TemporaryDirectory() as tmp:
        cur = None
        for r in range(a.rounds):
            for i, wl in enumerate(PATTERNS):
                pol = f"{a.policy},weights={cur}" if cur else f"{a.policy},weights=none"
                sim = api.simulation(a.machine, wl, pol, seed=100 * r + i, scale=scale)
                rec = sim.run()
                cur = sim.policy.agent.save(Path(tmp) / f"r{r}-{i}.npz")
                st = rec["policy_stats"]
                print(json.dumps({"round": r, "workload": wl,
                                  "throughput": rec["throughput"],
                                  "actions": st["actions"],
                                  "agent_updates": st["agent_updates"]}))
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_bytes(Path(cur).read_bytes())
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
