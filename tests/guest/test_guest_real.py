"""The `real` guest scenario: allocation policies under `tierlab exec`, and the daemon
killed mid-run (issue 5: every allocation policy runs for real; killing the daemon never
harms the target). About 70 s of wall time under TCG."""
from __future__ import annotations

import pytest

WHERE = {  # allocation policy -> node where first touches must land (node 0 has room)
    "dram-preferred": "N0", "dram-always": "N0", "pm-preferred": "N1", "pm-always": "N1"}


@pytest.mark.guest("real")
@pytest.mark.parametrize("alloc", sorted(WHERE))
def test_allocation_policy_places_first_touch_for_real(guest_run, alloc):
    ex = guest_run.one("alloc-exec", alloc=alloc)
    assert ex is not None and ex["rc"] == 0 and ex["checksum"] == "ok", guest_run.explain()
    s = guest_run.one(f"alloc-{alloc}")
    assert s is not None, guest_run.explain()
    node = WHERE[alloc]
    for rng in ("hot", "cold"):
        pages = sum(s[rng].values())
        assert s[rng].get(node, 0) >= 0.95 * pages, (alloc, s)


@pytest.mark.guest("real")
def test_killing_the_daemon_never_harms_the_target(guest_run):
    k = guest_run.one("kill-test")
    assert k is not None, guest_run.explain()
    assert k["hotcold_rc"] == 0 and k["checksum"] == "ok", k
    assert k["daemon_rc"] == 137, k  # SIGKILL: no clean-up ran
    # the kdamond it started keeps running (harmless, docs/linux.md says how to stop it)
    assert "on" in k["kdamonds"].split(), k


@pytest.mark.guest("real")
def test_sigterm_stops_the_daemon_cleanly(guest_run):
    t = guest_run.one("term-test")
    assert t is not None, guest_run.explain()
    assert t["hotcold_rc"] == 0 and t["checksum"] == "ok", t
    assert t["daemon_rc"] == 0, t
    assert "on" not in t["kdamonds"].split(), t  # its kdamond was switched off
    assert "stopped: SIGTERM" in t["daemon_output"], t
