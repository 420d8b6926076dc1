"""One run: machine, workload, policy and allocation specs checked and built into a
`Simulation`, run to a record (`run`); a sweep's runs as `Job`s (`jobs_for`) and one
job run in a worker (`_run_job`). `api` re-exports these with `compare`, which runs
jobs through a `sweep.Sweep`."""
from __future__ import annotations

import gc
import json
import numbers
import os
import tempfile
from pathlib import Path
from dataclasses import dataclass

from .engine import Costs, Simulation
from .errors import TierlabError, write_error
from .heap import base_pages, trim
from .machines import Machine, load_machine
from .params import parse_number
from .policies import ALLOCS, POLICIES, AllocPolicy, Policy
from .registry import Spec, load_toml
from .workloads import WORKLOADS, Workload

#: the smallest and largest --scale: below 1/65536 every workload fits in the 64-page
#: floor of a scaled tier, leaving nothing to place
MIN_SCALE, MAX_SCALE = 1 / 65536, 1024.0
#: workloads named by their file: `x.cfg` is `masim:x.cfg`, `x.pg` and `x.npz` traces
FILE_WORKLOADS = {".cfg": "masim", ".pg": "trace", ".npz": "trace"}


def check_scale(scale) -> float:
    """A miniature's scale factor, between 1/65536 and 1024."""
    x = parse_number(scale, "scale")
    if not MIN_SCALE <= x <= MAX_SCALE:
        raise TierlabError(f"bad scale {scale!r}: must be between 1/65536 and 1024 (smaller "
                           "miniatures fit every workload in a few pages: nothing to place)")
    return x


