"""`tierlab trace import|info|plot`, footprint replication (copies=k), trace replay
against an exact per-access stream, the recording scripts' dependency checks, and the
small real traces committed in tests/data/traces/."""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tierlab import api
from tierlab.cli import main
from tierlab.engine.timeline import Timeline
from tierlab.errors import TierlabError
from tierlab.monitors import ExactSource, RateSource
from tierlab.tracing.analysis import heatmap, trace_info
from tierlab.workloads import WORKLOADS
from tierlab.workloads.trace import CHUNK, Trace, read_trace, write_trace

from test_workload_trace import write_pg

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "traces"
SCRIPTS = REPO / "scripts" / "traces"
REAL = ["redis-ycsb-zipfian", "redis-ycsb-latest", "redis-ycsb-uniform",
        "memcached-memaslap", "rocksdb-dbbench", "hpcc-randomaccess"]
SHARED_PR = Path("/work/shared/traces/gapbs-pr-g16.pg")
Z_MAX = 4.5


def cli(capsys, *args):
    """Run the CLI in-process; returns (status, stdout, stderr)."""
    code = main(list(map(str, args)))
    got = capsys.readouterr()
    return code, got.out, got.err


def png_size(path) -> tuple[int, int]:
    raw = Path(path).read_bytes()
    assert raw[:8] == b"\x89PNG\r\n\x1a\n" and raw[12:16] == b"IHDR"
    return struct.unpack(">II", raw[16:24])


