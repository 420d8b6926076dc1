"""The test guest has what the real-backend tests rely on (one boot of scenarios/smoke.sh,
~20 s wall under TCG on the 2-core CI host)."""
from __future__ import annotations

import numpy
import pytest

pytestmark = [pytest.mark.guest("smoke")]


def test_guest_boots_and_smoke_scenario_passes(guest_run):
    assert guest_run.ok, guest_run.explain()
    assert not guest_run.bad_results, guest_run.bad_results[:3]
    assert guest_run.boot_seconds is not None and guest_run.boot_seconds < 60, guest_run.explain()


def test_two_nodes_node1_cpu_less(guest_run):
    r = guest_run.one("nodes")
    assert r, guest_run.explain()
    nodes = r["nodes"]
    assert set(nodes) == {"N0", "N1"}, nodes
    assert nodes["N0"]["cpus"] == "0-1" and nodes["N1"]["cpus"] == "", nodes
    assert str(r["has_cpu"]) == "0" and r["has_memory"] == "0-1", r
    assert nodes["N0"]["total_mib"] > 400 and nodes["N1"]["total_mib"] > 900, nodes


def test_two_memory_tiers_node0_on_top(guest_run):
    tiers = guest_run.one("tiers")["tiers"]
    assert len(tiers) == 2, tiers
    by_node = {t["nodes"]: int(t["name"].removeprefix("memory_tier")) for t in tiers}
    # a smaller abstract distance (tier id) is the faster tier
    assert set(by_node) == {"0", "1"} and by_node["0"] < by_node["1"], tiers


def test_tiering_knobs(guest_run):
    k = guest_run.one("knobs")
    assert k["numa_balancing_2"] is True, k
    assert k["demotion_enabled"] in (True, False), k      # the sysfs file exists
    assert k["debugfs_numa_balancing"] is True, k
    # the multi-gen LRU reclaims (every feature bit on): scripts/sim_vs_kernel.py mirrors
    # the kernel's tiering with autonuma-tiering-mglru on that assumption
    assert k["lru_gen"] == "0x0007", k


def test_damon_sysfs_has_vaddr(guest_run):
    d = guest_run.one("damon")
    assert d["sysfs"] is True, d
    assert "vaddr" in d["avail_operations"].split(), d


def test_move_pages_moves_half_to_node1(guest_run):
    m = guest_run.one("movetest")
    assert m == {"kind": "movetest", "rc": 0, "pages": 16384, "node0": 8192, "node1": 8192}, m


def test_hotcold_starts_where_asked_and_verifies(guest_run):
    ready = guest_run.one("hotcold", event="ready")
    done = guest_run.one("hotcold", event="done")
    first = guest_run.of("placement")[0]
    assert first["hot"].get("N1") == ready["hot_pages"] and first["hot"].get("N0") == 0, first
    assert first["cold"].get("N0") == ready["cold_pages"] and first["cold"].get("N1") == 0, first
    assert done["checksum"] == "ok" and done["bad_pages"] == 0 and done["ops"] > 0, done
    # stopped by SIGTERM after the sample (the event), not at the 120 s cap
    assert done["stopped"] is True, done
    assert guest_run.one("hotcold-exit")["rc"] == 0


def test_tierlab_cli_runs_from_repo_sources(guest_run):
    py = guest_run.one("python")
    assert py["rc"] == 0 and py["import_rc"] == 0 and py["list_rc"] == 0, guest_run.explain()
    assert py["policies"] >= 10 and py["has_autonuma_tiering"] is True, py
    assert py["numpy"] == numpy.__version__, py
