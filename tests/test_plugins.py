"""Plugins from outside the package (plugins.py): a policy file given with --import runs
on the process pool and on a local Dask cluster; an installed distribution's entry point
registers its policy; an edited plugin re-runs under --resume; a bad plugin is one line
and exit status 2. Each command runs in a fresh process, as a user runs it."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PLUGIN = '''
from tierlab.policies import POLICIES
from tierlab.policies.static import Static


@POLICIES.register("{name}")
class PluginPolicy(Static):
    """A plugin: static placement under another name{extra}."""
'''


def tierlab(*args, cwd, env=None):
    return subprocess.run([sys.executable, "-m", "tierlab", *map(str, args)], cwd=cwd,
                          capture_output=True, text=True, env={**os.environ, **(env or {})})


def runs(out: Path) -> list:
    return [json.loads(x) for x in (out / "results.jsonl").read_text().splitlines()]


@pytest.fixture
def plugin(tmp_path):
    p = tmp_path / "my_policy.py"
    p.write_text(PLUGIN.format(name="plugin-static", extra=""))
    return p


@pytest.mark.parametrize("where", [["--jobs", "2"], ["--cluster", "local:2"]])
def test_a_plugin_file_runs_on_workers(tmp_path, plugin, where):
    r = tierlab("compare", "--scale", "1/256", "--workloads", "gups:uniform", "--policies",
                "static,plugin-static", "--seeds", "0-1", "--import", plugin, *where,
                "--out", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    recs = runs(tmp_path / "out")
    assert sorted(x["policy"] for x in recs) == ["plugin-static"] * 2 + ["static"] * 2
    by = {(x["policy"], x["seed"]): x["throughput"] for x in recs}
    assert by[("plugin-static", 0)] == by[("static", 0)]  # static under another name


def test_an_edited_plugin_is_run_again_on_resume(tmp_path, plugin):
    args = ("compare", "--scale", "1/256", "--workloads", "gups:uniform", "--policies",
            "static,plugin-static", "--import", plugin)
    assert tierlab(*args, "--out", "out", cwd=tmp_path).returncode == 0
    plugin.write_text(PLUGIN.format(name="plugin-static", extra=", edited"))
    r = tierlab(*args, "--resume", "out", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "2 run(s) in out/results.jsonl were made by other code" in r.stderr
    assert len(runs(tmp_path / "out")) == 4


def test_an_entry_point_registers_its_policy(tmp_path):
    """A distribution installed on the path (its dist-info with an entry point in the
    group tierlab.policies) registers its policy in every tierlab process."""
    site = tmp_path / "site"
    (site / "my_plugin").mkdir(parents=True)
    (site / "my_plugin" / "__init__.py").write_text(PLUGIN.format(name="ep-static",
                                                                   extra=""))
    info = site / "my_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: my-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text("[tierlab.policies]\nep-static = my_plugin\n")
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    r = tierlab("list", "policies", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "ep-static" in r.stdout
    r = tierlab("run", "--scale", "1/256", "--workload", "gups:uniform", "--policy",
                "ep-static", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("text,needle", [
    (None, "bad --import 'missing.py': no such file"),
    ("raise RuntimeError('boom')", "failed to load: RuntimeError: boom"),
    ("from tierlab.policies import POLICIES\n"
     "from tierlab.policies.static import Static\n"
     "POLICIES.register('static')(type('S', (Static,), {}))\n",
     "policy 'static' registered twice"),
])
def test_a_bad_plugin_is_one_line_exit_2(tmp_path, text, needle):
    name = "missing.py"
    if text is not None:
        name = "bad.py"
        (tmp_path / name).write_text(text)
    r = tierlab("run", "--scale", "1/256", "--import", name, cwd=tmp_path)
    assert r.returncode == 2
    assert needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr
