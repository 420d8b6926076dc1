"""What the kernel's DAMON sees of a hot range in the guest (scenarios/damonview.sh), with
an address-space switch on every CPU each 1 ms (tick.c), as scripts/sim_vs_kernel.py runs
its guests: the premise of comparing the simulator's DAMON with the kernel's there.

Under TCG, without the ticks, the kernel's DAMON read hotcold's 64 MiB hot range at about
5e6 ops/s as never accessed, 0 of 20 samples in every aggregation for 20 s (README.md,
"The emulator's TLB"). With them it read 8.6-10.6 of 20 at 1.4e6 ops/s, where a page whose
accessed bit is set again at its next access reads 7 (2026-12-07).
"""
from __future__ import annotations

import math

import harness
import pytest

pytestmark = [pytest.mark.guest("damon-view")]

#: DAMON's sample interval in the scenario (TL_damon_sample_ms)
SAMPLE_S = 0.005


def test_damon_sees_the_hot_range_and_not_the_cold_one(guest_run):
    assert guest_run.ok, guest_run.explain()
    assert guest_run.one("tickers")["ticker_us"] == harness.TICKER_US
    views = guest_run.of("damon-view")
    ready = guest_run.one("hotcold", event="ready")
    rate = guest_run.one("hotcold", event="done")["ops_per_s"] / ready["hot_pages"]
    assert len(views) >= 3, guest_run.explain()
    late = views[len(views) // 2:]
    m = late[0]["vaddr"]["max_nr_accesses"]
    expect = m * -math.expm1(-rate * SAMPLE_S)  # each sample: accessed within 5 ms
    hot = [v["vaddr"]["hot"]["mean_nr_accesses"] for v in late]
    cold = [v["vaddr"]["cold"]["mean_nr_accesses"] for v in late]
    report = f"hot {hot}, cold {cold}, expected {expect:.1f} of {m} at {rate:.0f}/s a page"
    assert min(hot) >= 0.5 * expect, report
    assert max(cold) < 1, report
    # the physical-address view finds the hot range's frames too (node 1 holds nothing else)
    assert all(sum(v["paddr"]["pages"][1:]) >= 0.5 * ready["hot_pages"] for v in late), \
        [v["paddr"]["pages"] for v in late]
