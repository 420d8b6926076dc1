"""Sizes, durations and the base page size."""
from __future__ import annotations

import numbers
import re

from .errors import TierlabError

PAGE = 4096  #: base page size in bytes (4 KiB); all placement is tracked at this size
HUGE = 2 << 20  #: 2 MiB huge page
CACHELINE = 64  #: bytes moved per memory access

_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][0-9]+)?)\s*([kKmMgGtTpP]?)(i?)([bB]?)\s*$")
_MULT = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40, "p": 1 << 50}
MAX_SIZE = 1 << 60  #: 1 EiB: the largest size or bandwidth tierlab accepts
MAX_DURATION = 1e9  #: seconds (31 years): the longest duration; in ns it fits int64


def parse_size(text, what: str = "size") -> int:
    """Parse '64GiB', '4G', '512MB', '4096' into bytes (binary multiples, as numactl does)."""
    if isinstance(text, numbers.Real) and not isinstance(text, bool):
        if not text >= 0:
            raise TierlabError(f"bad {what} {text!r}: must be >= 0")
        value = text
    else:
        m = _SIZE.match(str(text))
        if not m:
            raise TierlabError(f"bad {what} {text!r}: expected a size such as 4GiB, 512MiB "
                               "or 4096")
        if m.group(4) == "b":
            raise TierlabError(f"bad {what} {text!r}: 'b' is bits; write bytes, such as "
                               f"{m.group(1)}{m.group(2).upper()}iB")
        value = float(m.group(1)) * _MULT[m.group(2).lower()]
    if value > MAX_SIZE:
        raise TierlabError(f"bad {what} {text!r}: must be at most 1EiB")
    return int(value)


def parse_duration(text, what: str = "duration") -> float:
    """Parse '10ms', '1s', '2.5min', '150' (seconds) into seconds (finite, >= 0)."""
    if isinstance(text, numbers.Real) and not isinstance(text, bool):
        value = float(text)
    else:
        m = re.match(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ns|us|ms|s|min|h)?\s*$",
                     str(text))
        if not m:
            raise TierlabError(f"bad {what} {text!r}: expected a duration such as 10ms, 1s "
                               "or 2min")
        mult = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, None: 1.0, "min": 60.0,
                "h": 3600.0}
        value = float(m.group(1)) * mult[m.group(2)]
    if not 0 <= value <= MAX_DURATION:
        raise TierlabError(f"bad {what} {text!r}: must be a duration from 0 to 1e9 s "
                           "(31 years)")
    return value


def fmt_size(nbytes: float) -> str:
    """Human-readable binary size."""
    for unit, mult in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= mult:
            return f"{nbytes / mult:.4g}{unit}"
    return f"{int(nbytes)}B"


def pages(nbytes: int) -> int:
    """Whole 4 KiB pages covering nbytes."""
    return -(-int(nbytes) // PAGE)
