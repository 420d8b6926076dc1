"""`tierlab trace record`: the pagegrind Valgrind tool and its Python wrapper."""
from __future__ import annotations

import argparse
import importlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tierlab.errors import TierlabError
from tierlab.tracing import add_parser, build_recorder, record
from tierlab.workloads.trace import PG_MAGIC, from_pagegrind, read_trace, write_trace

rec_mod = importlib.import_module("tierlab.tracing.record")
pytestmark = pytest.mark.skipif(shutil.which("valgrind") is None,
                                reason="valgrind is not installed (Debian package valgrind)")

SRC = Path(__file__).parent / "data" / "pagegrind_counts.c"
NPAGES = 8
READS = np.array([3 * p + 2 for p in range(NPAGES)])
WRITES = np.array([p * p + 1 for p in range(NPAGES)])
READS[-1] += 1  # the load straddling pages NPAGES-1 and NPAGES counts on the first


@pytest.fixture(scope="module")
def prog(tmp_path_factory) -> str:
    build_recorder()
    exe = tmp_path_factory.mktemp("prog") / "pagegrind_counts"
    subprocess.run(["gcc", "-O1", "-o", str(exe), str(SRC)], check=True)
    return str(exe)


def base_page(stdout: str) -> int:
    m = re.search(r"addr=(0x[0-9a-f]+) pages=(\d+)", stdout)
    assert m, stdout
    return int(m.group(1), 16) >> 12


def page_totals(t, pages):
    """Reads and writes summed over all windows for each of `pages`."""
    r = np.array([t.reads[t.pages == p].astype(np.int64).sum() for p in pages])
    w = np.array([t.writes[t.pages == p].astype(np.int64).sum() for p in pages])
    return r, w


def test_counts_exact(prog, tmp_path, capfd):
    out = tmp_path / "t.npz"
    assert record([prog], 10 ** 9, out) == 0
    base = base_page(capfd.readouterr().out)
    t = read_trace(out)
    assert t.nwindows == 1 and t.window == 10 ** 9
    r, w = page_totals(t, range(base, base + NPAGES))
    np.testing.assert_array_equal(r, READS)
    np.testing.assert_array_equal(w, WRITES)
    assert base + NPAGES not in set(t.pages.tolist())  # the straddle's second page
    assert t.source.startswith("pagegrind: ")


@pytest.fixture(scope="module")
def windowed(prog, tmp_path_factory):
    """One run with small windows, exit code 3, raw .pg output."""
    d = tmp_path_factory.mktemp("win")
    out = d / "t.pg"
    cap = subprocess.run(
        [sys.executable, "-c", "import sys; from tierlab.tracing import record; "
         "sys.exit(record([sys.argv[1], '3'], 997, sys.argv[2], fmt='pg'))", prog, str(out)],
        capture_output=True, text=True)
    return cap, out


def test_exit_code_and_output_pass_through(windowed):
    cap, _ = windowed
    assert cap.returncode == 3, cap.stderr
    assert re.search(r"^addr=0x[0-9a-f]+ pages=8$", cap.stdout, re.M)
    assert "pagegrind_counts: done" in cap.stderr
    assert "==" not in cap.stderr  # valgrind is quiet (-q)


def test_window_splitting(windowed):
    cap, out = windowed
    t = from_pagegrind(out)
    acc = t.window_accesses()
    assert t.nwindows > 5
    assert (acc[:-1] == 997).all() and 0 < acc[-1] <= 997
    np.testing.assert_array_equal(t.counts_per_window(), acc)  # every access attributed
    r, w = page_totals(t, range(base_page(cap.stdout), base_page(cap.stdout) + NPAGES))
    np.testing.assert_array_equal(r, READS)
    np.testing.assert_array_equal(w, WRITES)


def test_pg_layout(windowed):
    _, out = windowed
    buf = out.read_bytes()
    off, epoch = 0, 0
    while off < len(buf):
        magic, ep, nrec, acc = np.frombuffer(buf, "<u8", 4, off)
        assert magic == PG_MAGIC and ep == epoch and acc <= 997
        recs = np.frombuffer(buf, [("vpn", "<u8"), ("r", "<u4"), ("w", "<u4")], nrec, off + 32)
        assert (np.diff(recs["vpn"].astype(np.int64)) > 0).all()  # sorted, no duplicates
        assert ((recs["r"] > 0) | (recs["w"] > 0)).all()
        assert int(recs["r"].sum()) + int(recs["w"].sum()) == acc
        off += 32 + 16 * int(nrec)
        epoch += 1
    assert off == len(buf)


def test_round_trip(windowed, tmp_path):
    _, out = windowed
    t = from_pagegrind(out)
    write_trace(tmp_path / "t.npz", t)
    u = read_trace(tmp_path / "t.npz")
    for k in ("window_ptr", "pages", "reads", "writes"):
        np.testing.assert_array_equal(getattr(u, k), getattr(t, k))
    np.testing.assert_array_equal(u.window_accesses(), t.window_accesses())
    assert u.window == t.window == 997


def test_cli(prog, tmp_path, capfd):
    p = argparse.ArgumentParser(prog="tierlab")
    add_parser(p.add_subparsers(dest="cmd"))
    out = tmp_path / "cli.npz"
    a = p.parse_args(["trace", "record", "--window", "5000", "--out", str(out), "--",
                      prog, "7"])
    assert a.fn(a) == 7
    got = capfd.readouterr()
    assert "addr=" in got.out and f"wrote {out}" in got.err
    t = read_trace(out)
    assert t.window == 5000 and (t.window_accesses()[:-1] == 5000).all()
    with pytest.raises(SystemExit):
        p.parse_args(["trace", "record", "--window", "0", "--", prog])
    capfd.readouterr()
    with pytest.raises(SystemExit):
        p.parse_args(["trace", "record", "--help"])
    help_text = capfd.readouterr().out
    assert "--window N" in help_text and "pagegrind" in help_text


def test_errors(prog, tmp_path, monkeypatch):
    with pytest.raises(TierlabError, match="needs a command"):
        record([], 100, tmp_path / "x.npz")
    with pytest.raises(TierlabError, match="not found"):
        record(["no-such-program-pagegrind"], 100, tmp_path / "x.npz")
    with pytest.raises(TierlabError, match="unknown trace format"):
        record([prog], 100, tmp_path / "x.npz", fmt="csv")
    with pytest.raises(TierlabError, match="bad window"):
        record([prog], 0, tmp_path / "x.npz")
    with monkeypatch.context() as m:
        m.setattr(rec_mod.shutil, "which", lambda name: None)
        with pytest.raises(TierlabError, match="Debian package `valgrind`"):
            build_recorder()
    monkeypatch.setattr(rec_mod, "tool_dir", lambda: tmp_path / "missing")
    with pytest.raises(TierlabError, match="source checkout") as e:
        build_recorder()
    assert "\n" not in str(e.value)
