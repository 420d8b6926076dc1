"""Linux's own tiering in the guest (scenarios/tiering.sh, tiering=kernel on hotcold; the
kernel-hotcold case of scripts/sim_vs_kernel.py): NUMA balancing mode 2
promotes a 128 MiB hot range from the CPU-less node 1 to node 0 while kswapd demotes idle and
cold pages from a node 0 filled up to 16 MiB of headroom.

Every guest CPU switches address space every 1 ms (ticker_us=1000, as the script runs its
guests: README.md, "The emulator's TLB"). Measured on the 2-core Debian 12 host (TCG,
scan_size_mb=1024, 2026-12-07): >= 90% of the hot range is on node 0 5.8 s after mode 2 is
switched on (idle host: 90-94% when the runs stopped at 7.8-8.4 s), in bursts of one per
scan; kswapd demotes 29.6-32.5k pages (most of them idle initramfs pages);
pgpromote_success stays within 8 pages of the hot pages that moved.
"""
from __future__ import annotations

import json
import sys

import harness
import pytest

pytestmark = [pytest.mark.guest("kernel-tiering")]

#: no time bound of its own: guest time under TCG stretches with the host's load (a run
#: beside two busy loops reached 90% at 15.1 s, another at 8 s; a fixed 20 s run missed it
#: beside four busy jobs). The scenario samples until MOST is reached and 5 samples more
#: (an event), with 240 s of hotcold as the cap
MOST = 0.90


def _samples(run):
    init = run.one("placement-initial")
    on = run.one("tiering-on")
    assert init and on, run.explain()
    return init, on["uptime"], run.of("placement")


def _timeline(run):
    init, t_on, samples = _samples(run)
    return [(round(s["uptime"] - t_on, 1), round(harness.hot_fraction(s), 3),
             harness.vmstat_delta(init, s)) for s in samples]


def test_scenario_runs_clean(guest_run):
    assert guest_run.ok, guest_run.explain()
    assert not guest_run.bad_results, guest_run.bad_results[:3]
    knobs = guest_run.one("kernel-tiering-knobs")
    assert knobs["demotion_enabled"] is True, knobs
    assert guest_run.one("tiering-on")["numa_balancing"] == 2


def test_starts_hot_on_node1_cold_on_node0(guest_run):
    init, _, _ = _samples(guest_run)
    ready = guest_run.one("hotcold", event="ready")
    assert init["hot"]["N1"] == ready["hot_pages"] and init["hot"]["N0"] == 0, init
    # the cold fill may already make kswapd demote a little; nearly all of it is on node 0
    assert init["cold"]["N0"] >= 0.95 * ready["cold_pages"], init


def test_hot_range_promoted_within_the_run(guest_run):
    timeline = _timeline(guest_run)
    report = "\n".join(f"  t={t:5.1f}s hot on N0 {f:6.1%} promoted {d.get('pgpromote_success')} "
                       f"demoted {d.get('pgdemote_kswapd', 0) + d.get('pgdemote_direct', 0)}"
                       for t, f, d in timeline)
    print(f"kernel tiering timeline (s since numa_balancing=2):\n{report}")
    reached = [t for t, f, _ in timeline if f >= MOST]
    assert reached, f"hot range never {MOST:.0%} on node 0:\n{report}\n{guest_run.explain(10)}"

    # and it stays there (no large ping-pong) until the end
    assert timeline[-1][1] >= MOST, report


#: node 0's room above its min watermark once filled (scenarios/tiering.sh headroom_mib=16)
HEADROOM_PAGES = 16 * 256


def test_pages_demoted_to_make_room(guest_run):
    """Promotions into a full node 0 need room, and kswapd makes it by demotion: all but
    the headroom of the promoted pages were matched by demoted ones. Which pages go is the
    LRU's choice: idle initramfs pages first (they are older), so the workload's cold
    pages reach node 1 in some runs (1.7k-20k in 18 runs of 2026-12-06) and in others not
    at all (a CI run of 7dcacde demoted 0); none gets there but by demotion."""
    init, _, samples = _samples(guest_run)
    last = samples[-1]
    d = harness.vmstat_delta(init, last)
    demoted = d["pgdemote_kswapd"] + d["pgdemote_direct"]
    promoted = d["pgpromote_success"]
    assert promoted > HEADROOM_PAGES, d
    assert demoted + HEADROOM_PAGES >= promoted, (demoted, promoted)
    cold_gain = last["cold"]["N1"] - init["cold"]["N1"]
    assert 0 <= cold_gain <= demoted, (init["cold"], last["cold"], demoted)


