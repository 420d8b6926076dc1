"""tierlab: tiered main memory placement — simulate, compare, run for real."""
from .api import compare, run, simulation  # noqa: F401
from .provenance import __version__  # noqa: F401
from .reports.report import report  # noqa: F401
