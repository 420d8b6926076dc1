"""Telescope (ATC'24; monitors/telescope.py) and `tierlab telemetry`
(reports/telemetry.py): level choice on crafted regions, sampling through upper-level
accessed bits, precision and recall on crafted sets, Telescope against DAMON on a
sparse hot set, and the command's files."""
from __future__ import annotations

import json

import numpy as np
import pytest

from tierlab.cli import main
from tierlab.engine.timeline import Timeline
from tierlab.errors import TierlabError
from tierlab.field import RateField
from tierlab.monitors import MONITORS, AccessedBits
from tierlab.monitors.damon import Damon
from tierlab.monitors.telescope import (TelescopeBounded, TelescopeFlex, bounded_levels,
                                        flex_levels, overshoot, parse_error)
from tierlab.reports.telemetry import (overlap, precision_recall, region_hot, run_telemetry,
                                       split_monitors, true_hot)

from test_damon import FakeSim, _OpaqueSource

PMD, PUD, P4D = 512, 512 ** 2, 512 ** 3  # pages per 2 MiB, 1 GiB, 512 GiB entry


def arr(*x):
    return np.array(x, dtype=np.int64)


# -----------------------------------------------------------------------------------
# Level choice on crafted regions
# -----------------------------------------------------------------------------------
def test_bounded_picks_the_highest_entry_inside_the_region():
    # an aligned 512 GiB region: every sample at the P4D
    assert bounded_levels(0, P4D, arr(0, 12345, P4D - 1)).tolist() == [3, 3, 3]
    # 1 GiB long but only 2 MiB aligned: no PUD fits, PMDs everywhere
    assert bounded_levels(PMD, PMD + PUD, arr(PMD, PUD, PUD + PMD - 1)).tolist() == [1, 1, 1]
    # [3, 1100): the PMD [512, 1024) fits; the pages around it only as PTEs
    assert bounded_levels(3, 1100, arr(600, 1023, 1050, 5, 511)).tolist() == [1, 1, 0, 0, 0]
    # 1.5 GiB holding one aligned PUD: PUD inside it, PMDs in the rest
    s, e = PUD - PUD // 4, 2 * PUD + PUD // 4
    assert bounded_levels(s, e, arr(PUD + 7, s + 3, 2 * PUD + 9, e - 1)).tolist() == \
        [2, 1, 1, 1]
    # per region, broadcast over samples
    lv = bounded_levels(arr(0, 3)[:, None], arr(P4D, 1100)[:, None], np.array([[10, 20], [600, 5]]))
    assert lv.tolist() == [[3, 3], [1, 0]]
    assert overshoot(3, 1100, arr(600, 600), arr(1, 2)).tolist() == [0, PUD - 1097]


