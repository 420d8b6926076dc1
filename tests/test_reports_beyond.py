"""`tierlab reproduce beyond`'s targets (reports/repro_beyond.py, docs/own-policy.md)."""
from __future__ import annotations

import json

import pytest

from tierlab.reports import repro_beyond as rb


def cell(scenario, own, others=0.5, static=0.5, migrated=1.0):
    def run(t):
        return {"throughput": t, "migrated_bytes": migrated, "footprint_bytes": 1.0}

    return {"scenario": scenario, "workload": "w",
            "runs": {"tierlab": run(own), "hemem": run(others), "static": run(static),
                     "oracle": run(1.0)}}


POLS = ["tierlab", "hemem", "static", "oracle"]


def test_cells_are_told_apart_by_what_binds():
    assert rb.bandwidth_bound({"scenario": "optane-4tier 2x"})
    assert rb.bandwidth_bound({"scenario": "gapbs-pr-g16 bandwidth"})
    assert not rb.bandwidth_bound({"scenario": "optane-4tier 0x"})
    assert not rb.bandwidth_bound({"scenario": "gapbs-pr-g16 capacity"})


def test_targets_hold_and_fail_where_they_should():
    good = [cell("m 2x", 0.95), cell("t bandwidth", 0.90), cell("m 0x", 0.96),
            cell("t capacity", 0.94)]
    s = rb.summarise(good, POLS)
    assert all(s["targets"].values()), s["targets"]
    assert s["own_bandwidth_geomean"] == pytest.approx((0.95 * 0.90) ** 0.5)
    assert s["bandwidth_cells"] == s["capacity_cells"] == 2
    one_low = good[:1] + [cell("t bandwidth", 0.65)] + good[2:]  # a cell below 0.70
    t = rb.summarise(one_low, POLS)["targets"]
    assert [k[0] for k, v in t.items() if not v] == ["1", "3"]
    below_static = good[:3] + [cell("t capacity", 0.94, static=0.97)]
    t = rb.summarise(below_static, POLS)["targets"]
    assert [k[:2] for k, v in t.items() if not v] == ["2b"]
    churn = good[:3] + [cell("t capacity", 0.94, migrated=3.5)]
    assert [k[:2] for k, v in rb.summarise(churn, POLS)["targets"].items() if not v] == ["2c"]


def test_migration_target_judges_every_seed_not_the_cells_first():
    """A cell's record is its lowest seed's run for everything but throughput: a later
    seed that moves 3.5x its footprint still fails target 2c."""
    cells = [cell("m 0x", 0.96)]
    runs = [{"scenario": "m 0x", "workload": "w", "policy": p, "seed": seed,
             "throughput": t, "migrated_bytes": 3.5 if (p, seed) == ("tierlab", 2) else 1.0,
             "footprint_bytes": 1.0}
            for seed in range(3) for p, t in (("tierlab", 0.96), ("oracle", 1.0))]
    s = rb.summarise(cells, POLS, runs)
    assert s["own_migrated_over_footprint_max"] == 3.5
    assert not s["targets"]["2c migrated <= 3x footprint"]
    assert rb.summarise(cells, POLS)["targets"]["2c migrated <= 3x footprint"]


def test_readme_gives_every_cell_an_interval_over_seeds():
    runs = []
    for sc, own in (("m 2x", 0.9), ("t capacity", 0.95)):
        for seed, jitter in enumerate((0.98, 1.0, 1.02)):
            for pol, thr in (("tierlab", own * jitter), ("hemem", 0.5), ("static", 0.4),
                             ("oracle", 1.0)):
                runs.append({"scenario": sc, "machine": "m", "workload": "w", "alloc": "a",
                             "policy": pol, "seed": seed, "throughput": thr,
                             "migrated_bytes": 1.0, "footprint_bytes": 1.0})
    cells = []
    for sc in ("m 2x", "t capacity"):
        recs = rb.over_seeds([r for r in runs if r["scenario"] == sc])
        cells.append({"scenario": sc, "workload": "w", "runs": {r["policy"]: r for r in recs}})
    s = rb.summarise(cells, POLS, runs)
    assert s["own_bandwidth_claim"].startswith("0.900 [")
    assert "[" in s["own_geomean_claim"] and s["own_geomean_claim"].endswith("slower")
    text = rb.readme(cells, POLS, s, 1 / 64, runs)
    row = next(ln for ln in text.splitlines() if ln.startswith("| t capacity | w | 0.95 ["))
    assert "| hemem | 1.90x [" in row and row.endswith("faster |")
    assert text.startswith("# tierlab's own policy against `hemem`\n")
    alone = [p for p in POLS if p != "hemem"]  # `--policies tierlab`: static is the best other
    text = rb.readme(cells, alone, rb.summarise(cells, alone, runs), 1 / 64, runs)
    assert text.startswith("# tierlab's own policy against `static` and the oracle\n")
    assert "is `static`" in text


def test_reproduce_beyond_writes_its_report_from_the_runs(tmp_path, monkeypatch):
    """The whole report path on made-up runs (every scenario, 3 seeds): results, the
    summary with its targets, the per-cell intervals and the figure."""
    def compare(machines, workloads, policies, scale=1.0, **kw):
        base = {"tierlab": 0.9, "hemem": 0.7, "static": 0.4, "oracle": 1.0}
        return [{"machine": m, "workload": w, "policy": p, "alloc": "dram-preferred",
                 "seed": s, "throughput": base[p] * (1 + 0.01 * s), "migrated_bytes": 1.0,
                 "footprint_bytes": 1.0}
                for m in machines for w in workloads for p in policies for s in range(3)]
    monkeypatch.setattr(rb.api, "compare", compare)
    monkeypatch.setattr(rb, "TRACES", tmp_path / "no-traces")
    readme = rb.reproduce_beyond(tmp_path / "out", 1 / 64, ["gups:hotset"], jobs=1,
                                 policies=["hemem"])
    text = readme.read_text()
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["cells"] == 6 and summary["bandwidth_cells"] == 3
    assert summary["own_bandwidth_geomean"] == pytest.approx(0.9)
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and "| hemem | 1.29x [" in ln]
    assert len(rows) == 6
    assert (tmp_path / "out" / "beyond.png").stat().st_size > 0
    assert "target 3 geomean over every cell >= 0.93: NOT met" in text
