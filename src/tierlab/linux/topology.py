"""The NUMA machine as the kernel describes it in sysfs and procfs.

Sources (paths relative to `root`, so tests can pass a directory that mimics them):

- nodes: sys/devices/system/node/online and nodeN/{cpulist,meminfo,distance}
  (Documentation/ABI/stable/sysfs-devices-node); `distance` lists one entry per online
  node, in node order (drivers/base/node.c, node_read_distance);
- memory tiers: sys/devices/virtual/memory_tiering/memory_tierN/nodelist, lower N is
  faster (Documentation/ABI/testing/sysfs-kernel-mm-memory-tiers, mm/memory-tiers.c);
- HMAT: nodeN/access0/initiators/{read,write}_{latency,bandwidth} in ns and MiB/s, and
  one nodeM entry per initiator (Documentation/admin-guide/mm/numaperf.rst);
- sys/kernel/mm/numa/demotion_enabled (Documentation/ABI/testing/sysfs-kernel-mm-numa)
  and proc/sys/kernel/numa_balancing (Documentation/admin-guide/sysctl/kernel.rst).
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..errors import TierlabError
from ..units import PAGE, fmt_size

NODE_DIR = "sys/devices/system/node"
TIER_DIR = "sys/devices/virtual/memory_tiering"
DEMOTION_FILE = "sys/kernel/mm/numa/demotion_enabled"
BALANCING_FILE = "proc/sys/kernel/numa_balancing"
MIB = 1 << 20

#: numa_balancing sysctl values (kernel.rst: NUMA_BALANCING_NORMAL | _MEMORY_TIERING)
BALANCING_MODES = {0: "disabled", 1: "normal", 2: "memory tiering", 3: "normal + memory tiering"}

#: a CPU-less node whose HMAT read latency is within this factor of the CPU nodes'
#: is DRAM (memory-only DRAM); slower ones are CXL, or Optane when writes get less
#: than OPTANE_WRITE_SHARE of the read bandwidth (Izraelevitz et al. 2019: 13 vs 39 GB/s)
DRAM_LAT_FACTOR = 1.3
OPTANE_WRITE_SHARE = 0.5

_MEMTOTAL = re.compile(rb"MemTotal:\s+(\d+) kB")
_MEMFREE = re.compile(rb"MemFree:\s+(\d+) kB")


def parse_list(text: str, what: str = "node list") -> list[int]:
    """A kernel list such as "0-1,3" (bitmap_parselist, the format of cpulist and
    nodelist files) -> [0, 1, 3]; an empty string -> []."""
    out: list[int] = []
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        lo, sep, hi = part.partition("-")
        try:
            a = int(lo)
            b = int(hi) if sep else a
        except ValueError:
            raise TierlabError(f"bad {what} {text.strip()!r}: expected a list such as "
                               f"0-1,3") from None
        if a < 0 or b < a:
            raise TierlabError(f"bad {what} {text.strip()!r}: range {part!r} is empty or negative")
        out.extend(range(a, b + 1))
    return out


def format_list(ids) -> str:
    """[0, 1, 3] -> "0-1,3" (the inverse of `parse_list`)."""
    ids = sorted(set(int(i) for i in ids))
    parts, k = [], 0
    while k < len(ids):
        j = k
        while j + 1 < len(ids) and ids[j + 1] == ids[j] + 1:
            j += 1
        parts.append(str(ids[k]) if j == k else f"{ids[k]}-{ids[j]}")
        k = j + 1
    return ",".join(parts)


@dataclass(frozen=True)
class Hmat:
    """A node's access0 attributes: performance from its best initiator (numaperf.rst).
    Latencies in ns, bandwidths in bytes/s (sysfs gives MiB/s); None where missing."""

    read_latency_ns: float | None = None
    write_latency_ns: float | None = None
    read_bw: float | None = None
    write_bw: float | None = None
    initiators: tuple[int, ...] = ()


@dataclass
class NodeInfo:
    """One online NUMA node. `tier` is the rank of its memory tier (0 = fastest);
    `distances` maps every online node id to the SLIT distance from this node."""

    id: int
    cpus: list[int]
    total_bytes: int
    free_bytes: int
    distances: dict[int, int]
    tier: int
    hmat: Hmat | None = None

    @property
    def has_cpus(self) -> bool:
        return bool(self.cpus)


@dataclass
class Topology:
    """The machine: nodes in id order, `tier_order` node ids fastest first (the
    demotion path), and the kernel's tiering switches (None where the file is absent).

    `memory_tiers` maps the kernel's memory_tierN ids to their nodes ({} when the
    kernel has no memory_tiering directory); `tier_source` says where `tier_order`
    came from: "memory_tiering", "derived" (CPU nodes, then CPU-less by distance) or
    "override".
    """

    nodes: list[NodeInfo]
    tier_order: list[int]
    demotion_enabled: bool | None = None
    numa_balancing: int | None = None
    memory_tiers: dict[int, list[int]] = field(default_factory=dict)
    tier_source: str = "derived"
    root: str = "/"

    @property
    def node_ids(self) -> list[int]:
        return [n.id for n in self.nodes]

    def node(self, nid: int) -> NodeInfo:
        for n in self.nodes:
            if n.id == nid:
                return n
        raise TierlabError(f"no node {nid}; online nodes: {format_list(self.node_ids)}")

    def to_dict(self) -> dict:
        """JSON-ready form, for `tierlab nodes --json`."""
        nodes = []
        for n in self.nodes:
            d = asdict(n)
            d["distances"] = {str(k): v for k, v in n.distances.items()}
            d["cpulist"] = format_list(n.cpus)
            d["kind"] = node_kind(self, n)
            if n.hmat is not None:
                d["hmat"]["initiators"] = list(n.hmat.initiators)
            nodes.append(d)
        return {"nodes": nodes, "tier_order": list(self.tier_order),
                "tier_source": self.tier_source,
                "memory_tiers": {f"memory_tier{k}": v for k, v in self.memory_tiers.items()},
                "demotion_enabled": self.demotion_enabled,
                "numa_balancing": self.numa_balancing}


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as e:
        raise TierlabError(f"cannot read {path}: {e.strerror}") from None


def _number(path: Path) -> float | None:
    text = _read(path)
    if text is None or not text.strip():
        return None
    try:
        return float(text.strip())
    except ValueError:
        raise TierlabError(f"bad value {text.strip()!r} in {path}: expected a number") from None


def _meminfo(path: Path) -> tuple[int, int] | None:
    """(MemTotal, MemFree) in bytes from a node meminfo or /proc/meminfo."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    t, f = _MEMTOTAL.search(data), _MEMFREE.search(data)
    if t is None or f is None:
        raise TierlabError(f"{path}: no MemTotal/MemFree lines")
    return int(t.group(1)) * 1024, int(f.group(1)) * 1024


