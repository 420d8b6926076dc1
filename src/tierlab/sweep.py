"""Where a sweep's runs execute and where they go as they finish, so that an interrupt
loses no finished run and stops every worker at once (docs/cluster.md).

A `Sweep` runs lists of `runs.Job` on local processes (`jobs`) or as tasks on Dask's
`distributed` scheduler (`cluster`: "tcp://host:8786", "local:N" for a LocalCluster of
N one-thread workers, or a `distributed.Client`). Every finished run is appended to
DIR/results.jsonl (the record plus its `run_key`: the job's full spec, the digests of
the files it reads, the tierlab version and the digest of its source, provenance.py);
with `resume`, runs whose key is already there are not run again, and runs made by
other code are run again and counted. SIGINT and SIGTERM stop the workers at once and raise
`Interrupted`, which says what was kept.

    with Sweep(out="sweep", cluster="local:2") as sw:
        recs = tierlab.compare(...)   # inside the block, compare runs through sw
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import re
import signal
import sys
import threading
import uuid
from collections import Counter
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextvars import ContextVar
from dataclasses import asdict
from pathlib import Path

from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from .provenance import __version__, code_digest
from .errors import TierlabError, write_error
from .registry import Spec
from .runs import Job, _run_job

JSONL = "results.jsonl"
#: the Dask resource every tierlab task asks for; a worker offers it only if it runs this
#: tierlab version (_version_gate)
RESOURCE = f"tierlab-{__version__}"

_ACTIVE: ContextVar["Sweep | None"] = ContextVar("tierlab_sweep", default=None)


def active() -> "Sweep | None":
    """The sweep entered by the innermost `with Sweep(...)`, if any."""
    return _ACTIVE.get()


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM stopped the sweep; the message says what was kept."""

    def __init__(self, message: str, signum: int = signal.SIGINT):
        super().__init__(message)
        self.signum = signum


class RunsFailed(TierlabError):
    """Some runs raised; the others finished (and were streamed). `failures` holds
    (job, "Type: message") pairs."""

    def __init__(self, message: str, failures: list):
        super().__init__(message)
        self.failures = failures


#: a run record's keys that a resumed sweep relies on, by kind (README, "Every run
#: record"): text, whole numbers, finite numbers >= 0, and mappings
RECORD_TEXT = ("machine", "workload", "policy", "alloc")
RECORD_COUNTS = ("seed", "promotions", "demotions", "pingpong", "migrated_bytes")
RECORD_AMOUNTS = ("scale", "sim_seconds", "work", "throughput", "monitor_cpu_seconds",
                  "wall_seconds")


def record_problem(rec) -> str | None:
    """Why a record read back from results.jsonl cannot stand for its run (a missing
    key, a value of the wrong type, a number that is not finite or is negative), or
    None when it can."""
    if not isinstance(rec, dict):
        return "not a JSON object"
    for k in RECORD_TEXT + RECORD_COUNTS + RECORD_AMOUNTS + ("tier_access_share", "series"):
        if k not in rec:
            return f"no {k!r}"
    for k in RECORD_TEXT:
        if not isinstance(rec[k], str):
            return f"{k!r} is not text"
    for k in RECORD_COUNTS:
        if isinstance(rec[k], bool) or not isinstance(rec[k], int) or rec[k] < 0:
            return f"{k!r} is not a whole number >= 0"
    for k in RECORD_AMOUNTS:
        v = rec[k]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) \
                or v < 0:
            return f"{k!r} is not a finite number >= 0"
    share = rec["tier_access_share"]
    if not isinstance(share, dict) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in share.values()):
        return "'tier_access_share' is not a mapping of finite numbers"
    if not isinstance(rec["series"], dict):
        return "'series' is not a mapping"
    return None


def describe(job) -> str:
    """A job's spec on one line, as the progress log and error reports show it."""
    return (f"{job.machine} {job.workload} {job.policy} {job.alloc} seed {job.seed}"
            f" scale {job.scale:g}" + ("" if job.migrate == "linux" else
                                       f" migrate {job.migrate}"))


def input_files(spec: str) -> list[str]:
    """The files a machine or workload spec names (the whole spec as a TOML path, or
    a `trace:PATH`/`masim:PATH` argument or parameter), as written in the spec."""
    try:
        s = Spec.parse(spec)
    except TierlabError:
        return []
    cands = [spec, *s.args, *s.params.values()]
    return list(dict.fromkeys(c for c in cands if c and os.path.isfile(c)))


