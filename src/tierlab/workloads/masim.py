"""masim: phases of synthetic access patterns read from an sjp38/masim config file.

``masim:PATH`` reads masim's own config format unchanged:

- paragraphs are separated by blank lines; lines starting with ``#`` are comments;
- the first paragraph lists the regions, one per line: ``name, size_bytes[, init_file]``
  (``init_file`` = ``none`` or absent: no data loaded at start);
- every later paragraph is a phase: line 1 its name, line 2 its duration in ms, then one
  access-pattern line per pattern:
  ``region, random, stride_bytes, probability[, ro|wo|rw]`` where ``random`` is 1
  (random) or 0 (sequential) and probabilities are relative weights within the phase.

Example (two 100 MB regions, accessed in turn)::

    # regions
    a, 104857600
    b, 104857600

    low
    5000
    a, 0, 4096, 1

    high
    5000
    b, 1, 64, 1, rw

Model. Regions are laid out contiguously, page aligned, in file order. A pattern's share
of a phase's accesses is spread uniformly over its region: random and sequential
patterns give the same long-run per-page rate (within one monitoring interval a real
sequential sweep touches only a window of the region; this model does not show that).
A sequential stride below 64 B re-reads the same cache line, so such a pattern costs
stride/64 memory accesses per masim access. The read/write mode defaults to ``wo``,
masim's own default (``default_rw_mode = WRITE_ONLY``); ``ro`` = 1 read, ``wo`` =
1 write, ``rw`` = 1 read + 1 write per masim access.

Work unit: masim accesses (one iteration of masim's access loop). masim is time driven;
tierlab runs closed loop, so a phase of T ms becomes T/1000 x ``aps`` accesses, where
``aps`` (default 1e8) is the access rate at which the config's times hold. The defaults
(1 thread, 2 ns compute per access, memory-level parallelism 10 for masim's independent
batched accesses) give ~1e8 accesses/s with every page in DRAM, so the config's phase
durations are roughly the simulated ones. ``scale`` multiplies region sizes and work.

Allocation: a region is first touched by the first phase that accesses it (masim
mallocs regions up front but touches them only when accessing them), regions in file
order; regions with an init file are touched at start. Only segments per region and
pattern are built, so 5 TiB regions cost nothing more than small ones.

Malformed files (missing file, missing fields, unknown region, bad numbers, no phases)
give a TierlabError naming the file and line.
"""
from __future__ import annotations

from dataclasses import dataclass, field as dfield
from pathlib import Path

import numpy as np

from ..errors import TierlabError
from ..field import RateField
from ..params import parse_int, parse_number
from ..units import PAGE, fmt_size, parse_size
from .base import WORKLOADS, Change, Workload
from ._common import common_params, parse_scale

RW_MODES = ("ro", "wo", "rw")
DEFAULT_RW = "wo"  # masim.c: default_rw_mode = WRITE_ONLY
#: the longest phase (about a day): longer ones would simulate for hours
MAX_PHASE_MS = 1e8


@dataclass
class Region:
    name: str
    size: int  # bytes, as in the file
    init_file: str | None
    line: int


@dataclass
class Pattern:
    region: int  # index into regions
    random: bool
    stride: int
    probability: float
    rw: str
    line: int


@dataclass
class Phase:
    name: str
    time_ms: float
    patterns: list = dfield(default_factory=list)
    line: int = 0


@dataclass
class MasimConfig:
    path: str
    regions: list
    phases: list


def _paragraphs(text: str):
    """[(first_line_no, [(line_no, line), ...]), ...] without comments and blank lines."""
    paras, cur = [], []
    for no, raw in enumerate(text.splitlines(), start=1):
        line = raw.rstrip("\r\n")
        if line.lstrip().startswith("#"):
            continue
        if not line.strip():
            if cur:
                paras.append(cur)
                cur = []
            continue
        cur.append((no, line.strip()))
    if cur:
        paras.append(cur)
    return paras


BUNDLED = Path(__file__).resolve().parents[1] / "data" / "masim"


