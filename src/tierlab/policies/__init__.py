"""Placement policies and allocation policies. Every module (or subpackage) here is
imported so that it registers its policies: adding a policy means adding one file."""
from ..registry_autoload import import_all
from .alloc import ALLOCS, AllocPolicy  # noqa: F401
from .base import POLICIES, Policy  # noqa: F401

import_all(__name__, __path__)
