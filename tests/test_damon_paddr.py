"""Physical-address DAMON (`damon-paddr`, `damon-tiering:ops=paddr`) and the frame layout
under it (`engine.frames.NodeFrames`): the layout follows the page map, a demotion
reuses the frames a promotion left, and a region is what its frames hold."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tierlab.engine import Simulation
from tierlab.engine.frames import NodeFrames
from tierlab.errors import TierlabError
from tierlab.interface import UNALLOC
from tierlab.monitors.damon_paddr import DamonPaddr
from tierlab.policies import ALLOCS, POLICIES
from tierlab.policies.damon_tiering import DamonTiering

from test_damon import recall, run_policy, tiering_workload
from test_engine import check_invariants, small_machine

FREE, IDLE, OTHER = NodeFrames.FREE, NodeFrames.IDLE, NodeFrames.OTHER


class FakeMem:
    """The parts of `Memory` NodeFrames reads."""

    def __init__(self, capacity, node, held=None, idle=None):
        self.capacity = np.asarray(capacity, dtype=np.int64)
        self.node = np.asarray(node, dtype=np.uint8)
        self.npages = self.node.shape[0]
        k = self.capacity.shape[0]
        self.held = np.zeros(k, np.int64) if held is None else np.asarray(held, np.int64)
        self.idle = np.zeros(k, np.int64) if idle is None else np.asarray(idle, np.int64)


def check_layout(fr: NodeFrames, mem) -> None:
    """Every page sits in one frame of its node that names it; idle and others' frames
    are as many as `Memory` says."""
    for v, owner in enumerate(fr.owner):
        on = np.flatnonzero(mem.node == v)
        assert np.array_equal(np.sort(owner[owner >= 0]), on)
        assert np.array_equal(owner[fr.frame[on]], on)
        assert (owner == IDLE).sum() == mem.idle[v]
        assert (owner == OTHER).sum() == mem.held[v] - mem.idle[v]
    assert np.all(fr.frame[mem.node == UNALLOC] == -1)


def test_boot_layout_and_a_demotion_reuses_the_frames_a_promotion_left():
    U = UNALLOC
    mem = FakeMem([8, 8], [0, 0, 0, 0, 1, 1, U, U], held=[2, 0], idle=[1, 0])
    fr = NodeFrames(mem, "boot")
    # others first, then the idle pages, then the workload's in address order
    assert fr.owner[0].tolist() == [OTHER, IDLE, 0, 1, 2, 3, FREE, FREE]
    assert fr.owner[1].tolist() == [4, 5] + [FREE] * 6
    mem.node[1], mem.node[4] = 1, 0  # page 1 demoted, page 4 promoted
    fr.sync()
    check_layout(fr, mem)
    assert fr.frame[4] == 3  # the frame page 1 left on node 0
    assert fr.frame[1] == 0  # the frame page 4 left on node 1
    mem.node[6] = 1  # a first touch takes the lowest never-used frame
    fr.sync()
    assert fr.frame[6] == 2
    fr.move_idle(0, np.array([1]), 1)
    mem.idle[:], mem.held[:] = [0, 1], [1, 1]
    fr.sync()
    check_layout(fr, mem)
    assert fr.owner[0][1] == FREE and fr.owner[1][3] == IDLE


def test_random_layout_is_a_permutation_of_the_frames():
    mem = FakeMem([64, 64], np.r_[np.zeros(40), np.ones(20)])
    fr = NodeFrames(mem, "random", np.random.default_rng(3))
    check_layout(fr, mem)
    assert not np.array_equal(fr.frame[:40], np.arange(40))


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 29), st.integers(0, 2)), max_size=60),
       st.sampled_from(["boot", "random"]))
def test_layout_follows_any_sequence_of_moves_frees_and_touches(moves, order):
    """Property: after any moves (2 = free), the layout is consistent with the page
    map and no node holds more pages than frames."""
    rng = np.random.default_rng(0)
    mem = FakeMem([20, 40], rng.integers(0, 2, 30).astype(np.uint8), held=[3, 0],
                  idle=[2, 0])
    while (mem.node == 0).sum() > 17:
        mem.node[np.flatnonzero(mem.node == 0)[-1]] = 1
    fr = NodeFrames(mem, order, rng)
    for page, dst in moves:
        new = UNALLOC if dst == 2 else dst
        if new == 0 and (mem.node == 0).sum() >= 17:
            continue
        mem.node[page] = new
        if page % 3 == 0:
            fr.sync()
    fr.sync()
    check_layout(fr, mem)


def paddr_watch(frames: str, seed: int = 0):
    """The tiering workload all on the slow node (pm-preferred, nothing moves) watched
    by a paddr DAMON on that node's frames."""
    m = small_machine(dram_pages=4096, slow_pages=32768)
    sim = Simulation(m, tiering_workload(), POLICIES.create("static"),
                     ALLOCS.create("pm-preferred"), seed=seed)
    mon = DamonPaddr(node=1, frames=frames)
    snaps = []
    mon.attach(sim)
    mon.subscribe(lambda m_, now: snaps.append(m_.regions))
    sim.run()
    return sim, mon, snaps


