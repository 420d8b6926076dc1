"""The CLI as a user runs it: outputs, files, and one-line errors with exit status 2."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tierlab.cli import main

SMALL = ["--scale", "1/64"]


def run_cli(*args):
    """Run `python -m tierlab` in a subprocess (the real entry point, real exit code)."""
    p = subprocess.run([sys.executable, "-m", "tierlab", *args], capture_output=True,
                       text=True, timeout=300)
    return p.returncode, p.stdout, p.stderr


@pytest.mark.parametrize("args,needle", [
    (["run", "--machine", "nosuch"], "unknown machine 'nosuch'; valid: dram-cxl, optane-2tier"),
    (["run", "--workload", "nosuch"], "unknown workload 'nosuch'; valid:"),
    (["run", "--policy", "nosuch"], "unknown policy 'nosuch'; valid: "),
    (["run", "--alloc", "nosuch"], "valid: alloc-auto, dram-always, dram-preferred, pm-always, pm-preferred"),
    (["run", "--workload", "gups:hotset,hot=lots"], "bad"),
    (["run", "--workload", "gups:hotset,bogus=1"], "unknown parameter 'bogus'"),
    (["run", "--workload", "gups:nosuch"], "nosuch"),
    (["run", "--machine", "optane-2tier:dram=abc"], "bad optane-2tier dram 'abc'"),
    (["run", "--workload", "gups:uniform,size=4TiB"], "but machine optane-2tier has"),
    (["run", "--workload", "masim:/nonexistent.cfg"], "nonexistent"),
    (["run", "--workload", "trace:/nonexistent.npz"], "nonexistent"),
    (["list", "nosuch"], "unknown list 'nosuch'"),
    (["reproduce", "nosuch", "--out", "x"], "unknown reproduction 'nosuch'; valid: idt"),
    (["compare", "--workloads", "gups:uniform", "--policies", "static", "--baseline",
      "oracle", "--out", "x"], "baseline 'oracle' is not among --policies"),
])
def test_errors_are_one_line_and_exit_2(args, needle):
    code, out, err = run_cli(*args)
    assert code == 2, (out, err)
    assert needle in err
    assert "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def test_unknown_policy_lists_every_registered_policy():
    from tierlab.policies import POLICIES
    code, _, err = run_cli("run", "--policy", "nosuch")
    # (policies registered by the tests themselves are not in the subprocess)
    assert code == 2 and all(p in err for p in POLICIES.names() if not p.startswith("test-"))


def test_bad_scale_is_an_argparse_error():
    code, _, err = run_cli("run", "--scale", "0")
    assert code == 2 and "bad scale" in err and "Traceback" not in err


def test_malformed_machine_toml(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[machine\nname=1")
    code, _, err = run_cli("run", "--machine", str(bad))
    assert code == 2 and "malformed TOML" in err
    nokind = tmp_path / "nokind.toml"
    nokind.write_text('[[tier]]\nname="a"\nkind="sram"\ncapacity="1GiB"\nread_lat_ns=80\n'
                      'read_bw="10GB"\n')
    code, _, err = run_cli("run", "--machine", str(nokind))
    assert code == 2 and "bad kind 'sram'" in err and "valid: dram, cxl, optane, nvm" in err


def test_machine_and_workload_from_toml(tmp_path, capsys):
    box = tmp_path / "box.toml"
    box.write_text("""
