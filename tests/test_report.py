"""report.html: one self-contained page per comparison (plots embedded, no network)
with intervals, verdicts, notes, the command and the source digest; it opens in
headless Chromium with every plot decoded and no console message."""
from __future__ import annotations

import re
import shutil
import subprocess

import matplotlib.image
import pytest

from tierlab.cli import main
from tierlab.provenance import source_digest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
ARGS = ["compare", "--scale", "1/256", "--machine", "optane-2tier,dram-cxl", "--workloads",
        "gups:hotset,size=64MiB,hot=8MiB", "--policies", "static,oracle", "--seeds", "0-1"]


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    assert main([*ARGS, "--out", str(out)]) == 0
    return out


def test_the_report_stands_alone(report):
    text = (report / "report.html").read_text()
    pngs = sorted(report.glob("*.png"))
    assert len(pngs) >= 4 and text.count("data:image/png;base64,") == len(pngs)
    assert not re.search(r"(src|href)=['\"]?(https?:)?//", text)  # nothing fetched
    assert "tierlab compare --scale 1/256 --machine optane-2tier,dram-cxl" in text
    # the runs' source (from the run keys of results.jsonl) and the report's
    assert f"runs made by</th><td>tierlab source <code>{source_digest()}</code>" in text
    assert f"source <code>{source_digest()}</code></td></tr>" in text
    assert "faster" in text and "paired t-test over seeds on log throughput" in text
    for machine in ("optane-2tier", "dram-cxl"):
        assert f"{machine}, scale 1/256: over seeds" in text


@pytest.mark.skipif(CHROMIUM is None, reason="chromium not installed (Debian package "
                    "chromium; make test installs it where apt-get may run)")
def test_the_report_renders_in_headless_chromium(report, tmp_path):
    page = (report / "report.html").as_uri()
    base = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu",
            f"--user-data-dir={tmp_path / 'profile'}"]
    dom = subprocess.run([*base, "--enable-logging=stderr", "--v=0",
                          "--virtual-time-budget=10000", "--dump-dom", page],
                         capture_output=True, text=True, timeout=300)
    n = len(list(report.glob("*.png")))
    assert f'data-plots-ok="{n}/{n}"' in dom.stdout, dom.stdout[-2000:]
    console = [line for line in dom.stderr.splitlines() if ":CONSOLE" in line]
    assert not console, console
    shot = tmp_path / "shot.png"
    subprocess.run([*base, "--hide-scrollbars", "--window-size=1280,2000",
                    f"--screenshot={shot}", page], capture_output=True, timeout=300)
    img = matplotlib.image.imread(shot)
    assert img.shape[:2] == (2000, 1280) and img.std() > 0.05  # drawn, not blank


def test_a_reproduction_whose_results_hold_telemetry_gets_its_runs_report(report, tmp_path):
    """`reproduce telescope` writes {"telemetry": ..., "tiering": [runs]}: report.html
    is made from the tiering runs, beside its README."""
    import argparse
    import json
    from tierlab.cli import _reproduction_report
    runs = json.loads((report / "results.json").read_text())
    (tmp_path / "results.json").write_text(json.dumps({"telemetry": [{"monitor": "damon"}],
                                                       "tiering": runs}))
    a = argparse.Namespace(name="telescope", argv=["reproduce", "telescope"])
    page = _reproduction_report(tmp_path, a)
    assert page == tmp_path / "report.html"
    assert "tierlab reproduce telescope" in page.read_text()


def test_the_python_api_writes_what_the_cli_writes(tmp_path):
    """`tierlab.compare(..., out=DIR)` leaves what `tierlab compare --out DIR` leaves
    (results.jsonl, results.json, results.csv, the plots, report.html), and
    `tierlab.report` writes the same from any records, `tierlab.run`'s included."""
    import json
    import tierlab
    args = dict(machines=["optane-2tier"], workloads=["gups:uniform"],
                policies=["static", "oracle"], seeds=[0, 1], scale=1 / 256)
    recs = tierlab.compare(**args, out=tmp_path / "api")
    assert main(["compare", "--machine", "optane-2tier", "--workloads", "gups:uniform",
                 "--policies", "static,oracle", "--seeds", "0-1", "--scale", "1/256",
                 "--out", str(tmp_path / "cli")]) == 0
    names = sorted(p.name for p in (tmp_path / "cli").iterdir())
    assert sorted(p.name for p in (tmp_path / "api").iterdir()) == names
    assert {"results.jsonl", "results.json", "results.csv", "report.html",
            "speedup.png"} <= set(names)
    assert [r["throughput"] for r in json.loads((tmp_path / "api" / "results.json")
                                                .read_text())] == \
        [r["throughput"] for r in recs]
    got = tierlab.report([tierlab.run("optane-2tier", "gups:uniform", p, scale=1 / 256)
                          for p in ("static", "oracle")], tmp_path / "one")
    assert got["baseline"] == "static" and got["html"].exists() and got["plots"]
    assert any("1 seed" in n for n in got["notes"])


def test_the_api_reference_builds_without_a_warning(tmp_path):
    """`make apidoc`: pdoc renders every module's docstrings, warnings as errors (an
    import that fails, a module documented twice, a broken reference)."""
    import sys
    pytest.importorskip("pdoc")
    r = subprocess.run([sys.executable, "-W", "error::UserWarning", "-m", "pdoc", "-o",
                        str(tmp_path), "tierlab"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    pages = list(tmp_path.rglob("*.html"))
    assert len(pages) > 50 and (tmp_path / "tierlab" / "policies.html").exists()
    assert "PolicyView" in (tmp_path / "tierlab" / "interface.html").read_text()