def _localise(spec: str, files: dict[str, str]) -> str:
    """`spec` with each file token replaced by its copy on this worker."""
    for token, local in files.items():
        if spec == token:
            return local
        spec = re.sub(r"(?<=[:,=])" + re.escape(token) + r"(?=,|$)", lambda m: local,
                      spec)
    return spec


def _without_source(key: dict) -> str:
    """A run key without the source digest: the same run made by any code."""
    return json.dumps({k: v for k, v in key.items() if k != "source"}, sort_keys=True)


def _check_cluster(c: str) -> None:
    """A `--cluster` value is a scheduler address or local:N."""
    if c.startswith("local:"):
        n = c[len("local:"):]
        if not n.isdigit() or int(n) < 1:
            raise TierlabError(f"bad cluster {c!r}: local:N needs N >= 1 workers, e.g. "
                               f"local:4")
    elif not re.fullmatch(r"(tcp|tls|ws|wss|inproc|ucx)://\S+|[\w.-]+:\d+", c):
        raise TierlabError(f"bad cluster {c!r}: expected a scheduler address "
                           f"(tcp://host:8786) or local:N")


def _sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _run_local(job) -> tuple[dict, str]:
    """One run in a local worker process: (record, worker label)."""
    return _run_job(job), f"pid {os.getpid()}"


#: prctl(2) option: the signal a process gets when the thread that forked it ends
PR_SET_PDEATHSIG = 1


def _pool_init(parent: int | None = None) -> None:
    """Pool workers leave SIGINT to the parent (which stops them), die on SIGTERM, and
    on Linux die with the parent (PR_SET_PDEATHSIG, SIGKILL), so a sweep killed with
    SIGKILL, which runs no handler, leaves no worker behind holding its pipes. A
    worker whose parent is already gone (`parent` is no longer its parent) exits."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    if sys.platform.startswith("linux"):
        import ctypes
        try:
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL),
                                                   0, 0, 0)
        except (OSError, AttributeError):
            return
        if parent is not None and os.getppid() != parent:
            os._exit(1)


def _run_on_worker(job, inputs: dict, version: str) -> tuple[dict, str]:
    """One run as a Dask task. `inputs` maps each file token of the job's specs to
    (digest, bytes) scattered once per worker; they are written once into the worker's
    local directory and the specs point there. The record keeps the specs as given."""
    from distributed import get_worker
    from dataclasses import replace
    if version != __version__:
        raise TierlabError(f"worker has tierlab {__version__}, the sweep {version}")
    w = get_worker()
    files = {}
    for token, (digest, data) in inputs.items():
        path = Path(w.local_directory) / "tierlab-inputs" / digest / Path(token).name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}")
            tmp.write_bytes(data)
            tmp.replace(path)
        files[token] = str(path)
    local = replace(job, machine=_localise(job.machine, files),
                    workload=_localise(job.workload, files))
    rec = _run_job(local)
    rec["machine"], rec["workload"] = job.machine, job.workload
    name = str(w.name)
    return rec, name.split("://")[-1] if "://" in name else f"worker {name}"


def _version_gate(version: str):
    """A worker plugin, pickled by value (workers need not have this tierlab), that
    gives a worker the `RESOURCE` every tierlab task asks for only if it runs tierlab
    `version`: other workers take no tierlab task."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class TierlabVersionGate(WorkerPlugin):
        name = "tierlab-version-gate"

        def __init__(self, version):
            self.version = version

        async def setup(self, worker):
            import importlib
            try:  # the tierlab this worker imports (not this module's: it may have none)
                have = importlib.import_module("tierlab").__version__
            except ImportError:
                have = None
            if have == self.version:
                await worker.set_resources(**{f"tierlab-{self.version}":
                                              worker.state.nthreads})

    return TierlabVersionGate(version)


