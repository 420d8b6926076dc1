"""The `tierlab` command (docs/cli.md).

Errors in what the user typed (unknown names, bad sizes, malformed files) print one
line naming the bad value and the valid choices, and exit with status 2.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
import time
from pathlib import Path

from rich.progress import (BarColumn, Progress, TextColumn, TimeElapsedColumn,
                           TimeRemainingColumn)

from . import api
from .console import err, out
from .errors import TierlabError, write_error
from .params import argtype, parse_number

EPILOG = """\
names take parameters:  gups:hotset,hot=4GiB,size=64GiB   masim:PATH   trace:PATH
machines can be TOML files (see docs/machines.md); `tierlab list ...` shows the names.
"""



#: `reproduce --help`: each reproduction's runs per seed at its default scale, and the
#: wall time measured with --jobs 1 on the project's 2-core box (docs/benchmarks.md,
#: "The reproductions")
REPRODUCE_RUNS = """\
runs per seed at the default scale, and typical wall time per seed (--jobs 1, 2-core
box; docs/benchmarks.md; "estimated": from IDT's 52 s per run at 1/64 with its
full-scale 1,000-10,000 regions); the default --seeds 0-2 takes three times as long:
  idt             260 runs (240 at 1/64, 20 trace runs)    71 min
  idt --sensitivity 72 runs                                  ~20 min
  hemem            60 runs at 1/256                          17 min
  telescope        15 telemetry runs up to 5 TiB, 9 tiering  2-8 min
  johnny-cache     42 runs at 1/32                           1.5 min
  allocation      120 runs (105 at 1/64, 15 trace runs)     ~30 min (estimated)
  colloid          64 runs at 1/64                           3.5 min
  beyond          810 runs (54 cells x 15 policies)          ~1.9 h

"""

#: compare refuses more runs than this without --yes
MAX_RUNS = 10_000


class _Parser(argparse.ArgumentParser):
    """Usage errors are one line and exit status 2, like every other error."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _scale(text: str) -> float:
    """0.125 or 1/8 (ASCII numbers, docs/cli.md)."""
    from .params import parse_number
    try:
        a, _, b = text.partition("/")
        v = parse_number(a, "scale") / (parse_number(b, "scale", lo=0.0, lo_open=True)
                                        if b else 1.0)
    except TierlabError:
        raise argparse.ArgumentTypeError(f"bad scale {text!r}: expected e.g. 0.125 or "
                                         "1/8") from None
    try:
        return api.check_scale(v)
    except TierlabError as e:
        raise argparse.ArgumentTypeError(str(e).replace(repr(v), repr(text), 1)) from None


def _seed(text: str) -> int:
    try:
        if not re.fullmatch(r"\s*[0-9]+\s*", text):
            raise ValueError(text)
        return api.check_seed(int(text))
    except (ValueError, TierlabError):
        raise argparse.ArgumentTypeError(f"bad seed {text!r}: expected a whole number from 0 "
                                         "to 2**63-1") from None


def _number(what: str, **limits):
    """An argparse type: a finite number within `limits` (parse_number's)."""
    return argtype(parse_number, what, **limits)


def _csv(text: str) -> list[str]:
    items = [x.strip() for x in _split_top(text) if x.strip()]
    if not items:
        raise argparse.ArgumentTypeError("empty list")
    return items


def _split_top(text: str) -> list[str]:
    """Split a list of specs on commas that start a new spec: a comma followed by a
    word without '=' before the next ',' or ':' begins a new name, and so does a known
    name followed by ':' (gups:hotset,hot=4GiB stays one spec; static,oracle is two;
    tpp:demote_scale_factor=1000,nomad:demote_scale_factor=1000 is two)."""
    parts = text.split(",")
    items: list[str] = []
    for p in parts:
        named = ":" in p and "=" not in p.split(":", 1)[0] and _looks_like_name(p)
        if items and not named and ("=" in p or (":" in items[-1]
                                                 and not _looks_like_name(p))):
            items[-1] += "," + p
        else:
            items.append(p)
    return items


def _looks_like_name(p: str) -> bool:
    from .machines import MACHINES
    from .policies import ALLOCS, POLICIES
    from .workloads import WORKLOADS
    head = p.split(":", 1)[0].strip()
    return any(head in r.names() for r in (WORKLOADS, POLICIES, ALLOCS, MACHINES)) \
        or Path(head).suffix.lower() in api.FILE_WORKLOADS


