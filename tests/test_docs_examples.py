"""The console examples of README.md and docs/*.md (the `tierlab` and `make` lines of
their sh and console blocks) run as written, at their own scale, from a fresh process:
each either runs here, its error line as the doc prints it, or is listed in
NOT_RUNNABLE with why. A new example must be one or the other. The commands quoted
inline in prose (`tierlab ...` in backticks) are references, not runs: each must name a
verb, flags, values and names today's CLI has."""
import argparse
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tierlab import api, cli
from tierlab.errors import TierlabError

ROOT = Path(__file__).resolve().parents[1]
#: (file, the example's first words) -> why it does not run in make test
NOT_RUNNABLE = {
    ("README.md", "make demo"): "the demo itself: 30 runs, about 80 s "
                                "(benchmarks/bench_demo.py times it)",
    ("README.md", "make test"): "the test suite itself",
    ("README.md", "tierlab compare --machine optane-4tier --scale 1/64"):
        "39 runs, IDT's with its full-scale regions: minutes; the tour's table is its "
        "output",
    ("docs/baselines.md", "tierlab compare --machine optane-4tier --workloads @baselines"):
        "64 runs over the @baselines suite: minutes (docs/benchmarks.md, 'The baselines "
        "suite')",
    ("docs/cluster.md", "tierlab compare"): "a sweep interrupted with ^C and resumed: "
                                            "tests/test_cluster.py interrupts and resumes one",
    ("docs/nomad.md", "tierlab compare"): "24 runs of YCSB up to 28 M records: minutes; "
                                          "docs/nomad-compare holds its output",
}