def test_paddr_regions_see_what_frames_hold_not_addresses():
    """The hot 1024 pages of a boot layout fill 1024 consecutive frames: the regions find
    them, and free frames are never accessed. Laid out at random (a long-running
    machine), the same pages are spread over the node's 16,384 used frames, and no
    region can isolate them."""
    sim, mon, snaps = paddr_watch("boot")
    hot = np.arange(15360, 16384)
    f = mon.frames.frame[hot]
    assert np.array_equal(f, np.arange(15360, 16384))
    late = snaps[len(snaps) // 2:]
    assert np.mean([recall(r, 15360, 16384, 3) for r in late]) > 0.8
    assert np.mean([recall(r, 16384, 32768, 1) for r in late]) < 0.05
    sim, mon, snaps = paddr_watch("random")
    f = np.sort(mon.frames.frame[hot])
    late = snaps[len(snaps) // 2:]
    # the share of the hot pages' frames in regions found as hot as the boot layout's
    found = [np.mean([recall(r, a, a + 1, 3) for a in f[::16]]) for r in late[::10]]
    assert np.mean(found) < 0.3


@pytest.mark.parametrize("alloc", ["dram-preferred", "pm-preferred"])
def test_damon_tiering_on_paddr_beats_static_not_oracle(alloc):
    m = small_machine(dram_pages=4096, slow_pages=32768)
    thr = {}
    for p in ("static", "damon-tiering:ops=paddr", "oracle"):
        sim, rec = run_policy(m, p, alloc)
        check_invariants(sim)
        thr[p] = rec["throughput"]
        if "paddr" in p:
            pol = sim.policy
            assert rec["migrations_by_reason"].get("damos_migrate_hot", 0) >= 1024
            fr = pol.monitors[1].frames
            fr.sync()
            check_layout(fr, sim.mem)
            # a region is charged by its frames, free ones too: tried >= applied
            for s in pol.schemes:
                assert s.sz_tried >= s.sz_applied
    assert thr["damon-tiering:ops=paddr"] > 1.3 * thr["static"]
    assert thr["damon-tiering:ops=paddr"] <= thr["oracle"] * (1 + 5e-3)


def test_paddr_migrate_cold_demotes_idle_frames_in_its_regions():
    """Others' idle pages are frames a paddr region holds and never finds accessed:
    migrate_cold demotes them with the rest of its regions."""
    m = small_machine(dram_pages=4096, slow_pages=32768)
    pol = DamonTiering(ops="paddr", goals="off", goal_offset="none", quota="256KiB")
    sim = Simulation(m, tiering_workload(), pol, ALLOCS.create("dram-preferred"), seed=0)
    sim.mem.held[0] += 300
    sim.mem.idle[0] = 300
    rec = sim.run()
    assert sim.mem.idle[1] == 300 and sim.mem.idle[0] == 0
    cold = [s for s in pol.schemes if s.action == "migrate_cold"][0]
    assert rec["migrations_by_reason"]["damos_migrate_cold"] == cold.sz_applied // 4096
    fr = pol.monitors[0].frames
    fr.sync()
    check_layout(fr, sim.mem)


def test_paddr_parameters():
    with pytest.raises(TierlabError, match="vaddr, paddr"):
        DamonTiering(ops="kaddr")
    with pytest.raises(TierlabError, match="boot, random"):
        DamonTiering(ops="paddr", frames="lifo")
    with pytest.raises(TierlabError, match="watches virtual addresses"):
        DamonTiering(ops="paddr", monitor="telescope-bounded")
    m = small_machine(dram_pages=4096, slow_pages=32768)
    sim = Simulation(m, tiering_workload(), POLICIES.create("static"),
                     ALLOCS.create("dram-preferred"), seed=0)
    with pytest.raises(TierlabError, match="nodes 0-1"):
        DamonPaddr(node=5).attach(sim)


def test_telemetry_skips_a_monitor_of_frames():
    """telemetry scores regions against the hot set's virtual addresses: a paddr
    monitor's regions are frames, so it is skipped with the reason, not scored wrong."""
    from tierlab.reports.telemetry import run_telemetry
    said = []
    rec = run_telemetry("gups:hotset,hot=1MiB,size=8MiB,updates=1e5", ["damon-paddr"],
                        note=said.append)
    assert rec["skipped"][0]["monitor"] == "damon-paddr"
    assert "physical frames" in said[0]
