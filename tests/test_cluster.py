"""Sweeps on a Dask cluster, streamed and resumable (issue 20), and interrupts of a local
pool (issue 19): real `dask scheduler` and `dask worker` processes on 127.0.0.1 and the
real `tierlab` command, no mocks. Waits are on events (a file appearing, a worker
registering, a run finishing), never sleeps of fixed length."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")
from distributed import Client  # noqa: E402

import tierlab  # noqa: E402
from tierlab.cli import main  # noqa: E402
from tierlab.policies import POLICIES  # noqa: E402
from tierlab.policies.static import Static  # noqa: E402
from tierlab.sweep import JSONL, RunsFailed  # noqa: E402

BIN = Path(sys.executable).parent
TRACE = Path(__file__).parent / "data" / "traces" / "redis-ycsb-zipfian.npz"
#: 12 runs; the trace is named by a path relative to the test's directory, which the
#: workers (started elsewhere) can only read through the scattered copy
SWEEP = ["--machine", "optane-2tier", "--scale", "1/256", "--seeds", "0-1",
         "--workloads", "gups:hotset,gups:uniform,trace:traces/redis.npz",
         "--policies", "static,autonuma"]
RUNS = 12
DEADLINE = 120  # seconds any single wait may take on a busy machine


def until(cond, what: str, timeout: float = DEADLINE):
    """Poll `cond` until it returns something true; fail naming `what` after timeout."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = cond()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def start(args, log: Path, cwd: Path, env=None) -> subprocess.Popen:
    return subprocess.Popen(args, stdout=log.open("w"), stderr=subprocess.STDOUT, cwd=cwd,
                            env=env)


def stop(*procs) -> None:
    for p in procs:
        if p.poll() is None:
            p.kill()
        p.wait()


class Cluster:
    """A `dask scheduler` and its `dask worker`s (one thread, no nanny), each in a
    directory of its own."""

    def __init__(self, root: Path):
        self.root, self.procs, self.workers = root, [], {}
        sched = root / "scheduler.json"
        self.procs.append(start([BIN / "dask", "scheduler", "--host", "127.0.0.1", "--port",
                                 "0", "--no-dashboard", "--scheduler-file", sched],
                                root / "scheduler.log", root))
        self.address = until(lambda: _address(sched), "the scheduler")
        self.client = Client(self.address, timeout="60s")

    def add_worker(self, name: str, env=None) -> subprocess.Popen:
        d = self.root / name
        d.mkdir()
        p = start([BIN / "dask", "worker", self.address, "--nthreads", "1", "--no-nanny",
                   "--host", "127.0.0.1", "--no-dashboard", "--name", name,
                   "--local-directory", d], self.root / f"{name}.log", d, env)
        self.procs.append(p)
        self.workers[name] = p
        until(lambda: any(w.get("name") == name for w in
                          self.client.scheduler_info()["workers"].values()),
              f"worker {name} to register")
        return p

    def address_of(self, name: str) -> str:
        return next(a for a, w in self.client.scheduler_info()["workers"].items()
                    if w.get("name") == name)

    def close(self):
        self.client.close()
        stop(*reversed(self.procs))


def _address(path: Path):
    try:
        return json.loads(path.read_text())["address"]
    except (OSError, ValueError, KeyError):
        return None


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("dask"))
    try:
        c.add_worker("a")
        c.add_worker("b")
        yield c
    finally:
        c.close()


@pytest.fixture
def here(tmp_path, monkeypatch):
    """The test runs in tmp_path, with the trace at traces/redis.npz."""
    (tmp_path / "traces").mkdir()
    shutil.copy(TRACE, tmp_path / "traces" / "redis.npz")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _sigint_default() -> None:
    """A command started from a background job of a non-interactive shell inherits
    SIGINT ignored (POSIX), and Python then installs no KeyboardInterrupt handler: the
    sweep under test keeps the terminal's default however pytest itself was started."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def cli(*args, cwd: Path) -> subprocess.Popen:
    """The real command; PYTHONFAULTHANDLER makes SIGABRT print every thread's stack."""
    return subprocess.Popen([BIN / "tierlab", *map(str, args)], cwd=cwd, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=_sigint_default,
                            env={**os.environ, "PYTHONFAULTHANDLER": "1"})


