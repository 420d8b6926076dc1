"""Tracing real programs: `tierlab trace record|import|info|plot` (pagegrind, a Valgrind
tool; analysis in `tierlab.tracing.analysis`)."""
from .cli import add_parser
from .record import DEFAULT_WINDOW, build_recorder, record

__all__ = ["DEFAULT_WINDOW", "add_parser", "build_recorder", "record"]
