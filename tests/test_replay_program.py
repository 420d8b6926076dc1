"""tests/guest/replay.c (the guest's trace replayer) and replay_export.py, on the host.

replay.c is built natively with gcc and checked against the simulator's `trace:PATH`
replay of the same file (docs/trace-format.md, "Replay"): page layout, first-touch order
and window, per-window proportions and write shares; its JSON events and the node query
of its hot pages (move_pages(2) status mode, mm/migrate.c do_pages_stat); its errors.
No timing asserts: runs end by themselves or are stopped after an awaited event.
"""
from __future__ import annotations

import importlib.util
import json
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tierlab.api import make_workload
from tierlab.workloads.trace import PG_MAGIC, read_trace, write_trace

GUEST = Path(__file__).parent / "guest"
COPIES, PER_WINDOW, HOT = 2, 200_000, 24

_spec = importlib.util.spec_from_file_location("replay_export", GUEST / "replay_export.py")
rx = sys.modules.setdefault("replay_export", importlib.util.module_from_spec(_spec))
_spec.loader.exec_module(rx)


@pytest.fixture(scope="module")
def replay_bin(tmp_path_factory):
    if shutil.which("gcc") is None:
        pytest.skip("gcc not found: replay.c is not built")
    out = tmp_path_factory.mktemp("replay") / "replay"
    r = subprocess.run(["gcc", "-O2", "-Wall", "-Wextra", "-Werror", "-o", str(out),
                        str(GUEST / "replay.c")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return out


def synthetic_windows():
    """4 windows, Zipf-like counts over three clusters of pages (one 4 GiB away, so
    compaction applies), new pages in every window, a zero-count record in window 1
    (first touched only in window 2) and random write shares (some 0, some 1)."""
    rng = np.random.default_rng(7)
    lo = 10 ** 6 + 37                                    # not 2 MiB aligned
    pool = np.concatenate([lo + np.arange(260), lo + 3000 + np.arange(2, 400, 2),
                           lo + 2 ** 20 + np.arange(60)])
    zero_page = int(pool[-1]) + 1
    wins = []
    for i in range(4):
        pages = pool[: 180 + 100 * i]
        pages = pages[rng.random(len(pages)) < 0.9] if i else pages
        count = np.round(2000.0 / rng.permutation(np.arange(1, len(pages) + 1))) + 20
        share = np.where(rng.random(len(pages)) < 0.2, rng.integers(0, 2, len(pages)),
                         rng.random(len(pages)))
        writes = np.round(count * share).astype(np.int64)
        reads = count.astype(np.int64) - writes
        if i == 1:
            pages, reads, writes = (np.append(pages, zero_page), np.append(reads, 0),
                                    np.append(writes, 0))
        if i == 2:
            pages, reads, writes = (np.append(pages, zero_page), np.append(reads, 50),
                                    np.append(writes, 50))
        wins.append((pages, reads, writes))
    return wins


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    d = tmp_path_factory.mktemp("trace")
    wins = synthetic_windows()
    sums = np.array([int(r.sum() + w.sum()) for _, r, w in wins])
    acc = sums.copy()
    acc[1] = sums[1] * 5 // 4          # window 1 recorded unattributed accesses too
    path = d / "t.npz"
    write_trace(path, wins, accesses=acc)
    rpl = d / "t.rpl"
    rt = rx.replay_arrays(path)
    rx.write_rpl(rt, rpl)
    return path, rpl, rt


def parse_debug(path):
    h, t, c = [], [], []
    for line in Path(path).read_text().splitlines():
        f = line.split()
        if f[0] == "H":
            h.append(int(f[2]))
        elif f[0] == "T":
            t.append((int(f[1]), int(f[2])))
        elif f[0] == "C":
            c.append([int(x) for x in f[1:]])
    return np.array(h), np.array(t).reshape(-1, 2), np.array(c).reshape(-1, 5)


@pytest.fixture(scope="module")
def run(replay_bin, traced, tmp_path_factory):
    d = tmp_path_factory.mktemp("run")
    _, rpl, _ = traced
    cmd = [str(replay_bin), "--trace", str(rpl), "--copies", str(COPIES), "--per-window",
           str(PER_WINDOW), "--hot-pages", str(HOT), "--seed", "3", "--debug-counts",
           str(d / "dbg.txt"), "--ready-file", str(d / "ready"), "--done-file", str(d / "done")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    events = [json.loads(x) for x in r.stdout.splitlines()]
    return events, parse_debug(d / "dbg.txt"), d


def simulator(path):
    """The simulator's replay of the same run: per window, its first touches (alloc
    order), the expected reads and writes of every page over the window, and the stride."""
    w = make_workload(f"trace:{path},copies={COPIES},per_window={PER_WINDOW}")
    ch = list(w.changes())
    ats = [c.at for c in ch] + [w.total_work]
    out = {}
    for k, c in enumerate(ch):
        win = int(c.label.split()[-1])
        dur = ats[k + 1] - c.at
        alloc = (np.concatenate([np.arange(s, e) for s, e in c.alloc])
                 if c.alloc is not None else np.zeros(0, np.int64))
        f = c.field
        assert np.all(f.ends - f.starts == 1)
        out[win] = (alloc, f.starts, f.read * dur, f.write * dur)
    return w, out


def test_export_round_trip_and_format(traced, tmp_path):
    path, rpl, rt = traced
    buf = rpl.read_bytes()
    assert buf[:8] == b"TLRPL001"
    span, nwin = np.frombuffer(buf, "<u8", 2, 8)
    assert (span, nwin) == (rt.span_pages, 4)
    assert len(buf) == 24 + 16 * nwin + 12 * len(rt.offsets)
    back = rx.read_rpl(rpl)
    for a in ("window_ptr", "offsets", "reads", "writes", "window_accesses"):
        assert np.array_equal(getattr(back, a), getattr(rt, a)), a
    assert back.span_pages == rt.span_pages
    for i in range(rt.nwindows):
        o = rt.window(i)[0]
        assert np.all(np.diff(o.astype(np.int64)) > 0)
    assert np.all((rt.reads > 0) | (rt.writes > 0))     # zero-count records left out
    # the page map and stride are the simulator's; compaction did apply
    w = make_workload(f"trace:{path}")
    assert rt.span_pages == w.stride and rt.span_pages % 512 == 0
    assert rt.span_pages < 2 ** 20
    # the command line, and a pagegrind .pg of the same windows, give the same file
    recs = np.dtype([("vpn", "<u8"), ("r", "<u4"), ("w", "<u4")])
    out = bytearray()
    tr = read_trace(path)
    for i in range(tr.nwindows):
        p, r, wr = tr.window_records(i)
        out += np.array([PG_MAGIC, i, len(p), tr.window_accesses()[i]], dtype="<u8").tobytes()
        out += np.array(list(zip(p, r, wr)), dtype=recs).tobytes()
    (tmp_path / "t.pg").write_bytes(bytes(out))
    for src in (path, tmp_path / "t.pg"):
        dst = tmp_path / (src.name + ".rpl")
        r = subprocess.run([sys.executable, str(GUEST / "replay_export.py"), str(src),
                            str(dst)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert dst.read_bytes() == buf


def test_first_touch_order_and_window_match_the_simulator(run, traced):
    path, _, rt = traced
    events, (_, touches, counts), _ = run
    _, sim = simulator(path)
    want = np.concatenate([np.stack([np.full(len(sim[i][0]), i), sim[i][0]], axis=1)
                           for i in sorted(sim)])
    assert np.array_equal(touches, want)               # same pages, windows and order
    pages, wins = rx.first_touch(rt, COPIES)
    assert np.array_equal(touches, np.stack([wins, pages], axis=1))
    # ascending address order in each window, each page touched once
    assert np.all(np.diff(touches[:, 0]) >= 0)
    same = np.diff(touches[:, 0]) == 0
    assert np.all(np.diff(touches[:, 1])[same] > 0)
    assert len(np.unique(touches[:, 1])) == len(touches)
    # the zero-count record of window 1 (the highest page) is first touched in window 2
    top = int(rt.offsets.max())
    assert touches[touches[:, 1] == top, 0].tolist() == [2]
    assert touches[touches[:, 1] == top + rt.span_pages, 0].tolist() == [2]
    assert events[-1]["first_touched"] == COPIES * len(np.unique(rt.offsets))
    # each page is touched first, then accessed (never accessed before its first touch)
    first_win = dict(zip(touches[:, 1].tolist(), touches[:, 0].tolist()))
    assert all(first_win[p] <= w for w, p in zip(counts[:, 1], counts[:, 2]))


def test_layout_and_proportions_match_the_simulator(run, traced):
    path, _, rt = traced
    events, (_, _, counts), _ = run
    from scipy import stats
    w, sim = simulator(path)
    ready = events[0]
    assert ready["span_pages"] == w.stride and w.npages <= COPIES * w.stride
    for i, (_, pages, er, ew) in sim.items():
        c = counts[counts[:, 1] == i]
        c = c[np.argsort(c[:, 2])]
        assert np.all(c[:, 0] == 0)
        # (c) the same pages of every copy are accessed
        assert np.array_equal(c[:, 2], pages)
        for k in range(COPIES):
            mine = c[:, 2][c[:, 2] // w.stride == k] - k * w.stride
            theirs = pages[pages // w.stride == k] - k * w.stride
            assert np.array_equal(np.sort(mine), theirs)
        obs_r, obs_w = c[:, 3], c[:, 4]
        obs = obs_r + obs_w
        exp = er + ew
        # the window's accesses: copies x round(N x S / A), as the simulator's work
        assert obs.sum() == pytest.approx(exp.sum(), abs=COPIES)
        # (a) proportions: chi-square over the pages (expected counts are all >= 100)
        assert exp.min() >= 100
        p = stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue
        assert p > 1e-4, (i, p)
        # copies are chosen uniformly
        per_copy = np.bincount(pages // w.stride, weights=obs, minlength=COPIES)
        assert stats.chisquare(per_copy).pvalue > 1e-4
        # write share of each page: binomial around the recorded share
        share = ew / exp
        edge = (share == 0) | (share == 1)
        assert np.array_equal(obs_w[edge], (obs * share)[edge])
        z = (obs_w - obs * share)[~edge] / np.sqrt(obs * share * (1 - share))[~edge]
        assert stats.chi2.sf(np.sum(z ** 2), df=len(z)) > 1e-4
        assert np.abs(z).max() < 6
    assert events[-1]["ops"] == counts[:, 3:].sum()
    assert events[-1]["writes"] == counts[:, 4].sum()


def test_events_and_hot_pages(run, traced):
    _, _, rt = traced
    events, (hot, _, _), d = run
    kinds = [e["event"] for e in events]
    assert kinds[0] == "ready" and kinds[-1] == "done" and set(kinds[1:-1]) <= {"progress"}
    ready, done = events[0], events[-1]
    for k in ("pid", "base", "span_pages", "copies", "windows", "hot_pages"):
        assert isinstance(ready[k], int), k
    assert (ready["copies"], ready["windows"], ready["hot_pages"]) == (COPIES, 4, HOT)
    assert ready["base"] % (2 << 20) == 0
    assert done["windows_done"] == 4 and done["stopped"] is False and done["passes"] == 1
    assert json.loads((d / "ready").read_text()) == ready
    assert json.loads((d / "done").read_text()) == done
    # the first progress line comes before any first touch: every hot page is absent
    first = events[1]
    assert first["event"] == "progress" and first["ops"] == 0
    assert first["hot_nodes"] == {} and first["hot_absent"] == HOT
    for e in events[1:-1]:
        assert sum(e["hot_nodes"].values()) + e["hot_absent"] == HOT
        assert not one_node() or set(e["hot_nodes"]) <= {"0"}
    # the hot pages are the Python ranking's
    assert np.array_equal(hot, rx.hot_pages(rt, COPIES, HOT))
    assert np.array_equal(hot[:2], [hot[0], hot[0] + rt.span_pages])


def one_node() -> bool:
    return len(list(Path("/sys/devices/system/node").glob("node[0-9]*"))) <= 1


def test_loop_progress_reports_hot_nodes_and_sigterm_ends_with_done(replay_bin, traced):
    _, rpl, _ = traced
    p = subprocess.Popen([str(replay_bin), "--trace", str(rpl), "--copies", str(COPIES),
                          "--loop", "--interval-ms", "20", "--hot-pages", str(HOT),
                          "--seconds", "600"],   # ends by itself if never signalled
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        seen = None
        for line in p.stdout:
            e = json.loads(line)
            if e["event"] == "progress":
                assert sum(e["hot_nodes"].values()) + e["hot_absent"] == HOT
                if e["pass"] >= 1:          # every page first-touched by now
                    seen = e
                    break
        assert seen is not None
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    done = json.loads(out.splitlines()[-1])
    assert done["event"] == "done" and done["stopped"] is True and done["ops"] > 0
    if "hot_query_errno" not in seen:
        assert seen["hot_absent"] == 0
        if one_node():
            assert seen["hot_nodes"] == {"0": HOT}


@pytest.mark.parametrize("case", ["magic", "truncated", "trailing", "offsets", "usage",
                                  "option", "missing"])
def test_errors_exit_2_with_one_line(replay_bin, traced, tmp_path, case):
    buf = traced[1].read_bytes()
    bad = tmp_path / "bad.rpl"
    args = ["--trace", str(bad)]
    if case == "magic":
        bad.write_bytes(b"TLRPL002" + buf[8:])
    elif case == "truncated":
        bad.write_bytes(buf[: 24 + 16 + 12 * 5 + 7])
    elif case == "trailing":
        bad.write_bytes(buf + b"\0")
    elif case == "offsets":                     # window 0's second offset = its first
        b = bytearray(buf)
        b[24 + 16 + 12: 24 + 16 + 16] = b[24 + 16: 24 + 20]
        bad.write_bytes(bytes(b))
    elif case == "usage":
        args = ["--copies", "2"]
    elif case == "option":
        args = ["--trace", str(traced[1]), "--copies", "two"]
    elif case == "missing":
        args = ["--trace", str(tmp_path / "nope.rpl")]
    r = subprocess.run([str(replay_bin), *args], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1, r.stderr
    want = {"magic": "bad magic at byte 0", "truncated": "truncated records of window 0 at "
            "byte 40", "trailing": f"trailing bytes at byte {len(buf)}",
            "offsets": "not strictly increasing in window 0 at byte 52", "usage": "usage:",
            "option": "bad --copies", "missing": "No such file"}[case]
    assert want in lines[0], lines[0]