def finish(p: subprocess.Popen) -> tuple[int, str]:
    """Wait for the command's exit; one that hangs is aborted and the test fails with
    the stacks it was stuck in."""
    try:
        _, err = p.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGABRT)
        try:
            _, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        raise AssertionError(f"the command hung for 300 s; its stderr, ending with its "
                             f"stacks at SIGABRT:\n{err[-6000:]}") from None
    return p.returncode, err


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """The sweep run here, one run after another, uninterrupted: DIR with results.json,
    the CSV and the plots."""
    d = tmp_path_factory.mktemp("ref")
    (d / "traces").mkdir()
    shutil.copy(TRACE, d / "traces" / "redis.npz")
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(d)
        assert main(["compare", *SWEEP, "--jobs", "1", "--out", "ref"]) == 0
    return d / "ref"


def strip(records, drop=("wall_seconds",)):
    return [{k: v for k, v in r.items() if k not in drop} for r in records]


def same_results(got: Path, ref: Path) -> None:
    """results.json equal record by record but for wall times; the CSV likewise."""
    a = json.loads((got / "results.json").read_text())
    b = json.loads((ref / "results.json").read_text())
    assert len(a) == RUNS and strip(a) == strip(b)
    ca, cb = ((p / "results.csv").read_text().splitlines() for p in (got, ref))
    wall = ca[0].split(",").index("wall_seconds")
    cut = lambda rows: [[c for i, c in enumerate(r.split(",")) if i != wall] for r in rows]  # noqa: E731
    assert cut(ca) == cut(cb)


def jsonl(d: Path) -> list[dict]:
    """The complete lines of d/results.jsonl: a sweep still running may be mid-way
    through writing its last line (a record is longer than one buffered write)."""
    p = d / JSONL
    return [json.loads(x) for x in p.read_text().split("\n")[:-1]] if p.exists() else []


