"""Seeds as an axis (reports/stats.py): intervals, verdicts and summaries pinned on
crafted records, and the verdict checked against scipy's paired t-test."""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy import stats as sps

from tierlab.reports.results import add_speedups
from tierlab.reports.stats import (ONE_SEED, geo_ci, geomean_rows, mean_ci, pair_rows,
                                   spread_notes, verdict)


def recs(table: dict, machine="m") -> list[dict]:
    """Records from {(workload, policy): [throughput per seed]}, speedups over static."""
    out = [{"machine": machine, "workload": w, "policy": p, "alloc": "a", "seed": s,
            "throughput": x, "work_unit": "ops", "scale": 1 / 8}
           for (w, p), xs in table.items() for s, x in enumerate(xs)]
    add_speedups(out, "static")
    return out


def test_mean_ci_is_student_t():
    e = mean_ci([1.0, 2.0, 3.0])
    half = sps.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert e.mean == 2.0 and e.lo == pytest.approx(2 - half) and e.hi == pytest.approx(2 + half)
    one = mean_ci([5.0])
    assert one.lo is None and one.hi is None and one.text() == "5"


def test_geo_ci_is_the_interval_of_the_logs_exponentiated():
    e = geo_ci([1.1, 1.2, 1.3])
    logs = np.log([1.1, 1.2, 1.3])
    half = sps.t.ppf(0.975, 2) * logs.std(ddof=1) / math.sqrt(3)
    assert e.mean == pytest.approx(math.exp(logs.mean()))
    assert e.lo == pytest.approx(math.exp(logs.mean() - half))
    assert e.hi == pytest.approx(math.exp(logs.mean() + half))


@pytest.mark.parametrize("ratios,word", [
    ([1.10, 1.12, 1.09], "faster"), ([0.90, 0.91, 0.89], "slower"),
    ([0.90, 1.10, 1.00], "no difference"), ([1.2], ONE_SEED),
    ([1.0, 1.0, 1.0], "no difference"), ([2.0, 2.0], "faster"),
    ([0.9999999999999999] * 3, "no difference"),  # a run equal to its baseline's
    ([0.997, 0.997, 0.997], "slower")])
def test_verdict_words(ratios, word):
    assert verdict(ratios) == word


@settings(max_examples=80, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.floats(1e3, 1e7), st.floats(0.5, 2.0)), min_size=2,
                max_size=8))
def test_the_verdict_is_the_paired_t_test_on_log_throughput(pairs):
    base = np.array([b for b, _ in pairs])
    other = base * np.array([r for _, r in pairs])
    rows = pair_rows(recs({("w", "static"): list(base), ("w", "x"): list(other)}))
    got = next(r for r in rows if r["policy"] == "x")["verdict"]
    d = np.log(other) - np.log(base)
    if np.ptp(d) < 1e-12:
        return  # a constant difference: no t statistic (verdict() decides by sign)
    p = sps.ttest_rel(np.log(other), np.log(base)).pvalue
    assert got == ("no difference" if p >= 0.05 else
                   "faster" if d.mean() > 0 else "slower")


def test_pair_rows_pair_by_seed():
    """A policy 10% faster on every seed is faster even when seeds differ 10x between
    them (the pairing removes the seed's effect)."""
    rows = pair_rows(recs({("w", "static"): [1.0, 10.0, 100.0],
                           ("w", "x"): [1.1, 11.0, 110.0]}))
    x = next(r for r in rows if r["policy"] == "x")
    assert x["speedup"].mean == pytest.approx(1.1) and x["verdict"] == "faster"
    assert x["seeds"] == [0, 1, 2] and x["throughput"].n == 3


def test_geomean_rows_use_only_seeds_with_every_workload():
    rs = recs({("w1", "static"): [1, 1, 1], ("w1", "x"): [2, 2, 2],
               ("w2", "static"): [1, 1], ("w2", "x"): [8, 8]})
    g = next(r for r in geomean_rows(rs) if r["policy"] == "x")
    assert g["seeds"] == [0, 1] and g["workloads"] == 2
    assert g["geomean"].mean == pytest.approx(4.0)


def test_spread_note_when_seeds_spread_more_than_the_gap():
    rs = recs({("w", "static"): [1, 1, 1], ("w", "a"): [1.0, 1.5, 2.0],
               ("w", "b"): [1.3, 1.35, 1.4]})
    notes = spread_notes(pair_rows(rs))
    assert any("b and a differ by" in n and "more seeds" in n for n in notes), notes
    far = recs({("w", "static"): [1, 1, 1], ("w", "a"): [2.0, 2.1, 2.2],
                ("w", "b"): [4.0, 4.1, 4.2]})
    assert not [n for n in spread_notes(pair_rows(far)) if "a and b" in n]
    assert len(spread_notes(pair_rows(rs))) == 1  # static's spread is 0: far from a


