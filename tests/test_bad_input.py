"""Bad input of every kind issue 19 found is one line on stderr and exit status 2, never
a traceback, a hang or a silently accepted value: hypothesis over names, sizes, TOML
values and files, trace bytes, output paths and the Python API's arguments. The CLI
runs in-process (`tierlab.cli.main`) so that each example costs milliseconds."""
from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import tierlab
from tierlab.cli import MAX_RUNS, main
from tierlab.errors import TierlabError
from tierlab.machines.machine import CACHE_KEYS, MACHINE_KEYS, TIER_KEYS
from tierlab.units import _SIZE
from tierlab.params import _NUM
from tierlab.workloads.trace import PG_MAGIC

FUZZ = settings(max_examples=60, deadline=None, derandomize=True,
                suppress_health_check=[HealthCheck.function_scoped_fixture,
                                       HealthCheck.too_slow])
SMALL = "gups:hotset,size=64MiB,hot=8MiB"


def cli(*args) -> tuple[int, str]:
    """Exit status and stderr of `tierlab ARGS`, run in this process."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            code = main([str(a) for a in args])
        except SystemExit as e:
            code = e.code
    return code, err.getvalue()


def one_line_error(*args, names=()) -> str:
    code, err = cli(*args)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "error" in lines[0], (args, code, err)
    assert "Traceback" not in err
    for n in names:
        assert str(n) in lines[0], (n, lines[0])
    return lines[0]


# -- values that can never be right ----------------------------------------------------
printable = st.text(st.characters(min_codepoint=32, max_codepoint=126), max_size=12)
huge = st.builds(lambda m, e, u: f"{m}e{e}{u}", st.integers(1, 9), st.integers(19, 500),
                 st.sampled_from(["", "B", "GiB", "T"]))
not_a_size = printable.filter(lambda s: not _SIZE.match(s))
not_a_number = printable.filter(lambda s: not _NUM.match(s))
non_finite = st.sampled_from([float("nan"), float("inf"), float("-inf")])
negative = st.one_of(st.integers(max_value=-1), st.floats(max_value=-1e-9, allow_nan=False,
                                                          allow_infinity=False))
wrong_type = st.one_of(st.booleans(), st.lists(st.integers(0, 3), max_size=2),
                       st.just({"a": 1}))
bad_size = st.one_of(huge, not_a_size, negative, non_finite, wrong_type,
                     st.integers(2 ** 61, 2 ** 63 - 1))
bad_capacity = st.one_of(bad_size, st.integers(0, 4095))
bad_bandwidth = st.one_of(bad_size, st.just(0))
bad_positive = st.one_of(not_a_number, negative, non_finite, wrong_type, st.just(0))
bad_index = st.one_of(not_a_number, negative, wrong_type, st.floats(0.1, 0.9))
bad_duration = st.one_of(huge.map(lambda s: s.rstrip("BGiT") + "s"), negative, non_finite,
                         wrong_type, st.floats(1.5, 1e300), printable.filter(
                             lambda s: not re.match(r"^\s*[0-9.]", s)))
BAD = {
    "capacity": bad_capacity, "read_bw": bad_bandwidth, "write_bw": bad_bandwidth,
    "read_lat_ns": bad_positive, "write_lat_ns": bad_positive, "socket": bad_index,
    "has_cpus": st.one_of(printable, st.integers(), st.lists(st.booleans(), max_size=2)),
    "kind": st.one_of(printable.filter(lambda s: s not in ("dram", "cxl", "optane", "nvm")),
                      st.integers()),
    "name": st.sampled_from(["", "  ", "DUP"]),
    "cpu_socket": st.one_of(bad_index, st.integers(2, 99)),
    "cores_per_socket": bad_positive, "remote_lat_factor": bad_positive,
    "migrate_bw": bad_bandwidth, "tlb_shootdown": bad_duration, "hint_fault": bad_duration,
    "first_touch": bad_duration, "pte_walk": bad_duration, "pte_update": bad_duration,
    "demotion_enabled": st.one_of(printable, st.integers(), st.lists(st.booleans(),
                                                                      max_size=2)),
    "demotion": st.one_of(st.integers(), printable, st.lists(printable, min_size=1, max_size=2),
                          st.sampled_from([[0], [0, 0], [1, 2], [0, 1, 2]])),
    "watermarks": st.one_of(st.integers(), st.sampled_from([[0.1], [0.3, 0.2, 0.1],
                                                             [0, 0, 0.7], ["a", 0, 0]])),
}


def toml_value(v) -> str:
    """v as a TOML value (strings, numbers, booleans, arrays, inline tables)."""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return {"nan": "nan", "inf": "inf", "-inf": "-inf"}.get(str(v), repr(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(toml_value(x) for x in v) + "]"
    return "{" + ", ".join(f"{k} = {toml_value(x)}" for k, x in v.items()) + "}"


def machine_toml(machine: dict, tiers: list[dict], top: str = "") -> str:
    text = top + "[machine]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in machine.items())
    for t in tiers:
        text += "[[tier]]\n" + "".join(f"{k} = {toml_value(v)}\n" for k, v in t.items())
    return text


def good_tiers():
    return [{"name": "fast", "kind": "dram", "capacity": "2GiB", "read_lat_ns": 80,
             "read_bw": "50GB", "socket": 0, "has_cpus": True},
            {"name": "slow", "kind": "optane", "capacity": "16GiB", "read_lat_ns": 300,
             "read_bw": "20GB", "socket": 0, "has_cpus": False}]


def test_the_base_machine_file_runs(tmp_path):
    p = tmp_path / "box.toml"
    p.write_text(machine_toml({"name": "box"}, good_tiers()))
    assert cli("run", "--machine", p, "--workload", SMALL, "--scale", "1/64")[0] == 0
    p.write_text(machine_toml({"name": "box", "first_touch": "25us"}, good_tiers()))
    from tierlab.machines import load_machine
    assert load_machine(str(p)).first_touch_s == pytest.approx(25e-6)
    p.write_text(machine_toml({"name": "box", "pte_walk": "40ns", "pte_update": "0.1us",
                               "demotion_enabled": False}, good_tiers()))
    m = load_machine(str(p))
    assert (m.pte_walk_s, m.pte_update_s, m.demotion_enabled) == (
        pytest.approx(40e-9), pytest.approx(100e-9), False)


# -- sizes -------------------------------------------------------------------------------
@FUZZ
@given(value=st.one_of(huge, not_a_size, st.integers(2 ** 61, 2 ** 200).map(str)),
       where=st.sampled_from(["machine", "gups size", "gups hot", "bw-limit", "masim"]))
def test_bad_sizes(tmp_path, value, where):
    v = value.replace(",", "").replace("=", "") or "x"
    if where == "machine":
        one_line_error("run", "--machine", f"optane-2tier:dram={v}", names=["dram"])
    elif where.startswith("gups"):
        key = where.split()[1]
        one_line_error("run", "--workload", f"gups:hotset,{key}={v}", names=[key])
    elif where == "bw-limit":
        one_line_error("daemon", "--pid", os.getpid(), "--bw-limit", v, names=["--bw-limit"])
    else:
        cfg = tmp_path / "bad.cfg"
        cfg.write_text(f"big, {v}\n\nonly\n1000\nbig, 1, 64, 1\n")
        one_line_error("run", "--workload", cfg, names=[f"{cfg}:1"])


# -- machine files -----------------------------------------------------------------------
@FUZZ
@given(key=st.sampled_from(sorted(k for k in BAD if k in TIER_KEYS)), data=st.data(),
       tier=st.integers(0, 1))
def test_bad_tier_values(tmp_path, key, data, tier):
    tiers = good_tiers()
    value = data.draw(BAD[key])
    tiers[tier][key] = value
    if value == "DUP":
        tiers[1 - tier]["name"] = "DUP"
    p = tmp_path / "box.toml"
    p.write_text(machine_toml({"name": "box"}, tiers))
    msg = one_line_error("run", "--machine", p, "--workload", SMALL, names=[p])
    assert key in msg or "malformed TOML" in msg or "DUP" in msg, msg


@FUZZ
@given(key=st.sampled_from(sorted(k for k in BAD if k in MACHINE_KEYS)), data=st.data())
def test_bad_machine_values(tmp_path, key, data):
    value = data.draw(BAD[key].filter(lambda v: v != "DUP"))
    p = tmp_path / "box.toml"
    p.write_text(machine_toml({"name": "box", key: value} if key != "name" else {key: value},
                              good_tiers()))
    msg = one_line_error("run", "--machine", p, "--workload", SMALL, names=[p])
    assert key in msg or "malformed TOML" in msg, msg


@FUZZ
@given(key=st.from_regex(r"\A[a-z][a-z_]{0,10}\Z"), table=st.sampled_from(["machine", "tier"]))
def test_unknown_keys_are_refused(tmp_path, key, table):
    known = MACHINE_KEYS if table == "machine" else TIER_KEYS
    if key in known:
        return
    m, tiers = {"name": "box"}, good_tiers()
    (m if table == "machine" else tiers[0])[key] = 1
    p = tmp_path / "box.toml"
    p.write_text(machine_toml(m, tiers))
    one_line_error("run", "--machine", p, "--workload", SMALL, names=[p, key, "unknown"])


@FUZZ
@given(top=st.sampled_from(["machine", "tier", "dram_cache"]),
       value=st.one_of(st.integers(), printable, st.lists(st.integers(), max_size=2)))
def test_tables_of_the_wrong_type(tmp_path, top, value):
    text = f"{top} = {toml_value(value)}\n"
    if top != "tier":
        text += "".join("[[tier]]\n" + "".join(f"{k} = {toml_value(v)}\n"
                                                for k, v in t.items()) for t in good_tiers())
    p = tmp_path / "box.toml"
    p.write_text(text)
    one_line_error("run", "--machine", p, "--workload", SMALL, names=[p])


@FUZZ
@given(content=st.binary(max_size=200), what=st.sampled_from(["--machine", "--workload"]))
def test_binary_and_garbage_files(tmp_path, content, what):
    p = tmp_path / "x.toml"
    p.write_bytes(content)
    one_line_error("run", what, p, names=[p])


def test_directories_for_files(tmp_path):
    d = tmp_path / "dir.toml"
    d.mkdir()
    one_line_error("run", "--machine", d, names=[d, "directory"])
    one_line_error("run", "--workload", d, names=[d, "directory"])


@FUZZ
@given(key=st.sampled_from(["workload", "variant", "path", "params"]),
       value=st.one_of(st.integers(), st.booleans(), st.lists(st.integers(), max_size=2)))
def test_bad_workload_files(tmp_path, key, value):
    d = {"workload": "gups", "variant": "hotset"}
    d[key] = value
    p = tmp_path / "w.toml"
    p.write_text("".join(f"{k} = {toml_value(v)}\n" for k, v in d.items()))
    one_line_error("run", "--workload", p, names=[p, key])


CACHE_BAD = {"size": bad_capacity, "frame": printable.filter(lambda s: s not in ("4KiB", "2MiB")),
             "read_lat_ns": bad_positive, "write_lat_ns": bad_positive,
             "read_bw": bad_bandwidth, "write_bw": bad_bandwidth}


@FUZZ
@given(key=st.sampled_from(CACHE_KEYS), data=st.data())
def test_bad_dram_cache(tmp_path, key, data):
    cache = {"size": "1GiB", key: data.draw(CACHE_BAD[key])}
    text = machine_toml({"name": "mm"}, good_tiers()[1:]) + "[dram_cache]\n" + "".join(
        f"{k} = {toml_value(v)}\n" for k, v in cache.items())
    p = tmp_path / "mm.toml"
    p.write_text(text)
    one_line_error("run", "--machine", p, "--workload", SMALL, names=[p])


# -- command-line numbers ------------------------------------------------------------------
@FUZZ
@given(seed=st.one_of(st.integers(max_value=-1), st.integers(min_value=2 ** 63),
                      not_a_number, st.floats(0.1, 0.9)))
def test_bad_seeds(seed):
    one_line_error("run", "--seed", seed, "--workload", SMALL, names=["seed"])


@FUZZ
@given(lo=st.integers(1, 10 ** 9), gap=st.integers(1, 10 ** 9))
def test_empty_seed_ranges(tmp_path, lo, gap):
    one_line_error("compare", "--workloads", SMALL, "--policies", "static", "--seeds",
                   f"{lo + gap}-{lo}", "--out", tmp_path, names=["seeds"])


@FUZZ
@given(n=st.integers(MAX_RUNS, 10 ** 12))
def test_absurd_run_counts_need_yes(tmp_path, n):
    msg = one_line_error("compare", "--workloads", SMALL, "--policies", "static",
                         "--seeds", f"0-{n}", "--out", tmp_path / "o", names=["--yes"])
    assert f"{n + 1:,} runs" in msg and not (tmp_path / "o").exists()


@FUZZ
@given(scale=st.one_of(st.floats(1e-300, 1 / 65537), st.floats(1025, 1e300), non_finite,
                       not_a_number.filter(lambda s: "/" not in s)))
def test_bad_scales(scale):
    one_line_error("run", "--scale", scale, "--workload", SMALL, names=["scale"])


@FUZZ
@given(flag=st.sampled_from(["--window", "--hot-min"]),
       value=st.one_of(non_finite, st.floats(max_value=-1e-6), not_a_number))
def test_bad_telemetry_numbers(tmp_path, flag, value):
    one_line_error("telemetry", "--workload", SMALL, flag, value, "--out", tmp_path,
                   names=[flag])


# -- output paths: checked before the first run ----------------------------------------------
@pytest.mark.parametrize("kind", ["empty", "file for dir", "under a file", "unwritable"])
@pytest.mark.parametrize("cmd", ["compare", "telemetry", "reproduce"])
def test_bad_output_directories(tmp_path, kind, cmd):
    f = tmp_path / "f"
    f.write_text("x")
    out = {"empty": "", "file for dir": f, "under a file": f / "sub",
           "unwritable": "/proc/no/such"}[kind]
    args = {"compare": ["compare", "--workloads", SMALL, "--policies", "static,oracle"],
            "telemetry": ["telemetry", "--workload", SMALL],
            "reproduce": ["reproduce", "hemem"]}[cmd]
    one_line_error(*args, "--out", out, names=["--out"])
    assert f.read_text() == "x"


@pytest.mark.parametrize("flag", ["--json", "--explain"])
@pytest.mark.parametrize("kind", ["empty", "directory", "under a file", "unwritable"])
def test_bad_output_files(tmp_path, flag, kind):
    f = tmp_path / "f"
    f.write_text("x")
    path = {"empty": "", "directory": tmp_path, "under a file": f / "x.json",
            "unwritable": "/proc/no/such.json"}[kind]
    one_line_error("run", "--workload", SMALL, "--policy", "idt", flag, path, names=[flag])


# -- trace bytes -------------------------------------------------------------------------------
def pg_bytes(epochs) -> bytes:
    rec = np.dtype([("vpn", "<u8"), ("r", "<u4"), ("w", "<u4")])
    out = bytearray()
    for e, recs, acc in epochs:
        out += np.array([PG_MAGIC, e, len(recs), acc], dtype="<u8").tobytes()
        out += np.array(recs, dtype=rec).tobytes()
    return bytes(out)


U64 = st.integers(0, 2 ** 64 - 1)


@FUZZ
@given(field=st.sampled_from(["accesses", "nrec", "epoch", "vpn", "truncate"]), value=U64,
       at=st.integers(0, 1))
def test_corrupt_pagegrind_headers(tmp_path, field, value, at):
    epochs = [[0, [(7, 1, 2), (5, 3, 0)], 6], [1, [(9, 0, 4)], 4]]
    raw = None
    if field == "accesses":
        epochs[at][2] = max(value, 2 ** 62)
    elif field == "epoch":
        epochs[1][0] = 0
    elif field == "vpn":
        epochs[at][1][0] = (max(value, 2 ** 62), 1, 1)
    raw = pg_bytes(epochs)
    if field == "nrec":
        off = 16 + at * (32 + 2 * 16)
        raw = raw[:off] + int(max(value, 3)).to_bytes(8, "little") + raw[off + 8:]
    elif field == "truncate":
        raw = raw[:value % len(raw)] if value % len(raw) else raw[:5]
    p = tmp_path / "t.pg"
    p.write_bytes(raw)
    one_line_error("run", "--workload", p, names=["t.pg"])


@FUZZ
@given(raw=st.binary(min_size=1, max_size=300), magic=st.booleans())
def test_garbage_traces(tmp_path, raw, magic):
    p = tmp_path / "g.npz"
    p.write_bytes((PG_MAGIC.to_bytes(8, "little") if magic else b"") + raw)
    one_line_error("run", "--workload", f"trace:{p}", names=["g.npz"])


# -- the Python API: the same checks, as ValueError ------------------------------------------
@pytest.mark.parametrize("kw,needle", [
    ({"scale": 1e-300}, "bad scale"), ({"scale": float("nan")}, "scale"),
    ({"seed": -1}, "bad seed"), ({"seed": 1.5}, "bad seed"), ({"seed": "0"}, "bad seed"),
])
def test_api_run_checks_its_arguments(kw, needle):
    with pytest.raises(ValueError, match=needle):
        tierlab.run(workload=SMALL, **kw)


@pytest.mark.parametrize("kw,needle", [
    ({"policies": []}, "bad policies"), ({"policies": "static"}, "expected a list"),
    ({"workloads": SMALL}, "expected a list"), ({"seeds": []}, "bad seeds"),
    ({"seeds": [-1]}, "bad seed"), ({"jobs": 0}, "bad jobs"), ({"jobs": 1.5}, "bad jobs"),
    ({"baseline": "oracle"}, "baseline 'oracle' is not among"),
    ({"scale": 4096}, "bad scale"), ({"allocs": "dram-preferred"}, "expected a list"),
])
def test_api_compare_checks_its_arguments(kw, needle):
    args = {"machines": ["optane-2tier"], "workloads": [SMALL], "policies": ["static"]}
    args.update(kw)
    with pytest.raises(TierlabError, match=needle) as e:
        tierlab.compare(**args)
    assert isinstance(e.value, ValueError)


def test_file_workloads_need_no_prefix(tmp_path):
    """x.cfg is masim:x.cfg, x.pg a trace; tables show the file name, not its path."""
    from tierlab.api import workload_spec
    assert workload_spec("/a/b.cfg,aps=1e6").name == "masim"
    assert workload_spec("c.pg").args == ("c.pg",) and workload_spec("c.npz").name == "trace"
    assert workload_spec("masim:/a/b.cfg").args == ("/a/b.cfg",)
    deep = tmp_path / "a" / "very" / "deep" / "directory"
    deep.mkdir(parents=True)
    cfg = deep / "mine.cfg"
    cfg.write_text(Path(tierlab.__file__).parent.joinpath("data/masim/hotcold.cfg")
                   .read_text())
    err = io.StringIO()
    out = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        assert main(["run", "--workload", str(cfg), "--scale", "1/64"]) == 0
    assert "mine.cfg" in out.getvalue() and "very/deep" not in out.getvalue()


def _tierlab(args, stdout=None, close_stdout=False):
    """The real command in a process: its exit status and stderr."""
    import subprocess
    import sys
    exe = Path(sys.executable).parent / "tierlab"
    r = subprocess.run([str(exe), *args], stdout=stdout, stderr=subprocess.PIPE, text=True,
                       preexec_fn=(lambda: os.close(1)) if close_stdout else None)
    return r.returncode, r.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args,to_full,needle", [
    (["list", "machines"], True, "cannot write the output: No space left on device"),
    (["compare", "--scale", "1/256", "--workloads", "gups:uniform", "--policies",
      "static", "--out", "OUT"], True, "cannot write the output: No space left"),
    (["run", "--scale", "1/256", "--workload", "gups:uniform", "--policy", "static",
      "--json", "/dev/full"], False, "cannot write /dev/full: No space left on device"),
    (["run", "--scale", "1/256", "--workload", "gups:hotset", "--policy", "idt",
      "--explain", "/dev/full"], False, "cannot write /dev/full: No space left on device"),
])
def test_a_full_disk_is_one_line_and_exit_2(args, to_full, needle, tmp_path):
    """Writing to a full disk (/dev/full), stdout or a named file, ends with one line
    naming what could not be written and the OS error, exit 2, no traceback."""
    args = [str(tmp_path / "out") if x == "OUT" else x for x in args]
    with open(os.devnull if not to_full else "/dev/full", "w") as f:
        code, err = _tierlab(args, stdout=f)
    assert code == 2, err
    last = [x for x in err.strip().splitlines() if x.startswith("tierlab: error:")]
    assert last and needle in last[0] and "Traceback" not in err, err


def test_a_closed_stdout_is_one_line_and_exit_2():
    code, err = _tierlab(["list", "machines"], close_stdout=True)
    assert code == 2 and err.strip() == "tierlab: error: standard output is closed", err


# -- the probes of issue 48: one case per kind, each one line and exit 2 --------------
R = ["run", "--scale", "1/256", "--workload", SMALL]
TEL = ["telemetry", "--workload", SMALL, "--out", "OUT", "--monitors"]
C = ["compare", "--scale", "1/256", "--out", "OUT"]


@pytest.mark.parametrize("args,needle", [
    # 6: integer policy and monitor parameters given nan or -1
    (R + ["--policy", "damon-tiering:weight_nr=nan"], "damon-tiering weight_nr 'nan'"),
    (R + ["--policy", "idt:age_thres=nan"], "idt age_thres"),
    (R + ["--policy", "idt:seed=-1"], "idt seed '-1': must be >= 0"),
    (R + ["--policy", "autonuma-tiering:rate_limit_mbps=nan"], "rate_limit_mbps"),
    (TEL + ["hint-faults:skip_nodes=nan"], "hint-faults skip_nodes"),
    (TEL + ["idt-regions:history_bits=nan"], "idt-regions history_bits 'nan'"),
    (TEL + ["idt-regions:window=-1"], "idt-regions window '-1'"),
    # 7: overflows
    (R[:3] + ["--workload", "ycsb:a,detail=1e30", "--policy", "static"], "ycsb detail"),
    (R[:3] + ["--workload", "gups:dynamic,move=1e300h", "--policy", "static"],
     "gups move '1e300h': must be a duration from 0 to 1e9 s"),
    (C + ["--workloads", SMALL, "--policies", "static", "--seeds",
          "0-9223372036854775807"], "more than 10,000 needs --yes"),
    # 9: one rule for every spec
    (R[:3] + ["--workload", "gups:hotset,hot=4GiB,hot=8GiB"], "'hot' given twice"),
    (R[:3] + ["--workload", "gups:hotset,hot-frac=0.1,hot_frac=0.2"],
     "'hot_frac' given twice"),
    (R + ["--policy", "static:zzz=1"], "unknown parameter 'zzz' for policy 'static'"),
    (R[:3] + ["--workload", "gups:hotset,uniform"], "one variant only"),
    (R[:3] + ["--workload", "graph:bc,kernel=pr"], "the kernel is given twice"),
    (R[:3] + ["--workload", "gups:hotset,move=10s"], "'move' does not apply to"),
    (R[:3] + ["--workload", "ycsb:a,scan_max=10"], "'scan_max' does not apply to"),
    (R + ["--policy", "colloid-hemem:zzz=1"], "valid: rule, alpha, limit, period"),
    (R + ["--policy", "colloid-tpp:zzz=1"], "valid: alpha, hot_threshold"),
    (R + ["--policy", "nomad:zzz=1"], "valid: retries, queue, demote_scale_factor"),
    (TEL + ["damon:name=x"], "unknown parameter 'name' for monitor 'damon'"),
    # 10: switches
    (R + ["--policy", "idt:learn=nan"], "idt learn 'nan': a switch; valid: yes, no"),
    (R + ["--policy", "idt:learn=-1"], "idt learn '-1': a switch"),
    # 11: ranges
    (R + ["--policy", "idt:age_thres=-1"], "must be in [0, "),
    (R + ["--policy", "damon-tiering:weight_nr=-1"], "weight_nr '-1': must be in [0, "),
    (R + ["--policy", "damon-tiering:weight_age=-1"], "weight_age '-1': must be in [0, "),
    (TEL + ["idt-regions:fisher_alpha=nan"], "idt-regions fisher_alpha 'nan'"),
    (R[:3] + ["--workload", SMALL + ",threads=1e30"], "gups threads '1e30': must be in [1, 65536]"),
    (R[:3] + ["--workload", SMALL + ",mlp=1e30"], "gups mlp '1e30': must be in (0, 1024]"),
    # 12: duplicate entries
    (C + ["--workloads", SMALL, "--policies", "static,static"],
     "bad --policies: 'static' is listed twice"),
    (C + ["--workloads", f"{SMALL},{SMALL}", "--policies", "static"], "listed twice"),
    (C + ["--workloads", SMALL, "--policies", "static", "--allocs",
          "pm-always,pm-always"], "bad --allocs: 'pm-always' is listed twice"),
    (C + ["--workloads", SMALL, "--policies", "static", "--seeds", "1,0,1"],
     "bad --seeds: 1 is listed twice"),
    # 13: ASCII numbers only
    (R + ["--scale", "\u0661"], "bad scale"),
    (R + ["--scale", "\uff11/\uff18"], "bad scale"),
    (R + ["--scale", "1_0"], "bad scale '1_0'"),
    (R + ["--seed", "1_0"], "bad seed '1_0'"),
    (R + ["--seed", "\u0661"], "bad seed"),
    (C + ["--workloads", SMALL, "--policies", "static", "--jobs", "\u0662"], "--jobs"),
    (R + ["--policy", "hemem:period=1_0"], "period '1_0'"),
    (R + ["--policy", "tpp:demote_scale_factor=\u0661"], "tpp demote_scale_factor"),
    # 14: machine specs
    (R + ["--machine", "optane-2tier:antagonist="], "bad antagonist ''"),
    (R + ["--machine", "dram-cxl:antagonist=dram@50%+dram@50%"], "'dram' is given twice"),
    # 15: units and durations
    (R[:3] + ["--workload", "gups:hotset,size=64MiB,hot=4Gb"], "'b' is bits"),
    (["telemetry", "--workload", SMALL, "--window", "1e9", "--out", "OUT"],
     "--window '1e9': must be in [0.01, 1e+06]"),
])
def test_probe(args, needle, tmp_path):
    """Each probe of issue 48 ends in one line naming the bad value, exit 2, before any
    run starts."""
    one_line_error(*[tmp_path / "out" if a == "OUT" else a for a in args], names=[needle])


@pytest.mark.parametrize("machine,needle", [
    ({"cores_per_socket": 2.5}, "cores_per_socket 2.5: expected a whole number"),
    ({"cores_per_socket": 1e12}, "cores_per_socket"),
    ({"cpu_socket": "0"}, "cpu_socket '0': expected a whole number from 0 to 63, unquoted"),
    ({"demotion": []}, "demotion []: lists no node"),
    ({"name": 5}, "bad machine name 5"),
])
def test_probe_machine_files(tmp_path, machine, needle):
    f = tmp_path / "m.toml"
    f.write_text(machine_toml(machine, good_tiers()))
    one_line_error("run", "--machine", f, "--workload", SMALL, names=[needle])


@pytest.mark.parametrize("key,value,needle", [
    ("name", 5, "bad name 5: expected a string"),
    ("read_lat_ns", 1e-300, "must be in [1, 1e+06]"),
    ("read_lat_ns", 1e300, "must be in [1, 1e+06]"),
    ("socket", "0", "socket '0': expected a whole number"),
])
def test_probe_tier_values(tmp_path, key, value, needle):
    tiers = good_tiers()
    tiers[1][key] = value
    f = tmp_path / "m.toml"
    f.write_text(machine_toml({}, tiers))
    one_line_error("run", "--machine", f, "--workload", SMALL, names=[needle])


MASIM = "r, 1048576\n\nphase\n{ms}\nr, 1, 64, 1\n"


@pytest.mark.parametrize("text,needle", [
    (MASIM.format(ms=0), ":4: bad duration '0' for phase 'phase'"),
    (MASIM.format(ms="\u0661\u0660"), ":4: bad duration"),
    (MASIM.replace("r, 1048576", "r\x00x, 1048576").replace("\nr, 1", "\nr\x00x, 1")
     .format(ms=10), ":1: region name 'r\\x00x' holds a control character"),
    (MASIM.format(ms=10).replace("1, 64, 1", "1, 6_4, 1"), "bad stride '6_4'"),
])
def test_probe_masim_files(tmp_path, text, needle):
    f = tmp_path / "bad.cfg"
    f.write_text(text)
    one_line_error("run", "--workload", f"masim:{f}", names=[needle])


def test_a_masim_path_may_hold_equals_and_commas(tmp_path):
    """A path is the spec's first part and every part up to a known key=value."""
    d = tmp_path / "a=b,c"
    d.mkdir()
    f = d / "x=1.cfg"
    f.write_text(MASIM.format(ms=10))
    w = tierlab.api.make_workload(f"masim:{f},threads=2", 1 / 256)
    assert w.threads == 2 and w.footprint_pages > 0
    w = tierlab.api.make_workload(str(f), 1 / 256)
    assert w.footprint_pages > 0