def _hmat(node_dir: Path) -> Hmat | None:
    d = node_dir / "access0" / "initiators"
    if not d.is_dir():
        return None
    lat = {k: _number(d / f"{k}_latency") for k in ("read", "write")}
    bw = {k: _number(d / f"{k}_bandwidth") for k in ("read", "write")}
    inits = sorted(int(p.name[4:]) for p in d.iterdir() if re.fullmatch(r"node\d+", p.name))
    h = Hmat(lat["read"], lat["write"],
             None if bw["read"] is None else bw["read"] * MIB,
             None if bw["write"] is None else bw["write"] * MIB, tuple(inits))
    return None if h == Hmat() else h


def _memory_tiers(root: Path) -> dict[int, list[int]]:
    d = root / TIER_DIR
    if not d.is_dir():
        return {}
    tiers = {}
    for p in d.iterdir():
        m = re.fullmatch(r"memory_tier(\d+)", p.name)
        text = _read(p / "nodelist") if m else None
        if text is not None:
            tiers[int(m.group(1))] = parse_list(text, f"nodelist of {p.name}")
    return dict(sorted(tiers.items()))


def _flag(path: Path) -> bool | None:
    text = _read(path)
    if text is None:
        return None
    v = text.strip().lower()
    if v in ("true", "1"):
        return True
    if v in ("false", "0"):
        return False
    raise TierlabError(f"bad value {v!r} in {path}: expected true/false/1/0")


def _nodes_without_numa(root: Path) -> list[NodeInfo]:
    """A kernel without CONFIG_NUMA: one node 0 with every CPU and /proc/meminfo."""
    mem = _meminfo(root / "proc/meminfo")
    if mem is None:
        raise TierlabError(f"no NUMA topology under {root}: {NODE_DIR}/online and "
                           f"proc/meminfo are missing")
    cpus = parse_list(_read(root / "sys/devices/system/cpu/online") or "", "cpu list")
    return [NodeInfo(0, cpus, mem[0], mem[1], {0: 10}, 0)]