def test_a_sweep_on_the_cluster_equals_the_local_run(cluster, here, reference, capsys):
    """Two `dask worker`s run the 12 runs; results.json, the CSV and the plots equal the
    local run's but for wall times, every run streamed to results.jsonl with its key;
    the trace reached each worker that ran it as one file in its local directory."""
    code = main(["compare", *SWEEP, "--cluster", cluster.address, "--out", "out"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert f"{RUNS} runs on the Dask cluster at {cluster.address} (2 worker(s))" in err
    same_results(here / "out", reference)
    lines = jsonl(here / "out")
    assert len(lines) == RUNS
    assert {r["run_key"]["tierlab"] for r in lines} == {tierlab.__version__}
    assert {tuple(r["run_key"]["inputs"]) for r in lines if "trace" in r["workload"]} == \
        {("traces/redis.npz",)}
    ran = [(x.split()[1], x.rsplit(" on ", 1)[1]) for x in err.splitlines()
           if x.startswith("[")]
    assert len(ran) == RUNS and {w for _, w in ran} <= {"worker a", "worker b"}
    for w in ("a", "b"):
        copies = list((cluster.root / w).rglob("tierlab-inputs/*/redis.npz"))
        ran_trace = ("trace:traces/redis.npz", f"worker {w}") in ran
        assert len(copies) == 1 if ran_trace else len(copies) <= 1, copies
    pngs = sorted(reference.glob("*.png"))
    assert len(pngs) == 3 + 3  # and a tier-share-over-time figure per workload
    for png in pngs:
        assert (here / "out" / png.name).read_bytes() == png.read_bytes(), png.name


def test_killing_a_worker_mid_sweep_loses_no_run(cluster, here, reference):
    """A third worker is killed (SIGKILL) while it runs a simulation: its run goes to
    the others and the sweep completes with the reference's records."""
    victim = cluster.add_worker("c")
    addr = cluster.address_of("c")
    p = cli("compare", *SWEEP, "--policies", "autonuma", "--cluster", cluster.address,
            "--out", "out", cwd=here)
    # keys end in the run's index: the first four are the GUPS runs (a second each)
    until(lambda: any(int(k.rsplit("-", 1)[1]) < 4 for k in
                      cluster.client.processing().get(addr, ())) or p.poll() is not None,
          "worker c to start a GUPS run")
    assert p.poll() is None, "the sweep ended before worker c ran anything"
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    cluster.workers.pop("c")
    code, err = finish(p)
    assert code == 0, err
    got = json.loads((here / "out" / "results.json").read_text())
    ref = [r for r in json.loads((reference / "results.json").read_text())
           if r["policy"] == "autonuma"]
    assert len(got) == 6 and strip(got, ("wall_seconds", "speedup")) == \
        strip(ref, ("wall_seconds", "speedup"))


def interrupt_after_three(args, here: Path, sig, freeze=False, held=(),
                          starved=lambda: False, state=lambda: "no cluster"):
    """Start a sweep into here/out and send `sig` once three runs are in results.jsonl;
    returns (process, its exit code, stderr, the workers frozen, seconds from the signal
    to the sweep's exit). On a busy machine the
    short runs left may all finish before the signal lands: that sweep was not
    interrupted, which is not what is tested, so it is started again (at most 3 times).
    With `freeze`, the sweep's own worker processes are stopped (SIGSTOP) as soon as
    three runs are in, so no more can finish before the signal; the sweep must then
    still stop them (SIGKILL reaches a stopped process). `held`: processes (a Dask
    worker) stopped from the first finished run on (inputs reach every worker before
    the first run), so the runs given to them cannot finish and the signal lands
    mid-sweep however late the client reads its results; they are continued after each
    try. `starved()` says the workers not held have no run left (the scheduler gave, or
    let work stealing give, the rest to the held ones): the signal is sent then, with
    fewer than three runs in. `state()` describes the cluster in a timeout's message."""
    for _ in range(3):
        try:
            got = _interrupt_once(args, here, sig, freeze, held, starved, state)
        finally:
            for pid in held:
                os.kill(pid, signal.SIGCONT)
        if got is not None:
            return got
    pytest.fail("the sweep finished before every one of 3 signals could land")


def _interrupt_once(args, here: Path, sig, freeze, held, starved, state):
    shutil.rmtree(here / "out", ignore_errors=True)
    p = cli(*args, "--out", "out", cwd=here)
    if held:
        until(lambda: len(jsonl(here / "out")) >= 1 or p.poll() is not None, "a run")
        for pid in held:
            os.kill(pid, signal.SIGSTOP)
    try:
        until(lambda: len(jsonl(here / "out")) >= 3 or p.poll() is not None
              or starved(), "three runs")
    except AssertionError as e:
        p.kill()
        raise AssertionError(f"{e}: {len(jsonl(here / 'out'))} in; {state()}; the "
                             f"sweep's stderr: {p.communicate()[1][-2000:]}") from None
    workers = [w for w in _children(p.pid) if _is_pool_worker(w)] if freeze else []
    for w in workers:
        os.kill(w, signal.SIGSTOP)
    if p.poll() is None and len(jsonl(here / "out")) < RUNS:
        t0 = time.monotonic()
        p.send_signal(sig)
        code, err = finish(p)
        if not (code == 0 and len(jsonl(here / "out")) == RUNS):
            return p, code, err, workers, time.monotonic() - t0
    else:
        finish(p)
    return None


def test_interrupted_cluster_sweep_resumes_only_the_missing_runs(cluster, here, reference):
    """SIGINT after three runs (or fewer, when only the held worker has runs left): one
    line says what was kept; --resume runs only the others, appended to results.jsonl,
    and the results equal an uninterrupted run's."""
    b = cluster.address_of("b")

    def processing():
        return {a: sorted(int(k.rsplit("-", 1)[1]) for k in ks)
                for a, ks in cluster.client.processing().items()}

    _, code, err, _, _ = interrupt_after_three(
        ("compare", *SWEEP, "--cluster", cluster.address), here, signal.SIGINT,
        held=[cluster.workers["b"].pid],
        starved=lambda: not any(ks for a, ks in processing().items() if a != b),
        state=lambda: f"runs by worker, b={b}: {processing()}")
    assert code == 130, err
    last = err.strip().splitlines()[-1]
    assert last.startswith("tierlab: interrupted: workers stopped;") and "--resume out" \
        in last and "Traceback" not in err
    kept = jsonl(here / "out")
    assert 1 <= len(kept) < RUNS
    code, err = finish(cli("compare", *SWEEP, "--cluster", cluster.address,
                           "--resume", "out", cwd=here))
    assert code == 0, err
    assert f"{len(kept)} of {RUNS} runs already in out/{JSONL}: running the other " \
        f"{RUNS - len(kept)}" in err
    after = jsonl(here / "out")
    assert after[:len(kept)] == kept and len(after) == RUNS
    assert len({json.dumps(r["run_key"], sort_keys=True) for r in after}) == RUNS
    same_results(here / "out", reference)


def test_a_record_held_by_a_stopped_worker_does_not_block_the_sweep(cluster):
    """A finished run whose record sits on a worker that does not answer (stopped here):
    the fetch gives up within its half second, so the sweep still sees a signal (the
    hang CI met at 5094531: Future.result waited for the stopped worker), and gets the
    record once the worker answers again."""
    from tierlab.sweep import Sweep
    b = cluster.workers["b"]
    f = cluster.client.submit(lambda: ({"run": 1}, "worker b"), pure=False,
                              workers=[cluster.address_of("b")])
    until(lambda: f.status == "finished", "the run on worker b")
    os.kill(b.pid, signal.SIGSTOP)
    try:
        got = []
        t = threading.Thread(target=lambda: got.append(Sweep._fetch(f)), daemon=True)
        t.start()
        t.join(DEADLINE)
        assert not t.is_alive(), "the fetch waited for the stopped worker"
        assert got == [None]
    finally:
        os.kill(b.pid, signal.SIGCONT)
    assert until(lambda: Sweep._fetch(f), "the record after SIGCONT") == \
        ({"run": 1}, "worker b")
    g = cluster.client.submit(lambda: 1 / 0, pure=False)
    until(lambda: g.status == "error", "the failing run")
    with pytest.raises(ZeroDivisionError):
        Sweep._fetch(g)


def test_a_worker_with_another_tierlab_is_refused(cluster, here, tmp_path, capsys):
    """A worker whose tierlab says 0.0.9 is refused in one line and runs nothing; the
    sweep runs on the others."""
    fake = tmp_path / "fake" / "tierlab"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('__version__ = "0.0.9"\n')
    env = {**os.environ, "PYTHONPATH": str(fake.parent)}
    cluster.add_worker("old", env=env)
    try:
        addr = cluster.address_of("old")
        code = main(["compare", "--scale", "1/256", "--workloads", "gups:uniform",
                     "--policies", "static,oracle", "--seeds", "0-3",
                     "--cluster", cluster.address, "--out", "out"])
        err = capsys.readouterr().err
        assert code == 0, err
        assert f"worker {addr} refused: it has tierlab 0.0.9, this sweep runs tierlab " \
            f"{tierlab.__version__}" in err.splitlines()
        ran_on = [x.rsplit(" on ", 1)[1] for x in err.splitlines() if x.startswith("[")]
        assert len(ran_on) == 8 and "worker old" not in ran_on
    finally:
        stop(cluster.workers.pop("old"))


@POLICIES.register("test-client-only")
class ClientOnly(Static):
    """Registered in the test process only: workers do not know it."""


def test_a_run_that_raises_on_a_worker_is_reported_and_the_rest_go_on(cluster, here):
    """The Python API with cluster=ADDRESS: the policy unknown to the workers raises
    there; the error names the run's spec and the error, the other runs are kept."""
    with pytest.raises(RunsFailed) as e:
        tierlab.compare(["optane-2tier"], ["gups:uniform"], ["static", "test-client-only"],
                        seeds=[0, 1], scale=1 / 256, cluster=cluster.address, out="out")
    assert len(e.value.failures) == 2
    assert "optane-2tier gups:uniform test-client-only dram-preferred seed " in str(e.value)
    assert "unknown policy 'test-client-only'" in str(e.value)
    assert [r["policy"] for r in jsonl(here / "out")] == ["static", "static"]


def _children(pid: int) -> list[int]:
    kids = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) \
                    == pid:
                kids.append(int(d.name))
        except (OSError, ValueError, IndexError):
            pass
    return kids


def _is_pool_worker(pid: int) -> bool:
    """A process pool's worker: a fork of its parent (the same command line) or
    multiprocessing's spawn_main; not another child the sweep may wait on (a git or
    other subprocess, multiprocessing's resource tracker)."""
    try:
        cmd = (Path("/proc") / str(pid) / "cmdline").read_bytes()
        stat = (Path("/proc") / str(pid) / "stat").read_text()
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        return b"spawn_main" in cmd or cmd == (Path("/proc") / str(parent) /
                                               "cmdline").read_bytes()
    except (OSError, ValueError, IndexError):
        return False


def _alive(pid: int) -> bool:
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0] \
            != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_jobs_2_stops_its_workers_at_once_on_sigint_and_sigterm(sig, here, reference):
    """Issue 19: with --jobs 2, SIGINT or SIGTERM stops both worker processes within
    seconds, says so in one line, keeps the finished runs; --resume (after SIGTERM)
    completes the sweep with the uninterrupted run's results."""
    p, code, err, workers, took = interrupt_after_three(("compare", *SWEEP, "--jobs", "2"),
                                                        here, sig, freeze=True)
    assert workers, "no pool workers were seen"
    word = "interrupted" if sig == signal.SIGINT else "terminated"
    assert code == 128 + sig, err
    assert err.strip().splitlines()[-1].startswith(f"tierlab: {word}: workers stopped;")
    assert "Traceback" not in err
    assert took < 5, took
    assert not [w for w in workers if _alive(w)]
    kept = jsonl(here / "out")
    assert 3 <= len(kept) < RUNS
    if sig == signal.SIGINT:
        return
    code, err = finish(cli("compare", *SWEEP, "--jobs", "2", "--resume", "out", cwd=here))
    assert code == 0, err
    assert len(jsonl(here / "out")) == RUNS
    same_results(here / "out", reference)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG")