def skewed_trace(path):
    """100 pages (vpn 1000..1099) over 4 windows; page totals: page 0 1000, pages
    1-9 100 each, 10-19 8 each, 20-99 1 each (2060 accesses, 464 of them writes)."""
    per = np.array([1000] + [100] * 9 + [8] * 10 + [1] * 80)
    pages = 1000 + np.arange(100)
    wins = []
    for k in range(4):
        own = np.arange(100) % 4 == k              # the 1-access pages, spread out
        c = np.where(per > 1, per // 4, own * per)
        w = c // 4
        wins.append((pages[c > 0], (c - w)[c > 0], w[c > 0]))
    return write_trace(path, wins, source="skewed")


# ---------------------------------------------------------------------------------
# import / info / plot
# ---------------------------------------------------------------------------------
def test_import_round_trip(tmp_path, capsys):
    pg = tmp_path / "x.pg"
    write_pg(pg, [(0, [(70, 1, 2), (5, 3, 0), (70, 1, 0)], 10), (1, [(9, 0, 4)], 4),
                  (2, [], 0), (3, [(5, 2, 2), (1 << 30, 1, 0)], 9)])
    code, out, err = cli(capsys, "trace", "import", pg)
    assert code == 0 and f"wrote {tmp_path / 'x.npz'}" in out, err
    a, b = read_trace(pg), read_trace(tmp_path / "x.npz")
    for k in ("window_ptr", "pages", "reads", "writes"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    np.testing.assert_array_equal(a.window_accesses(), b.window_accesses())
    assert b.window_accesses().tolist() == [10, 4, 0, 9] and b.window == 10
    assert b.pages.tolist() == [5, 70, 9, 5, 1 << 30] and b.reads.tolist() == [3, 2, 0, 2, 1]
    # --out as a directory, then as a file name
    d = tmp_path / "out"
    d.mkdir()
    assert cli(capsys, "trace", "import", pg, "--out", d)[0] == 0
    assert (d / "x.npz").is_file()
    assert cli(capsys, "trace", "import", pg, "--out", tmp_path / "y.npz")[0] == 0
    assert read_trace(tmp_path / "y.npz").nrecords == 5


@pytest.mark.skipif(not SHARED_PR.exists(), reason="shared traces not present")
def test_import_shared_trace_counts(tmp_path, capsys):
    code, out, _ = cli(capsys, "trace", "import", SHARED_PR, "--out", tmp_path / "pr.npz")
    assert code == 0
    a, b = read_trace(SHARED_PR), read_trace(tmp_path / "pr.npz")
    for k in ("window_ptr", "pages", "reads", "writes"):
        np.testing.assert_array_equal(getattr(a, k), getattr(b, k))
    assert b.total_accesses == a.total_accesses == 267_008_723


def test_info_known_skew(tmp_path, capsys):
    p = tmp_path / "s.npz"
    skewed_trace(p)
    code, out, _ = cli(capsys, "trace", "info", p, "--json")
    assert code == 0
    info = json.loads(out)
    total = 1000 + 900 + 80 + 80
    assert info["accesses"] == total and info["pages"] == 100 and info["windows"] == 4
    assert info["writes"] == 4 * (62 + 9 * 6 + 10 * 0) and info["records"] == 4 * 20 + 80
    assert info["write_share"] == pytest.approx(info["writes"] / total)
    assert info["skew"]["1%"] == pytest.approx(1000 / total)
    assert info["skew"]["10%"] == pytest.approx(1900 / total)
    assert info["skew"]["20%"] == pytest.approx(1980 / total)
    assert info["hottest_page_share"] == pytest.approx(1000 / total)
    assert info["footprint_bytes"] == info["span_bytes"] == 100 * 4096
    assert info["mappings"] == 1 and info["lowest_address"] == 1000 * 4096
    assert info["source"] == "skewed" and info["unattributed"] == 0
    # the table view shows the same numbers
    code, out, _ = cli(capsys, "trace", "info", p)
    assert code == 0 and "1% 48.5%, 10% 92.2%, 20% 96.1%" in out and "2,060" in out


def test_info_reads_pagegrind_directly(tmp_path, capsys):
    pg = tmp_path / "x.pg"
    write_pg(pg, [(0, [(5, 3, 1), (7, 0, 4)], 10)])
    info = trace_info(read_trace(pg))
    assert info["accesses"] == 10 and info["unattributed"] == 2
    assert info["write_share"] == pytest.approx(5 / 8)
    code, out, _ = cli(capsys, "trace", "info", pg)
    assert code == 0 and "not attributed to pages" in out


def test_heatmap_bins_and_plot(tmp_path, capsys):
    # two mappings 1 GiB apart: compaction keeps one empty 2 MiB chunk between them
    wins = [(np.array([0, 1, 262144 + k]), np.array([4, 0, 2]), np.array([0, 4, 1]))
            for k in range(6)]
    p = tmp_path / "h.npz"
    t = write_trace(p, wins)
    m, re_, ce, gaps = heatmap(t, rows=8, cols=3)
    assert m.shape == (8, 3) and re_[0] == 0 and ce.tolist() == [0, 2, 4, 6]
    span = 2 * CHUNK + 6
    assert re_[-1] == span and gaps.tolist() == [CHUNK]
    cells = np.outer(np.diff(re_), np.diff(ce))
    assert (m * cells).sum() == pytest.approx(t.reads.sum() + t.writes.sum())
    assert m[0].sum() > 0 and m[-1].sum() > 0 and m[3].sum() == 0
    m2, re2, _, gaps2 = heatmap(t, rows=1000, cols=1000, compact="no")
    assert m2.shape == (1000, 6) and len(gaps2) == 0 and re2[-1] == 262144 + 6
    out = tmp_path / "sub" / "h.png"
    code, stdout, _ = cli(capsys, "trace", "plot", p, "--out", out, "--size", "640x480",
                          "--rows", "8", "--cols", "3")
    assert code == 0 and f"wrote {out}" in stdout
    assert png_size(out) == (640, 480)
    assert cli(capsys, "trace", "plot", p, "--out", tmp_path)[0] == 0
    assert png_size(tmp_path / "h.png") == (1200, 800)


@pytest.mark.parametrize("action", ["import", "info", "plot"])
def test_help_texts(capsys, action):
    with pytest.raises(SystemExit) as e:
        main(["trace", action, "--help"])
    assert e.value.code == 0
    text = capsys.readouterr().out
    assert "example:" in text and {"import": "pagegrind", "info": "skew",
                                   "plot": "heat map"}[action] in text


# ---------------------------------------------------------------------------------
# damaged files: one line on stderr, exit status 2
# ---------------------------------------------------------------------------------
def damaged_files(tmp_path):
    good = tmp_path / "good.npz"
    write_trace(good, [(np.arange(50), np.ones(50), np.ones(50))] * 3)
    raw = good.read_bytes()
    (tmp_path / "cut.npz").write_bytes(raw[:len(raw) // 2])
    (tmp_path / "junk.npz").write_bytes(b"not a trace at all" * 20)
    pg = tmp_path / "good.pg"
    write_pg(pg, [(0, [(7, 1, 2), (5, 3, 0)], 6), (1, [(9, 0, 4)], 4)])
    rawpg = pg.read_bytes()
    (tmp_path / "cut.pg").write_bytes(rawpg[:-7])
    bad = bytearray(rawpg)
    bad[64] ^= 0xFF  # the second epoch's magic
    (tmp_path / "magic.pg").write_bytes(bytes(bad))
    return ["cut.npz", "junk.npz", "cut.pg", "magic.pg", "missing.npz"]


def test_damaged_files_give_one_line_errors(tmp_path, capsys):
    names = damaged_files(tmp_path)
    for name in names:
        f = tmp_path / name
        runs = [("trace", "info", f), ("trace", "plot", f, "--out", tmp_path / "x.png"),
                ("run", "--workload", f"trace:{f}", "--policy", "static")]
        if name.endswith(".pg") or name == "missing.npz":
            runs.append(("trace", "import", f, "--out", tmp_path / "o.npz"))
        for args in runs:
            code, _, err = cli(capsys, *args)
            assert code == 2, (args, err)
            assert err.startswith("tierlab: error: ") and name in err, (args, err)
            assert len(err.strip().splitlines()) == 1, err
    code, _, err = cli(capsys, "trace", "import", tmp_path / "good.npz")
    assert code == 2 and "not a pagegrind .pg file" in err
    code, _, err = cli(capsys, "trace", "plot", tmp_path / "good.npz", "--size", "big")
    assert code == 2 and "bad size 'big'" in err
    code, _, err = cli(capsys, "trace", "import", tmp_path / "good.pg", "--out",
                       tmp_path / "good.pg")
    assert code == 2


def test_damaged_file_through_the_real_entry_point(tmp_path):
    damaged_files(tmp_path)
    for args in (["trace", "info", str(tmp_path / "cut.npz")],
                 ["trace", "import", str(tmp_path / "cut.pg")]):
        p = subprocess.run([sys.executable, "-m", "tierlab", *args], capture_output=True,
                           text=True, timeout=120)
        assert p.returncode == 2 and "Traceback" not in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "truncated" in p.stderr


# ---------------------------------------------------------------------------------
# copies=k
# ---------------------------------------------------------------------------------
@pytest.fixture
def two_windows(tmp_path):
    p = tmp_path / "c.npz"
    write_trace(p, [(np.array([3, 4, 600]), np.array([6, 2, 1]), np.array([0, 2, 1])),
                    (np.array([4, 700]), np.array([3, 0]), np.array([0, 3]))])
    return p


def test_copies_multiply_footprint_and_keep_per_page_rates(two_windows):
    one = Trace(str(two_windows))
    k = 3
    many = Trace(str(two_windows), copies=k)
    assert many.copies == k and many.threads == k * one.threads
    assert many.footprint_pages == k * one.footprint_pages == k * 4
    assert many.total_work == k * one.total_work == k * 18
    assert many.stride % CHUNK == 0 and many.stride >= one.npages + CHUNK
    assert many.npages == (k - 1) * many.stride + one.npages
    c1, ck = list(one.changes()), list(many.changes())
    assert [c.at for c in ck] == [k * c.at for c in c1]
    for a, b in zip(c1, ck):
        assert b.field.total == pytest.approx(a.field.total)
        for i in range(k):
            pages = a.field.starts + i * many.stride
            r, w = b.field.rate_of(pages)
            r0, w0 = a.field.rate_of(a.field.starts)
            np.testing.assert_allclose(r, r0 / k)
            np.testing.assert_allclose(w, w0 / k)
        assert b.alloc.tolist() == [[s + i * many.stride, e + i * many.stride]
                                    for i in range(k) for s, e in a.alloc.tolist()]
    # each copy's page gets its recorded count in every window: rate x window work
    w0_work = ck[1].at - ck[0].at
    r, w = ck[0].field.rate_of(np.array([2 * many.stride + 3]))
    assert (r[0] + w[0]) * w0_work == pytest.approx(6)
    assert many.params["copies"] == k and "copies" not in one.params


def test_copies_and_scale(two_windows):
    t = Trace(str(two_windows), copies=4, scale=0.5)
    assert t.copies == 2 and t.total_work == 2 * 18 and t.threads == 4
    assert t.footprint_pages == 2 * 4
    t = Trace(str(two_windows), copies=3, scale=0.5)  # 1.5 copies: 2 laid out, 1.5 x work
    assert t.copies == 2 and t.total_work == pytest.approx(1.5 * 18)
    t = Trace(str(two_windows), copies=1, scale=0.5)  # the plain rule: first half
    assert t.copies == 1 and t.total_work == 9 and t.footprint_pages == 3
    t = Trace(str(two_windows), copies=8, scale=1 / 16)
    assert t.copies == 1 and t.total_work == 9
    w = WORKLOADS.create(f"trace:{two_windows},copies=2", scale=1.0, seed=0)
    assert w.copies == 2
    for bad in ("0", "1.5", "x"):
        with pytest.raises(TierlabError, match="trace copies"):
            Trace(str(two_windows), copies=bad)


def test_copies_keep_run_time(tmp_path):
    """k copies with k times the threads: about the same simulated time, k x work
    (with some compute per access, so that the k-fold bandwidth barely loads DRAM)."""
    rng = np.random.default_rng(3)
    wins = []
    for _ in range(20):
        pages = np.unique(rng.integers(0, 3000, 800))
        wins.append((pages, rng.integers(1, 200, len(pages)), rng.integers(0, 50, len(pages))))
    p = tmp_path / "r.npz"
    write_trace(p, wins)
    recs = {k: api.run("optane-2tier", f"trace:{p},copies={k},compute_ns=50", "static")
            for k in (1, 4)}
    assert recs[4]["work"] == pytest.approx(4 * recs[1]["work"])
    assert recs[4]["sim_seconds"] == pytest.approx(recs[1]["sim_seconds"], rel=0.02)
    half = api.run("optane-2tier", f"trace:{p},copies=4,compute_ns=50", "static", scale=0.5)
    assert half["work"] == pytest.approx(2 * recs[1]["work"])
    assert half["sim_seconds"] == pytest.approx(recs[1]["sim_seconds"], rel=0.02)


# ---------------------------------------------------------------------------------
# replay against an exact per-access stream of the same trace
# ---------------------------------------------------------------------------------
def test_replay_agrees_with_exact_access_stream(tmp_path):
    """The replayed rate field against the trace's own accesses, each placed at a
    uniform random time inside its window (the order within a window is unknown):
    per-window counts match exactly in expectation, and accessed bits sampled every
    1/40 window agree with the model's 1 - exp(-lambda) per (page class, window)."""
    rng = np.random.default_rng(7)
    classes = {"hot": (0, 16, 400), "warm": (16, 80, 40), "cold": (80, 336, 2)}
    wins = []
    for j in range(3):
        pages, reads, writes = [], [], []
        for name, (a, b, c) in classes.items():
            pp = np.arange(a, b) + (512 if (j == 2 and name == "hot") else 0)
            pages.append(pp)
            reads.append(np.full(len(pp), c - c // 4))
            writes.append(np.full(len(pp), c // 4))
        wins.append((np.concatenate(pages), np.concatenate(reads), np.concatenate(writes)))
    p = tmp_path / "x.npz"
    t = write_trace(p, wins)
    wl = Trace(str(p))
    speed = 1000.0  # accesses per simulated second
    ch = list(wl.changes())
    tl = Timeline(ch[0].field)
    bounds = [c.at / speed for c in ch] + [wl.total_work / speed]
    for c, t0 in zip(ch[1:], bounds[1:]):
        tl.advance(t0, c.at)
        tl.set_field(t0, c.field)
    tl.advance(bounds[-1], wl.total_work)
    # exact events: every recorded access at a uniform time within its window
    mapped = wl._mapped[np.searchsorted(wl._touched, t.pages)]
    wid = np.repeat(np.arange(t.nwindows), np.diff(t.window_ptr))
    cnt = (t.reads + t.writes).astype(np.int64)
    ev_page = np.repeat(mapped, cnt)
    ev_win = np.repeat(wid, cnt)
    ev_write = np.concatenate([np.r_[np.zeros(r, bool), np.ones(w, bool)]
                               for r, w in zip(t.reads, t.writes)])
    b = np.asarray(bounds)
    ev_t = b[ev_win] + rng.random(len(ev_page)) * (b[ev_win + 1] - b[ev_win])
    exact = ExactSource(ev_t, ev_page, ev_write, npages=wl.npages)
    model = RateSource(tl)
    pages = np.arange(wl.npages)
    # 1. expected counts per window equal the recorded counts
    for j in range(t.nwindows):
        er, ew = model.expected(pages, pages + 1, b[j], b[j + 1])
        xr, xw = exact.counts(pages, pages + 1, b[j], b[j + 1])
        np.testing.assert_allclose(er, xr, atol=1e-6)
        np.testing.assert_allclose(ew, xw, atol=1e-6)
    # 2. accessed bits per (class, window): exact stream vs the model's draws
    checked = 0
    for j in range(t.nwindows):
        edges = np.linspace(b[j], b[j + 1], 41)
        for name, (a0, b0, _) in classes.items():
            cls = np.arange(a0, b0) + (512 if (j == 2 and name == "hot") else 0)
            ex = ra = 0
            mean = var = 0.0
            for t0, t1 in zip(edges[:-1], edges[1:]):
                ex += int(exact.accessed(cls, cls + 1, t0, t1).sum())
                ra += int(model.accessed(cls, cls + 1, t0, t1, rng).sum())
                lam = sum(model.expected(cls, cls + 1, t0, t1))
                pr = -np.expm1(-lam)
                mean += float(pr.sum())
                var += float((pr * (1 - pr)).sum())
            sd = max(np.sqrt(var), 1.0)
            assert abs(ex - mean) / sd < Z_MAX, (j, name, ex, mean)
            assert abs(ra - mean) / sd < Z_MAX, (j, name, ra, mean)
            checked += 1
    assert checked == 9


# ---------------------------------------------------------------------------------
# recording scripts: dependency checks (no Valgrind needed)
# ---------------------------------------------------------------------------------
@pytest.fixture
def bare_path(tmp_path):
    """A PATH with only the shell utilities the scripts need before their checks."""
    d = tmp_path / "bin"
    d.mkdir()
    for tool in ("bash", "dirname", "basename", "id", "cat", "mktemp", "rm", "sh", "env"):
        src = shutil.which(tool)
        if src:
            (d / tool).symlink_to(os.path.realpath(src))
    (d / "python3").symlink_to(os.path.realpath(sys.executable))
    return str(d)


@pytest.mark.parametrize("script,package", [
    ("redis-ycsb.sh", "redis-server"), ("memcached-memaslap.sh", "memcached"),
    ("rocksdb-dbbench.sh", "rocksdb-tools"), ("hpcc-randomaccess.sh", "hpcc")])
def test_scripts_name_the_missing_package(bare_path, script, package):
    p = subprocess.run([str(SCRIPTS / script), "--size", "small"], capture_output=True,
                       text=True, timeout=60, env={"PATH": bare_path, "HOME": "/tmp"})
    assert p.returncode == 2, p.stderr
    assert f"install the Debian package {package}" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


@pytest.mark.parametrize("args,needle", [
    (["redis-ycsb.sh", "--dist", "pareto"], "bad --dist 'pareto'; valid: zipfian, latest"),
    (["redis-ycsb.sh", "--size", "huge"], "bad --size 'huge'; valid: small, eval"),
    (["hpcc-randomaccess.sh", "--until", "HPL"], "bad --until 'HPL'; valid: MPIRandomAccess"),
    (["memcached-memaslap.sh", "--get", "2"], "bad --get '2'"),
    (["record-all.sh", "--only", "nosuch"], "unknown recording 'nosuch'"),
])
def test_scripts_reject_bad_arguments(args, needle):
    p = subprocess.run([str(SCRIPTS / args[0]), *args[1:]], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 2 and needle in p.stderr, p.stderr


def test_scripts_help():
    for s in ("redis-ycsb.sh", "memcached-memaslap.sh", "rocksdb-dbbench.sh",
              "hpcc-randomaccess.sh", "record-all.sh"):
        p = subprocess.run([str(SCRIPTS / s), "--help"], capture_output=True, text=True,
                           timeout=60)
        assert p.returncode == 0 and p.stdout.startswith("usage:"), s


# ---------------------------------------------------------------------------------
# the small real traces in tests/data/traces/
# ---------------------------------------------------------------------------------
def test_committed_traces_are_small():
    files = {f.stem: f.stat().st_size for f in DATA.glob("*.npz")}
    assert set(REAL) <= set(files), sorted(files)
    assert max(files.values()) < 2 * 2 ** 20 and sum(files.values()) < 6 * 2 ** 20


@pytest.mark.parametrize("name", REAL)
def test_committed_trace_loads(name):
    t = read_trace(DATA / f"{name}.npz")
    info = trace_info(t)
    assert info["windows"] > 5 and info["pages"] > 500
    assert 0 < info["write_share"] < 1 and info["skew"]["1%"] < info["skew"]["20%"] <= 1
    assert t.source.startswith("pagegrind: ")


@pytest.mark.parametrize("name", REAL)
def test_committed_trace_runs_under_two_policies(name):
    spec = f"trace:{DATA / name}.npz,max_changes=60"
    machine = "optane-2tier,dram=4MiB"
    recs = [api.run(machine, spec, pol) for pol in ("static", "idt")]
    for r in recs:
        assert r["work"] == pytest.approx(read_trace(DATA / f"{name}.npz").total_accesses)
        assert r["sim_seconds"] > 0 and sum(r["tier_access_share"].values()) == \
            pytest.approx(1.0)
    assert recs[1]["promotions"] + recs[1]["demotions"] > 0


def test_compare_on_a_recorded_trace(tmp_path):
    spec = f"trace:{DATA / 'redis-ycsb-zipfian.npz'},max_changes=40"
    recs = api.compare(["optane-2tier,dram=4MiB"], [spec], ["static", "idt"],
                       ["dram-preferred"], [0], 1.0, "static", 1)
    assert [r["policy"] for r in recs] == ["static", "idt"]
    assert recs[0]["speedup"] == pytest.approx(1.0)


def test_run_and_compare_cli_on_a_recorded_trace(tmp_path, capsys):
    spec = f"trace:{DATA / 'rocksdb-dbbench.npz'},max_changes=40"
    code, out, err = cli(capsys, "run", "--machine", "optane-2tier", "--workload", spec,
                         "--policy", "idt", "--json", tmp_path / "r.json")
    assert code == 0, err
    assert json.loads((tmp_path / "r.json").read_text())[0]["policy"] == "idt"
    code, out, err = cli(capsys, "compare", "--machine", "optane-2tier,dram=4MiB",
                         "--workloads", spec, "--policies", "static,idt", "--jobs", "1",
                         "--out", tmp_path / "cmp")
    assert code == 0, err
    res = json.loads((tmp_path / "cmp" / "results.json").read_text())
    assert {r["policy"] for r in res} == {"static", "idt"}
