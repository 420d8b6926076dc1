"""Workload generators (docs/workloads.md): importing this package registers them.

Built in: gups (uniform, hotset, dynamic, gupspp), masim:PATH, ycsb:a..f, stream, graph,
trace:PATH. Each module documents its work unit, parameters and where its defaults come
from; `tierlab list workloads` shows the first docstring line of each.
"""
from .base import WORKLOADS, Change, Workload, ranges
from . import gups, masim, ycsb, stream, graph, trace, twitter  # noqa: F401  (registration)
from .trace import TraceData, convert_pagegrind, from_pagegrind, read_trace, write_trace

__all__ = ["WORKLOADS", "Workload", "Change", "ranges", "TraceData", "read_trace",
           "write_trace", "from_pagegrind", "convert_pagegrind"]
