"""Monitors: what a real system can see of the accesses (docs/architecture.md, "The
path of one run", step 5).

`source` answers questions about the access stream (statistical `RateSource`, exact
`ExactSource` replay); `primitives` builds the hardware-like mechanisms the monitors
share (accessed bits at every page-table level, PEBS samples, NUMA hint faults).
"""
from .primitives import (HINT_FAULT_SECONDS, LEVEL_NAMES, LEVEL_SPAN, PEBS_SAMPLE_SECONDS,
                         PTE_CHECK_SECONDS, AccessedBits, HintFaults, PebsPoll, PebsSampler)
from .source import AccessSource, ExactSource, RateSource, poisson_events
from .base import MONITORS, Monitor
from ..registry_autoload import import_all

import_all(__name__, __path__, skip=("base", "primitives", "source"))

__all__ = [
    "MONITORS", "Monitor",
    "AccessSource", "RateSource", "ExactSource", "poisson_events",
    "AccessedBits", "PebsSampler", "PebsPoll", "HintFaults",
    "LEVEL_SPAN", "LEVEL_NAMES", "PTE_CHECK_SECONDS", "PEBS_SAMPLE_SECONDS",
    "HINT_FAULT_SECONDS",
]