def test_flex_goes_up_within_the_allowance_and_not_beyond():
    size = int(0.9 * PUD)  # 0.9 GiB at 0: PMDs bounded, the PUD overshoots by 11%
    p = arr(10, PUD // 2)
    assert bounded_levels(0, size, p).tolist() == [1, 1]
    assert flex_levels(0, size, p, 0.25).tolist() == [2, 2]
    assert flex_levels(0, size, p, 0.05).tolist() == [1, 1]  # 11% > 5%: stays
    # a 2 MiB region: the PUD would overshoot 511x its size
    assert flex_levels(PMD, 2 * PMD, arr(PMD + 1), 0.25).tolist() == [1]
    # two levels at most: a PTE-level sample near the end of a region one page short of
    # 512 GiB may go to its PUD (+2) but not to the P4D (+3), though that fits too
    s, e = 0, P4D - 1
    q = arr(P4D - 2)
    assert bounded_levels(s, e, q).tolist() == [0]
    assert flex_levels(s, e, q, 0.25).tolist() == [2]
    assert flex_levels(s, e, q, 0.25, up=3).tolist() == [3]
    assert flex_levels(s, e, arr(5), 0.25).tolist() == [3]  # PUD-level sample: +1
    assert flex_levels(s, e, arr(5), 0.0).tolist() == [2]  # no allowance: bounded


def test_flex_allowance_per_level_follows_the_slides():
    """Slides: L2 (2 MiB entries) may overshoot 25%, L3 (1 GiB) 15%; one value is the
    public code's rule at every level."""
    size = int(0.85 * PUD)  # the PUD overshoots by 17.6%: over L3's 15%, under 25%
    p = arr(10, PUD // 2)
    default = MONITORS.create("telescope-flex").error
    assert default == [0.25, 0.15]
    assert flex_levels(0, size, p, default).tolist() == [1, 1]
    assert flex_levels(0, size, p, parse_error("25%")).tolist() == [2, 2]
    assert flex_levels(0, int(0.9 * PUD), p, default).tolist() == [2, 2]  # 11% <= 15%
    # a PMD overshoot of 20% passes L2's 25%: 2 MiB entry over a 1.67 MiB region
    assert flex_levels(0, int(PMD / 1.2), arr(3), default).tolist() == [1]
    with pytest.raises(TierlabError, match="25%/15%"):
        parse_error("25%/x")


def test_registry_and_parameters():
    b = MONITORS.create("telescope-bounded")
    f = MONITORS.create("telescope-flex:error=10%")
    assert isinstance(b, Damon) and isinstance(f, TelescopeBounded)
    assert b.sample_interval == pytest.approx(0.005) and b.max_nr_accesses == 40
    assert f.error == pytest.approx([0.1]) and TelescopeFlex(error="0.3").error == [0.3]
    for bad in ("telescope-flex:error=-1", "telescope-flex:error=lots",
                "telescope-bounded:error=10%", "telescope-bounded:min_nr_regions=1"):
        with pytest.raises(TierlabError):
            MONITORS.create(bad)
    with pytest.raises(TierlabError, match="simulator only"):
        f.attach(type("RealBackend", (), {"real": True})())


# -----------------------------------------------------------------------------------
# Sampling through upper-level accessed bits
# -----------------------------------------------------------------------------------
def test_samples_read_the_chosen_entry_in_both_paths():
    """A sample is Bernoulli(1 - exp(-entry rate x 5 ms)) of its entry at the chosen
    level: the batched rate path and per-level `bits.test_since` agree with it; the
    checks are counted per level and charged (2 x 150 ns per sample)."""
    n = 1 << 20
    st, en = arr(0, 300000, 300064), arr(300000, 300064, n)
    rates = np.array([1e-3, 2000.0, 1e-3]) / 2  # per page per s; W(t) = t
    f = RateField(st, en, rates, rates, n)
    regions = (arr(0, PUD + 1000, 400000), arr(PUD, PUD + 100000, n))
    pages = np.arange(n)
    cum = np.concatenate(([0.0], np.cumsum(f.rate_of(pages)[0] * 2)))
    expect = []
    for s, e in zip(*regions):
        p = pages[s:e]
        span = np.asarray([1, PMD, PUD, P4D])[bounded_levels(s, e, p)]
        a = p // span * span
        lam = (cum[np.minimum(a + span, n)] - cum[a]) * 0.005
        expect.append(40 * np.mean(-np.expm1(-lam)))
    expect = np.array(expect)
    assert expect[0] > 20 and expect[1] < 5 and 5 < expect[2] < 35
    for kind, k in (("rate", 300), ("bits", 60)):
        sim = FakeSim(f, seed=4)
        if kind == "bits":
            sim.source = _OpaqueSource(sim.source)
            sim.bits = AccessedBits(sim.source, sim.rng_for("bits"), npages=n)
        mon = TelescopeBounded(target=[(0, n)])
        mon.sim, mon.rng = sim, sim.rng_for("telescope")
        mon.set_regions(*regions)
        draws = []
        for j in range(1, k + 1):
            sim.timeline.advance(0.2 * j, 0.2 * j)
            draws.append(mon._sample(0.2 * (j - 1), 0.2 * j))
        m = np.mean(draws, axis=0)
        sd = np.sqrt(40 * 0.25 / k)
        assert np.all(np.abs(m - expect) < 5 * sd), (kind, m, expect)
        by = mon.stats()["checks_by_level"]
        assert by["pud"] > 0 and by["pmd"] > 0 and by["pte"] > 0 and by["p4d"] == 0
        assert sum(by.values()) == 3 * 40 * k
        assert sim.bits.checks == 2 * 3 * 40 * k
        assert sim.cpu == pytest.approx(2 * 3 * 40 * k * 150e-9)


# -----------------------------------------------------------------------------------
# Precision and recall
# -----------------------------------------------------------------------------------
def test_precision_and_recall_on_crafted_sets():
    # one window's aggregations, the regions cut differently each time
    aggs = [(arr(0, 100, 200), arr(100, 200, 300), arr(1, 3, 0)),
            (arr(0, 150), arr(150, 300), arr(1, 4)),
            (arr(150, 250), arr(250, 300), arr(0, 6))]
    s, e = region_hot(aggs, hot_min=5)
    # summed per page: [0,100) 2, [100,150) 4, [150,200) 7, [200,250) 4, [250,300) 10
    assert s.tolist() == [150, 250] and e.tolist() == [200, 300]
    assert region_hot(aggs, hot_min=5, scale=0.6)[0].tolist() == [250]
    truth = (arr(120, 280), arr(220, 400))
    assert overlap(s, e, *truth) == 50 + 20
    prec, rec, hit, m, t = precision_recall((s, e), truth)
    assert (hit, m, t) == (70, 100, 220)
    assert prec == pytest.approx(0.7) and rec == pytest.approx(70 / 220)
    z = arr()
    assert precision_recall((z, z), truth)[:2] == (None, 0.0)
    assert precision_recall((s, e), (z, z))[:2] == (0.0, None)


def test_sampled_truth_from_the_rate_field():
    """truth=sampled: expected accessed 5 ms intervals per 200 ms aggregation > 5, i.e.
    a rate above -200 ln(1 - 5/40) ~ 26.7 accesses per second per page."""
    thr = -200 * np.log1p(-5 / 40)
    f = RateField(arr(0, 10, 20, 30), arr(10, 20, 30, 40),
                  np.array([thr * 0.99, thr * 1.01, 500.0, 0.0]), np.zeros(4), 50)
    tl = Timeline(f)
    tl.advance(2.0, 2.0)
    s, e = true_hot(tl, 1.0, 2.0, truth="sampled")
    assert s.tolist() == [10] and e.tolist() == [30]
    # a field change mid-window: the first field for half of it only, [30,40) then hot
    g = RateField(arr(30), arr(40), np.array([2000.0]), np.zeros(1), 50)
    tl.set_field(2.5, g)
    tl.advance(3.0, 3.0)
    s, e = true_hot(tl, 2.0, 3.0, truth="sampled")
    assert s.tolist() == [20] and e.tolist() == [40]  # 500/s for 0.5 s still counts
    tl.set_field(3.0, RateField(arr(0), arr(10), np.array([thr * 1.05]), np.zeros(1), 50))
    tl.advance(4.0, 4.0)
    s, e = true_hot(tl, 3.0, 4.0, truth="sampled")
    assert s.tolist() == [0] and e.tolist() == [10]


def test_relative_truth_is_the_workloads_hot_set_whatever_its_rate():
    """truth=relative: pages at >= 2x the footprint's mean rate, however low the rate
    per page (a large hot set's pages are rarely touched each: the paper's point)."""
    f = RateField(arr(0, 10, 100), arr(10, 100, 1000),
                  np.array([0.5, 0.02, 1e-6]), np.zeros(3), 1000)
    tl = Timeline(f)
    tl.advance(1.0, 1.0)
    # mean over the 1000 pages: (10 x 0.5 + 90 x 0.02 + 900 x 1e-6) / 1000 ~ 0.0068
    s, e = true_hot(tl, 0.0, 1.0)
    assert s.tolist() == [0] and e.tolist() == [100]
    assert true_hot(tl, 0.0, 1.0, truth="sampled")[0].size == 0  # far below 26.7/s
    # a uniform field has no hot set; unmapped pages are not part of the footprint
    u = RateField(arr(0, 500), arr(100, 520), np.array([1.0, 10.0]), np.zeros(2), 1000)
    tl.set_field(1.0, u)
    tl.advance(2.0, 2.0)
    s, e = true_hot(tl, 1.0, 2.0)
    assert s.tolist() == [500] and e.tolist() == [520]  # mean over 120 pages: 2.5
    tl.set_field(2.0, RateField(arr(0), arr(1000), np.array([1.0]), np.zeros(1), 1000))
    tl.advance(3.0, 3.0)
    assert true_hot(tl, 2.0, 3.0)[0].size == 0


def test_split_monitor_specs():
    assert split_monitors("damon,telescope-flex:error=10%,aggr=1s,pebs:poll=5ms") == [
        "damon", "telescope-flex:error=10%,aggr=1s", "pebs:poll=5ms"]


# -----------------------------------------------------------------------------------
# Telescope against DAMON (ATC'24's observation) and the command
# -----------------------------------------------------------------------------------
NEEDLES = """# three 8 MiB hot needles in 32 GiB of (almost) idle memory
cold_a, 8589934592
n1, 8388608
cold_b, 8589934592
n2, 8388608
cold_c, 8589934592
n3, 8388608
cold_d, 8589934592

run
{ms}
n1, 1, 64, 30
n2, 1, 64, 30
n3, 1, 64, 30
cold_a, 1, 64, 0.00001
cold_b, 1, 64, 0.00001
cold_c, 1, 64, 0.00001
cold_d, 1, 64, 0.00001
"""


def test_telescope_recall_beats_damon_on_sparse_hot_needles(tmp_path):
    cfg = tmp_path / "needles.cfg"
    cfg.write_text(NEEDLES.format(ms=20000))
    res = run_telemetry(f"masim:{cfg}", ["damon", "telescope-bounded", "telescope-flex"])
    by = {e["monitor"]: e for e in res["monitors"]}
    d, b, f = (by[k]["summary"] for k in ("damon", "telescope-bounded", "telescope-flex"))
    assert d["windows"] >= 18
    assert d["mean_recall"] < 0.5 and d["recall90_at"] is None
    for s in (b, f):
        assert s["mean_recall"] > d["mean_recall"] + 0.3
        assert s["recall90_at"] is not None and s["recall90_at"] <= 10
    assert d["mean_precision"] > 0.8  # what DAMON marks hot is hot; it misses most
    # the ATC'24 intervals, and every monitor charged its checks
    assert by["damon"]["params"]["aggr"] == "200ms"
    for e in res["monitors"]:
        assert e["monitor_cpu_seconds"] > 0
        assert all(x is None or 0 <= x <= 1 for x in e["series"]["recall"])
    assert by["telescope-bounded"]["stats"]["checks_by_level"]["pud"] > 0


def test_telemetry_command_writes_its_files(tmp_path, capsys):
    cfg = tmp_path / "tiny.cfg"
    cfg.write_text("cold, 268435456\nhot, 4194304\n\nrun\n3000\nhot, 1, 64, 90\n"
                   "cold, 1, 64, 10\n")
    out = tmp_path / "out"
    rc = main(["telemetry", "--workload", f"masim:{cfg}", "--monitors",
               "damon,telescope-flex:error=10%,pebs", "--out", str(out)])
    cap = capsys.readouterr()
    assert rc == 0, cap.err
    assert "damon:" in cap.err and "telescope-flex:error=10%:" in cap.err  # progress
    for name in ("telemetry.json", "telemetry.csv", "telemetry.png"):
        assert (out / name).stat().st_size > 0
    res = json.loads((out / "telemetry.json").read_text())
    names = [e["monitor"] for e in res["monitors"]] + [s["monitor"] for s in res["skipped"]]
    assert names[:2] == ["damon", "telescope-flex:error=10%"] and "pebs" in names
    for e in res["monitors"]:
        assert len(e["series"]["t"]) >= 2 and e["summary"]["mean_recall"] is not None
    lines = (out / "telemetry.csv").read_text().splitlines()
    assert lines[0].startswith("monitor,t,precision,recall")
    assert len(lines) == 1 + sum(len(e["series"]["t"]) for e in res["monitors"])


def test_telemetry_says_when_the_workload_has_no_hot_page(tmp_path, capsys):
    """masim:zigzag spreads its accesses evenly: under the relative truth no page is hot
    in any window, and the command says so under its table instead of leaving
    "precision 0.0%, recall -" unexplained; a workload with a hot set gets no note."""
    rc = main(["telemetry", "--workload", "masim:zigzag", "--monitors", "damon",
               "--out", str(tmp_path / "z")])
    out = capsys.readouterr().out
    assert rc == 0
    assert "note: masim:zigzag has no hot page under --truth relative in any window (no " \
        "page reached 2x the footprint's mean access rate)" in " ".join(out.split())
    rc = main(["telemetry", "--workload", "masim:hotcold", "--monitors", "damon",
               "--out", str(tmp_path / "h")])
    assert rc == 0 and "no hot page" not in capsys.readouterr().out


@pytest.mark.parametrize("monitors,needle", [
    ("nosuch", "unknown monitor 'nosuch'; valid:"),
    ("telescope-flex:error=lots", "bad telescope-flex error"),
    ("damon:bogus=1", "unknown parameter 'bogus'"),
])
def test_telemetry_errors_are_one_line_exit_2(tmp_path, capsys, monitors, needle):
    rc = main(["telemetry", "--workload", "masim:hotcold", "--monitors", monitors,
               "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 2 and needle in err and len(err.strip().splitlines()) == 1


def test_reproduction_configs_have_the_papers_sizes(tmp_path):
    """`tierlab reproduce telescope` builds its masim configs: the footprint and the hot
    bytes as asked, in `needles` hot regions between idle ones."""
    from tierlab import api
    from tierlab.reports.reproduce import telescope_config
    cfg = telescope_config(tmp_path / "t.cfg", 10, 2**30, needles=10, seconds=5)
    wl = api.make_workload(f"masim:{cfg}")
    sizes = {r.name: r.size for r in wl.config.regions}
    hot = sum(v for k, v in sizes.items() if k.startswith("hot"))
    assert len([k for k in sizes if k.startswith("hot")]) == 10
    assert abs(hot - 2**30) <= 10 * 4096
    assert abs(sum(sizes.values()) - 10 * 2**30) <= 11 * 4096


def test_damon_tiering_acts_on_telescope_regions():
    """ATC'24's tiering runs: DAMOS on Telescope's regions (`monitor=`), DAMON's by
    default; an unknown monitor is named with the valid ones."""
    from tierlab import api
    from tierlab.errors import TierlabError
    from tierlab.monitors.telescope import TelescopeBounded, TelescopeFlex
    assert type(api.make_policy("damon-tiering").monitor).__name__ == "Damon"
    assert isinstance(api.make_policy("damon-tiering:monitor=telescope-bounded").monitor,
                      TelescopeBounded)
    assert isinstance(api.make_policy("damon-tiering:monitor=telescope-flex").monitor,
                      TelescopeFlex)
    with pytest.raises(TierlabError, match="valid: damon, telescope-bounded"):
        api.make_policy("damon-tiering:monitor=pebs")
