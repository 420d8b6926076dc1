"""NUMA discovery from sysfs fixture trees (tests/linux/fixtures/*) and the host."""
from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tierlab.errors import TierlabError
from tierlab.linux.topology import (Hmat, discover, format_list, format_nodes, node_kind,
                                    parse_list, refresh_free, to_machine)
from tierlab.machines.machine import Machine

FIX = Path(__file__).parent / "fixtures"
GIB = 1 << 30


def test_lists_round_trip():
    assert parse_list("0-1,3\n") == [0, 1, 3]
    assert parse_list("") == [] and parse_list("\n") == []
    assert format_list([3, 0, 1, 5, 6, 7]) == "0-1,3,5-7"
    with pytest.raises(TierlabError, match="'0-x'"):
        parse_list("0-x")


def test_qemu_guest():
    t = discover(FIX / "qemu2")
    assert t.node_ids == [0, 1]
    n0, n1 = t.nodes
    assert n0.cpus == [0, 1] and n1.cpus == [] and not n1.has_cpus
    assert n0.total_bytes == 1014380 * 1024 and n0.free_bytes == 880212 * 1024
    assert n0.distances == {0: 10, 1: 20} and n1.distances == {0: 20, 1: 10}
    assert t.memory_tiers == {4: [0], 22: [1]}
    assert (n0.tier, n1.tier) == (0, 1)
    assert t.tier_order == [0, 1] and t.tier_source == "memory_tiering"
    assert n0.hmat == Hmat(100.0, 100.0, 20 * GIB, 20 * GIB, (0,))
    assert n1.hmat.read_latency_ns == 300 and n1.hmat.read_bw == 5 * GIB
    assert n1.hmat.initiators == (0,)
    assert t.demotion_enabled is True and t.numa_balancing == 2
    assert [node_kind(t, n) for n in t.nodes] == ["dram", "cxl"]


def test_qemu_guest_machine():
    m = to_machine(discover(FIX / "qemu2"))
    assert isinstance(m, Machine) and m.nnodes == 2
    assert [t.kind for t in m.tiers] == ["dram", "cxl"]
    assert m.tiers[0].read_lat_ns == 100 and m.tiers[1].read_lat_ns == 300
    assert m.tiers[1].read_bw == 5 * GIB and m.tiers[1].write_bw == 5 * GIB
    assert m.tiers[1].capacity == 1031724 * 1024 and not m.tiers[1].has_cpus
    assert m.demotion == [0, 1] and m.fast_nodes() == [0] and m.slow_nodes() == [1]
    assert m.cores_per_socket == 2 and not m.is_remote(1)
    m.scaled(0.5)


def test_optane_box_without_memory_tiering():
    t = discover(FIX / "optane4")
    assert t.memory_tiers == {} and t.tier_source == "derived"
    assert [n.tier for n in t.nodes] == [0, 0, 1, 1]
    assert len(t.nodes[0].cpus) == 48 and t.nodes[1].cpus[0] == 24
    assert t.tier_order == [0, 1, 2, 3]
    assert all(n.hmat is None for n in t.nodes)
    assert t.demotion_enabled is False and t.numa_balancing == 1
    m = to_machine(t)
    assert [x.kind for x in m.tiers] == ["dram", "dram", "cxl", "cxl"]
    assert [x.socket for x in m.tiers] == [0, 1, 0, 1]
    assert m.is_remote(1) and m.is_remote(3) and not m.is_remote(2)
    assert m.tiers[2].read_lat_ns == 166.0  # the dram-cxl preset's CXL figure
    assert m.fast_nodes() == [0, 1] and m.slow_nodes() == [2, 3]


def test_tier_order_override():
    t = discover(FIX / "optane4", tier_order="0,2,1,3")
    assert t.tier_order == [0, 2, 1, 3] and t.tier_source == "override"
    assert to_machine(t).demotion == [0, 2, 1, 3]
    for bad in ("0,1,2", "0,1,2,2", "0,1,2,4", "a,b"):
        with pytest.raises(TierlabError, match=rf"bad tier order '{bad}'.*online nodes: 0-3"):
            discover(FIX / "optane4", tier_order=bad)


def test_single_node_host_fixture():
    t = discover(FIX / "single")
    assert t.node_ids == [0] and t.tier_order == [0]
    assert t.demotion_enabled is None and t.numa_balancing == 0
    m = to_machine(t)
    assert m.nnodes == 1 and m.tiers[0].kind == "dram" and m.tiers[0].read_lat_ns == 81.0
    assert m.cores_per_socket == 8


def test_hmat_kinds():
    t = discover(FIX / "qemu2")
    n1 = t.nodes[1]
    n1.hmat = Hmat(110.0, 110.0, 20 * GIB, 20 * GIB, (0,))
    assert node_kind(t, n1) == "dram"
    n1.hmat = Hmat(305.0, 100.0, 39 * GIB, 13 * GIB, (0,))
    assert node_kind(t, n1) == "optane"
    m = to_machine(t)
    assert m.tiers[1].kind == "optane" and m.tiers[1].write_bw == 13 * GIB
    t.nodes[1] = replace(n1, hmat=None)
    assert node_kind(t, t.nodes[1]) == "cxl"


def test_refresh_free(tmp_path):
    shutil.copytree(FIX / "qemu2", tmp_path / "r")
    t = discover(tmp_path / "r")
    p = tmp_path / "r/sys/devices/system/node/node1/meminfo"
    p.write_text(p.read_text().replace("1001340", "500000"))
    assert refresh_free(t) == {0: 880212 * 1024, 1: 500000 * 1024}
    assert t.nodes[1].free_bytes == 500000 * 1024


def test_kernel_without_numa(tmp_path):
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/meminfo").write_text("MemTotal:  2048 kB\nMemFree:  1024 kB\n")
    (tmp_path / "sys/devices/system/cpu").mkdir(parents=True)
    (tmp_path / "sys/devices/system/cpu/online").write_text("0-3\n")
    t = discover(tmp_path)
    assert t.node_ids == [0] and t.nodes[0].cpus == [0, 1, 2, 3]
    assert t.nodes[0].total_bytes == 2 << 20
    assert refresh_free(t) == {0: 1 << 20}
    with pytest.raises(TierlabError, match="no NUMA topology"):
        discover(tmp_path / "empty")


def test_format_and_json():
    t = discover(FIX / "qemu2")
    text = format_nodes(t)
    lines = text.splitlines()
    assert lines[0].split()[:3] == ["node", "cpus", "total"]
    assert lines[2].split()[:2] == ["1", "-"] and "300/300" in lines[2] and "5/5" in lines[2]
    assert "memory_tier22=1" in text and "numa_balancing: 2 (memory tiering)" in text
    d = json.loads(json.dumps(t.to_dict()))
    assert d["tier_order"] == [0, 1] and d["memory_tiers"] == {"memory_tier4": [0],
                                                               "memory_tier22": [1]}
    assert d["nodes"][1]["hmat"]["read_latency_ns"] == 300 and d["nodes"][1]["kind"] == "cxl"
    assert d["nodes"][0]["cpulist"] == "0-1" and d["nodes"][0]["distances"]["1"] == 20
    assert "unknown" in format_nodes(discover(FIX / "single"))


def test_host():
    t = discover("/")
    assert len(t.nodes) >= 1 and sorted(t.tier_order) == t.node_ids
    assert any(n.has_cpus for n in t.nodes) and t.nodes[0].total_bytes > 0
    free = refresh_free(t)
    assert set(free) == set(t.node_ids) and all(v > 0 for v in free.values())
    to_machine(t)
    format_nodes(t)