def _seeds(text: str):
    """0,1,2 or 0-4 (a range, not expanded: a count can be checked first)."""
    try:
        if "-" in text and "," not in text:
            a, b = text.split("-", 1)
            seeds = range(_seed(a.strip()), _seed(b.strip()) + 1)
        else:
            seeds = [_seed(x.strip()) for x in text.split(",")]
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"bad seeds {text!r}: expected 0,1,2 or 0-4 "
                                         "(whole numbers >= 0)") from None
    if not seeds:
        raise argparse.ArgumentTypeError(f"bad seeds {text!r}: empty range (the first seed "
                                         "is above the last)")
    return seeds


class _Version(argparse.Action):
    """--version: the source digest is computed only when asked for (it reads every
    file of the package), not at every start."""

    def __call__(self, parser, namespace, values, option_string=None):
        from .provenance import __version__, source_digest
        parser.exit(0, f"tierlab {__version__} (source {source_digest()})\n")


def _progress():
    return Progress(TextColumn("{task.description}"), BarColumn(),
                    TextColumn("{task.percentage:>3.0f}%"), TimeElapsedColumn(),
                    TextColumn("eta"), TimeRemainingColumn(), console=err,
                    transient=True, disable=not err.is_terminal)


def _log_progress(what: str, every: float = 10.0):
    """Without a terminal, a progress callback that prints one line (the share of the
    work done) after the first 2 s and then at most every `every` seconds."""
    import time
    t0 = time.monotonic()
    last = [t0 - every + 2.0]

    def tick(frac: float) -> None:
        now = time.monotonic()
        if now - last[0] >= every and frac < 1:
            last[0] = now
            err.print(f"{what}: {100 * frac:.0f}% of the work after {now - t0:.0f} s",
                      highlight=False, markup=False)
    return tick


def cmd_run(a) -> int:
    a.scale = a.scale or 1.0
    for flag in ("json", "explain"):
        if getattr(a, flag) is not None:
            api.writable_file(getattr(a, flag), f"--{flag}")
    with _progress() as prog:
        what = f"{a.policy} on {a.workload}"
        task = prog.add_task(what, total=1.0)
        log = _log_progress(what) if not err.is_terminal else (lambda f: None)

        def tick(f):
            prog.update(task, completed=f)
            log(f)
        rec = api.run(a.machine, a.workload, a.policy, a.alloc, a.seed, a.scale,
                      progress=tick, migrate=a.migrate, explain=a.explain)
    rec["speedup"] = None
    from .reports.tables import results_table
    out.print(results_table([rec], title=f"{a.machine} (scale {a.scale:g})"))
    shares = ", ".join(f"{k} {100 * v:.1f}%" for k, v in rec["tier_access_share"].items())
    out.print(f"accesses by tier: {shares}; monitor CPU {rec['monitor_cpu_seconds']:.3g} s")
    if a.explain:
        out.print(f"wrote {a.explain}")
    if a.json:
        try:
            Path(a.json).parent.mkdir(parents=True, exist_ok=True)
            Path(a.json).write_text(json.dumps([rec], indent=1))
        except OSError as e:
            raise write_error(a.json, e) from None
        out.print(f"wrote {a.json}")
    return 0


def _sweep(a):
    """The sweep of a compare or reproduce: where runs execute (--jobs, --cluster) and
    DIR/results.jsonl, continued with --resume DIR (sweep.py). Sets a.out."""
    from .sweep import Sweep
    if a.resume and a.out and Path(a.out) != Path(a.resume):
        raise TierlabError(f"--resume {a.resume} with --out {a.out}: a resumed sweep "
                           f"writes into its own directory; give one of them")
    if not (a.out or a.resume):
        raise TierlabError("--out DIR is required (or --resume DIR to continue a sweep)")
    a.out = a.resume or a.out
    cores = os.cpu_count() or 1
    if a.jobs > cores and not a.cluster:
        err.print(f"note: --jobs {a.jobs} is more than this machine's {cores} cores; at most "
                  f"{a.jobs} runs at a time share them", highlight=False)
    return Sweep(out=a.out, resume=bool(a.resume), cluster=a.cluster, jobs=a.jobs,
                 console=err, force=bool(getattr(a, "force", False)))