def examples() -> list:
    """(file, command, the lines the doc prints after it) of every example."""
    out = []
    for f in [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md")):
        for block in re.findall(r"```(?:sh|bash|console|shell)\n(.*?)```", f.read_text(),
                                re.S):
            lines = block.replace("\\\n", " ").splitlines()
            for i, line in enumerate(lines):
                cmd = " ".join(line.strip().removeprefix("$ ").split())
                if cmd.startswith(("tierlab ", "make ")):
                    shown = []
                    for nxt in lines[i + 1:]:
                        if nxt.startswith("$ ") or nxt.strip().startswith("tierlab "):
                            break
                        shown.append(nxt)
                    out.append((str(f.relative_to(ROOT)), cmd.split(" #")[0], shown))
    return out


def skipped(doc: str, cmd: str):
    return next((why for (d, head), why in NOT_RUNNABLE.items()
                 if d == doc and cmd.startswith(head)), None)


RUNNABLE = [e for e in examples() if skipped(e[0], e[1]) is None]


def test_every_example_runs_or_says_why_not():
    found = examples()
    assert len(found) >= 14
    assert len(RUNNABLE) >= 5
    for (doc, head) in NOT_RUNNABLE:  # every exemption still names an example
        assert any(d == doc and c.startswith(head) for d, c, _ in found), (doc, head)


@pytest.mark.parametrize("doc,cmd,shown", RUNNABLE, ids=[f"{d}: {c[:60]}" for d, c, _
                                                          in RUNNABLE])
def test_the_example_runs_as_the_doc_shows(tmp_path, doc, cmd, shown):
    args = shlex.split(cmd)[1:]
    # paths of the repository (examples/...) stay its; DIR and outputs go to tmp_path
    args = [str(ROOT / a) if (ROOT / a).exists() and "/" in a else
            ("out-dir" if a == "DIR" else a) for a in args]
    r = subprocess.run([sys.executable, "-m", "tierlab", *args], cwd=tmp_path,
                       capture_output=True, text=True)
    errors = [x for x in shown if x.startswith("tierlab: error:")]
    if errors:  # an example of a refusal: the doc's line, exit status 2
        assert r.returncode == 2 and r.stderr.strip().splitlines() == errors, r.stderr
    else:
        assert r.returncode == 0, r.stderr[-2000:]


#: placeholders of inline commands -> a value of their kind
PLACEHOLDERS = {"DIR": "out-dir", "NEW": "new-dir", "F": "trace.pg", "FILE": "trace.pg",
                "N": "4", "S": "1/8", "M": "optane-4tier", "ADDRESS": "local:2",
                "NAME": "idt", "CMD": "true", "ARGS": "-v", "F.pg": "trace.pg"}


def _subparsers(p) -> dict:
    """{verb: its parser} of an argparse parser's sub-commands."""
    acts = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(acts[0].choices) if acts else {}


def inline_commands() -> list:
    """(file, words after `tierlab`) of every backticked `tierlab ...` in the prose of
    README.md and docs/*.md: one entry per alternative of an `a|b` or `a/b` word (and
    per verb for `VERB`), with `...` and the brackets of optional parts dropped."""
    verbs = "|".join(sorted(_subparsers(cli.parser())))
    out = []
    for f in [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md")):
        text = re.sub(r"```.*?```", "", f.read_text(), flags=re.S)
        for cmd in dict.fromkeys(re.findall(r"`tierlab ([^`]*)`", text)):
            cmd = re.sub(r"\|\s+", "|", cmd.replace("...", " ").replace("VERB", verbs))
            cmd = re.sub(r"\$\([^)]*\)", "ADDRESS", cmd)  # a shell substitution
            words = [PLACEHOLDERS.get(w, w) for w in
                     cmd.replace("[", " ").replace("]", " ").split()]
            todo = [[]]
            for w in words:  # alternatives of verbs and actions, not of values
                alts = re.split(r"[|/]", w) if not w.startswith("-") and (
                    "|" in w or len(todo[0]) < 2 and "/" in w and "." not in w) else [w]
                todo = [t + [a] for t in todo for a in alts]
            out += [(str(f.relative_to(ROOT)), t) for t in todo]
    return out


INLINE = inline_commands()


def test_inline_commands_found():
    assert len(INLINE) >= 40
    assert ["reproduce", "idt", "--out", "out-dir"] in [w for _, w in INLINE]


def _flag_values(words: list) -> list:
    """(flag, value or None) of the options before a `--`."""
    words = words[:words.index("--")] if "--" in words else words
    return [(w, words[i + 1] if i + 1 < len(words) and not words[i + 1].startswith("-")
             else None) for i, w in enumerate(words) if w.startswith("-")]


@pytest.mark.parametrize("doc,words", INLINE, ids=[f"{d}: {' '.join(w)[:60]}"
                                                   for d, w in INLINE])
def test_inline_command_names_what_exists(doc, words):
    """Each command of the prose names a verb and flags today's CLI has, values its
    flags accept, and registered policies, machines, workloads and reproductions. A
    command in prose may leave out required arguments (it is a reference, not a run)."""
    p = cli.parser()
    sp, rest = p, list(words)
    while rest and not rest[0].startswith("-") and _subparsers(sp):
        assert rest[0] in _subparsers(sp), f"no {rest[0]!r}: {sorted(_subparsers(sp))}"
        sp, rest = _subparsers(sp)[rest.pop(0)], rest
    holders = [sp] if sp is not p or not rest or rest[0] in p._option_string_actions else [
        v for v in _subparsers(p).values() if rest[0] in v._option_string_actions]
    assert holders, f"no verb takes {rest[0]!r}"
    for flag, value in _flag_values(rest):
        for h in holders:
            act = h._option_string_actions.get(flag)
            assert act is not None, f"{flag!r} is not a flag of {h.prog!r}"
            if value is None or act.nargs == 0 or "$" in value:
                continue
            v = act.type(value) if callable(act.type) else value
            assert act.choices is None or v in act.choices, (flag, v, act.choices)
            names = [v] if isinstance(v, str) else v
            if re.search(r"\b[A-Z]\b", value):
                continue  # a placeholder inside a spec (trace:T,copies=K)
            if flag == "--workloads":
                for w in api.expand_suites(names):
                    api.make_workload(w, scale=1 / 1024)
            elif flag == "--machine":
                for m in names:
                    api.make_machine(m)
            elif flag in ("--policy", "--policies"):
                for q in names:
                    api.make_policy(q)
    if words[0] == "reproduce" and len(words) > 1 and not words[1].startswith("-") \
            and not words[1].endswith(".toml"):
        from tierlab.reports.reproduce import REPRODUCTIONS
        assert words[1] in REPRODUCTIONS, (words[1], sorted(REPRODUCTIONS))


@pytest.mark.parametrize("words", [["compare", "--no-such-flag"], ["frobnicate"],
                                   ["run", "--policy", "no-such-policy"],
                                   ["reproduce", "no-such-paper"],
                                   ["compare", "--workloads", "@no-suite"],
                                   ["trace", "record", "--window", "x"]])
def test_the_inline_check_refuses_what_does_not_exist(words):
    with pytest.raises((AssertionError, TierlabError, argparse.ArgumentTypeError,
                        ValueError)):
        test_inline_command_names_what_exists("doc", words)