def test_probe_trace_import_outputs(tmp_path):
    """trace import writes .npz only, and never over a file that is not a trace."""
    pg = tmp_path / "t.pg"
    pg.write_bytes(PG_MAGIC.to_bytes(8, "little") + bytes(56))
    one_line_error("trace", "import", pg, "--out", tmp_path / "x.pg", names=["ends in .npz"])
    mine = tmp_path / "notes.npz"
    mine.write_text("my notes")
    one_line_error("trace", "import", pg, "--out", mine, names=["is not a tierlab trace"])
    assert mine.read_text() == "my notes"


def test_probe_trace_record_under_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    one_line_error("trace", "record", "--out", f / "t.pg", "--", "true",
                   names=[f"'{f}' is a file, not a directory"])


def test_jobs_above_the_cores_get_a_note_and_the_runs_count(tmp_path, capsys):
    """--jobs far above the machine's cores: a note, and the start line counts the
    processes that can run (one per run at most)."""
    code = main(["compare", "--scale", "1/256", "--workloads", SMALL, "--policies",
                 "static", "--jobs", str(4 * (os.cpu_count() or 1)), "--out", str(tmp_path)])
    err = capsys.readouterr().err
    assert code == 0 and "is more than this machine's" in err, err
    assert "1 runs on 1 process(es)" in err, err