class _Board:
    """The sweep's progress bar: runs done of those submitted, running, queued, and
    finished runs per worker; without a terminal, one line per finished run."""

    def __init__(self, console):
        self.console = console
        self.total = self.done = self.running = 0
        self.announced = 0  # runs outside the sweep announced but not finished yet
        self.per_worker: Counter = Counter()
        self.progress = None
        if console is not None:
            self.progress = Progress(TextColumn("{task.description}"), BarColumn(),
                                     TextColumn("{task.fields[state]}"),
                                     TimeElapsedColumn(), TextColumn("eta"),
                                     TimeRemainingColumn(), console=console,
                                     transient=True, disable=not console.is_terminal)
            self.task = self.progress.add_task("runs", total=0, state="")

    def say(self, text: str) -> None:
        if self.console is not None:
            self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def start(self):
        if self.progress is not None:
            self.progress.start()

    def stop(self):
        if self.progress is not None:
            self.progress.stop()

    def add(self, n: int, where: str) -> None:
        """n more runs: their count first ("N runs on WHERE", "N more ..." after the
        first batch), before the first of their lines."""
        if n:
            self.say(f"{n}{' more' if self.total else ''} {where}")
        self.total += n
        self.show()

    def finished(self, job, rec, worker: str, external: bool = False) -> None:
        self.done += 1
        if external and self.announced:
            self.announced -= 1  # counted by `Sweep.expect`
        elif external:
            self.total += 1
        self.per_worker[worker] += 1
        if self.console is not None and not self.console.is_terminal:
            on = f" on {worker}" if worker else ""
            self.say(f"[{self.done}/{self.total}] {job.workload} {job.policy} "
                     f"{getattr(job, 'alloc', '')}: {rec['wall_seconds']:.1f} s{on}")
        self.show()

    def show(self, running: int | None = None) -> None:
        if running is not None:
            self.running = running
        if self.progress is None:
            return
        queued = max(self.total - self.done - self.running, 0)
        top = ", ".join(f"{w}: {n}" for w, n in self.per_worker.most_common(4) if w)
        more = len(self.per_worker) - 4
        state = (f"{self.done}/{self.total} done, {self.running} running, {queued} "
                 f"queued" + (f" | {top}" if top else "") + (f" +{more} more" if more > 0
                                                             else ""))
        self.progress.update(self.task, total=max(self.total, 1), completed=self.done,
                             state=state)


