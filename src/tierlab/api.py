"""The Python API: the CLI's verbs as functions (README.md, "What is there").

    import tierlab
    rec = tierlab.run(machine="optane-2tier", workload="gups:hotset", policy="oracle")
    recs = tierlab.compare(machines=["optane-2tier"], workloads=["gups:uniform"],
                           policies=["static", "oracle"], baseline="static")

One run and its specs are `runs`' (re-exported here); `compare` runs many through a
`sweep.Sweep`.
"""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar

from .params import parse_number
from .reports.report import report
from .reports.results import add_speedups
from .runs import (check_baseline, check_list, check_scale, check_seed, check_unique,
                   count_runs, expand_suites, explaining_policies, FILE_WORKLOADS, Job,
                   jobs_for, make_alloc, make_machine, make_policy, make_workload,
                   MAX_SCALE, MIN_SCALE, run, simulation, SUITE_SCALE, suite_scale, SUITES,
                   validate, workload_spec, writable_dir, writable_file)
from .sweep import Sweep, active

__all__ = ["compare", "default_seeds", "MIN_SCALE", "MAX_SCALE", "FILE_WORKLOADS",
           "check_scale", "check_seed", "check_list", "check_unique", "check_baseline",
           "writable_file", "writable_dir", "make_machine", "workload_spec",
           "make_workload", "make_policy", "make_alloc", "simulation",
           "explaining_policies", "run", "SUITES", "SUITE_SCALE", "suite_scale",
           "expand_suites", "Job", "count_runs", "jobs_for", "validate"]


#: the seeds of a compare call that names none (`default_seeds`; reproduce --seeds)
_SEEDS: ContextVar[tuple] = ContextVar("tierlab_default_seeds", default=(0,))


@contextmanager
def default_seeds(seeds):
    """Inside the block, `compare` calls that name no seeds run these (a reproduction's
    several comparisons all run `reproduce --seeds`)."""
    token = _SEEDS.set(tuple(check_seed(s) for s in check_list(seeds, "seeds")))
    try:
        yield
    finally:
        _SEEDS.reset(token)


def compare(machines, workloads, policies, allocs=("dram-preferred",), seeds=None,
            scale: float = 1.0, baseline: str | None = None, jobs: int | None = None,
            on_done=None, migrate: str = "linux", cluster=None, out=None,
            resume: bool = False, force: bool = False) -> list[dict]:
    """Run every combination; results are in a fixed order and do not depend on `jobs`
    or `cluster` (each run is seeded on its own). `on_done(job, record)` is called as
    runs finish. `cluster`: a Dask scheduler address, "local:N" or a distributed.Client
    (docs/cluster.md); `out`: a directory where each finished run is appended to
    results.jsonl; `resume`: skip the runs already there; `force`: start over in an
    `out` that already holds a sweep (refused otherwise). Inside
    `with tierlab.sweep.Sweep(...)`, without these, runs go through that sweep
    (sweep.py). `seeds` None: (0,), or those of the enclosing `default_seeds` block."""
    seeds = _SEEDS.get() if seeds is None else seeds
    machines, workloads, policies, allocs, seeds = (
        check_list(v, k) for v, k in ((machines, "machines"), (workloads, "workloads"),
                                      (policies, "policies"), (allocs, "allocs"),
                                      (seeds, "seeds")))
    for v, k in ((machines, "machines"), (workloads, "workloads"), (policies, "policies"),
                 (allocs, "allocs"), (seeds, "seeds")):
        check_unique(v, k)
    seeds, scale = [check_seed(s) for s in seeds], check_scale(scale)
    baseline = check_baseline(baseline, policies)
    if jobs is not None:
        jobs = parse_number(jobs, "jobs", lo=1, integer=True)
    todo = jobs_for(machines, workloads, policies, allocs, seeds, scale, migrate)
    validate(todo)
    sweep = active()
    if sweep is None or cluster is not None or out is not None or resume:
        with Sweep(out=out, resume=resume, cluster=cluster, jobs=jobs,
                   force=force) as sweep:
            results = sweep.run(todo, on_done)
    else:
        results = sweep.run(todo, on_done)
    add_speedups(results, baseline, alloc=allocs[0])
    if out is not None:
        report(results, out, baseline, command="tierlab.compare(...)")
    return results
