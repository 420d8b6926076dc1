"""NOMAD (OSDI'24): the engine's transactional migration and shadow copies
(engine/shadow.py) and the `nomad` policy (policies/nomad.py)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from tierlab.engine import Simulation
from tierlab.errors import TierlabError
from tierlab.policies import ALLOCS, POLICIES
from tierlab.policies.base import Policy

from conftest import HotCold
from test_engine import check_invariants, simulate, small_machine


class Scripted(Policy):
    """Runs `steps[t](sim)` once at simulated time t and records what it returns; `sim`
    is the Simulation itself (`real`, set by the test), to read the truth it models."""

    def __init__(self, steps):
        super().__init__()
        self.steps = steps
        self.out = {}

    def attach(self, sim):
        super().attach(sim)
        for t, fn in self.steps.items():
            sim.every(1e9, lambda now, t=t, fn=fn: self.out.setdefault(t, fn(self.real)),
                      offset=t)


def run_scripted(steps, write_frac=0.5, slow_pages=3000, dram_pages=900, work=1e9,
                 migrate_bw=None):
    """3000 pages (HotCold: the hot 300 at 2700-3000); first touch fills DRAM from 0."""
    wl = HotCold(n=3000, hot=300, work=work, write_frac=write_frac)
    pol = Scripted(steps)
    m = small_machine(dram_pages=dram_pages, slow_pages=slow_pages)
    if migrate_bw is not None:
        m = dataclasses.replace(m, migrate_bw=migrate_bw)
    sim = Simulation(m, wl, pol,
                     ALLOCS.create("dram-preferred"), seed=3)
    pol.real = sim
    sim.run()
    check_invariants(sim)
    return sim, pol.out


HOT = np.arange(2400, 2700)  #: cold pages just below HotCold's hot 300, left slow by first touch


def tpm(sim, pages, **kw):
    """Demote as many cold DRAM pages as `pages` (room above the watermarks), then
    promote `pages` by transactional migration."""
    cold = np.flatnonzero(sim.node_of(np.arange(2400)) == 0)[:len(pages)]
    sim.migrate(cold, 1)
    return sim.migrate_tpm(pages, 0, **kw)


def test_clean_promoted_page_is_demoted_by_remap():
    """A read-only page promoted by TPM keeps its shadow: its demotion copies nothing."""
    def promote(sim):
        sim.migrate(np.flatnonzero(sim.node_of(np.arange(2400)) == 0)[:100], 1)
        before = sim.stats.migrated_bytes
        moved, failed = sim.migrate_tpm(HOT[:100], 0)
        return moved, failed, sim.stats.migrated_bytes - before, sim.shadow_frames().copy()

    def demote(sim):
        before = sim.stats.migrated_bytes
        return sim.migrate(HOT[:100], 1), sim.stats.migrated_bytes - before, \
            sim.shadow_frames().copy()

    sim, out = run_scripted({0.01: promote, 0.02: demote}, write_frac=0.0)
    moved, failed, copied, held = out[0.01]
    assert (moved, failed) == (100, 0)
    assert copied == 100 * 4096
    assert list(held) == [0, 100]  # the old frames stay on the slow node
    demoted, copied2, held2 = out[0.02]
    assert demoted == 100 and copied2 == 0, "a clean shadowed page must be remapped"
    assert list(held2) == [0, 0]
    assert sim.shadows.remapped == 100


def test_written_pages_lose_their_shadow_and_are_copied_back():
    """The first write drops the shadow (a write-protect fault); demotion then copies."""
    def promote(sim):
        return tpm(sim, HOT[:100])

    def demote(sim):
        before = sim.stats.migrated_bytes
        return sim.migrate(HOT[:100], 1), sim.stats.migrated_bytes - before

    sim, out = run_scripted({0.01: promote, 5.0: demote}, write_frac=0.5)
    assert out[0.01][0] == 100
    demoted, copied = out[5.0]
    assert demoted == 100 and copied == 100 * 4096
    assert sim.shadows.dropped["write"] == 100


def test_transactions_abort_as_often_as_the_page_is_written_during_its_copy():
    """One attempt commits with probability exp(-w T) (w writes per second, T the
    copy); with no writes none aborts."""
    def promote(sim):
        _, w = sim.timeline.field.rate_of(HOT[:1])
        x = sim.throughput()
        return tpm(sim, HOT, retries=1), w[0] * x * 4096 / sim.machine.migrate_bw

    sim, out = run_scripted({0.01: promote}, write_frac=0.5, migrate_bw=1e7)  # slow copies
    (moved, failed), wt = out[0.01]
    assert moved + failed == 300
    p_abort = -np.expm1(-wt)
    assert 0.2 < p_abort < 0.8
    sd = np.sqrt(300 * p_abort * (1 - p_abort))
    assert abs(failed - 300 * p_abort) < 4 * sd
    assert sim.shadows.tpm_attempts == 300 and sim.shadows.tpm_aborts == failed
    sim2, out2 = run_scripted({0.01: promote}, write_frac=0.0)
    assert out2[0.01][0] == (300, 0) and sim2.shadows.tpm_aborts == 0


def test_shadows_go_first_under_pressure_on_their_node():
    """Shadows use slow-tier capacity and are freed before anything else needs it."""
    def promote(sim):
        return tpm(sim, HOT)

    def fill(sim):  # demote cold DRAM pages until the slow node is short
        lo = np.flatnonzero(sim.node_of(np.arange(2400)) == 0)
        return sim.migrate(lo, 1), sim.shadow_frames().copy()

    sim, out = run_scripted({0.01: promote, 0.02: fill}, write_frac=0.0,
                            slow_pages=2800)
    assert out[0.01][0] == 300
    moved, held = out[0.02]
    assert sim.shadows.dropped["reclaimed"] > 0
    assert moved > 0 and held[1] < 300


@pytest.mark.parametrize("write_frac", [0.0, 0.5])
def test_nomad_runs_and_keeps_invariants(write_frac):
    wl = HotCold(n=3000, hot=600, work=3e9, write_frac=write_frac)
    sim, rec = simulate(small_machine(dram_pages=500, slow_pages=4000), wl, "nomad",
                        "dram-preferred", seed=2)
    check_invariants(sim)
    assert rec["promotions"] > 0 and rec["shadows"]["shadows_created"] > 0
    if write_frac == 0.0:  # read-only: demotions of promoted pages are remaps
        assert rec["shadows"]["shadow_remaps"] > 0
        assert rec["shadows"]["shadows_dropped_write"] == 0
    else:
        assert rec["shadows"]["shadows_dropped_write"] > 0


def test_nomad_demotes_clean_pages_by_remap_under_pressure():
    """A read-only hot set larger than DRAM (NOMAD's pressure case): TPP copies every
    migration; NOMAD's demotions of promoted, still clean pages are remaps, so it
    copies far less per migration, and none of its promotions stalls the application
    for a copy (its copies are the mover's CPU)."""
    wl = HotCold(n=3000, hot=600, work=3e9, write_frac=0.0)
    m = small_machine(dram_pages=500, slow_pages=4000)
    _, tpp = simulate(m, wl, "tpp", "dram-preferred", seed=2)
    _, nomad = simulate(m, wl, "nomad", "dram-preferred", seed=2)
    per = {r["policy"]: r["migrated_bytes"] / max(r["promotions"] + r["demotions"], 1)
           for r in (tpp, nomad)}
    assert per["tpp"] == 4096
    assert per["nomad"] < 4096 * 0.75, "most demotions should be remaps"
    assert nomad["shadows"]["shadow_remaps"] > nomad["demotions"] / 2
    assert nomad["migration_cpu_seconds"] > 0


def test_nomad_is_deterministic_per_seed():
    wl = HotCold(n=3000, hot=600, work=2e9, write_frac=0.3)
    m = small_machine(dram_pages=500, slow_pages=4000)
    a = simulate(m, wl, "nomad", "dram-preferred", seed=5)[1]
    b = simulate(m, wl, "nomad", "dram-preferred", seed=5)[1]
    for k in ("throughput", "promotions", "demotions", "migrated_bytes", "shadows"):
        assert a[k] == b[k]


@pytest.mark.parametrize("spec", ["nomad:retries=0", "nomad:queue=x", "nomad:retries=-1"])
def test_bad_parameters_name_the_value(spec):
    with pytest.raises(TierlabError, match="nomad"):
        POLICIES.create(spec)


def test_a_page_shadowed_hundreds_of_times_keeps_one_live_entry():
    """Read-only pages promoted by TPM and demoted by remap 300 times (each a new
    shadow, its old entry dead): the frames held stay those of the live shadows, no dead
    entry comes back, and the entries stay bounded (compacted)."""
    def cycle(sim):
        sim.migrate(np.flatnonzero(sim.node_of(np.arange(2400)) == 0)[:50], 1)
        remapped = 0 if sim.shadows is None else sim.shadows.remapped
        for _ in range(300):
            assert sim.migrate_tpm(HOT[:50], 0) == (50, 0)
            assert sim.migrate(HOT[:50], 1) == 50
        sim.migrate_tpm(HOT[:50], 0)
        return (sim.shadows.remapped - remapped, sim.shadows.per_node().copy(),
                sim.mem.held.copy(), sim.shadows.entries())

    sim, out = run_scripted({0.01: cycle}, write_frac=0.0)
    remapped, frames, held, entries = out[0.01]
    assert remapped == 300 * 50
    assert list(frames) == list(held) == [0, 50]
    assert entries <= 2 * 50
