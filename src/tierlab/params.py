"""The values of `name:key=value` specs: one grammar for every machine, workload, policy,
monitor and allocation-policy parameter (docs/cli.md, "The spec grammar").

Numbers are ASCII: digits, one optional point, an optional exponent and an optional
decimal multiplier (k, M, G, T = 1e3 ... 1e12); no digit separators, no other scripts'
digits, never nan or inf. Sizes and durations have their units (units.py). A switch is
one of yes/no, on/off, true/false, y/n, 1/0. Every bad value is a TierlabError that
names the parameter, the value and what is valid.
"""
from __future__ import annotations

import math
import re

import numpy as np

from .errors import TierlabError
from .units import fmt_size, parse_size

_NUM = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKmMgGtT]?)\s*$")
_DEC = {"": 1.0, "k": 1e3, "m": 1e6, "g": 1e9, "t": 1e12}
#: the largest whole-number parameter: counts and periods stay far inside int64
MAX_INT = 1 << 53
_ON = ("1", "yes", "true", "on", "y")
_OFF = ("0", "no", "false", "off", "n")


def parse_number(value, what: str, *, lo=None, hi=None, lo_open=False, integer=False):
    """A number given as int/float or text ('16', '0.9', '1e9', '2.5G' = 2.5e9), finite,
    within [lo, hi] ((lo, hi] with lo_open); with `integer`, whole and at most 2**53."""
    if isinstance(value, bool):
        raise TierlabError(f"bad {what} {value!r}: expected a number")
    if isinstance(value, (int, float, np.integer, np.floating)):
        try:
            x = float(value)
        except OverflowError:
            x = math.inf
    else:
        m = _NUM.match(str(value))
        if not m:
            raise TierlabError(f"bad {what} {value!r}: expected " + (
                "a whole number such as 16 or 1e6" if integer else
                "a number such as 16, 0.9, 1e9 or 2G"))
        x = float(m.group(1)) * _DEC[m.group(2).lower()]
    if not math.isfinite(x):
        raise TierlabError(f"bad {what} {value!r}: must be finite")
    if integer:
        if abs(x - round(x)) > 1e-9 * max(1.0, abs(x)):
            raise TierlabError(f"bad {what} {value!r}: must be a whole number")
        if x > MAX_INT and (hi is None or hi > MAX_INT):
            raise TierlabError(f"bad {what} {value!r}: must be <= 2**53")
        x = int(round(x))
    low = lo is not None and (x < lo or (lo_open and x == lo))
    if (low or (hi is not None and x > hi)) and lo is not None and hi is not None:
        raise TierlabError(f"bad {what} {value!r}: must be in {'(' if lo_open else '['}"
                           f"{_fmt(lo)}, {_fmt(hi)}]")
    if low:
        raise TierlabError(f"bad {what} {value!r}: must be {'>' if lo_open else '>='} "
                           f"{_fmt(lo)}")
    if hi is not None and x > hi:
        raise TierlabError(f"bad {what} {value!r}: must be <= {_fmt(hi)}")
    return x


def _fmt(x) -> str:
    """A bound as a reader writes it: 0, 1024, 0.5, 1e+06."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e6 else f"{x:g}"


def parse_int(value, what: str, lo: int = 0, hi: int | None = None) -> int:
    """A whole number in [lo, hi] (hi: 2**53 when None)."""
    return parse_number(value, what, lo=lo, hi=hi, integer=True)


def parse_fraction(value, what: str, *, lo_open=False, hi_open=False) -> float:
    """A share of something: 0.125 or 12.5%, in [0, 1] (open ends as asked)."""
    s = value.strip() if isinstance(value, str) else value
    pct = isinstance(s, str) and s.endswith("%")
    x = parse_number(s[:-1] if pct else s, what) / (100 if pct else 1)
    if x < 0 or x > 1 or (lo_open and x == 0) or (hi_open and x == 1):
        rng = ("(" if lo_open else "[") + "0, 1" + (")" if hi_open else "]")
        raise TierlabError(f"bad {what} {value!r}: must be in {rng} (a fraction such as "
                           "0.1, or a percentage such as 10%)")
    return x


def parse_bytes(value, what: str, *, minimum: int = 1) -> int:
    """A size in bytes ('64GiB', '4G', 4096) that must be >= minimum."""
    n = parse_size(value, what)
    if n < minimum:
        raise TierlabError(f"bad {what} {value!r}: must be at least {fmt_size(minimum)}")
    return n


def parse_choice(value, what: str, choices) -> str:
    """One of `choices` (case-insensitive)."""
    v = str(value).strip().lower()
    if v not in choices:
        raise TierlabError(f"bad {what} {value!r}; valid: {', '.join(choices)}")
    return v


def parse_nodes(value, what: str) -> list[int]:
    """A node list: node numbers joined by '+' (0+2; ';' and blanks also separate), or
    a list of them; empty for None or ''."""
    if value is None or value == "":
        return []
    items = str(value).replace("+", " ").replace(";", " ").split() \
        if isinstance(value, str) else list(value)
    return [parse_int(x, f"{what} (node numbers joined by '+')", 0, 1023) for x in items]


def parse_flag(value, what: str) -> bool:
    """A switch: yes/no, on/off, true/false, y/n or 1/0; else a TierlabError."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    v = str(value).strip().lower()
    if v in _ON:
        return True
    if v in _OFF:
        return False
    raise TierlabError(f"bad {what} {value!r}: a switch; valid: yes, no (or on/off, "
                       "true/false, 1/0)")


def argtype(parse, what: str, **limits):
    """An argparse `type=` that parses with `parse` (one of the above) and turns its
    TierlabError into argparse's one-line usage error."""
    import argparse

    def typed(text: str):
        try:
            return parse(text, what, **limits)
        except TierlabError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
    return typed