def _read_nodes(root: Path) -> list[NodeInfo]:
    nd = root / NODE_DIR
    online = _read(nd / "online")
    if online is None:
        return _nodes_without_numa(root)
    ids = parse_list(online, "online node list")
    nodes = []
    for i in ids:
        d = nd / f"node{i}"
        cpus = parse_list(_read(d / "cpulist") or "", f"cpulist of node {i}")
        total, free = _meminfo(d / "meminfo") or (0, 0)
        dist = [int(x) for x in (_read(d / "distance") or "").split()]
        nodes.append(NodeInfo(i, cpus, total, free, dict(zip(ids, dist)), 0, _hmat(d)))
    return nodes


def _reference(nodes: list[NodeInfo]) -> NodeInfo:
    """The node distances are measured from: the first node with CPUs."""
    return next((n for n in nodes if n.has_cpus), nodes[0])


def parse_tier_order(text, online: list[int]) -> list[int]:
    """A `--tier-order` override such as "0,2,1,3": a permutation of the online nodes."""
    raw = text if isinstance(text, str) else ",".join(str(x) for x in text)
    try:
        order = [int(x) for x in raw.split(",") if x.strip()]
    except ValueError:
        order = None
    if order is None or sorted(order) != sorted(online):
        raise TierlabError(f"bad tier order {raw!r}: must list each online node once "
                           f"(online nodes: {format_list(online)})")
    return order


def discover(root="/", tier_order=None) -> Topology:
    """Read the machine under `root`; `tier_order` overrides the fastest-first order.

    Tiers come from the kernel's memory tiers when present; otherwise nodes with CPUs
    form tier 0 and CPU-less nodes tier 1. Within a tier, nodes with CPUs come first,
    then nodes by distance from the first CPU node.
    """
    root = Path(root)
    nodes = _read_nodes(root)
    tiers = _memory_tiers(root)
    if tiers:
        rank = {nid: r for r, ns in enumerate(tiers.values()) for nid in ns}
        for n in nodes:
            n.tier = rank.get(n.id, len(tiers))
        source = "memory_tiering"
    else:
        for n in nodes:
            n.tier = 0 if n.has_cpus else 1
        source = "derived"
    ref = _reference(nodes)
    order = [n.id for n in sorted(nodes, key=lambda n: (n.tier, not n.has_cpus,
                                                        ref.distances.get(n.id, 255), n.id))]
    if tier_order is not None:
        order, source = parse_tier_order(tier_order, [n.id for n in nodes]), "override"
    bal = _number(root / BALANCING_FILE)
    return Topology(nodes, order, _flag(root / DEMOTION_FILE),
                    None if bal is None else int(bal), tiers, source, str(root))


def refresh_free(topo: Topology, root=None) -> dict[int, int]:
    """Re-read MemFree of every node (one small file each); updates `topo.nodes` and
    returns {node id: free bytes}."""
    nd = Path(topo.root if root is None else root)
    for n in topo.nodes:
        path = nd / NODE_DIR / f"node{n.id}" / "meminfo"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            if len(topo.nodes) > 1:
                raise TierlabError(f"{path} is missing: node {n.id} went offline?") from None
            path = nd / "proc/meminfo"
            data = path.read_bytes()
        m = _MEMFREE.search(data)
        if m is None:
            raise TierlabError(f"{path}: no MemFree line")
        n.free_bytes = int(m.group(1)) * 1024
    return {n.id: n.free_bytes for n in topo.nodes}


def node_kind(topo: Topology, node: NodeInfo) -> str:
    """"dram" for nodes with CPUs; a CPU-less node is "cxl" unless its HMAT read
    latency is DRAM-like (within DRAM_LAT_FACTOR of the CPU nodes') or its write
    bandwidth is below OPTANE_WRITE_SHARE of its read bandwidth ("optane")."""
    if node.has_cpus:
        return "dram"
    h = node.hmat
    if h is None or h.read_latency_ns is None:
        return "cxl"
    refs = [n.hmat.read_latency_ns for n in topo.nodes
            if n.has_cpus and n.hmat is not None and n.hmat.read_latency_ns]
    ref = min(refs) if refs else _defaults()["dram"].read_lat_ns
    if h.read_latency_ns <= DRAM_LAT_FACTOR * ref:
        return "dram"
    if h.read_bw and h.write_bw and h.write_bw < OPTANE_WRITE_SHARE * h.read_bw:
        return "optane"
    return "cxl"


