"""IDT (HPDC'24): region monitoring, an RL-tuned demotion threshold, ARP and PRP
promotion. `agent` holds the PPO agent."""