def cmd_compare(a) -> int:
    from .reports.report import report
    from .reports.tables import results_table, scale_text, summary_table, verdict_table
    for flag in ("workloads", "policies"):
        if not getattr(a, flag):
            raise TierlabError(f"compare needs --{flag} (or an experiment file that gives "
                               f"{flag})")
    machines = a.machine
    if a.scale is None:
        a.scale = api.suite_scale(a.workloads) or 1.0
        if a.scale != 1.0:
            err.print(f"scale {a.scale:g}: the suite's default (--scale 1 for full size)")
    for what, items in (("--machine", machines), ("--workloads", a.workloads),
                        ("--policies", a.policies), ("--allocs", a.allocs),
                        ("--seeds", a.seeds)):
        api.check_unique(items, what)
    baseline = api.check_baseline(a.baseline, a.policies)
    n = api.count_runs(machines, a.workloads, a.policies, a.allocs, a.seeds)
    if n > MAX_RUNS and not a.yes:
        raise TierlabError(f"{n:,} runs asked for (machines x workloads x policies x allocs "
                           f"x seeds); more than {MAX_RUNS:,} needs --yes")
    todo = api.jobs_for(machines, a.workloads, a.policies, a.allocs, a.seeds, a.scale,
                        a.migrate)
    api.validate(todo)
    if a.out is not None:
        api.writable_dir(a.out, "--out")
    with _sweep(a):
        recs = api.compare(machines, a.workloads, a.policies, a.allocs, a.seeds, a.scale,
                           baseline, a.jobs, migrate=a.migrate)
    got = report(recs, Path(a.out), baseline, command=_command_line(a))
    label, rows = got["baseline"], got["rows"]
    nseeds = len({r["seed"] for r in recs})
    for m in machines:
        title = f"{m}, scale {scale_text(a.scale)}, {nseeds} seed{'s' * (nseeds > 1)}"
        out.print(results_table([r for r in recs if r["machine"] == m], label,
                                title=f"{title}: every run"))
        out.print(verdict_table([r for r in rows if r["machine"] == m], label,
                                title=f"{title}: over seeds"))
    if len({r["workload"] for r in recs}) > 1:
        out.print(summary_table(recs, label))
    for line in got["notes"]:
        err.print(line, highlight=False, markup=False, soft_wrap=True)
    out.print(f"wrote {got['json']}, {got['csv']}, " + ", ".join(map(str, got["plots"])))
    out.print(f"report: {got['html']}")
    return 0


#: options an experiment file does not set: where output goes and how to start over
NOT_IN_EXPERIMENTS = ("resume", "force", "yes")


def _apply_experiment(a, argv) -> None:
    """Fill `a` from its experiment file (compare's EXPERIMENT.toml, or reproduce's
    NAME given as a .toml): each top-level key is a flag's name (`import`, `alloc` as
    spelt on the command line) with a value, a list or the flag's comma string, parsed
    as the flag parses it; a flag given on the command line wins."""
    from .registry import load_toml
    path = a.experiment if a.cmd == "compare" else a.name
    d = load_toml(path, "experiment")
    acts = {x.dest: x for x in a.parser._actions
            if x.option_strings and x.dest not in ("help",) + NOT_IN_EXPERIMENTS}
    given = {x.dest for x in acts.values() for tok in argv for o in x.option_strings
             if tok == o or tok.startswith(o + "=")}
    if a.cmd == "reproduce":
        if not isinstance(d.get("name"), str):
            raise TierlabError(f"experiment file {path}: needs name = \"idt\" (or another "
                               "reproduction)")
        a.name = d.pop("name")
    for key, v in d.items():
        dest = {"import": "imports", "alloc": "allocs"}.get(key, key.replace("-", "_"))
        act = acts.get(dest)
        if act is None:
            valid = sorted(x.option_strings[0][2:] for x in acts.values())
            raise TierlabError(f"experiment file {path}: unknown key {key!r}; valid: "
                               f"{', '.join((['name'] if a.cmd == 'reproduce' else []) + valid)}")
        if dest in given:
            continue
        try:
            if act.nargs == 0:  # a switch
                if not isinstance(v, bool):
                    raise argparse.ArgumentTypeError("expected true or false")
                val = v
            elif isinstance(v, list):
                items = [str(x).strip() for x in v]
                if act.type is _csv or act.dest == "imports":
                    if not items or not all(items):
                        raise argparse.ArgumentTypeError("empty list or item")
                    val = items
                else:
                    val = act.type(",".join(items)) if act.type else ",".join(items)
            else:
                val = act.type(str(v)) if act.type else str(v)
                val = [val] if act.dest == "imports" else val
        except (argparse.ArgumentTypeError, ValueError) as e:
            raise TierlabError(f"experiment file {path}: bad {key} {v!r}: {e}") from None
        setattr(a, dest, val)


def _command_line(a) -> str:
    """The command that made this output, as a user would type it again."""
    import shlex
    return "tierlab " + shlex.join(a.argv)


