"""The `daemon` guest scenario: `tierlab exec` running a policy on hotcold in the guest.

test_scenario_plumbing_with_stand_in checks the scenario itself with fake_exec.py (which
only honours the exec contract), so a failure of the real command below is the command's.
The real run needs `tierlab exec` in the repo (skipped until the CLI has it); policy and
alloc from TIERLAB_GUEST_POLICY / TIERLAB_GUEST_ALLOC (default idt, dram-preferred): the
hot range starts on the slow node 1, the cold range fills the fast node 0, and the
policy must swap them. The run stops at an event: 90% of the hot range on node 0 plus 3
samples, then SIGTERM to the workload (240 s is a cap). Measured (TCG): about 55 s wall
unloaded; IDT demoted the whole cold range at its first decision (~15 s) and had the hot
range on node 0 by ~16 s. Under a loaded host a fixed 40 s run once ended at 75%.
"""
from __future__ import annotations

import pytest
from harness import tierlab_exec_available


def finished_exec(request):
    """The guest run of a `tierlab exec` scenario that ended well: the workload's data
    verified and exit status 0. Returns (run, the exec record, the workload's ready
    event)."""
    if not tierlab_exec_available():
        pytest.skip("`tierlab exec` is not in the repo's CLI yet")
    run = request.getfixturevalue("guest_run")
    ex = run.one("exec")
    assert ex is not None and ex["ok"] and ex["checksum"] == "ok", run.explain()
    rec = run.one("exec-results")["data"][0]
    assert rec["exit_code"] == 0, rec
    return run, rec, run.one("hotcold", event="ready")


@pytest.mark.guest("daemon-contract")
def test_scenario_plumbing_with_stand_in(guest_run):
    assert guest_run.ok, guest_run.explain()
    ex = guest_run.one("exec")
    assert ex["ok"] is True and ex["rc"] == 0 and ex["rc_matches_child"] is True, ex
    assert ex["workload_started"] is True and ex["checksum"] == "ok", ex
    assert len(guest_run.of("exec-interval")) >= 3, guest_run.explain()
    assert guest_run.one("hotcold", event="done")["checksum"] == "ok"
    assert len(guest_run.of("placement")) >= 3
    res = guest_run.one("exec-results")
    assert res.get("data") and res["data"][0]["exit_code"] == 0, res


