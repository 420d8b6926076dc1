"""Machine description (docs/machines.md) and TOML loading."""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import TierlabError
from ..params import parse_bytes, parse_int, parse_number
from ..registry import Registry, Spec, load_toml
from ..units import PAGE, fmt_size, parse_duration, parse_size

MACHINES: Registry = Registry("machine")

KINDS = ("dram", "cxl", "optane", "nvm")


@dataclass(frozen=True)
class Tier:
    """One NUMA node.

    Latencies are idle, from a CPU of `socket` (local); bandwidths are the node's
    peaks in bytes/s. `has_cpus` is False for CPU-less nodes (CXL expanders, Optane
    in app-direct mode), which still hang off `socket`.
    """

    name: str
    kind: str
    capacity: int
    read_lat_ns: float
    write_lat_ns: float
    read_bw: float
    write_bw: float
    socket: int = 0
    has_cpus: bool = True

    def __post_init__(self):
        """Check every figure (one-line errors naming the tier and key); sizes may be
        given as text ('64GiB')."""
        if not isinstance(self.name, str) or not self.name.strip():
            raise TierlabError(f"bad tier name {self.name!r}: expected a non-empty string")
        w = f"tier {self.name!r}"
        if self.kind not in KINDS:
            raise TierlabError(f"{w}: bad kind {self.kind!r}; valid: {', '.join(KINDS)}")
        put = object.__setattr__
        put(self, "capacity", parse_bytes(self.capacity, f"{w} capacity", minimum=PAGE))
        for k in ("read_lat_ns", "write_lat_ns"):  # 1 ns .. 1 ms: a memory, not a disk
            put(self, k, parse_number(getattr(self, k), f"{w} {k}", lo=1.0, hi=1e6))
        for k in ("read_bw", "write_bw"):
            put(self, k, float(parse_bytes(getattr(self, k), f"{w} {k}")))
        put(self, "socket", parse_number(self.socket, f"{w} socket", lo=0, integer=True))
        if not isinstance(self.has_cpus, bool):
            raise TierlabError(f"bad {w} has_cpus {self.has_cpus!r}; valid: true, false")

    @property
    def capacity_pages(self) -> int:
        return self.capacity // PAGE

    @property
    def is_fast(self) -> bool:
        """"DRAM" in the allocation policies' sense (HPDC'23): DRAM kinds."""
        return self.kind == "dram"


FRAMES = {"4KiB": PAGE, "2MiB": 512 * PAGE}


@dataclass(frozen=True)
class CacheSpec:
    """Optane memory mode (Johnny Cache, OSDI'23): DRAM as a direct-mapped cache in front
    of the machine's memory, indexed by physical frame: slot = frame number mod the
    number of frame-sized slots in `size` (`frame` 4KiB, or 2MiB for huge pages).
    Latencies and bandwidths are the DRAM's (engine/dram_cache.py has the model)."""

    size: int
    frame: str = "4KiB"
    read_lat_ns: float = 81.0
    write_lat_ns: float = 86.0
    read_bw: float = 105e9
    write_bw: float = 80e9

    def __post_init__(self):
        if self.frame not in FRAMES:
            raise TierlabError(f"bad DRAM cache frame {self.frame!r}; valid: "
                               + ", ".join(FRAMES))
        if self.size < FRAMES[self.frame]:
            raise TierlabError(f"bad DRAM cache size {self.size}: smaller than one "
                               f"{self.frame} frame")
        for k in ("read_lat_ns", "write_lat_ns", "read_bw", "write_bw"):
            parse_number(getattr(self, k), f"dram_cache {k}", lo=0.0, lo_open=True)

    @property
    def frame_pages(self) -> int:
        return FRAMES[self.frame] // PAGE

    @property
    def nslots(self) -> int:
        return self.size // FRAMES[self.frame]