class Sweep:
    """Runs runs.Job lists on local processes or a Dask cluster, streaming finished runs
    to `out`/results.jsonl and, with `resume`, skipping those already there."""

    def __init__(self, out=None, resume: bool = False, cluster=None,
                 jobs: int | None = None, console=None, force: bool = False):
        self.out = Path(out) if out is not None else None
        if resume and self.out is None:
            raise TierlabError("resume needs the directory of the sweep to resume (out)")
        if resume and force:
            raise TierlabError("--resume continues a sweep and --force starts it over; "
                               "give one of them")
        #: start over in an `out` that already holds a sweep's runs (else refused)
        self.force = bool(force)
        if isinstance(cluster, str):
            _check_cluster(cluster)
        self.resume, self.cluster, self.console = resume, cluster, console
        self.jobs = int(jobs or os.cpu_count() or 1)
        self.board = _Board(console)
        self._lines: dict[str, str] = {}  # run key -> record as a JSON line
        self._digests: dict[tuple, str] = {}
        #: a resumed run's key without its source digest -> the digest that made it
        self._made_by: dict[str, str | None] = {}
        self._scattered: dict[str, object] = {}
        self._client = self._local_cluster = None
        self._local_pids: list[int] = []
        self._checked: set[str] = set()
        self._accepted: set[str] = set()
        self._file = None
        self._old_term = None
        self.ran = 0

    # -- set up and tear down ------------------------------------------------------
    def __enter__(self) -> "Sweep":
        try:
            if self.out is not None:
                self._open_jsonl()
            if self.cluster is not None:
                self._connect()
        except BaseException:
            self._close()
            raise
        if threading.current_thread() is threading.main_thread():
            self._old_term = signal.signal(signal.SIGTERM, self._on_term)
        self.board.start()
        self._token = _ACTIVE.set(self)
        return self

    def __exit__(self, *exc) -> None:
        _ACTIVE.reset(self._token)
        self.board.stop()
        if self._old_term is not None:
            signal.signal(signal.SIGTERM, self._old_term)
        self._close()

    def _close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        self._disconnect()

    @staticmethod
    def _on_term(signum, frame):
        raise Interrupted("terminated", signal.SIGTERM)

    def where_for(self, runs: int) -> str:
        """Where `runs` runs execute, for the start line."""
        if self._client is None:
            return f"{max(1, min(self.jobs, runs))} process(es)"
        n = len(self._accepted)
        if self._local_cluster is not None:
            return f"a local Dask cluster of {n} worker(s)"
        return f"the Dask cluster at {self._client.scheduler.address} ({n} worker(s))"

    def _open_jsonl(self) -> None:
        path = self.out / JSONL
        try:
            self._read_jsonl(path)
        except OSError as e:
            raise write_error(path, e) from None

    def _read_jsonl(self, path: Path) -> None:
        """Load the runs of a resumed sweep, then open results.jsonl for appending (or
        start it afresh)."""
        if self.resume:
            if not path.is_file():
                raise TierlabError(f"cannot resume {self.out}: no {path} (start the sweep "
                                   f"with --out {self.out})")
            text = path.read_text(errors="replace")
            bad, first = 0, None
            for line in text.splitlines():
                try:
                    rec = json.loads(line)
                    key = json.dumps(rec.pop("run_key"), sort_keys=True)
                    why = record_problem(rec)
                except (ValueError, KeyError, AttributeError, TypeError):
                    why = "not a JSON record with a run_key"
                if why is not None:
                    bad += 1
                    first = first or why
                    continue
                self._lines[key] = json.dumps(rec)
                spec = json.loads(key)
                self._made_by[_without_source(spec)] = spec.get("source")
            if bad:
                self.board.say(f"{path}: {bad} unreadable or invalid line(s) skipped, "
                               f"their runs run again (first: {first})")
            self._file = path.open("a")
            if text and not text.endswith("\n"):
                self._file.write("\n")
        else:
            if path.is_file() and path.stat().st_size and not self.force:
                n = sum(1 for line in path.read_text(errors="replace").splitlines()
                        if line.strip())
                raise TierlabError(f"{path} already holds {n} run(s) of a sweep: "
                                   f"--resume {self.out} continues it, --force starts "
                                   f"it over")
            self.out.mkdir(parents=True, exist_ok=True)
            self._file = path.open("w")

    def _connect(self) -> None:
        try:
            import distributed
        except ImportError:
            raise TierlabError("--cluster needs Dask's distributed: pip install "
                               "'tierlab[cluster]' (or distributed>=2024.1)") from None
        c = self.cluster
        if isinstance(c, distributed.Client):
            self._client = c
        elif c.startswith("local:"):
            import logging
            self._local_cluster = distributed.LocalCluster(
                n_workers=int(c[len("local:"):]), threads_per_worker=1, processes=True,
                host="127.0.0.1", dashboard_address=":0",
                scheduler_kwargs={"dashboard": False}, silence_logs=logging.ERROR)
            self._client = distributed.Client(self._local_cluster)
            self._local_pids = list(self._client.run(os.getpid).values())
        else:
            try:
                self._client = distributed.Client(c, timeout="10s")
            except (OSError, TimeoutError) as e:
                raise TierlabError(f"cannot reach the Dask scheduler at {c!r}: "
                                   f"{str(e).splitlines()[0] if str(e) else type(e).__name__}"
                                   ) from None
        self._client.register_plugin(_version_gate(__version__))
        accepted = self._check_workers()
        if self._checked and not accepted:
            raise TierlabError(f"no worker at {self._client.scheduler.address} runs "
                               f"tierlab {__version__} (see above): pip install "
                               f"tierlab=={__version__} on them")
        if not self._checked:
            self.board.say(f"waiting for workers at {self._client.scheduler.address}")

    def _check_workers(self) -> int:
        """Say, one line each, which new workers are refused (another tierlab version, or
        none); return how many workers are accepted so far."""
        def version():  # nested: pickled by value, so a worker without tierlab answers
            import importlib
            try:
                return importlib.import_module("tierlab").__version__
            except ImportError:
                return None

        workers = set(self._client.nthreads())
        new = [w for w in workers if w not in self._checked]
        if new:
            got = self._client.run(version, workers=new, on_error="return")
            for w in new:
                v = got.get(w)
                self._checked.add(w)
                if v == __version__:
                    self._accepted.add(w)
                    continue
                have = "no tierlab" if v is None or isinstance(v, BaseException) \
                    else f"tierlab {v}"
                self.board.say(f"worker {w} refused: it has {have}, this sweep runs "
                               f"tierlab {__version__}")
        return len(self._accepted & workers)

    def _disconnect(self) -> None:
        if self._client is not None and self._client is not self.cluster:
            self._client.close()
        if self._local_cluster is not None:
            self._local_cluster.close()
        self._client = self._local_cluster = None

    # -- keys and inputs ---------------------------------------------------------
    def _digest(self, path: str) -> str:
        st = os.stat(path)
        k = (os.path.abspath(path), st.st_size, st.st_mtime_ns)
        if k not in self._digests:
            self._digests[k] = _sha256(path)
        return self._digests[k]

    def _inputs(self, job) -> dict[str, str]:
        return {f: self._digest(f) for s in (job.machine, job.workload)
                for f in input_files(s)}

    def key(self, job) -> str:
        """The run's key in results.jsonl: its full spec, the digests of the files it
        reads, the tierlab version and the digest of the source that runs it, plugins
        included."""
        return json.dumps({**asdict(job), "inputs": self._inputs(job),
                           "tierlab": __version__, "source": code_digest()},
                          sort_keys=True)

    # -- running -----------------------------------------------------------------
    def run(self, todo: list, on_done=None) -> list[dict]:
        """Records of `todo` in order; runs whose key is known are not run again.
        `on_done(job, record)` is called as each new run finishes."""
        keys = [self.key(j) for j in todo]
        fresh: dict[str, int] = {}
        for i, k in enumerate(keys):
            if k not in self._lines and k not in fresh:
                fresh[k] = i
        known = len(todo) - sum(1 for k in keys if k in fresh)
        if known and self.out is not None:
            self.board.say(f"{known} of {len(todo)} runs already in {self.out / JSONL}: "
                           f"running the other {len(todo) - known}")
        stale = Counter(self._made_by[s] for s in (_without_source(json.loads(k))
                                                     for k in fresh) if s in self._made_by)
        if stale and self.out is not None:
            were = ", ".join(f"{n} by source {src}" if src else f"{n} by a tierlab without "
                             "a source digest" for src, n in stale.items())
            self.board.say(f"{sum(stale.values())} run(s) in {self.out / JSONL} were made by "
                           f"other code ({were}; now {code_digest()}): running them "
                           "again")
        self.board.add(len(fresh), f"runs on {self.where_for(len(fresh))}")
        raw: dict[str, dict] = {}
        failures: list = []
        errors: list = []

        def finished(key, rec, worker):
            job = todo[fresh[key]]
            line = json.dumps(rec)
            if self._file is not None:
                self._file.write(json.dumps({**rec, "run_key": json.loads(key)}) + "\n")
                self._file.flush()
            self._lines[key] = line
            raw[key] = rec
            self.ran += 1
            self.board.finished(job, rec, worker)
            if on_done:
                on_done(job, rec)

        def failed(key, err):
            job = todo[fresh[key]]
            msg = f"{type(err).__name__}: {err}".splitlines()[0]
            failures.append((job, msg))
            errors.append(err)
            self.board.say(f"run failed: {describe(job)}: {msg}")

        try:
            if self._client is not None:
                self._run_dask(todo, fresh, finished, failed)
            elif self.jobs <= 1 or len(fresh) <= 1:
                for k, i in fresh.items():
                    self.board.show(running=1)
                    try:
                        rec, w = _run_local(todo[i])
                    except MemoryError:
                        raise
                    except Exception as e:
                        failed(k, e)
                    else:
                        finished(k, rec, "")
            else:
                self._run_pool(todo, fresh, finished, failed)
        except KeyboardInterrupt as e:
            raise self._interrupted(e) from None
        self.board.show(running=0)
        if failures:
            job, msg = failures[0]
            head = f"run {describe(job)} failed: {msg}" if len(failures) == 1 else \
                f"{len(failures)} of {len(fresh)} runs failed (first: {describe(job)}: {msg})"
            kept = f"; the runs that finished are in {self.out / JSONL}, --resume " \
                   f"{self.out} runs the others" if self.out else ""
            raise RunsFailed(head + kept, failures) from errors[0]
        if self.out is None:
            return [raw[k] if k in raw else json.loads(self._lines[k]) for k in keys]
        return [json.loads(self._lines[k]) for k in keys]

    def _interrupted(self, e: KeyboardInterrupt) -> Interrupted:
        signum = getattr(e, "signum", signal.SIGINT)
        what = "terminated" if signum == signal.SIGTERM else "interrupted"
        if self.out is not None:
            msg = (f"{what}: workers stopped; {len(self._lines)} finished runs are kept in "
                   f"{self.out / JSONL} ({self.ran} of them new); --resume {self.out} runs "
                   f"the rest")
        else:
            msg = f"{what}: workers stopped after {self.ran} runs"
        return Interrupted(msg, signum)

    def _run_pool(self, todo, fresh, finished, failed) -> None:
        n = min(self.jobs, len(fresh))
        ex = ProcessPoolExecutor(max_workers=n, initializer=_pool_init,
                                 initargs=(os.getpid(),))
        try:
            futs = {ex.submit(_run_local, todo[i]): k for k, i in fresh.items()}
            pending = set(futs)
            while pending:
                self.board.show(running=min(n, len(pending)))
                done, pending = wait(pending, timeout=0.5, return_when=FIRST_COMPLETED)
                for f in done:
                    if f.exception() is not None:
                        failed(futs[f], f.exception())
                    else:
                        finished(futs[f], *f.result())
        except BaseException:
            _stop_pool(ex)
            raise
        ex.shutdown()

    def _run_dask(self, todo, fresh, finished, failed) -> None:
        with _DeferredSignals() as deferred:
            self._run_dask_deferred(todo, fresh, finished, failed, deferred)

    def _run_dask_deferred(self, todo, fresh, finished, failed, deferred) -> None:
        import distributed
        client = self._client
        tag = uuid.uuid4().hex[:8]
        # every input file goes to each accepted worker once, before any run starts
        files = {f: self._digest(f) for i in fresh.values() for s in
                 (todo[i].machine, todo[i].workload) for f in input_files(s)}

        def scatter(names):
            for f in names:
                if files[f] not in self._scattered:
                    live = self._accepted & set(client.nthreads())
                    self._scattered[files[f]] = client.scatter(
                        Path(f).read_bytes(), broadcast=True, hash=False,
                        workers=sorted(live) or None)

        def submit(i, n):
            job = todo[i]
            names = [f for s in (job.machine, job.workload) for f in input_files(s)]
            scatter(names)
            inputs = {f: (files[f], self._scattered[files[f]]) for f in names}
            return client.submit(_run_on_worker, job, inputs, __version__, pure=False,
                                 key=f"tierlab-run-{tag}-{n}", resources={RESOURCE: 1})

        scatter(files)
        futs = {}
        for n, (k, i) in enumerate(fresh.items()):
            futs[submit(i, n)] = (k, i)
        pending = set(futs)
        ours = {f.key for f in futs}
        resubmits = 0
        fetching: set = set()  # finished runs whose records are still on their worker
        try:
            while pending or fetching:
                deferred.check()
                done = set()
                try:
                    if pending:
                        with client.as_current():
                            done, pending = distributed.wait(pending, timeout=0.5,
                                                             return_when="FIRST_COMPLETED")
                except TimeoutError:
                    pass
                except distributed.client.FuturesCancelledError:
                    # the scheduler forgot runs whose input copy died with its worker
                    # (scattered data cannot be recomputed): scatter again, resubmit
                    lost = [f for f in pending if f.cancelled()]
                    resubmits += len(lost)
                    if not lost or resubmits > 3 * len(futs):
                        raise
                    for d in files.values():
                        self._scattered.pop(d, None)
                    for f in lost:
                        k, i = futs.pop(f)
                        new = submit(i, len(ours))
                        futs[new] = (k, i)
                        ours.add(new.key)
                        pending = (pending - {f}) | {new}
                fetching |= done
                for f in list(fetching):
                    try:
                        got = self._fetch(f)
                    except Exception as e:
                        failed(futs[f][0], e)
                    else:
                        if got is None:
                            continue
                        finished(futs[f][0], *got)
                    fetching.discard(f)
                    f.release()
                self._check_workers()
                busy = client.processing()
                self.board.show(running=sum(1 for ks in busy.values() for x in ks
                                            if x in ours))
            deferred.check()
        except BaseException:
            client.cancel(list(pending))
            for pid in self._local_pids:  # our LocalCluster's workers: stop them now
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            raise

    @staticmethod
    def _fetch(f):
        """A finished run's (record, worker), or None while the worker holding the
        record does not answer (a stopped or overloaded worker; the scheduler notices a
        dead one and runs it again): the fetch gives up after half a second, so a signal
        is seen between tries. A run that failed raises its error."""
        if f.status == "error":
            raise f.exception()
        try:
            return f.result(timeout=0.5)
        except TimeoutError:
            return None

    def expect(self, n: int, what: str) -> None:
        """Announce n runs made outside the sweep (a reproduction's telemetry runs),
        before the first: their count first, as every batch of the sweep's own."""
        self.board.add(n, f"{what} runs in this process")
        self.board.announced += n

    def report(self, job, rec) -> None:
        """Count a run finished outside the sweep (a reproduction's telemetry runs);
        runs of the sweep are counted already."""
        if not isinstance(job, Job):
            self.board.finished(job, rec, "", external=True)