def _defaults() -> dict:
    """Per-kind tier figures of the built-in presets (machines/presets.py)."""
    from ..machines.presets import dram_cxl, optane_2tier
    d, c = optane_2tier(), dram_cxl()
    return {"dram": d.tiers[0], "optane": d.tiers[1], "nvm": d.tiers[1], "cxl": c.tiers[1]}


def _sockets(topo: Topology) -> dict[int, int]:
    """Socket of each node: CPU nodes number the sockets in id order; a CPU-less node
    hangs off its HMAT initiator, else off the nearest CPU node."""
    cpu_nodes = [n.id for n in topo.nodes if n.has_cpus]
    sock = {nid: s for s, nid in enumerate(cpu_nodes)}
    for n in topo.nodes:
        if n.id in sock:
            continue
        inits = [i for i in (n.hmat.initiators if n.hmat else ()) if i in sock]
        near = inits or sorted(cpu_nodes, key=lambda c: (n.distances.get(c, 255), c))
        sock[n.id] = sock[near[0]] if near else 0
    return sock


def to_machine(topo: Topology, name: str = "host"):
    """A simulator Machine with one tier per node: tier i is `topo.nodes[i]` (node ids
    map to tier indices in id order), capacity MemTotal (a page if none), HMAT figures
    where known and the presets' figures for the node's kind elsewhere; demotion =
    `tier_order`."""
    from ..machines.machine import Machine, Tier

    defaults = _defaults()
    sock = _sockets(topo)
    index = {n.id: i for i, n in enumerate(topo.nodes)}
    tiers = []
    for n in topo.nodes:
        kind = node_kind(topo, n)
        base = defaults[kind]
        h = n.hmat or Hmat()
        tiers.append(Tier(
            f"node{n.id}", kind, max(n.total_bytes, PAGE),
            h.read_latency_ns or base.read_lat_ns,
            h.write_latency_ns or h.read_latency_ns or base.write_lat_ns,
            h.read_bw or base.read_bw, h.write_bw or h.read_bw or base.write_bw,
            sock[n.id], n.has_cpus))
    first_cpu = next((topo.node(i) for i in topo.tier_order if topo.node(i).has_cpus), None)
    kw = {}
    if first_cpu is not None:
        kw = {"cpu_socket": sock[first_cpu.id], "cores_per_socket": float(len(first_cpu.cpus))}
    if topo.demotion_enabled is not None:
        kw["demotion_enabled"] = bool(topo.demotion_enabled)
    return Machine(name, tiers, demotion=[index[i] for i in topo.tier_order],
                   description=f"discovered under {topo.root}", **kw)


def format_nodes(topo: Topology) -> str:
    """The `tierlab nodes` table: one row per node, then tiers and kernel switches."""
    head = ["node", "cpus", "total", "free", "tier", "kind", "distances",
            "lat r/w ns", "bw r/w GiB/s"]
    rows = []
    for n in topo.nodes:
        h = n.hmat
        lat = bw = "-"
        if h is not None and (h.read_latency_ns or h.write_latency_ns):
            lat = f"{_num(h.read_latency_ns)}/{_num(h.write_latency_ns)}"
        if h is not None and (h.read_bw or h.write_bw):
            bw = "/".join(_num(None if b is None else b / (1 << 30))
                          for b in (h.read_bw, h.write_bw))
        rows.append([str(n.id), format_list(n.cpus) or "-", fmt_size(n.total_bytes),
                     fmt_size(n.free_bytes), str(n.tier), node_kind(topo, n),
                     " ".join(str(n.distances[i]) for i in topo.node_ids if i in n.distances),
                     lat, bw])
    width = [max(len(r[c]) for r in [head] + rows) for c in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(r, width)).rstrip() for r in [head] + rows]
    src = topo.tier_source
    if topo.memory_tiers:
        src += " " + " ".join(f"memory_tier{k}={format_list(v)}"
                              for k, v in topo.memory_tiers.items())
    lines.append(f"tier order (fastest first): {','.join(map(str, topo.tier_order))} ({src})")
    dem = "unknown" if topo.demotion_enabled is None else str(topo.demotion_enabled).lower()
    bal = ("unknown" if topo.numa_balancing is None else
           f"{topo.numa_balancing} ({BALANCING_MODES.get(topo.numa_balancing, 'unknown mode')})")
    lines.append(f"demotion_enabled: {dem}   numa_balancing: {bal}")
    return "\n".join(lines)


def _num(x) -> str:
    return "?" if x is None else f"{x:.4g}"
