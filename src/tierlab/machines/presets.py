"""Built-in machines. Figures and their sources:

- Local DRAM ~81 ns idle random read, Optane ~305 ns random read; per socket with 6
  DIMMs DRAM ~105 GB/s read, Optane ~39 GB/s read and ~13 GB/s write; remote adds
  ~50-70% latency (Izraelevitz et al., "Basic Performance Measurements of the Intel
  Optane DC Persistent Memory Module", 2019). Optane write latency: ~94 ns to the
  ADR write-pending queue, but sustained writes are bandwidth bound; we use 100 ns.
- CXL expanders add 70-100 ns over local DRAM (Pond, ASPLOS'23; TPP, ASPLOS'23); we take
  +85 ns and 64 GB/s for a x16 PCIe5 device.
"""
from __future__ import annotations

from ..errors import TierlabError
from ..units import parse_duration, parse_size
from .machine import MACHINES, CacheSpec, Machine, Tier

GB = 1e9


def _dram(name, cap, socket=0):
    return Tier(name, "dram", cap, 81.0, 86.0, 105 * GB, 80 * GB, socket, True)


def _optane(name, cap, socket=0):
    return Tier(name, "optane", cap, 305.0, 100.0, 39 * GB, 13 * GB, socket, False)


@MACHINES.register("optane-2tier")
def optane_2tier(dram="32GiB", optane="256GiB"):
    """One socket, DRAM + Optane in app-direct mode (HeMem's setup, scaled)."""
    return Machine("optane-2tier",
                   [_dram("dram", parse_size(dram, "optane-2tier dram")),
                    _optane("optane", parse_size(optane, "optane-2tier optane"))],
                   demotion=[0, 1], description="1 socket: DRAM + Optane")


@MACHINES.register("optane-4tier")
def optane_4tier(dram="16GiB", optane="128GiB"):
    """Two sockets, each DRAM + Optane (IDT's machine); path local DRAM -> remote DRAM ->
    local Optane -> remote Optane. DRAM is sized so the workloads' footprints exceed all
    of it: IDT's 96-110 GB RSS against its DRAM, here the 64 GiB default workloads
    against 2 x 16 GiB, so three tiers are in use."""
    d, o = parse_size(dram, "optane-4tier dram"), parse_size(optane, "optane-4tier optane")
    return Machine("optane-4tier",
                   [_dram("dram0", d, 0), _dram("dram1", d, 1),
                    _optane("optane0", o, 0), _optane("optane1", o, 1)],
                   demotion=[0, 1, 2, 3], description="2 sockets x (DRAM + Optane)")


@MACHINES.register("dram-cxl")
def dram_cxl(dram="32GiB", cxl="128GiB", cxl_lat="166ns"):
    """DRAM + a CPU-less CXL memory expander (TPP's setup); `cxl_lat` is its unloaded
    read latency (Colloid's artifact emulates the alternate tier with the remote socket
    at 135-192 ns), writes 5 ns slower as for DRAM."""
    lat = parse_duration(cxl_lat, "dram-cxl cxl_lat") * 1e9
    if not 1 <= lat <= 1e5:
        raise TierlabError(f"bad dram-cxl cxl_lat {cxl_lat!r}: expected 1ns to 100us")
    return Machine("dram-cxl",
                   [_dram("dram", parse_size(dram, "dram-cxl dram")),
                    Tier("cxl", "cxl", parse_size(cxl, "dram-cxl cxl"), lat, lat + 5,
                         64 * GB, 64 * GB, 0, False)],
                   demotion=[0, 1], description="DRAM + CPU-less CXL expander")


@MACHINES.register("optane-memory-mode")
def optane_memory_mode(dram="32GiB", optane="256GiB", frame="4KiB"):
    """One socket, Optane in memory mode: the OS sees only the Optane capacity, and the
    DRAM is a direct-mapped cache in front of it, indexed by physical frame (Johnny
    Cache, OSDI'23: 2 MiB slots with huge pages, `frame=2MiB`; 4 KiB otherwise)."""
    d = parse_size(dram, "optane-memory-mode dram")
    return Machine("optane-memory-mode",
                   [_optane("optane", parse_size(optane, "optane-memory-mode optane"))],
                   demotion=[0], description="1 socket: Optane behind a DRAM cache",
                   dram_cache=CacheSpec(d, str(frame), 81.0, 86.0, 105 * GB, 80 * GB))