[machine]
name = "box"
[[tier]]
name = "fast"
kind = "dram"
capacity = "2GiB"
read_lat_ns = 80
read_bw = "100GB"
[[tier]]
name = "slow"
kind = "cxl"
capacity = "8GiB"
read_lat_ns = 200
read_bw = "30GB"
has_cpus = false
""")
    wl = tmp_path / "wl.toml"
    wl.write_text('workload = "gups"\nvariant = "hotset"\n[params]\nsize = "4GiB"\n'
                  'hot = "512MiB"\nupdates = "2e8"\n')
    js = tmp_path / "r.json"
    assert main(["run", "--machine", str(box), "--workload", str(wl), "--policy", "oracle",
                 "--json", str(js)]) == 0
    rec = json.loads(js.read_text())[0]
    assert rec["machine"] == str(box)
    assert set(rec["tier_access_share"]) == {"fast", "slow"}
    assert rec["tier_access_share"]["fast"] > 0.85  # the 512 MiB hot set sits in 2 GiB


def test_run_prints_table_and_writes_record(tmp_path, capsys):
    js = tmp_path / "run.json"
    assert main(["run", *SMALL, "--workload", "gups:hotset", "--policy", "oracle",
                 "--json", str(js)]) == 0
    out = capsys.readouterr().out
    assert "gups:hotset" in out and "oracle" in out
    (rec,) = json.loads(js.read_text())
    for key in ("machine", "workload", "policy", "alloc", "seed", "sim_seconds", "work",
                "throughput", "tier_access_share", "promotions", "demotions", "pingpong",
                "migrated_bytes", "monitor_cpu_seconds", "wall_seconds"):
        assert key in rec


def test_compare_writes_results_and_plots_and_is_independent_of_jobs(tmp_path):
    recs = {}
    for jobs in (1, 2):
        out = tmp_path / f"j{jobs}"
        assert main(["compare", *SMALL, "--workloads", "gups:uniform,gups:hotset",
                     "--policies", "static,oracle", "--jobs", str(jobs),
                     "--out", str(out)]) == 0
        for f in ("results.json", "results.csv", "speedup.png", "throughput.png",
                  "tier_share.png", "tier_share_time-optane-2tier-gups-uniform.png",
                  "tier_share_time-optane-2tier-gups-hotset.png", "report.html"):
            assert (out / f).stat().st_size > 0, f
        recs[jobs] = json.loads((out / "results.json").read_text())
    strip = lambda rs: [{k: v for k, v in r.items() if k != "wall_seconds"} for r in rs]  # noqa
    assert strip(recs[1]) == strip(recs[2])
    by = {(r["workload"], r["policy"]): r for r in recs[1]}
    assert by[("gups:hotset", "static")]["speedup"] == pytest.approx(1.0)
    assert by[("gups:hotset", "oracle")]["speedup"] > 1.5
    csv = (tmp_path / "j1" / "results.csv").read_text().splitlines()
    assert csv[0].startswith("machine,workload,policy,alloc,seed") and len(csv) == 5


def test_a_suite_without_scale_runs_at_the_suites_scale(tmp_path):
    """`--workloads @gups` and no --scale: the suite's own scale, said on stderr; the
    log has one line per finished run when stderr is not a terminal; --scale wins."""
    code, out, err = run_cli("compare", "--workloads", "@gups", "--policies", "static",
                             "--out", str(tmp_path / "a"))
    assert code == 0, err
    assert "scale 0.125: the suite's default" in err and "[4/4] " in err
    recs = json.loads((tmp_path / "a" / "results.json").read_text())
    assert [r["workload"] for r in recs] == ["gups:uniform", "gups:hotset", "gups:dynamic",
                                             "gups:gupspp"]
    assert {r["scale"] for r in recs} == {0.125}
    assert main(["compare", *SMALL, "--workloads", "@gups", "--policies", "static",
                 "--out", str(tmp_path / "b")]) == 0
    recs = json.loads((tmp_path / "b" / "results.json").read_text())
    assert {r["scale"] for r in recs} == {1 / 64}


def test_explain_writes_one_json_line_per_interval(tmp_path, capsys):
    ex = tmp_path / "why.jsonl"
    assert main(["run", *SMALL, "--machine", "optane-4tier", "--policy", "idt-damon",
                 "--explain", str(ex)]) == 0
    lines = [json.loads(x) for x in ex.read_text().splitlines()]
    assert len(lines) > 10 and all("nodes" in e and "t" in e for e in lines)
    assert [e["t"] for e in lines] == sorted(e["t"] for e in lines)
    code, _, err = run_cli("run", *SMALL, "--policy", "static", "--explain",
                           str(tmp_path / "x"))
    assert code == 2 and "explains its decisions; valid: alloc-auto, idt" in err


def test_explain_shows_alloc_auto_decisions_and_rewards(tmp_path):
    """alloc-auto's lines (key "alloc"): every decision with the reason, every closed
    pull with its reward; beside a placement policy's own lines."""
    ex = tmp_path / "why.jsonl"
    assert main(["run", *SMALL, "--workload", "ycsb:d", "--policy", "idt", "--alloc",
                 "alloc-auto", "--explain", str(ex)]) == 0
    lines = [json.loads(x) for x in ex.read_text().splitlines()]
    alloc = [e["alloc"] for e in lines if "alloc" in e]
    assert any("nodes" in e for e in lines), "IDT's own lines are there too"
    decisions = [a for a in alloc if "decision" in a]
    closed = [a for a in alloc if "closed" in a]
    assert decisions[0]["why"].startswith("bulk first touch")
    assert decisions[1] == {**decisions[1], "decision": "reclaim", "arm": "dram-always",
                            "why": "reclaim first: never measured"}
    assert len(closed) >= 10 and all("log_throughput" in a and "mean" in a for a in closed)
    assert any(a["why"].startswith("largest upper bound") for a in decisions)