# every parameter of every registered name, given values no parameter may take
NONSENSE = ["nan", "inf", "-1", "\u0661", "1_0", "zz"]


def _every_parameter():
    from tierlab.machines import MACHINES
    from tierlab.monitors.base import MONITORS
    from tierlab.policies import ALLOCS, POLICIES
    from tierlab.registry import user_params
    from tierlab.workloads import WORKLOADS
    variants = {"gups": "hotset", "graph": "pr", "ycsb": "e"}
    for reg in (MACHINES, MONITORS, POLICIES, ALLOCS, WORKLOADS):
        for name, factory in reg.items():
            if name in ("masim", "trace"):
                continue  # their files are probed above
            only = getattr(factory, "variant_params", {})
            for key in user_params(factory):
                if key in ("scale", "seed") and reg is WORKLOADS:
                    continue  # set by --scale and --seed, not by a spec
                yield reg, name, only.get(key, (variants.get(name),))[0], key


@pytest.mark.parametrize("reg,name,variant,key", list(_every_parameter()),
                         ids=lambda x: getattr(x, "kind", x))
def test_every_parameter_refuses_nonsense(reg, name, variant, key):
    """No parameter of any machine, workload, policy, allocation policy or monitor takes
    nan, inf, -1, another script's digit, a digit separator or a word, and each is
    refused when the spec is read (a TierlabError naming the key), not in a run."""
    for value in NONSENSE:
        spec = f"{name}:{variant + ',' if variant else ''}{key}={value}"
        with pytest.raises(TierlabError) as e:
            if reg.kind == "machine":
                tierlab.api.make_machine(spec)
            elif reg.kind == "workload":
                tierlab.api.make_workload(spec, 1 / 256)
            else:
                reg.create(spec)
        assert key in str(e.value) or value in str(e.value), (spec, str(e.value))
