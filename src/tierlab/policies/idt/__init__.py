"""IDT (HPDC'24): region monitoring, an RL-tuned demotion threshold, ARP and PRP
promotion. `agent` holds the PPO agent, `policy` the policy and its ablations."""
from . import policy  # noqa: F401  (registers idt and its ablations)