class _DeferredSignals:
    """SIGINT and SIGTERM, while Dask runs, are noted and raised between client calls
    (`check`), not inside one: a KeyboardInterrupt inside `distributed.utils.sync`
    before its coroutine has started makes its `cancel` callback fail with a NameError
    that tornado prints as a traceback (distributed 2026.8). A second signal raises at
    once, so a client call that hangs can still be left. A signal that was ignored (a
    nohup'd sweep) stays ignored."""

    def __init__(self):
        self.signum = None
        self._old: dict[int, object] = {}

    def __enter__(self) -> "_DeferredSignals":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                if signal.getsignal(sig) not in (signal.SIG_IGN, None):
                    self._old[sig] = signal.signal(sig, self._note)
        return self

    def __exit__(self, *exc) -> None:
        for sig, old in self._old.items():
            signal.signal(sig, old)

    def _note(self, signum, frame) -> None:
        if self.signum is not None:
            raise Interrupted("interrupted", signum)
        self.signum = signum

    def check(self) -> None:
        if self.signum is not None:
            raise Interrupted("interrupted", self.signum)


def _feeder_error_dropped(e: BaseException, obj) -> None:
    """A queue feeder's error while a stopped pool's pipes close (`_stop_pool`)."""


def _drop_pool_thread_errors(threads: set) -> None:
    """From here on, an OSError or EOFError that ends one of `threads` (a stopped pool's
    feeder and manager threads) is dropped; any other thread's error is printed as
    before. The feeder thread, failing to send into a closed pipe, wakes the manager
    through a pipe that may close between its check and its write
    (concurrent.futures.process._SafeQueue._on_queue_feeder_error ->
    _ThreadWakeup.wakeup): that EBADF escapes the thread, and threading.excepthook
    would print it after the sweep's one-line message."""
    before = threading.excepthook

    def hook(args) -> None:
        if args.thread in threads and issubclass(args.exc_type, (OSError, EOFError)):
            return
        before(args)

    threading.excepthook = hook