@pytest.mark.guest("daemon-exec")
def test_tierlab_exec_runs_policy_in_guest(request):
    if not tierlab_exec_available():
        pytest.skip("`tierlab exec` is not in the repo's CLI yet")
    run = request.getfixturevalue("guest_run")
    ex = run.one("exec")
    assert ex is not None, run.explain()
    assert ex["workload_started"] is True, f"{ex['error']}\n{run.explain()}"
    assert ex["error"] == "" and ex["ok"] is True, f"{ex}\n{run.explain()}"
    assert ex["rc_matches_child"] is True and ex["checksum"] == "ok", ex
    # the run stops at an event (the hot range on node 0), not at the cap
    done = run.one("hotcold", event="done")
    assert done["stopped"] is True, done
    secs = done["run_s"]
    lines = len(run.of("exec-line")) + len(run.of("exec-interval"))
    res = run.one("exec-results")
    assert "data" in res, res
    # a line for each report the daemon made (its record's series), and the stop line;
    # at most one report per 1 s interval, fewer when a monitoring pass (a DAMON read of
    # 1,000+ regions under TCG) outlasts the interval: counted against the daemon's own
    # reports, not the run's wall time, which a loaded host stretches
    reports = res["data"][0]["series"]["t"]
    assert len(reports) >= 2 and lines >= len(reports) + 1, \
        f"{lines} output lines for {len(reports)} reports in a {secs} s run"
    slots = [int(t // 1.0) for t in reports]
    assert all(b > a for a, b in zip(slots, slots[1:])), reports


@pytest.mark.guest("daemon-exec")
def test_exec_puts_hot_on_fast_and_cold_on_slow_and_counts_match_the_kernel(request):
    """Issue 5: with `tierlab exec` on, the hot range ends on node 0 and cold pages are
    demoted to node 1 within the run, every page's contents verify, and the daemon's
    own counts agree with /proc/PID/numa_maps and /proc/vmstat."""
    run, rec, ready = finished_exec(request)
    assert rec["stop_reason"] == "target exited"
    hot_pages, cold_pages = ready["hot_pages"], ready["cold_pages"]
    last = run.of("placement")[-1]
    # placement: the hot range on the fast node, the cold range on the slow node
    assert last["hot"].get("N0", 0) >= 0.9 * hot_pages, last
    # the daemon demoted cold pages to make room. How many: IDT demotes only while
    # node 0 has <= demote_wmark (10%) free, and (the paper's rules since issue 16) an
    # aggressive pass still requires age >= age_thres, so the cold range leaves node 0
    # over several passes, and what is left there once node 0 is above 10% free stays
    # (before, one aggressive pass that ignored age took the whole cold range at once)
    assert last["cold"].get("N1", 0) > 0, last
    # numa_maps against the daemon's counts: the cold range is first touched on node 0
    # (dram-preferred), so a cold page on node 1 was demoted by the daemon, unless node 0
    # was full at its first touch (a guest starved of CPU: the daemon had not made room
    # yet) and it went to node 1 at once; those are on node 1 by the first placement
    # sample (taken once every page is touched). The daemon promoted no fewer pages than
    # the hot range gained on node 0. Its moves after the last sample (the target is
    # stopped once the hot range is on node 0, and a pass may still be moving) are not
    # in numa_maps: its count is held against the kernel's migrations at the end instead.
    first = run.of("placement")[0]
    on_slow, at_first = last["cold"].get("N1", 0), first["cold"].get("N1", 0)
    down, tol = rec["moves"].get("0->1", 0), 0.01 * cold_pages + 64
    vm = run.one("nodes-after")["vmstat"]
    up = rec["moves"].get("1->0", 0)
    assert on_slow - at_first - tol <= down <= vm["pgmigrate_success"] - up, \
        (rec["moves"], first, last, vm)
    gained_hot = last["hot"].get("N0", 0) - first["hot"].get("N0", 0)
    assert rec["moves"].get("1->0", 0) >= gained_hot - 64, (rec["moves"], first, last)
    assert rec["promotions"] <= 1.02 * hot_pages + 64, rec["promotions"]
    # vmstat: the kernel migrated at least what the daemon says it moved (compaction may
    # add its own), and nothing came from the kernel's NUMA balancing (switched off)
    moved = rec["promotions"] + rec["demotions"]
    assert moved <= vm["pgmigrate_success"] <= 1.5 * moved + 4096, (moved, vm)
    assert vm["numa_pages_migrated"] == 0 and vm["pgpromote_success"] == 0, vm


@pytest.mark.guest("daemon-exec-tierlab")
def test_tierlab_policy_runs_for_real_and_its_cpu_is_measured(request):
    """Issue 21, target 6: the `tierlab` policy, unchanged, on the kernel's DAMON and
    move_pages: the hot range ends on node 0, every page verifies, and the daemon's own
    CPU per GiB managed is measured (printed; docs/own-policy.md records it)."""
    run, rec, ready = finished_exec(request)
    assert rec["policy"].startswith("tierlab"), rec
    last = run.of("placement")[-1]
    assert last["hot"].get("N0", 0) >= 0.9 * ready["hot_pages"], \
        ({k: v for k, v in rec["policy_stats"].items() if k != "monitor"}, last)
    gib = rec["managed_bytes_max"] / 2**30
    assert rec["daemon_cpu_seconds"] > 0 and gib > 0
    print(f"tierlab daemon: {rec['daemon_cpu_seconds']:.2f} CPU s over "
          f"{rec['sim_seconds']:.0f} s managing {gib:.2f} GiB (TCG guest): "
          f"{100 * rec['daemon_cpu_seconds'] / rec['sim_seconds'] / gib:.1f}% of a CPU "
          "per GiB")