def test_counters_consistent_with_numa_maps(guest_run):
    init, _, samples = _samples(guest_run)
    ready = guest_run.one("hotcold", event="ready")
    done = guest_run.one("hotcold", event="done")
    hot_pages = ready["hot_pages"]
    slack = max(64, hot_pages // 100)
    for s in samples:
        d = harness.vmstat_delta(init, s)
        moved_up = s["hot"]["N0"] - init["hot"]["N0"]
        # every hot page that went from node 1 to node 0 was a counted promotion...
        assert d["pgpromote_success"] + slack >= moved_up, (s["uptime"], d, s["hot"])
        # ...and promotions are not much more than that: little ping-pong, cold rarely touched
        assert d["pgpromote_success"] <= moved_up + hot_pages // 10 + done["cold_ops"] + slack, \
            (s["uptime"], d, s["hot"])
        # NUMA-balancing migrations of this run are these promotions
        assert abs(d["numa_pages_migrated"] - d["pgpromote_success"]) <= slack, d
    # nothing lost or swapped. numa_maps counts present PTEs, so a batch of pages in
    # mid-migration (kswapd demotes them in batches) is briefly uncounted: a final
    # sample of a fresh-clone run beside a yes (0fbacc1) was 64 cold pages short. A lost
    # or swapped page would be missing from every later sample, so one of the final
    # samples (the scenario takes 5 after the hot range settles) holds them all, and
    # none is short by more than a batch.
    want = hot_pages + ready["cold_pages"]
    totals = [sum(s["hot"].values()) + sum(s["cold"].values()) for s in samples]
    assert all(0 <= want - t <= slack for t in totals), (want, totals)
    assert want in totals[-5:], (want, totals[-5:], samples[-1])


def test_workload_contents_intact(guest_run):
    done = guest_run.one("hotcold", event="done")
    assert done is not None, guest_run.explain()
    assert done["checksum"] == "ok" and done["bad_pages"] == 0 and done["read_bad"] == 0, done
    # stopped by SIGTERM once the placement reached MOST (the event), not at the cap
    assert done["stopped"] is True and done["ops"] > 0, done
    assert guest_run.one("workload-exit")["rc"] == 0
    (harness.LOGS / "kernel-tiering-timeline.json").write_text(json.dumps(
        {"log": str(guest_run.log_path), "timeline": _timeline(guest_run)}, indent=1))


#: scripts/sim_vs_kernel.py's kernel-hotcold case. Its hot share over time is not asserted
#: here: under TCG the guest's kernel slows with the host's load while its timers do not,
#: and that gap was 0.18 on an idle host but 0.56-0.67 beside the two processes of a
#: running reproduction (2026-12-06; docs/sim-vs-kernel runs idle). What the load does not
#: move: pages promoted by the end (the kernel's run stops at 90% + 5 samples: 93-100% of
#: the hot range) and pages demoted per page promoted (idle: kernel 1.04, simulator 1.08;
#: loaded: 0.97-1.06 and 1.05-1.09)
COUNTER_BOUND = 0.15


def test_the_simulator_follows_the_kernel(guest_run, tmp_path):
    """The cheapest case of the simulator-against-kernel comparison, end to end: this
    boot's timeline against `autonuma-tiering-mglru` on the machine that mirrors the guest.
    Both place 90% of the hot range on node 0; the promotions, and the demotions per
    promotion, agree within COUNTER_BOUND."""
    sys.path.insert(0, str(harness.REPO / "scripts"))
    import sim_vs_kernel as svk
    case = svk.CASES["kernel-hotcold"]
    g = svk.guest_data(case, guest_run)
    s = svk.simulate(case, g, tmp_path, **svk.calibration())
    print(f"simulator against kernel: {svk.gaps(g, s)}")
    assert max(g["hot_fast"]) >= MOST and max(s["hot_fast"]) >= MOST
    kp, kd, sp, sd = g["promoted"][-1], g["demoted"][-1], s["promoted"][-1], s["demoted"][-1]
    assert kp > 0 and sp > 0 and abs(kp - sp) <= COUNTER_BOUND * sp, (kp, sp)
    assert abs(kd / kp - sd / sp) <= COUNTER_BOUND * sd / sp, (kd, kp, sd, sp)