def test_pool_workers_die_with_a_sweep_killed_by_sigkill(here):
    """SIGKILL runs no handler in the sweep, so nothing stops its pool workers: they die
    with their parent (PR_SET_PDEATHSIG) instead of living on, blocked on a lock and a
    pipe, holding the caller's stdout open."""
    p = cli("compare", *SWEEP, "--jobs", "2", "--out", "out", cwd=here)
    until(lambda: len(jsonl(here / "out")) >= 1 or p.poll() is not None, "a run")
    kids = [w for w in _children(p.pid) if _is_pool_worker(w)]
    assert p.poll() is None and kids, "the sweep ended before it could be killed"
    p.kill()
    p.wait()
    until(lambda: not [k for k in kids if _alive(k)], "the workers to exit")
    for f in (p.stdout, p.stderr):
        f.close()


@pytest.mark.parametrize("args,needle", [
    (["--cluster", "nowhere"], "bad cluster 'nowhere': expected a scheduler address "
     "(tcp://host:8786) or local:N"),
    (["--cluster", "local:0", "--out", "o"], "bad cluster 'local:0': local:N needs N >= 1"),
    (["--resume", "o"], "cannot resume o: no o/results.jsonl"),
    (["--resume", "o", "--out", "p"], "--resume o with --out p: a resumed sweep writes "
     "into its own directory"),
    ([], "--out DIR is required (or --resume DIR to continue a sweep)"),
])
def test_bad_sweep_options_are_one_line_and_exit_2(args, needle, tmp_path, monkeypatch,
                                                     capsys):
    monkeypatch.chdir(tmp_path)
    if "--out" not in args and "--resume" not in args and args:
        args = args + ["--out", "o"]
    assert main(["compare", "--scale", "1/256", "--workloads", "gups:uniform",
                 "--policies", "static", *args]) == 2
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1, err


