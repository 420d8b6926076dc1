"""`static`: placement at allocation only, no migration (kswapd still demotes when a
node runs out of room, as the kernel would)."""
from .base import POLICIES, Policy


@POLICIES.register("static")
class Static(Policy):
    """Placement at allocation only; never migrates."""