def cmd_reproduce(a) -> int:
    from .reports.reproduce import REPRODUCTION_SCALE, REPRODUCTIONS
    if a.name not in REPRODUCTIONS:
        raise TierlabError(f"unknown reproduction {a.name!r}; valid: "
                           f"{', '.join(REPRODUCTIONS)}")
    run = REPRODUCTIONS[a.name]
    wls = api.expand_suites(a.workloads)
    if a.sensitivity:
        if a.name != "idt":
            raise TierlabError(f"--sensitivity applies to idt only (the IDT paper's "
                               f"sensitivity study), not {a.name!r}")
        from .reports.repro_idt_sensitivity import reproduce_idt_sensitivity
        run = reproduce_idt_sensitivity
        # the reproduce default (@baselines): the study's four representative workloads
        wls = None if a.workloads == ["@baselines"] else wls
    if a.policies is not None:
        if a.name != "beyond":
            raise TierlabError(f"--policies applies to beyond only, not {a.name!r}")
        for p in a.policies:
            api.make_policy(p)  # a bad name fails here, before any run
    if a.out is not None:
        api.writable_dir(a.out, "--out")
    if a.name == "telescope" and getattr(a, "cluster", None):
        err.print("note: telescope's telemetry runs stay in this process; its tiering "
                  "runs go to the cluster (docs/cluster.md)")
    api.check_unique(a.seeds, "--seeds")
    t0 = time.monotonic()
    with _sweep(a) as sweep, api.default_seeds(a.seeds):
        _write_experiment(Path(a.out), a)
        scale = a.scale if a.scale is not None else REPRODUCTION_SCALE[a.name]
        extra = {"policies": a.policies} if a.name == "beyond" else {}
        path = run(Path(a.out), scale, wls, a.jobs, on_done=sweep.report, **extra)
        ran = sweep.ran
    html = _reproduction_report(Path(a.out), a)
    err.print(f"reproduce {a.name}: {ran} run(s) made in {time.monotonic() - t0:.0f} s, "
              f"{len(a.seeds)} seed(s) each", highlight=False)
    out.print(f"wrote {path} (figures and results.json beside it)")
    if html is not None:
        out.print(f"report: {html}")
    return 0


def _write_experiment(outdir: Path, a) -> Path:
    """DIR/experiment.toml: the reproduction as run, which `tierlab reproduce
    DIR/experiment.toml --out NEW` runs again (after any edit)."""
    def toml(v):
        if isinstance(v, bool):
            return "true" if v else "false"
        if isinstance(v, (list, tuple, range)):
            return "[" + ", ".join(toml(x) for x in v) + "]"
        return json.dumps(v)  # strings and numbers: TOML's basic forms
    rows = {"name": a.name, "workloads": list(a.workloads), "seeds": list(a.seeds)}
    if a.scale is not None:
        rows["scale"] = a.scale
    if a.sensitivity:
        rows["sensitivity"] = True
    if a.policies is not None:
        rows["policies"] = list(a.policies)
    if getattr(a, "imports", None):
        rows["import"] = [str(Path(x).resolve()) if x.endswith(".py") else x
                          for x in a.imports]
    outdir.mkdir(parents=True, exist_ok=True)
    path = outdir / "experiment.toml"
    path.write_text(f"# {_command_line(a)}\n" +
                    "".join(f"{k} = {toml(v)}\n" for k, v in rows.items()))
    return path


def _reproduction_report(outdir: Path, a):
    """report.html beside a reproduction's results.json: its tables over seeds and its
    figures (the Markdown report states the paper's claims)."""
    from .reports.html import write_report
    from .reports.stats import ONE_SEED_NOTE, pair_rows, spread_notes
    jp = outdir / "results.json"
    if not jp.is_file():
        return None
    recs = json.loads(jp.read_text())
    if isinstance(recs, dict):  # telescope: its tiering runs (telemetry has no runs)
        recs = recs.get("tiering")
    if not isinstance(recs, list) or not recs or not all(
            isinstance(r, dict) and "throughput" in r for r in recs):
        return None
    notes = spread_notes(pair_rows(recs))
    if len({r["seed"] for r in recs}) == 1:
        notes.append(ONE_SEED_NOTE)
    ones = {r["policy"] for r in recs if r.get("speedup") == 1.0} - {
        r["policy"] for r in recs if r.get("speedup") != 1.0}
    base = ones.pop() if len(ones) == 1 else "its baseline"
    return write_report(recs, base, outdir, sorted(outdir.glob("*.png")), notes,
                        command=_command_line(a), title=f"tierlab reproduce {a.name}")


