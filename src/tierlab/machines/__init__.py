"""Machines: tiers (NUMA nodes) with capacity, latency, bandwidth and socket."""
from .machine import MACHINES, Machine, Tier, load_machine  # noqa: F401
from . import presets  # noqa: F401  (registers the built-in presets)
