"""docs/writing-a-policy.md's interface table against the code: every member a policy
may use (`PolicyView.FORWARDED`) is in the table, and every call the table writes out
has the code's parameters in order, with the code's defaults (a call may leave out
trailing parameters that have defaults, or end in '...')."""
import ast
import inspect
import re
from pathlib import Path

from tierlab.engine.engine import Simulation
from tierlab.engine.lru import LRU
from tierlab.engine.memory import Memory
from tierlab.interface import PolicyView
from tierlab.monitors.primitives import AccessedBits

DOC = Path(__file__).resolve().parents[1] / "docs" / "writing-a-policy.md"
OWNERS = {"mem": Memory, "lru": LRU, "bits": AccessedBits}


def members() -> list[str]:
    """The backticked names in the first column of the interface table."""
    table = DOC.read_text().split("## The backend interface", 1)[1]
    out = []
    for row in table.splitlines():
        if row.startswith("| `"):
            out += re.findall(r"`([^`]+)`", row[1:].split(" | ", 1)[0])
    return out


def split_args(text: str) -> list[str]:
    """The parameters of a written-out call, split on top-level commas."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        depth += ch in "([{" and 1 or (-1 if ch in ")]}" else 0)
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [p for p in parts + [cur.strip()] if p]


def test_every_member_a_policy_may_use_is_in_the_table():
    documented = {re.split(r"[.(]", m)[0] for m in members()}
    assert PolicyView.FORWARDED - documented == set()


def test_the_tables_calls_are_the_codes():
    calls = [m for m in members() if re.fullmatch(r"[\w.]+\(.*\)", m)]
    assert len(calls) >= 15
    for call in calls:
        name, args = re.fullmatch(r"([\w.]+)\((.*)\)", call).groups()
        owner, _, attr = name.rpartition(".")
        fn = getattr(OWNERS.get(owner, Simulation), attr)
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        written = split_args(args)
        more = written[-1:] == ["..."]
        written = written[:-1] if more else written
        assert len(written) <= len(params), call
        for w, p in zip(written, params):
            wname, eq, default = w.partition("=")
            assert wname == p.name, f"{call}: {wname!r} where the code has {p.name!r}"
            if eq:
                assert ast.literal_eval(default) == p.default, f"{call}: {w}"
        rest = params[len(written):]
        assert more or all(p.default is not inspect.Parameter.empty for p in rest), \
            f"{call}: leaves out {[p.name for p in rest]}"
