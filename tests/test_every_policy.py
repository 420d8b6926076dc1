"""Issue 3, item 3: every registered placement policy runs on 2 and 4 tiers under every
allocation policy, through moves, growth and frees, keeping the engine's invariants
(capacity never exceeded, no page lost or duplicated) and finishing its work; each
one that migrates promotes some of a hot set that starts in the slow tier."""
from __future__ import annotations

import pytest

from tierlab.policies import ALLOCS, POLICIES

from conftest import HotCold
from test_engine import check_invariants, simulate, small_machine

#: memory-mode policies need a DRAM cache (tests/test_memory_mode.py)
PLACEMENT = sorted(n for n in POLICIES.names() if not n.startswith("test-")
                   and not getattr(POLICIES.get(n), "needs_dram_cache", False))


@pytest.mark.parametrize("alloc", sorted(ALLOCS.names()))
@pytest.mark.parametrize("tiers", [2, 4])
@pytest.mark.parametrize("policy", PLACEMENT)
def test_policy_runs_on_every_tiering_and_alloc(policy, tiers, alloc):
    m = small_machine(dram_pages=900, slow_pages=3000, tiers=tiers)
    wl = HotCold(n=3000, hot=300, phases=3, grow=400, free_first=200, work=2e9)  # ~20-40 simulated s
    sim, rec = simulate(m, wl, policy, alloc, seed=1)
    check_invariants(sim)
    assert sim.mem.allocated == 3000 + 400 - 200
    assert rec["work"] == pytest.approx(wl.total_work)
    if policy != "static" and alloc.startswith("pm"):  # hot pages start slow
        assert rec["promotions"] > 0
    assert rec["policy"] == policy and sum(rec["tier_access_share"].values()) == \
        pytest.approx(1.0)