def test_out_over_a_sweep_is_refused_and_loses_nothing(tmp_path, monkeypatch, capsys):
    """`--out DIR` where DIR holds a sweep's results.jsonl (typing --out for --resume)
    is refused with one line naming --resume and --force, and the file is left as it
    was; --force starts over; --resume continues; the two together are refused."""
    monkeypatch.chdir(tmp_path)
    args = ["compare", "--scale", "1/256", "--workloads", "gups:uniform", "--policies",
            "static", "--jobs", "1"]
    assert main([*args, "--out", "o"]) == 0
    kept = (tmp_path / "o" / JSONL).read_bytes()
    assert kept.count(b"\n") == 1
    capsys.readouterr()
    assert main([*args, "--seeds", "0-1", "--out", "o"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "results.jsonl already holds 1 run(s)" in err
    assert "--resume o continues it, --force starts it over" in err
    assert (tmp_path / "o" / JSONL).read_bytes() == kept
    assert main([*args, "--seeds", "0-1", "--resume", "o"]) == 0
    assert (tmp_path / "o" / JSONL).read_bytes().startswith(kept)
    assert len(jsonl(tmp_path / "o")) == 2
    assert main([*args, "--out", "o", "--force"]) == 0
    assert len(jsonl(tmp_path / "o")) == 1
    capsys.readouterr()
    assert main([*args, "--resume", "o", "--force"]) == 2
    assert "give one of them" in capsys.readouterr().err
    with pytest.raises(tierlab.errors.TierlabError, match="already holds 1 run"):
        tierlab.compare(["optane-2tier"], ["gups:uniform"], ["static"], scale=1 / 256,
                        out=str(tmp_path / "o"))
    assert len(tierlab.compare(["optane-2tier"], ["gups:uniform"], ["static"],
                               scale=1 / 256, out=str(tmp_path / "o"), force=True)) == 1


def _a_finished_sweep(tmp_path, monkeypatch, seeds: str):
    """A small sweep finished in tmp_path/o: its arguments, results.jsonl and records."""
    monkeypatch.chdir(tmp_path)
    args = ["compare", "--scale", "1/256", "--workloads", "gups:uniform", "--policies",
            "static", "--seeds", seeds, "--jobs", "1"]
    assert main([*args, "--out", "o"]) == 0
    path = tmp_path / "o" / JSONL
    return args, path, [json.loads(x) for x in path.read_text().splitlines()]


def test_resume_reruns_records_that_cannot_stand_for_their_run(tmp_path, monkeypatch,
                                                               capsys):
    """--resume reads every record back through `record_problem`: a line without
    `policy`, one with a garbage value and one with throughput NaN are never used; their
    runs run again, said in one note, and results.json holds only sound records."""
    import math
    args, path, recs = _a_finished_sweep(tmp_path, monkeypatch, "0-3")
    del recs[0]["policy"]
    recs[1]["alloc"] = {"not": "text"}
    recs[2]["throughput"] = float("nan")
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    capsys.readouterr()
    assert main([*args, "--resume", "o"]) == 0
    err = capsys.readouterr().err
    assert "3 unreadable or invalid line(s) skipped, their runs run again (first: no " \
        "'policy')" in err
    assert "1 of 4 runs already in" in err
    got = json.loads((tmp_path / "o" / "results.json").read_text())
    assert sorted(r["seed"] for r in got) == [0, 1, 2, 3]
    assert all(r["policy"] == "static" and r["alloc"] == "dram-preferred" and
               math.isfinite(r["throughput"]) for r in got)


def test_record_problem_names_what_is_wrong():
    from tierlab.sweep import record_problem
    rec = tierlab.run(machine="optane-2tier", workload="gups:uniform", policy="static",
                      scale=1 / 256)
    assert record_problem(rec) is None
    for change, why in [({"seed": True}, "'seed' is not a whole number"),
                        ({"migrated_bytes": -1}, "'migrated_bytes' is not a whole"),
                        ({"wall_seconds": float("inf")}, "'wall_seconds' is not a finite"),
                        ({"tier_access_share": {"dram": "x"}}, "'tier_access_share'"),
                        ({"series": []}, "'series' is not a mapping")]:
        assert why in record_problem({**rec, **change})
    assert record_problem([]) == "not a JSON object"


def test_signals_during_dask_calls_are_raised_between_them_not_inside():
    """A signal while Dask runs is noted and raised at the next check, as Interrupted with
    its number, never inside a client call (distributed's sync() prints a NameError
    traceback when interrupted before its coroutine starts); a second signal raises at
    once; an ignored SIGINT stays ignored; the handlers are restored after."""
    from tierlab.sweep import Interrupted, _DeferredSignals
    # as in an interactive shell, whatever this run inherited (a background job of a
    # non-interactive shell starts with SIGINT ignored)
    inherited = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _deferred_signals(Interrupted, _DeferredSignals)
    finally:
        signal.signal(signal.SIGINT, inherited)


def _deferred_signals(Interrupted, _DeferredSignals):
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    with _DeferredSignals() as d:
        os.kill(os.getpid(), signal.SIGTERM)
        until(lambda: d.signum == signal.SIGTERM, "the signal to be noted")
        with pytest.raises(Interrupted) as e:
            d.check()
        assert e.value.signum == signal.SIGTERM
        with pytest.raises(Interrupted) as e:
            os.kill(os.getpid(), signal.SIGINT)
            until(lambda: False, "the second signal to raise")
        assert e.value.signum == signal.SIGINT
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == before
    old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with _DeferredSignals() as d:
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
            d.check()
        assert d.signum is None
    finally:
        signal.signal(signal.SIGINT, old)


def test_the_source_digest_changes_with_any_edit_of_the_code_that_makes_runs(tmp_path):
    import shutil
    from tierlab.provenance import PACKAGE, source_digest
    copy = tmp_path / "tierlab"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    assert source_digest(copy) == source_digest(PACKAGE)
    static = copy / "policies" / "static.py"
    table = copy / "reports" / "tables.py"
    table.write_text(table.read_text() + "\n# an edit of how results are shown\n")
    source_digest.cache_clear()
    assert source_digest(copy) == source_digest(PACKAGE)  # rendering makes no run
    static.write_text(static.read_text() + "\n# an edit\n")
    source_digest.cache_clear()
    assert source_digest(copy) != source_digest(PACKAGE)


def test_resume_reruns_the_runs_other_code_made(tmp_path, monkeypatch, capsys):
    """A run key holds the digest of the source that made it: after an edit (here, the
    key's digest is another code's), --resume runs those runs again and says how many
    and why; runs of this code are kept."""
    args, path, recs = _a_finished_sweep(tmp_path, monkeypatch, "0-2")
    for r in recs[:2]:
        r["run_key"]["source"] = "0123456789abcdef"
        r["throughput"] = 1.0  # what the old code measured
    path.write_text("".join(json.dumps(r) + "\n" for r in recs))
    capsys.readouterr()
    assert main([*args, "--resume", "o"]) == 0
    err = capsys.readouterr().err
    assert "2 run(s) in o/results.jsonl were made by other code (2 by source " \
        "0123456789abcdef; now " in err, err
    got = json.loads((tmp_path / "o" / "results.json").read_text())
    assert len(got) == 3 and all(r["throughput"] > 1.0 for r in got)