def check_seed(seed) -> int:
    """A run's random seed: a whole number from 0 to 2**63-1."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) \
            or not 0 <= seed < 2 ** 63:
        raise TierlabError(f"bad seed {seed!r}: expected a whole number from 0 to 2**63-1")
    return int(seed)


def check_list(value, what: str) -> list:
    """A non-empty list of names (a lone string is refused: it is not a list)."""
    if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
        raise TierlabError(f"bad {what} {value!r}: expected a list such as [{value!r}]")
    items = list(value)
    if not items:
        raise TierlabError(f"bad {what} []: expected at least one")
    return items


def check_unique(items, what: str) -> None:
    """Refuse a list that names one entry twice (it would run once and count twice)."""
    if isinstance(items, range):
        return
    seen = set()
    for x in items:
        key = x.strip() if isinstance(x, str) else x
        try:
            if key in seen:
                raise TierlabError(f"bad {what}: {x!r} is listed twice")
            seen.add(key)
        except TypeError:  # an unhashable entry (a Machine object): not compared
            pass


def check_baseline(baseline, policies) -> str:
    """The policy speedups are normalised to (default: the first); one of `policies`."""
    baseline = policies[0] if baseline is None else baseline
    if baseline not in policies:
        raise TierlabError(f"baseline {baseline!r} is not among --policies "
                           f"({', '.join(map(str, policies))})")
    return baseline


def _parents_are_dirs(p: Path, what: str) -> None:
    """The nearest existing parent of `p` must be a directory (not a regular file)."""
    for parent in p.parents:
        if parent.exists():
            if not parent.is_dir():
                raise TierlabError(f"bad {what} {str(p)!r}: {str(parent)!r} is a file, not "
                                   "a directory")
            return


def writable_file(path, what: str) -> Path:
    """`path` as a file that can be written, checked before any work: not a directory,
    in a directory that exists or can be made, writable. Nothing is truncated."""
    p = Path(os.fspath(path))
    if not str(path).strip():
        raise TierlabError(f"bad {what} {str(path)!r}: expected a file name")
    _parents_are_dirs(p, what)
    if p.is_dir():
        raise TierlabError(f"bad {what} {str(path)!r}: is a directory, expected a file name")
    existed = p.exists()
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "a"):
            pass
        if not existed:
            p.unlink()
    except OSError as e:
        raise TierlabError(f"bad {what} {str(path)!r}: cannot write there "
                           f"({e.strerror or e})") from None
    return p


def writable_dir(path, what: str) -> Path:
    """`path` as a directory that exists or is made now and can be written to."""
    p = Path(os.fspath(path))
    if not str(path).strip():
        raise TierlabError(f"bad {what} {str(path)!r}: expected a directory")
    _parents_are_dirs(p, what)
    if p.exists() and not p.is_dir():
        raise TierlabError(f"bad {what} {str(path)!r}: is a file, expected a directory")
    try:
        p.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=p).close()
    except OSError as e:
        raise TierlabError(f"bad {what} {str(path)!r}: cannot write there "
                           f"({e.strerror or e})") from None
    return p


def make_machine(m, scale: float = 1.0) -> Machine:
    return m if isinstance(m, Machine) else load_machine(str(m), scale)


def workload_spec(text: str) -> Spec:
    """A workload spec, or a TOML file holding one:

        workload = "gups"       # registered name
        variant = "hotset"      # optional bare word
        [params]                # optional, as on the command line
        size = "64GiB"
        hot = "4GiB"
    """
    if not text.endswith(".toml"):
        # the file is the longest leading run of parts that ends in a known suffix (a
        # path may hold ','): `x.cfg,threads=2` is masim:x.cfg with threads=2
        parts = text.split(",")
        head = next((h for h in (",".join(parts[:i]).strip()
                                 for i in range(len(parts), 0, -1))
                     if Path(h).suffix.lower() in FILE_WORKLOADS), parts[0].strip())
        kind = FILE_WORKLOADS.get(Path(head).suffix.lower())
        if kind and head.split(":", 1)[0] not in WORKLOADS.names():
            text = f"{kind}:{text.strip()}"
        return Spec.parse(text)
    d = load_toml(text, "workload")
    if "workload" not in d:
        raise TierlabError(f"workload file {text}: missing key 'workload' (a registered "
                           f"name: {', '.join(WORKLOADS.names())})")
    unknown = set(d) - {"workload", "variant", "path", "params"}
    if unknown:
        raise TierlabError(f"workload file {text}: unknown key(s) {', '.join(sorted(unknown))}"
                           "; valid: workload, variant, path, params")
    for k in ("workload", "variant", "path"):
        if k in d and not isinstance(d[k], str):
            raise TierlabError(f"workload file {text}: bad {k} {d[k]!r}: expected a string")
    if not isinstance(d.get("params", {}), dict):
        raise TierlabError(f"workload file {text}: bad params {d['params']!r}: expected a "
                           "[params] table")
    args = tuple(str(d[k]) for k in ("variant", "path") if k in d)
    params = {k.replace("-", "_"): str(v) for k, v in d.get("params", {}).items()}
    return Spec(str(d["workload"]), args, params)


def make_workload(w, scale: float = 1.0, seed: int = 0) -> Workload:
    if isinstance(w, Workload):
        return w
    wl = WORKLOADS.create(workload_spec(str(w)), scale=scale, seed=seed)
    wl.name = str(w)
    return wl


def make_policy(p) -> Policy:
    if isinstance(p, Policy):
        return p
    pol = POLICIES.create(Spec.parse(str(p)))
    pol.spec = str(p)
    return pol


def make_alloc(a) -> AllocPolicy:
    return a if isinstance(a, AllocPolicy) else ALLOCS.create(Spec.parse(str(a)))


def simulation(machine="optane-2tier", workload="gups:hotset", policy="static",
               alloc="dram-preferred", seed: int = 0, scale: float = 1.0,
               progress=None, migrate: str = "linux") -> Simulation:
    """Build a Simulation without running it (for notebooks and tests)."""
    scale, seed = check_scale(scale), check_seed(seed)
    return Simulation(make_machine(machine, scale), make_workload(workload, scale, seed),
                      make_policy(policy), make_alloc(alloc), seed=seed, progress=progress,
                      costs=Costs.for_mover(migrate), scale=scale)


def explaining_policies() -> list[str]:
    """Registered placement and allocation policies that can explain their decisions
    (an `explain_fields` attribute)."""
    return sorted(n for reg in (POLICIES, ALLOCS) for n, cls in reg.items()
                  if hasattr(cls, "explain_fields"))


def run(machine="optane-2tier", workload="gups:hotset", policy="static",
        alloc="dram-preferred", seed: int = 0, scale: float = 1.0, progress=None,
        migrate: str = "linux", explain=None) -> dict:
    """Run one simulation; returns its run record (see reports/results.py).
    `migrate`: the migration mechanism, "linux" (move_pages) or "nimble".
    `explain`: a path; the placement policy, the allocation policy or both (those that
    can) write one JSON line per decision there (what they saw, chose, were rewarded,
    and moved, with the reason; allocation lines under the key "alloc"). Its arrays
    are made without numpy's huge-page advice (`heap.base_pages`)."""
    with base_pages():
        sim = simulation(machine, workload, policy, alloc, seed, scale, progress, migrate)
        if explain is None:
            rec = sim.run()
        else:
            who = [p for p in (sim.policy, sim.alloc) if hasattr(p, "explain_fields")]
            if not who:
                raise TierlabError(f"neither policy {policy!r} nor allocation policy "
                                   f"{alloc!r} explains its decisions; valid: "
                                   f"{', '.join(explaining_policies())}")
            path = writable_file(explain, "explain file")
            f = open(path, "w")

            def write(e):
                try:
                    f.write(json.dumps(e) + "\n")
                except OSError as err:
                    raise write_error(path, err) from None
            try:
                for p in who:
                    p.explain = write
                rec = sim.run()
            finally:
                try:
                    f.close()
                except OSError as err:
                    raise write_error(path, err) from None
    rec["machine"] = str(machine) if not isinstance(machine, Machine) else machine.name
    rec["scale"] = scale
    rec["migrate"] = migrate
    return rec


