"""tierlab: tiered main memory placement — simulate, compare, run for real."""
__version__ = "0.1.0"

from .api import compare, run, simulation  # noqa: F401,E402
