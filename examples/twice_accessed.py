"""A plugin policy, the worked example of docs/writing-a-policy.md: promote a page seen
accessed at two scans in a row, demote by Linux's LRU. One file outside the package:

    tierlab compare --import examples/twice_accessed.py --machine optane-2tier \\
        --scale 1/256 --workloads gups:hotset --policies static,twice-accessed --out DIR

Every `period` (100 ms) a CLOCK hand per slow node tests and clears the accessed bits of up to
`batch` of its pages; a page found accessed at its previous visit too goes to the top
node, which first demotes as many of its least recently used pages as it needs to keep
its low watermark free (`reclaim`). The rule is naive on purpose: a cold page accessed
at two visits in a row is promoted too, so it moves far more pages than `oracle`
(tests/test_examples.py runs it, and checks it beats `static` on a hot set).
"""
import numpy as np

from tierlab.policies import POLICIES, Policy
from tierlab.units import parse_duration


@POLICIES.register("twice-accessed")
class TwiceAccessed(Policy):
    """Promote a page accessed at two scans in a row; kswapd's LRU demotes."""

    def __init__(self, period="100ms", batch="65536"):   # spec params arrive as strings
        super().__init__(period=period, batch=batch)
        self.period = parse_duration(period, "twice-accessed period")
        self.batch = int(batch)
        self.promoted = 0

    def attach(self, sim):
        super().attach(sim)                    # sim: the PolicyView (interface.py)
        self.sim = sim
        self.top = sim.machine.demotion[0]     # the fastest node
        self.hand = {n: 0 for n in sim.machine.demotion[1:]}
        self.seen = np.zeros(sim.mem.npages, dtype=bool)  # accessed at the last visit
        sim.every(self.period, self.tick)

    def tick(self, now):
        sim, mem = self.sim, self.sim.mem
        cpu = sim.bits.cpu_seconds             # the checks' cost, charged below
        for node in self.hand:
            # (pages, the hand's next position, addresses passed)
            pages, self.hand[node], _ = mem.pages_on(node, self.hand[node], self.batch)
            if pages.size == 0:
                continue
            accessed = sim.bits.test_and_clear(0, pages, now)   # level 0: 4 KiB PTEs
            twice = pages[accessed & self.seen[pages]]
            self.seen[pages] = accessed
            if twice.size == 0:
                continue
            room = int(mem.free[self.top] - mem.wmark_low[self.top])
            if room < twice.size:              # make room: demote by Linux's LRU
                sim.reclaim(self.top, int(twice.size - room))
            self.promoted += sim.migrate(twice, self.top, reason="twice")
        sim.charge_cpu(sim.bits.cpu_seconds - cpu)

    def stats(self):
        return {**super().stats(), "promoted": self.promoted}