def cmd_telemetry(a) -> int:
    from rich.table import Table
    from .reports.telemetry import (REL_HOT, run_telemetry, split_monitors,
                                    write_telemetry)
    monitors = split_monitors(a.monitors)
    api.writable_dir(a.out, "--out")
    with _progress() as prog:
        tasks = {n: prog.add_task(n, total=1.0) for n in monitors}

        def done(name, e):
            prog.update(tasks[name], completed=1.0)
            s = e["summary"]
            pr = lambda v: "-" if v is None else f"{100 * v:.0f}%"  # noqa: E731
            err.print(f"{name}: {e['sim_seconds']:.0f} simulated s in "
                      f"{e['wall_seconds']:.1f} s, last precision {pr(s['last_precision'])}"
                      f", recall {pr(s['last_recall'])}", highlight=False, markup=False)

        res = run_telemetry(a.workload, monitors, machine=a.machine, seed=a.seed,
                            window=a.window, hot_min=a.hot_min, truth=a.truth,
                            note=lambda t: err.print(t, highlight=False, markup=False),
                            progress=lambda n, f: prog.update(tasks[n], completed=f),
                            on_done=done)
    t = Table(title=f"{a.workload} on {res['machine']}: hot = nr_accesses > {a.hot_min:g} "
              f"per 200 ms, truth {a.truth}, scored every {a.window:g} s")
    for col in ("monitor", "mean precision", "mean recall", "last precision", "last recall",
                "recall >= 90% at", "monitor CPU", "wall s"):
        t.add_column(col, justify="left" if col == "monitor" else "right")
    pct = lambda v: "-" if v is None else f"{100 * v:.1f}%"  # noqa: E731
    for e in res["monitors"]:
        s = e["summary"]
        t.add_row(e["monitor"], pct(s["mean_precision"]), pct(s["mean_recall"]),
                  pct(s["last_precision"]), pct(s["last_recall"]),
                  "-" if s["recall90_at"] is None else f"{s['recall90_at']:.0f} s",
                  f"{e['monitor_cpu_seconds']:.3g} s ({100 * e['cpu_share']:.2g}%)",
                  f"{e['wall_seconds']:.1f}")
    out.print(t)
    if res["monitors"] and not any(any(e["series"]["true_hot_bytes"])
                                   for e in res["monitors"]):
        why = (f" (no page reached {REL_HOT:g}x the footprint's mean access rate)"
               if a.truth == "relative" else "")
        out.print(f"note: {a.workload} has no hot page under --truth {a.truth} in any "
                  f"window{why}: recall has nothing to find (-), and every page a monitor "
                  f"calls hot counts against its precision", highlight=False, markup=False)
    paths = write_telemetry(res, Path(a.out))
    out.print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def cmd_list(a) -> int:
    from rich.table import Table
    from .machines import MACHINES
    from .policies import ALLOCS, POLICIES
    from .workloads import WORKLOADS
    regs = {"machines": MACHINES, "workloads": WORKLOADS, "policies": POLICIES,
            "allocs": ALLOCS}
    try:
        from .monitors import MONITORS
        regs["monitors"] = MONITORS
    except ImportError:
        pass
    kinds = [a.what] if a.what else list(regs)
    for k in kinds:
        if k not in regs:
            raise TierlabError(f"unknown list {k!r}; valid: {', '.join(regs)}")
        t = Table(title=k, show_header=False, title_justify="left")
        t.add_column("name", style="bold")
        t.add_column("what")
        for name in regs[k].names():
            t.add_row(name, regs[k].describe(name))
        out.print(t)
    return 0


def cmd_nodes(a) -> int:
    from .linux import topology
    topo = topology.discover(tier_order=a.tier_order)
    if a.json:
        print(json.dumps(topo.to_dict(), indent=1))
    else:
        print(topology.format_nodes(topo))
    return 0


def _real_opts(a) -> dict:
    """The options of daemon and exec (an --out DIR is checked here, before any work)."""
    from .units import parse_duration, parse_size
    if a.out is not None:
        api.writable_dir(a.out, "--out")
    return dict(interval=parse_duration(a.interval, "--interval"),
                duration=None if a.duration is None else parse_duration(a.duration,
                                                                        "--duration"),
                tier_order=a.tier_order,
                bw_limit=None if a.bw_limit is None else parse_size(a.bw_limit,
                                                                    "--bw-limit"))


def _echo(line: str) -> None:
    print(line, flush=True)


def cmd_daemon(a) -> int:
    from .linux.daemon import run_daemon
    run_daemon(a.pid, a.policy, out=a.out, echo=_echo, **_real_opts(a))
    return 0


def cmd_exec(a) -> int:
    from .linux.daemon import run_exec
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    return run_exec(cmd, a.policy, alloc=a.alloc, out=a.out, echo=_echo, **_real_opts(a))


