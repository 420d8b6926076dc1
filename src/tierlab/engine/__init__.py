"""The engine: clock, closed-loop progress, placement mechanics, costs, metrics."""
from .engine import Costs, Simulation, Stats  # noqa: F401
from .memory import UNALLOC, Memory  # noqa: F401
from .timeline import Timeline  # noqa: F401
