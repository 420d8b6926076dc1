"""Placement policies and allocation policies. Each module registers its policies."""
from .alloc import ALLOCS, AllocPolicy  # noqa: F401
from .base import POLICIES, Policy  # noqa: F401
from . import oracle, static  # noqa: F401