REAL_EPILOG = """Runs for real (root; Linux with two or more NUMA nodes). Policies whose monitors
exist on Linux run unchanged: static, damon-tiering, idt and its ablations (on the
kernel's DAMON); those built on hint faults or single-page accessed bits (autonuma,
tpp, multi-clock, ...) are the kernel's own business (numa_balancing=2) and refuse.
See docs/linux.md.
"""


def parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="tierlab", description="Tiered main memory placement: simulate, compare, "
        "run for real.", epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action=_Version, nargs=0,
                   help="show the version and the digest of the installed source")
    sub = p.add_subparsers(dest="cmd", metavar="COMMAND")

    def common(sp, multi=False):
        sp.add_argument("--machine", default=["optane-2tier"] if multi else "optane-2tier",
                        type=_csv if multi else str,
                        help="machine preset (with params) or TOML file "
                        "(default: optane-2tier)")
        sp.add_argument("--migrate", default="linux", metavar="MECH",
                        help="migration mechanism for every policy: linux (move_pages, "
                        "one copy thread; default) or nimble (parallel copy threads and "
                        "exchange migration, Nimble ASPLOS'19)")
        sp.add_argument("--scale", type=_scale, default=None,
                        help="build a miniature (e.g. 1/8): capacities, footprints, work, "
                        "bandwidths, cores and threads shrink together, latencies stay, "
                        "so per-page rates and run length match full scale "
                        "(docs/model.md; default: 1, or the suite's scale for @SUITE)")

    def plugin_option(sp):
        sp.add_argument("--import", dest="imports", action="append", default=[],
                        metavar="PLUGIN", help="a .py file or module that registers "
                        "policies, workloads, monitors or machines (repeatable); worker "
                        "processes load it too (TIERLAB_IMPORT; docs/writing-a-policy.md)")

    def sweep_options(sp):
        plugin_option(sp)
        sp.add_argument("--cluster", metavar="ADDRESS",
                        help="run each run as a task on a Dask distributed scheduler "
                        "(tcp://host:8786), or on a local one of N workers (local:N); "
                        "workers need this tierlab version (docs/cluster.md)")
        sp.add_argument("--resume", metavar="DIR",
                        help="continue the sweep written into DIR: the runs already in "
                        "DIR/results.jsonl are not run again")
        sp.add_argument("--force", action="store_true",
                        help="start over in an --out DIR that already holds a sweep's "
                        "results.jsonl (without it that is refused: --resume continues "
                        "it)")

    r = sub.add_parser("run", help="simulate one workload under one policy",
                       description="Simulate one workload on one machine under one "
                       "placement policy and allocation policy.", epilog=EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    common(r)
    plugin_option(r)
    r.add_argument("--workload", default="gups:hotset", help="workload spec "
                   "(default: gups:hotset)")
    r.add_argument("--policy", default="static", help="placement policy (default: static)")
    r.add_argument("--alloc", default="dram-preferred",
                   help="allocation policy: dram-preferred (default), dram-always, "
                   "pm-preferred, pm-always, alloc-auto")
    r.add_argument("--seed", type=_seed, default=0, help="random seed (default: 0)")
    r.add_argument("--explain", metavar="FILE", help="write the policy's decisions, one "
                   "JSON line per interval: what it saw (IDT: free memory, the age "
                   "quartiles), what it chose (action, age_thres), its reward, and the "
                   "regions it demoted and promoted with the reason; with --alloc "
                   "alloc-auto also its decisions (spill or reclaim, and why) and rewards, "
                   "under the key \"alloc\"")
    r.add_argument("--json", metavar="FILE", help="write the run record (a one-element "
                   "list, as results.json) to FILE")
    r.set_defaults(fn=cmd_run)

    c = sub.add_parser("compare", help="run policies x workloads, table + JSON/CSV + plots",
                       description="Run every combination of workloads, policies, "
                       "allocation policies and seeds; print a table of speedups over the "
                       "baseline and write results.json, results.csv and PNG plots.",
                       epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("experiment", nargs="?", metavar="EXPERIMENT.toml",
                   help="an experiment file: its top-level keys are this command's flag "
                   "names (machine, workloads, policies, allocs, seeds, scale, baseline, "
                   "jobs, ...), each a value, a list or the flag's comma string; flags "
                   "given here override it")
    common(c, multi=True)
    c.add_argument("--workloads", type=_csv,
                   help="comma-separated workload specs, or @SUITE (@baselines: gups "
                   "uniform/hotset/dynamic, graph:pr, ycsb:a, ycsb:d, stream, "
                   "masim:tiering; @gups)")
    c.add_argument("--policies", type=_csv, help="comma-separated policies")
    c.add_argument("--allocs", "--alloc", type=_csv, default=["dram-preferred"],
                   help="comma-separated allocation policies (default: dram-preferred)")
    c.add_argument("--baseline", help="policy to normalise to (default: the first)")
    c.add_argument("--seeds", type=_seeds, default=[0], help="seeds, e.g. 0,1,2 or 0-4")
    c.add_argument("--jobs", type=_number("--jobs", lo=1, integer=True),
                   default=os.cpu_count() or 1,
                   help="parallel processes (default: all cores); results do not "
                   "depend on it")
    c.add_argument("--out", help="output directory (required unless --resume)")
    c.add_argument("--yes", action="store_true",
                   help=f"run even more than {MAX_RUNS:,} runs")
    sweep_options(c)
    c.set_defaults(fn=cmd_compare, parser=c)

    rp = sub.add_parser("reproduce", help="a paper's evaluation: Markdown report, PNGs, "
                        "results.json", description="Reproduce a paper's evaluation in the "
                        "simulator and write DIR/README.md (tables with the paper's numbers "
                        "next to the simulator's), PNG figures, DIR/results.json and "
                        "DIR/report.html.",
                        epilog=REPRODUCE_RUNS + EPILOG,
                        formatter_class=argparse.RawDescriptionHelpFormatter)
    rp.add_argument("name", help="which paper: idt, hemem, telescope, johnny-cache, "
                    "allocation, colloid; or beyond (tierlab's own policy "
                    "against every other and the oracle); or the experiment.toml a "
                    "reproduction wrote beside its results (its keys: name and this "
                    "command's flag names; flags given here override it)")
    rp.add_argument("--out", help="output directory (required unless --resume)")
    rp.add_argument("--scale", type=_scale, default=None,
                    help="miniature scale (default: idt 1/64, as the @baselines suite; "
                    "hemem 1/256, a 2 GiB miniature of its 512 GiB GUPS; telescope 1, "
                    "the paper's footprints; johnny-cache 1/32; allocation 1/64; colloid "
                    "1/64)")
    rp.add_argument("--workloads", type=_csv, default=["@baselines"],
                    help="workload specs or @SUITE (default: @baselines)")
    rp.add_argument("--seeds", type=_seeds, default=range(3),
                    help="seeds of every run (default: 0-2, which gives each speedup a "
                    "95%% interval and a verdict; 0 runs a third as many)")
    rp.add_argument("--jobs", type=_number("--jobs", lo=1, integer=True),
                    default=os.cpu_count() or 1,
                    help="parallel processes (default: all cores)")
    rp.add_argument("--policies", type=_csv, default=None,
                    help="beyond only: the policies to compare (default: tierlab and "
                    "every other system; tierlab, static and oracle are always added)")
    rp.add_argument("--sensitivity", action="store_true",
                    help="idt only: the paper's sensitivity study instead of its "
                    "evaluation: sample x aggregation interval and demote_wmark x "
                    "critical_wmark grids, normalised to the default cell (default "
                    "workloads: gups:hotset, ycsb:d, masim:tiering; 72 runs)")
    sweep_options(rp)
    rp.set_defaults(fn=cmd_reproduce, parser=rp)

    te = sub.add_parser("telemetry", help="precision and recall of monitors' hot sets "
                        "over time (Telescope, ATC'24)",
                        description="Run each monitor alone on the workload (policy static, "
                        "nothing migrates) and score its hot set every window against the "
                        "workload's true hot set: precision, recall and monitor CPU over "
                        "time. Writes DIR/telemetry.json, DIR/telemetry.csv and "
                        "DIR/telemetry.png. A region is hot when its nr_accesses (accessed "
                        "5 ms samples per 200 ms aggregation) exceed --hot-min on average "
                        "over the window; the true hot set is the workload's (--truth "
                        "relative: pages with at least 2x the footprint's mean access "
                        "rate) or what a per-page check would see (--truth sampled); "
                        "definitions in reports/telemetry.py.",
                        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    te.add_argument("--workload", required=True,
                    help="workload spec, e.g. masim:telescope-5t")
    te.add_argument("--monitors", default="damon,pebs,telescope-bounded,telescope-flex",
                    help="comma-separated monitor specs (default: damon, pebs, "
                    "telescope-bounded, telescope-flex; `tierlab list monitors`); DAMON "
                    "and Telescope run at 5 ms / 200 ms unless aggr= is given")
    te.add_argument("--machine", default=None,
                    help="machine preset or TOML file (default: optane-2tier with DRAM "
                    "holding the whole footprint)")
    te.add_argument("--seed", type=_seed, default=0, help="random seed (default: 0)")
    te.add_argument("--window", type=_number("--window", lo=0.01, hi=1e6), default=1.0,
                    help="seconds per precision/recall point (default: 1)")
    te.add_argument("--hot-min", type=_number("--hot-min", lo=0.0), default=5.0,
                    help="hot: more than this many accessed 5 ms samples per 200 ms "
                    "aggregation, averaged over the window (default: 5, ATC'24)")
    te.add_argument("--truth", default="relative", choices=["relative", "sampled"],
                    help="the true hot set: relative = pages with >= 2x the footprint's "
                    "mean access rate (default; the workload's hot set), sampled = pages "
                    "a 5 ms check of their own bit finds hot by the --hot-min rule")
    te.add_argument("--out", required=True, help="output directory")
    te.set_defaults(fn=cmd_telemetry)

    def real(sp):
        sp.add_argument("--policy", default="damon-tiering",
                        help="placement policy (default: damon-tiering)")
        sp.add_argument("--interval", default="1s",
                        help="how often to print what moved (default: 1s)")
        sp.add_argument("--duration", default=None,
                        help="stop after this long (default: until the target exits)")
        sp.add_argument("--tier-order", default=None, metavar="NODES",
                        help="override the kernel's tiers: node ids fastest first, "
                        "e.g. 0,2,1,3")
        sp.add_argument("--bw-limit", default=None, metavar="BYTES_PER_S",
                        help="migration bandwidth limit, e.g. 1GiB (default: none)")
        sp.add_argument("--out", default=None, help="write DIR/results.json")

    d = sub.add_parser("daemon", help="manage a running process with a policy, for real",
                       description="Attach to process PID and run a placement policy on "
                       "it: DAMON through sysfs, move_pages(2) for migration.",
                       epilog=REAL_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    d.add_argument("--pid", type=_number("--pid", lo=1, integer=True), required=True, help="process to manage")
    real(d)
    d.set_defaults(fn=cmd_daemon)

    e = sub.add_parser("exec", help="start a command under an allocation policy and a "
                       "placement policy, for real",
                       description="Start CMD with the allocation policy set before exec "
                       "(set_mempolicy(2), inherited from its first allocation), manage "
                       "it with the placement policy until it exits, and return its exit "
                       "status.", epilog=REAL_EPILOG,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    real(e)
    e.add_argument("--alloc", default="dram-preferred",
                   help="allocation policy: dram-preferred (default), dram-always, "
                   "pm-preferred, pm-always")
    e.add_argument("command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS",
                   help="the command to run")
    e.set_defaults(fn=cmd_exec)

    from .tracing import add_parser as add_trace_parser
    add_trace_parser(sub)

    no = sub.add_parser("nodes", help="this machine's NUMA nodes and tiers as tierlab "
                        "sees them", description="Nodes, CPUs, capacity, free memory, "
                        "distances, memory tiers and HMAT attributes of this machine.")
    no.add_argument("--json", action="store_true", help="print JSON")
    no.add_argument("--tier-order", default=None, metavar="NODES",
                    help="override the tier order, e.g. 0,2,1,3")
    no.set_defaults(fn=cmd_nodes)

    li = sub.add_parser("list", help="list machines, workloads, policies, allocs, monitors")
    li.add_argument("what", nargs="?", help="machines|workloads|policies|allocs|monitors")
    plugin_option(li)
    li.set_defaults(fn=cmd_list)
    return p


def main(argv=None) -> int:
    p = parser()
    argv = sys.argv[1:] if argv is None else [str(x) for x in argv]
    a = p.parse_args(argv)
    a.argv = argv
    if not a.cmd:
        p.print_help()
        return 2
    if sys.stdout is None:  # started with its standard output closed (`>&-`)
        print("tierlab: error: standard output is closed", file=sys.stderr)
        return 2
    try:
        if getattr(a, "experiment", None) or str(getattr(a, "name", "")).endswith(".toml"):
            _apply_experiment(a, argv)
        if getattr(a, "imports", None):
            from .plugins import add
            add(a.imports)
        return a.fn(a)
    except TierlabError as e:
        print(f"tierlab: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as e:
        print("tierlab: " + (str(e) or "interrupted"), file=sys.stderr)
        return 128 + getattr(e, "signum", 2)
    except BrokenPipeError:  # `tierlab ... | head`: the reader left
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as e:  # a full disk, a file or directory that cannot be written
        where = e.filename if e.filename is not None else "the output"
        print(f"tierlab: error: cannot write {where}: {e.strerror or e}", file=sys.stderr)
        with contextlib.suppress(OSError, ValueError):  # nothing more to flush there
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 2


if __name__ == "__main__":
    sys.exit(main())