def test_reproduction_matrices_give_intervals_and_words_over_seeds():
    from tierlab.reports.reproduce import md_matrix
    t = md_matrix(recs({("w", "static"): [1, 1, 1], ("w", "x"): [1.1, 1.12, 1.09]}),
                  ["static", "x"])
    assert "| w | 1.00 [1.00, 1.00] | 1.10 [" in t and "] faster |" in t, t
    assert "Seeds 0, 1, 2: [lo, hi] is the 95% interval" in t
    one = md_matrix(recs({("w", "static"): [1], ("w", "x"): [2]}), ["static", "x"])
    assert "| w | 1.00 | 2.00 |" in one and "1 seed, no interval" in one, one


def test_default_seeds_reach_every_compare_in_the_block():
    import tierlab
    with tierlab.api.default_seeds([0, 1]):
        rs = tierlab.compare(["optane-2tier"], ["gups:uniform"], ["static"], scale=1 / 256)
        assert sorted(r["seed"] for r in rs) == [0, 1]
    rs = tierlab.compare(["optane-2tier"], ["gups:uniform"], ["static"], scale=1 / 256)
    assert [r["seed"] for r in rs] == [0]


def test_versus_pairs_by_workload_and_seed():
    from tierlab.reports.stats import versus
    rs = recs({("w1", "a"): [2.0, 2.2], ("w1", "b"): [1.0, 1.1],
               ("w2", "a"): [3.0, 3.1], ("w2", "b"): [1.5, 1.5],
               ("w1", "static"): [1, 1], ("w2", "static"): [1, 1]})
    text = versus(rs, "a", "b")
    assert text.startswith("a/b 2.0") and "a faster (4 pairs of workload and seed)" in text
    assert versus(rs, "a", "nosuch") == "-"


def test_over_seeds_gives_one_record_per_cell():
    from tierlab.reports.stats import over_seeds
    rs = recs({("w", "static"): [1.0, 4.0], ("w", "x"): [2.0, 8.0]})
    for r in rs:
        r["policy_stats"] = {"seed": r["seed"]}
    got = {r["policy"]: r for r in over_seeds(rs)}
    assert len(got) == 2 and got["x"]["seeds"] == [0, 1]
    assert got["x"]["throughput"] == pytest.approx(4.0)  # geometric mean of 2 and 8
    assert got["x"]["speedup"] == pytest.approx(2.0)
    assert got["x"]["policy_stats"] == {"seed": 0}  # other fields: the lowest seed's


def test_a_reproductions_footer_names_its_seeds_also_after_over_seeds():
    from tierlab.reports.stats import over_seeds, seeds_footer
    rs = recs({("w", "static"): [1.0, 4.0, 2.0], ("w", "x"): [2.0, 8.0, 4.0]})
    for got in (rs, over_seeds(rs)):
        assert "Seeds 0, 1, 2: a number that stands for several runs" in seeds_footer(got)
    assert "One seed (0)" in seeds_footer(recs({("w", "static"): [1.0]}))


def test_paired_matches_runs_across_machines_and_allocation_policies():
    """A claim's pairs: two machines (Johnny Cache's memory mode against app-direct)
    paired by workload and seed; two allocation policies under one tiering policy."""
    from tierlab.reports.stats import paired, ratio_claim
    rs = recs({("w", "jc"): [2.0, 2.2, 2.1]}, machine="cache") + \
        recs({("w", "hemem"): [1.0, 1.1, 1.0]}, machine="flat")
    assert paired(rs, "jc", "hemem") == []  # machines differ: nothing to pair
    got = paired(rs, "jc", "hemem", match=("workload",))
    assert got == pytest.approx([2.0, 2.0, 2.1])
    text = ratio_claim(got)
    assert text.startswith("2.03x [") and text.endswith(", faster")
    assert ratio_claim(got[:1]) == f"2.00x ({ONE_SEED})"
    assert ratio_claim([]) == "-"
    runs = [dict(r, policy="tpp", alloc=a) for a, r in
            zip(["dram-always"] * 3 + ["pm-always"] * 3,
                recs({("w", "x"): [3.0, 3.3, 3.1], ("w", "y"): [3.0, 3.2, 3.1]}))]
    ties = paired(runs, "pm-always", "dram-always", match=("machine", "workload", "policy"),
                  field="alloc")
    assert len(ties) == 3 and verdict(ties) == "no difference"