def resolve(path) -> Path:
    """A config path, or the name of a bundled config (`masim:zigzag` ->
    tierlab/data/masim/zigzag.cfg) when no such file exists."""
    p = Path(path)
    if not p.exists():
        for cand in (BUNDLED / p.name, BUNDLED / f"{p.name}.cfg"):
            if "/" not in str(path) and cand.exists():
                return cand
    return p


def bundled() -> list[str]:
    return sorted(c.stem for c in BUNDLED.glob("*.cfg"))


def parse_config(path) -> MasimConfig:
    """Parse a masim config file; TierlabError naming file and line on any problem."""
    p = resolve(path)
    try:
        text = p.read_text()
    except FileNotFoundError:
        raise TierlabError(f"masim config {str(path)!r}: file not found (bundled configs: "
                           f"{', '.join(bundled())})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TierlabError(f"masim config {str(path)!r}: cannot read: {e}") from None

    def err(no, msg):
        return TierlabError(f"{path}:{no}: {msg}")

    paras = _paragraphs(text)
    if not paras:
        raise TierlabError(f"masim config {str(path)!r}: empty (expected a regions paragraph "
                           f"and at least one phase)")
    regions, names = [], {}
    for no, line in paras[0]:
        f = [x.strip() for x in line.split(",")]
        if len(f) not in (2, 3):
            raise err(no, f"region line needs 'name, size_bytes[, init_file]', got {line!r}")
        name, size = f[0], f[1]
        if not name:
            raise err(no, "empty region name")
        if not name.isprintable():
            raise err(no, f"region name {name!r} holds a control character")
        if name in names:
            raise err(no, f"region {name!r} defined twice")
        try:
            nbytes = parse_size(size, "region size")
        except TierlabError:
            raise err(no, f"bad size {size!r} for region {name!r}: expected bytes") from None
        if nbytes <= 0:
            raise err(no, f"bad size {size!r} for region {name!r}: must be > 0")
        init = f[2] if len(f) == 3 and f[2] and f[2].lower() != "none" else None
        names[name] = len(regions)
        regions.append(Region(name, nbytes, init, no))
    if len(paras) < 2:
        raise TierlabError(f"masim config {str(path)!r}: no phases (expected paragraphs "
                           f"'name / duration_ms / region, random, stride, probability')")
    phases = []
    for para in paras[1:]:
        no0, pname = para[0]
        if len(para) < 2:
            raise err(no0, f"phase {pname!r} has no duration line")
        if not pname.isprintable():
            raise err(no0, f"phase name {pname!r} holds a control character")
        no1, dur = para[1]
        try:
            ms = parse_number(dur, "duration", lo=0.0, lo_open=True, hi=MAX_PHASE_MS)
        except TierlabError:
            raise err(no1, f"bad duration {dur!r} for phase {pname!r}: expected "
                           f"milliseconds, more than 0 and at most {MAX_PHASE_MS:.0e}"
                      ) from None
        if len(para) < 3:
            raise err(no1, f"phase {pname!r} has no access pattern lines")
        ph = Phase(pname, ms, line=no0)
        for no, line in para[2:]:
            f = [x.strip() for x in line.split(",")]
            if len(f) not in (4, 5):
                raise err(no, "access pattern needs 'region, random(0|1), stride_bytes, "
                              f"probability[, ro|wo|rw]', got {line!r}")
            if f[0] not in names:
                raise err(no, f"unknown region {f[0]!r}; regions: {', '.join(names)}")
            if f[1] not in ("0", "1"):
                raise err(no, f"bad random flag {f[1]!r}: expected 1 (random) or 0 "
                              f"(sequential)")
            try:
                stride = parse_int(f[2], "stride", 1)
            except TierlabError:
                raise err(no, f"bad stride {f[2]!r}: expected a positive number of "
                              f"bytes") from None
            try:
                prob = parse_number(f[3], "probability", lo=0.0)
            except TierlabError:
                raise err(no, f"bad probability {f[3]!r}: expected a number >= 0") from None
            rw = DEFAULT_RW
            if len(f) == 5:
                rw = f[4].lower()
                if rw not in RW_MODES:
                    raise err(no, f"bad rw mode {f[4]!r}; valid: ro, wo, rw")
            ph.patterns.append(Pattern(names[f[0]], f[1] == "1", stride, prob, rw, no))
        if sum(pt.probability for pt in ph.patterns) <= 0:
            raise err(no0, f"phase {pname!r}: probabilities sum to 0")
        phases.append(ph)
    return MasimConfig(str(path), regions, phases)


@WORKLOADS.register("masim")
class Masim(Workload):
    """masim:PATH — phases of region access patterns from an sjp38/masim config file."""

    def __init__(self, path=None, aps=1e8, threads=1, compute_ns=2.0, mlp=10.0,
                 scale=1.0, seed=0):
        super().__init__()
        if path is None or not str(path).strip():
            raise TierlabError("masim needs a config file: masim:PATH")
        scale = parse_scale(scale)
        self.threads, self.compute_ns, self.mlp = common_params(threads, compute_ns, mlp,
                                                                what="masim")
        self.aps = parse_number(aps, "masim aps", lo=0.0, lo_open=True)
        cfg = parse_config(str(path).strip())
        self.config = cfg
        self.name = f"masim:{Path(cfg.path).name}"
        self.work_unit = "accesses"
        # Layout: contiguous, page aligned, in file order.
        npg = np.array([max(1, -(-int(round(r.size * scale)) // PAGE)) for r in cfg.regions],
                       dtype=np.int64)
        self.region_start = np.concatenate(([0], np.cumsum(npg)[:-1])).astype(np.int64)
        self.region_end = self.region_start + npg
        self.npages = int(self.region_end[-1])
        # Phases as work.
        self._phases = []
        allocated = np.zeros(len(cfg.regions), dtype=bool)
        for i, r in enumerate(cfg.regions):
            if r.init_file is not None:
                allocated[i] = True
        init_alloc = [i for i in range(len(cfg.regions)) if allocated[i]]
        at = 0.0
        for ph in cfg.phases:
            work = ph.time_ms / 1000.0 * self.aps * scale
            if work <= 0:
                continue
            fld = self._phase_field(ph)
            touched = sorted({pt.region for pt in ph.patterns if pt.probability > 0})
            new = [i for i in touched if not allocated[i]]
            allocated[new] = True
            self._phases.append((at, ph.name, fld, init_alloc + new))
            init_alloc = []
            at += work
        if not self._phases:
            raise TierlabError(f"masim config {cfg.path!r}: every phase has zero duration "
                               f"(no work)")
        self.total_work = at
        self.footprint_pages = int(npg[allocated].sum())
        self.params = {"path": cfg.path, "aps": self.aps, "threads": self.threads,
                       "regions": len(cfg.regions), "phases": len(self._phases),
                       "span": fmt_size(self.npages * PAGE), "accesses": self.total_work}

    def _phase_field(self, ph: Phase) -> RateField:
        tot = sum(pt.probability for pt in ph.patterns)
        starts, ends, rd, wr = [], [], [], []
        for pt in ph.patterns:
            if pt.probability <= 0:
                continue
            share = pt.probability / tot
            if not pt.random and pt.stride < 64:
                share *= pt.stride / 64.0  # consecutive accesses hit the same line
            a, b = int(self.region_start[pt.region]), int(self.region_end[pt.region])
            n = b - a
            starts.append(a)
            ends.append(b)
            rd.append(share / n if pt.rw in ("ro", "rw") else 0.0)
            wr.append(share / n if pt.rw in ("wo", "rw") else 0.0)
        return RateField.from_segments(np.array(starts), np.array(ends), np.array(rd),
                                       np.array(wr), self.npages)

    def changes(self):
        for at, name, fld, alloc in self._phases:
            al = None
            if alloc:
                al = np.stack([self.region_start[alloc], self.region_end[alloc]], axis=1)
            yield Change(at, field=fld, alloc=al, label=name)