def test_list_shows_registered_names(capsys):
    assert main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("optane-4tier", "gups", "masim", "ycsb", "oracle", "pm-always"):
        assert name in out


def test_help_explains(capsys):
    with pytest.raises(SystemExit) as e:
        main(["compare", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "--baseline" in out and "--jobs" in out and "gups:hotset,hot=4GiB" in out


def test_the_modules_the_guest_carries_import_neither_scipy_nor_matplotlib():
    """tests/guest/mkinitramfs.sh puts into the guest's RAM disk every package the
    tierlab modules import (except its front-ends); scipy alone is ~110 MiB there, and
    a report module importing it at the top doubled the RAM disk until the guest's
    workloads ran out of memory. Those imports stay inside functions."""
    import re
    script = (Path(__file__).parent / "guest" / "mkinitramfs.sh").read_text()
    skip = re.search(r"^skip = (\(.*\))$", script, re.M).group(1)
    code = ("import importlib, pkgutil, sys, tierlab, tierlab.cli\n"
            f"skip = {skip}\n"
            "for m in pkgutil.walk_packages(tierlab.__path__, 'tierlab.'):\n"
            "    if not m.name.startswith(skip):\n"
            "        importlib.import_module(m.name)\n"
            "print(sorted(k for k in ('scipy', 'matplotlib') if k in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def test_an_experiment_file_runs_is_edited_and_runs_again(tmp_path, capsys):
    """`tierlab compare EXPERIMENT.toml`: its keys are the flags' names (lists or the
    flags' comma strings, scale as "1/256"); a flag given on the command line wins; an
    edit adds its runs to a resumed sweep; an unknown key is one line and status 2."""
    import json
    exp = tmp_path / "exp.toml"
    exp.write_text('machine = "optane-2tier"\nworkloads = ["gups:hotset,hot=64MiB"]\n'
                   'policies = "static,oracle"\nseeds = [0, 1]\nscale = "1/256"\n')
    assert main(["compare", str(exp), "--seeds", "0", "--out", str(tmp_path / "o")]) == 0
    recs = json.loads((tmp_path / "o" / "results.json").read_text())
    assert sorted((r["policy"], r["seed"]) for r in recs) == [("oracle", 0), ("static", 0)]
    assert {r["workload"] for r in recs} == {"gups:hotset,hot=64MiB"}
    assert recs[0]["scale"] == 1 / 256
    exp.write_text(exp.read_text().replace('"static,oracle"', '["static", "oracle", "tpp"]'))
    capsys.readouterr()
    assert main(["compare", str(exp), "--seeds", "0", "--resume", str(tmp_path / "o")]) == 0
    assert "2 of 3 runs already in" in capsys.readouterr().err
    exp.write_text(exp.read_text() + 'polices = "static"\n')
    assert main(["compare", str(exp), "--out", str(tmp_path / "p")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown key 'polices'; valid:" in err[0] and "policies" in err[0]
