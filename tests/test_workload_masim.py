"""masim config parsing and phases."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from tierlab.errors import TierlabError
from tierlab.units import PAGE
from tierlab.workloads import WORKLOADS
from tierlab.workloads.masim import Masim, parse_config

MASIM = Path(__file__).parents[1] / "src" / "tierlab" / "data" / "masim"


def test_zigzag_alternates():
    w = WORKLOADS.create(f"masim:{MASIM}/zigzag.cfg", scale=1.0, seed=0)
    ch = list(w.changes())
    assert [c.label for c in ch] == ["warmup", "low 0", "high 0", "low 1", "high 1",
                                     "low 2", "high 2"]
    half = 268435456 // PAGE
    assert w.npages == 2 * half and w.footprint_pages == 2 * half
    # both regions first touched by the warm-up phase, in file order
    assert ch[0].alloc.tolist() == [[0, half], [half, 2 * half]]
    assert all(c.alloc is None for c in ch[1:])
    # work = ms / 1000 x aps
    assert [c.at for c in ch] == pytest.approx([0, 2e8, 3e8, 4e8, 5e8, 6e8, 7e8])
    assert w.total_work == pytest.approx(8e8)
    lo, hi = np.array([0, half]), np.array([half, 2 * half])
    for c in ch[1:]:
        t = c.field.range_total(lo, hi)
        expect = [1.0, 0.0] if c.label.startswith("low") else [0.0, 1.0]
        assert t == pytest.approx(expect)
        # masim's default mode is write-only
        assert c.field.total_write == pytest.approx(1.0) and c.field.total_read == 0
    assert ch[0].field.range_total(lo, hi) == pytest.approx([0.5, 0.5])


def test_hotcold_modes_and_layout():
    w = Masim(str(MASIM / "hotcold.cfg"), aps=1e6)
    f = next(w.changes()).field
    a = 1073741824 // PAGE
    h = 67108864 // PAGE
    # hot region: 90% of masim accesses, rw = 1 read + 1 write each
    r, wr = f.range_sum(np.array([a]), np.array([a + h]))
    assert r[0] == pytest.approx(0.9) and wr[0] == pytest.approx(0.9)
    r, wr = f.range_sum(np.array([0]), np.array([a]))  # cold_a: ro
    assert r[0] == pytest.approx(0.05) and wr[0] == 0
    r, wr = f.range_sum(np.array([a + h]), np.array([2 * a + h]))  # cold_b: default wo
    assert r[0] == 0 and wr[0] == pytest.approx(0.05)
    assert w.total_work == pytest.approx(3e6)


def test_scale_and_aps():
    w1 = Masim(str(MASIM / "zigzag.cfg"), aps="2e8", scale=0.25)
    assert w1.npages == 2 * (268435456 // 4 // PAGE)
    assert w1.total_work == pytest.approx(8e8 * 2 * 0.25)


def test_terabyte_regions_stay_compact():
    w = WORKLOADS.create(f"masim:{MASIM}/telescope-5t.cfg", scale=1.0, seed=0)
    assert w.npages * PAGE == 5 << 40
    ch = list(w.changes())
    f = ch[0].field
    assert f.nsegments == 3
    hot = (2743410360320 // PAGE, 2743410360320 // PAGE + (10 << 30) // PAGE)
    assert f.range_total(np.array([hot[0]]), np.array([hot[1]]))[0] == pytest.approx(0.95)


def test_sequential_small_stride_costs_fewer_accesses(tmp_path):
    p = tmp_path / "s.cfg"
    p.write_text("r, 1048576\n\nsweep\n100\nr, 0, 8, 1, ro\n")
    f = next(Masim(str(p)).changes()).field
    assert f.total == pytest.approx(8 / 64)


def test_lazy_first_touch_and_unused_region(tmp_path):
    p = tmp_path / "lazy.cfg"
    p.write_text("a, 40960\nb, 40960\nc, 40960, init.dat\nunused, 40960\n\n"
                 "p1\n10\na, 1, 64, 1\n\np2\n10\nb, 1, 64, 1\na, 1, 64, 1\n")
    w = Masim(str(p))
    ch = list(w.changes())
    # c has an init file: touched at start; a by phase 1; b by phase 2; unused never
    assert ch[0].alloc.tolist() == [[20, 30], [0, 10]]
    assert ch[1].alloc.tolist() == [[10, 20]]
    assert w.footprint_pages == 30 and w.npages == 40


GOOD = "a, 4096000\nb, 8192000\n\nphase one\n1000\na, 1, 64, 3\nb, 0, 4096, 1, ro\n"


@pytest.mark.parametrize("text,needle", [
    ("", "empty"),
    ("a, 4096\n", "no phases"),
    ("a\n\np\n10\na, 1, 64, 1\n", ":1:"),
    ("a, big\n\np\n10\na, 1, 64, 1\n", "bad size"),
    ("a, 4096\na, 4096\n\np\n10\na, 1, 64, 1\n", "twice"),
    ("a, 4096\n\np\nten\na, 1, 64, 1\n", ":4: bad duration"),
    ("a, 4096\n\np\n10\n", "no access pattern"),
    ("a, 4096\n\np\n", "no duration"),
    ("a, 4096\n\np\n10\nz, 1, 64, 1\n", ":5: unknown region 'z'"),
    ("a, 4096\n\np\n10\na, 2, 64, 1\n", "random flag"),
    ("a, 4096\n\np\n10\na, 1, -64, 1\n", "stride"),
    ("a, 4096\n\np\n10\na, 1, 64, x\n", "probability"),
    ("a, 4096\n\np\n10\na, 1, 64\n", "needs"),
    ("a, 4096\n\np\n10\na, 1, 64, 1, rx\n", "rw mode"),
    ("a, 4096\n\np\n10\na, 1, 64, 0\n", "sum to 0"),
    ("a, 4096\n\np\n0\na, 1, 64, 1\n", ":4: bad duration '0'"),
])
def test_malformed_configs(tmp_path, text, needle):
    p = tmp_path / "bad.cfg"
    p.write_text(text)
    with pytest.raises(TierlabError) as e:
        Masim(str(p))
    msg = str(e.value)
    assert needle in msg and "\n" not in msg
    assert "bad.cfg" in msg


def test_missing_file():
    with pytest.raises(TierlabError, match="not found"):
        WORKLOADS.create("masim:/no/such/file.cfg")


def test_comments_and_extra_blank_lines(tmp_path):
    p = tmp_path / "c.cfg"
    p.write_text("# regions\na, 4096000\n\n\n# phases\n\nphase\n100\n# a comment\na, 1, 64, 1\n")
    cfg = parse_config(str(p))
    assert len(cfg.regions) == 1 and len(cfg.phases) == 1
    assert cfg.phases[0].patterns[0].rw == "wo"


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_fuzz_mutated_configs_only_raise_tierlab_errors(tmp_path, data):
    text = GOOD
    lines = text.split("\n")
    op = data.draw(st.sampled_from(["drop", "dup", "replace", "truncate", "insert"]))
    i = data.draw(st.integers(0, len(lines) - 1))
    junk = data.draw(st.text(alphabet="ab, 01-9.x#\t", max_size=12))
    if op == "drop":
        del lines[i]
    elif op == "dup":
        lines.insert(i, lines[i])
    elif op == "replace":
        lines[i] = junk
    elif op == "insert":
        lines.insert(i, junk)
    text = "\n".join(lines)
    if op == "truncate":
        text = text[: data.draw(st.integers(0, len(text)))]
    p = tmp_path / "fuzz.cfg"
    p.write_text(text)
    try:
        w = Masim(str(p), aps=1e3)
    except TierlabError as e:
        assert "\n" not in str(e)
        return
    ch = list(w.changes())
    assert ch[0].at == 0 and w.total_work > 0