#: named workload lists: `--workloads @baselines` (the baselines suite, docs/baselines.md)
SUITES = {
    "baselines": ["gups:uniform", "gups:hotset", "gups:dynamic", "graph:pr", "ycsb:a",
                  "ycsb:d", "stream", "masim:tiering"],
    "gups": ["gups:uniform", "gups:hotset", "gups:dynamic", "gups:gupspp"],
}


#: the scale a suite runs at when `--scale` is not given: the largest at which the
#: whole suite under the baselines takes minutes on two cores (docs/benchmarks.md)
SUITE_SCALE = {"baselines": 1 / 64, "gups": 1 / 8}


def suite_scale(workloads: list[str]) -> float | None:
    """The default scale of the suites named in `workloads` (the smallest), if any."""
    got = [SUITE_SCALE[w[1:]] for w in workloads if w[1:] in SUITE_SCALE and w[0] == "@"]
    return min(got) if got else None


def expand_suites(workloads: list[str]) -> list[str]:
    """Replace `@name` entries by the suite's workloads."""
    out = []
    for w in workloads:
        if w.startswith("@"):
            if w[1:] not in SUITES:
                raise TierlabError(f"unknown suite {w!r}; valid: "
                                   f"{', '.join('@' + k for k in SUITES)}")
            out.extend(SUITES[w[1:]])
        else:
            out.append(w)
    return out


@dataclass(frozen=True)
class Job:
    machine: str
    workload: str
    policy: str
    alloc: str
    seed: int
    scale: float
    migrate: str = "linux"


def _run_job(job: Job) -> dict:
    """One run of a sweep. A worker process runs many: after each, the simulation's
    reference cycles are collected and the freed heap pages given back (`heap.trim`),
    or glibc keeps them resident and a worker's RSS grows by the earlier runs' peaks
    (2.7 GiB at `reproduce idt`'s trace rows, where no single run exceeds 1.3)."""
    rec = run(job.machine, job.workload, job.policy, job.alloc, job.seed, job.scale,
              migrate=job.migrate)
    gc.collect()
    trim()
    return rec


def count_runs(machines, workloads, policies, allocs, seeds) -> int:
    """How many runs `jobs_for` would make, without making them."""
    n_seeds = seeds.stop - seeds.start if isinstance(seeds, range) else len(seeds)
    return len(machines) * len(expand_suites(workloads)) * len(policies) * len(allocs) \
        * n_seeds


def jobs_for(machines, workloads, policies, allocs=("dram-preferred",), seeds=(0,),
             scale: float = 1.0, migrate: str = "linux") -> list[Job]:
    return [Job(m, w, p, a, s, scale, migrate) for m in machines
            for w in expand_suites(workloads) for a in allocs for s in seeds for p in policies]


def validate(jobs: list[Job]) -> None:
    """Build every distinct machine/workload/policy/alloc once, so bad names fail
    before any run starts."""
    for m in {j.machine for j in jobs}:
        make_machine(m, jobs[0].scale)
    for w in {j.workload for j in jobs}:
        make_workload(w, jobs[0].scale)
    for p in {j.policy for j in jobs}:
        make_policy(p)
    for a in {j.alloc for j in jobs}:
        make_alloc(a)
    for m in {j.migrate for j in jobs}:
        Costs.for_mover(m)