@dataclass
class Machine:
    """Tiers, the demotion path, sockets and mechanism costs.

    demotion: node ids from fastest to slowest; kswapd demotes a node's pages to the
    next node on this path (Linux `node_demotion`, IDT's 0 -> 1 -> 2 -> 3).
    cpu_socket: socket the workload's threads run on.
    remote_lat_factor: latency multiplier for a node on another socket (Izraelevitz
    et al. 2019: remote adds ~50-70%).
    migrate_bw: move_pages copy bandwidth per migrating thread (4 KiB pages: about
    1-2 GB/s; docs/machines.md).
    tlb_shootdown_s: stall of all app threads per migration batch.
    hint_fault_s: cost of one NUMA hint fault to the faulting thread (1-2 us).
    first_touch_s: cost of a page's first touch (the page fault and zeroing) to the
    touching thread, for pages a workload allocates after it starts (its first change,
    the set-up, is free). 0 by default: the cost is the same under every placement, so
    it only dilutes a comparison; the test guest's TCG takes ~32 us (docs/linux.md).
    pte_walk_s, pte_update_s: NUMA balancing's scan (task_numa_work) per PTE walked and
    per PTE made PROT_NONE (20 ns and 50 ns, choices: monitors/hint_faults.py).
    demotion_enabled: /sys/kernel/mm/numa/demotion_enabled (mm/vmscan.c can_demote):
    when false, reclaim (kswapd, direct) demotes nothing; a policy's own migrations
    (move_pages, DAMOS migrate_cold) still move pages down.
    cores_per_socket: for deciding whether background threads steal app CPU.
    """

    name: str
    tiers: list[Tier]
    demotion: list[int] = field(default_factory=list)
    cpu_socket: int = 0
    remote_lat_factor: float = 1.6
    migrate_bw: float = 1.5e9
    tlb_shootdown_s: float = 5e-6
    hint_fault_s: float = 1.5e-6
    first_touch_s: float = 0.0
    pte_walk_s: float = 20e-9
    pte_update_s: float = 50e-9
    demotion_enabled: bool = True
    cores_per_socket: float = 24
    description: str = ""
    #: min, low, high watermarks as fractions of each node (engine/memory.py). Linux
    #: derives them from min_free_kbytes and watermark_scale_factor: on a large node
    #: about 0.5/1/1.5% is typical; on a small one min_free_kbytes makes them several
    #: percent (the 465 MiB node of the test guest: 4.6/5.9/7.1%, docs/linux.md)
    watermarks: tuple = (0.005, 0.01, 0.015)
    #: memory mode: the tiers are what the OS sees, this DRAM caches them (JC, OSDI'23)
    dram_cache: CacheSpec | None = None
    #: a bandwidth antagonist (a STREAM-like co-runner, as in Colloid's and Memstrata's
    #: experiments): node -> share of that node's bandwidth its traffic keeps busy, in
    #: [0, 0.95]; given as {"dram0": 0.5}, {0: 0.5} or "dram0@50%+optane0@10%"
    antagonist: dict = field(default_factory=dict)

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name.strip():
            raise TierlabError(f"bad machine name {self.name!r}: expected a non-empty string")
        if not 1 <= len(self.tiers) <= 8:
            raise TierlabError(f"machine {self.name!r}: needs 1 to 8 tiers")
        names = [t.name for t in self.tiers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise TierlabError(f"machine {self.name!r}: tier name(s) {', '.join(dup)} used "
                               "twice; each tier needs its own name")
        self.cpu_socket = parse_number(self.cpu_socket, "cpu_socket", lo=0, integer=True)
        sockets = sorted({t.socket for t in self.tiers})
        if self.cpu_socket not in sockets:
            raise TierlabError(f"bad cpu_socket {self.cpu_socket}: no tier is on it; valid: "
                               f"{', '.join(map(str, sockets))}")
        self.remote_lat_factor = parse_number(self.remote_lat_factor, "remote_lat_factor",
                                              lo=0.0, lo_open=True)
        self.migrate_bw = parse_number(self.migrate_bw, "migrate_bw", lo=0.0, lo_open=True)
        self.cores_per_socket = parse_number(self.cores_per_socket, "cores_per_socket",
                                             lo=0.0, lo_open=True)
        if not isinstance(self.demotion_enabled, bool):
            raise TierlabError(f"bad demotion_enabled {self.demotion_enabled!r}; valid: "
                               "true, false")
        for k in COST_KEYS:
            k += "_s"
            setattr(self, k, parse_number(getattr(self, k), k[:-2], lo=0.0, hi=1.0))
        if isinstance(self.demotion, (str, bytes)) or not hasattr(self.demotion, "__iter__"):
            raise TierlabError(f"bad demotion {self.demotion!r}: expected a list of node "
                               "indices, fastest first, such as [0, 1]")
        self.demotion = [parse_number(x, "demotion node", integer=True)
                         for x in self.demotion]
        if not self.demotion:
            self.demotion = sorted(range(len(self.tiers)),
                                   key=lambda i: self.read_latency_ns(i))
        if sorted(self.demotion) != list(range(len(self.tiers))):
            raise TierlabError(
                f"machine {self.name!r}: demotion path {self.demotion} must list every node "
                f"0..{len(self.tiers) - 1} once")
        self.antagonist = parse_antagonist(self.antagonist, names)
        if self.antagonist and self.dram_cache is not None:
            raise TierlabError(f"machine {self.name!r}: an antagonist is not modelled in "
                               "memory mode (a DRAM cache)")

    @property
    def nnodes(self) -> int:
        return len(self.tiers)

    def is_remote(self, node: int) -> bool:
        return self.tiers[node].socket != self.cpu_socket

    def read_latency_ns(self, node: int) -> float:
        t = self.tiers[node]
        return t.read_lat_ns * (self.remote_lat_factor if self.is_remote(node) else 1.0)

    def write_latency_ns(self, node: int) -> float:
        t = self.tiers[node]
        return t.write_lat_ns * (self.remote_lat_factor if self.is_remote(node) else 1.0)

    def rank(self, node: int) -> int:
        """Position of `node` on the demotion path (0 = top tier)."""
        return self.demotion.index(node)

    def lower(self, node: int) -> int | None:
        """Next node down the demotion path, or None for the last."""
        r = self.rank(node)
        return self.demotion[r + 1] if r + 1 < len(self.demotion) else None

    def fast_nodes(self) -> list[int]:
        """DRAM nodes in demotion-path order ("DRAM" of the allocation policies)."""
        return [n for n in self.demotion if self.tiers[n].is_fast]

    def slow_nodes(self) -> list[int]:
        return [n for n in self.demotion if not self.tiers[n].is_fast]

    @property
    def capacity_pages(self) -> int:
        return sum(t.capacity_pages for t in self.tiers)

    def scaled(self, factor: float) -> "Machine":
        """A miniature for `--scale F`: capacities, bandwidths, migration bandwidth and
        cores times F, latencies unchanged. With the workload's footprint, work and
        threads also times F, every page sees the same access rate, every node the same
        utilisation and the run the same length as at full scale (docs/model.md)."""
        if factor <= 0:
            raise TierlabError(f"bad scale {factor!r}: must be > 0")
        tiers = [replace(t, capacity=max(int(t.capacity * factor) // PAGE, 64) * PAGE,
                         read_bw=t.read_bw * factor, write_bw=t.write_bw * factor)
                 for t in self.tiers]
        cache = self.dram_cache
        if cache is not None:
            unit = FRAMES[cache.frame]
            cache = replace(cache, size=max(int(cache.size * factor) // unit, 1) * unit,
                            read_bw=cache.read_bw * factor, write_bw=cache.write_bw * factor)
        return replace(self, tiers=tiers, name=self.name, migrate_bw=self.migrate_bw * factor,
                       cores_per_socket=self.cores_per_socket * factor, dram_cache=cache)

    def describe(self) -> str:
        parts = [f"{t.name}={fmt_size(t.capacity)}" for t in self.tiers]
        if self.dram_cache is not None:
            parts.append(f"DRAM cache {fmt_size(self.dram_cache.size)} direct-mapped by "
                         f"{self.dram_cache.frame} frame")
        return f"{self.name}: " + ", ".join(parts)


#: mechanism costs, durations: the TOML key, and the Machine field with `_s`
COST_KEYS = ("tlb_shootdown", "hint_fault", "first_touch", "pte_walk", "pte_update")
TIER_KEYS = ("name", "kind", "capacity", "read_lat_ns", "write_lat_ns", "read_bw",
             "write_bw", "socket", "has_cpus")
MACHINE_KEYS = ("name", "description", "cpu_socket", "cores_per_socket",
                "remote_lat_factor", "migrate_bw", "tlb_shootdown", "hint_fault", "first_touch",
                "pte_walk", "pte_update", "demotion_enabled", "demotion", "watermarks",
                "antagonist")


def parse_antagonist(value, names: list[str]) -> dict:
    """{node index: busy share} from {name or index: share} or "name@share+..." (shares
    as fractions or percentages, each in [0, 0.95])."""
    if value in (None, {}):
        return {}
    if isinstance(value, str) and not value.strip():
        raise TierlabError("bad antagonist '': expected NODE@SHARE[+...], e.g. dram0@50% "
                           "(leave it out for none)")
    if isinstance(value, str):
        items = []
        for part in value.split("+"):
            node, at, share = part.partition("@")
            if not at:
                raise TierlabError(f"bad antagonist {value!r}: expected NODE@SHARE[+...], "
                                   "e.g. dram0@50%")
            items.append((node.strip(), share.strip()))
    elif isinstance(value, dict):
        items = list(value.items())
    else:
        raise TierlabError(f"bad antagonist {value!r}: expected NODE@SHARE or a table")
    out = {}
    for node, share in items:
        if isinstance(node, int) and 0 <= node < len(names):
            i = node
        elif str(node) in names:
            i = names.index(str(node))
        else:
            raise TierlabError(f"bad antagonist node {node!r}; valid: {', '.join(names)}")
        text = str(share)
        frac = parse_number(text[:-1], "antagonist share in %", lo=0, hi=95) / 100 \
            if text.endswith("%") else parse_number(share, "antagonist share", lo=0, hi=0.95)
        if i in out:
            raise TierlabError(f"bad antagonist {value!r}: node {names[i]!r} is given "
                               "twice; give each node once with its total share")
        out[i] = float(frac)
    return out


def _table(d: dict, key: str, valid) -> dict:
    """The TOML table `key` of d (empty if absent), with no keys outside `valid`."""
    t = d.get(key, {})
    if not isinstance(t, dict):
        raise TierlabError(f"bad {key} {t!r}: expected a [{key}] table")
    unknown = set(t) - set(valid)
    if unknown:
        raise TierlabError(f"[{key}]: unknown key(s) {', '.join(sorted(unknown))}; "
                           f"valid: {', '.join(valid)}")
    return t


def machine_from_dict(d: dict, source: str) -> Machine:
    """Build a Machine from a TOML table (see docs/machines.md for the schema)."""
    unknown = set(d) - {"machine", "tier", "dram_cache"}
    if unknown:
        raise TierlabError(f"{source}: unknown table(s) {', '.join(sorted(unknown))}; "
                           "valid: machine, tier, dram_cache")
    tiers_in = d.get("tier")
    if tiers_in is None:
        raise TierlabError(f"{source}: no [[tier]] tables")
    if not isinstance(tiers_in, list) or not all(isinstance(t, dict) for t in tiers_in):
        raise TierlabError(f"{source}: bad tier {tiers_in!r}: expected [[tier]] tables")
    try:
        m = _table(d, "machine", MACHINE_KEYS)
        tiers = []
        for i, t in enumerate(tiers_in):
            missing = [k for k in ("name", "capacity", "read_lat_ns", "read_bw") if k not in t]
            if missing:
                raise TierlabError(f"tier {i}: missing {', '.join(missing)}")
            unknown = set(t) - set(TIER_KEYS)
            if unknown:
                raise TierlabError(f"tier {i}: unknown key(s) {', '.join(sorted(unknown))}; "
                                   f"valid: {', '.join(TIER_KEYS)}")
            if not isinstance(t["name"], str):
                raise TierlabError(f"tier {i}: bad name {t['name']!r}: expected a string "
                                   "such as \"dram0\"")
            tiers.append(Tier(
                name=t["name"], kind=t.get("kind", "dram"), capacity=t["capacity"],
                read_lat_ns=t["read_lat_ns"], write_lat_ns=t.get("write_lat_ns",
                                                                 t["read_lat_ns"]),
                read_bw=t["read_bw"], write_bw=t.get("write_bw", t["read_bw"]),
                socket=_toml_int(t.get("socket", 0), f"tier {i} socket", 0, 63), has_cpus=t.get("has_cpus", True)))
        kw = {k: m[k] for k in ("remote_lat_factor", "demotion") if k in m}
        if "cpu_socket" in m:
            kw["cpu_socket"] = _toml_int(m["cpu_socket"], "cpu_socket", 0, 63)
        if "cores_per_socket" in m:
            kw["cores_per_socket"] = _toml_int(m["cores_per_socket"], "cores_per_socket",
                                               1, 4096)
        if kw.get("demotion") == []:
            raise TierlabError("bad demotion []: lists no node (leave the key out for the "
                               "default order, fastest first)")
        if not isinstance(m.get("name", ""), str):
            raise TierlabError(f"bad machine name {m['name']!r}: expected a string")
        if "migrate_bw" in m:
            kw["migrate_bw"] = float(parse_size(m["migrate_bw"], "migrate_bw"))
        for k in COST_KEYS:
            if k in m:
                kw[k + "_s"] = parse_duration(m[k], k)
        if "demotion_enabled" in m:
            kw["demotion_enabled"] = m["demotion_enabled"]
        if "watermarks" in m:
            kw["watermarks"] = _watermarks(m["watermarks"])
        if "dram_cache" in d:
            kw["dram_cache"] = cache_from_dict(d)
        if "antagonist" in m:
            kw["antagonist"] = m["antagonist"]
        return Machine(name=str(m.get("name", Path(source).stem)), tiers=tiers,
                       description=str(m.get("description", "")), **kw)
    except TierlabError as e:
        raise TierlabError(f"{source}: {e}") from None


def _toml_int(value, what: str, lo: int, hi: int) -> int:
    """A TOML integer (not a string, float or boolean) in [lo, hi]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TierlabError(f"bad {what} {value!r}: expected a whole number from {lo} to "
                           f"{hi}, unquoted")
    return parse_int(value, what, lo, hi)


def _watermarks(value) -> tuple:
    try:
        wm = tuple(float(x) for x in value)
    except (TypeError, ValueError):
        wm = ()
    if len(wm) != 3 or not 0 <= wm[0] <= wm[1] <= wm[2] < 0.5:
        raise TierlabError(f"bad watermarks {value!r}: expected [min, low, high] fractions "
                           "with 0 <= min <= low <= high < 0.5")
    return wm


CACHE_KEYS = ("size", "frame", "read_lat_ns", "write_lat_ns", "read_bw", "write_bw")


def cache_from_dict(d: dict) -> CacheSpec:
    """The [dram_cache] table of d: size, frame, read_lat_ns, write_lat_ns, read_bw,
    write_bw."""
    c = _table(d, "dram_cache", CACHE_KEYS)
    if "size" not in c:
        raise TierlabError("[dram_cache]: missing size")
    kw = {"size": parse_size(c["size"], "dram_cache size"),
          "frame": str(c.get("frame", "4KiB"))}
    kw.update({k: c[k] for k in ("read_lat_ns", "write_lat_ns") if k in c})
    kw.update({k: float(parse_size(c[k], f"dram_cache {k}")) for k in ("read_bw", "write_bw")
               if k in c})
    return CacheSpec(**kw)


def load_machine(spec: str, scale: float = 1.0) -> Machine:
    """A preset name (with params) or a path to a TOML file; then `--scale`."""
    if spec.endswith(".toml") or "/" in spec:
        m = machine_from_dict(load_toml(spec, "machine"), spec)
    else:
        parsed = Spec.parse(spec)
        antagonist = parsed.params.pop("antagonist", None)
        m = MACHINES.create(parsed)
        if antagonist is not None:
            m = replace(m, antagonist=antagonist)
    return m.scaled(scale) if scale != 1.0 else m