def _stop_pool(ex: ProcessPoolExecutor) -> None:
    """Stop a process pool now: SIGTERM to every worker, SIGKILL to those still alive
    after a second, queued runs cancelled: an interrupt stops every worker at once.

    The pool's queue feeder thread may then still send a worker its stop sentinel into
    a pipe the pool has closed (CPython gh-94777, gh-107219) and print that error's
    traceback after the sweep's one-line message (1 of ~10 `--jobs 2` interrupts,
    tests/test_cluster.py): the sweep is ending, so such errors are dropped from here on
    (multiprocessing.queues.Queue._on_queue_feeder_error, a static method, prints them;
    an error escaping those threads is dropped too, `_drop_pool_thread_errors`)."""
    import multiprocessing.queues
    multiprocessing.queues.Queue._on_queue_feeder_error = staticmethod(_feeder_error_dropped)
    queue = getattr(ex, "_call_queue", None)
    _drop_pool_thread_errors({t for t in (getattr(queue, "_thread", None),
                                          getattr(ex, "_executor_manager_thread", None))
                              if t is not None})
    old = signal.signal(signal.SIGINT, signal.SIG_IGN) \
        if threading.current_thread() is threading.main_thread() else None
    try:
        procs = list((getattr(ex, "_processes", None) or {}).values())
        for p in procs:
            if p.is_alive():
                p.terminate()
        for p in procs:
            p.join(1.0)
            if p.is_alive():
                p.kill()
                p.join(1.0)
        ex.shutdown(wait=False, cancel_futures=True)
    finally:
        if old is not None:
            signal.signal(signal.SIGINT, old)
