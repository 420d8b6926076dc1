"""`memtis`: MEMTIS (Lee et al., "MEMTIS: Efficient Memory Tiering with Dynamic Page
Classification and Page Size Determination", SOSP'23), from the paper, checked
against its public code, cosmoss-jigu/memtis (linux/mm/htmm_core.c, htmm_sampler.c,
htmm_migrater.c, include/linux/htmm.h, mm/mempolicy.c, mm/memcontrol.c,
mm/huge_memory.c). Quoted names below only label the rules; function names are the
kernel's (docs/memtis.md, "Rules implemented", pairs each rule with its kernel source).

Tiers. MEMTIS is 2-tier (one toptier node, `next_demotion_node` for the other; the
CXL mode fixes nodes 0 and 1). Here the fast tier is the top of `machine.demotion`
and every other node is the slow tier: a promotion moves to the top node, a demotion
to the first node down the path with room (then the next). The PEBS "fast" event is
loads served by the top node, "slow" loads served by any other node (the kernel
samples local DRAM and local PMM, or remote DRAM in CXL mode, and nothing else).

Pages. The simulator has no THP state: memory is modelled as 2 MiB huge pages
(aligned groups of `HP` = 512 simulated 4 KiB pages, as in `hemem`), all THP-backed
(the artifact runs with THP "always"), which MEMTIS may split into base pages. A
group is born as a huge page when its first page is allocated and dies when its last
page is freed. A huge page's place is its allocated pages' nodes: it is "on the fast
tier" when all of them are on the top node, else it is a slow-tier page whose
non-top pages a promotion moves ("huge pages are migrated whole").

Sampling ("PEBS events", "Sample period"). The `pebs` monitor on the three events
(fast-tier loads, slow-tier loads, stores); loads start at period 199, stores at
100007 (`htmm_sample_period`, `htmm_inst_sample_period`). Every 15 s (`cpucap_period`)
the sampling thread's CPU over the window (the monitor's `cpu_seconds`: samples x
`sample_cost`) is compared, in permille of one CPU, with `ksampled_soft_cpu_quota`
(30) +- 5: above, both period indexes step up once; below, both step down (loads only
if their index is above 0), in `pebs_period_list` (30 primes 199..19997) and
`pebs_inst_period_list` (100003, 300007, 600011, 1000003, 1500003), as
`increase_sample_period` / `decrease_sample_period`. The kernel's first window is an
EMA (0.8 x the measurement, `if (!cputime)`); later windows are the measurement;
both reproduced. Under `--scale F` the sampler sees F of the accesses, so its CPU is
compared with F x the quota. The thread drains its buffers every 2 ms; here it drains
every `poll` (10 ms) and applies the samples in time order, so only the ~ms delay of
counting differs (kmigraterd acts every 500 ms). Period changes set the monitor's
period dicts (`Pebs.period`, `Pebs.sampler.period`), which `Pebs.draw` reads at every
poll. Store samples: the kernel's ALL_STORES event counts every retired store, cache
hits included; the rate field's writes are memory writes, so a store period of 1e5
yields fewer store samples here than on hardware (a modelling limit, as for hemem).

Counters ("Per-page counter", `update_base_page`, `update_huge_page`). Every sample,
of any event and on any tier, adds 512 to the 4 KiB page's count (a base page, or the
sampled subpage of a huge page) and 1 to the huge page's meta count. New pages
("New pages start hot", `set_page_coolstatus`, `__prep_transhuge_page_for_htmm`):
meta and subpage counts 2^(hot+1), and with `htmm_skip_cooling=1` (default) they skip
the next cooling (their clock is the global clock + 1).

Bins ("Histogram", `get_idx`): floor(log2(count + 1)) capped at 15. The page histogram
counts a huge page's allocated pages in its meta bin and a base page in its bin; the
estimated-base-page histogram bins every 4 KiB page by its own count. The kernel keeps
both incrementally and resets them at each cooling, refilling them as kmigraterd
rescans the lists within its next pass; here they are computed when needed from every
page's count as cooled by the current clock (the rescan's result, without the <= 0.5 s
in which the kernel's histogram is partial).

Hot threshold ("Hot threshold", `__adjust_active_threshold`), every
`htmm_adaptation_period` (100,000) samples unless that sample cools: walk the bins from
15 down while the pages add up to <= fast capacity - promotion watermark; the threshold
is one above the first bin that does not fit (15 when bin 15 alone does not fit: the
kernel's `idx_hot != 15` test), at least `htmm_thres_hot` (1). Between coolings it only
rises, or falls when splits happened (`split_happen`); at the first adaptation after a
cooling it drops by 1 if the computed value is lower. The base-page threshold follows
the same walk over the estimated-base-page histogram. Warm ("Warm set"): hot - 1 when
the pages the walk fitted fill < 75% of (capacity - watermark), else hot; `warm=off` sets it to hot
(`htmm_nowarm`). After a demotion pass that demoted fewer pages than min(promotion
demand, excess), warm = hot until the next adaptation (`demote_node`).

Cooling ("Cooling", `update_pginfo`, `__cooling`): every `htmm_cooling_period`
(2,000,000) samples, or when the allocated memory grew by 10 GB since the last one
(`need_memcg_cooling`), the global clock ticks; if the previous cooling's rescan is
done the statistics are reset, the base-page threshold drops by 1 and the hit-ratio
EMAs (`prev_dram_sampled`, `prev_max_dram_sampled`) are halved and added to. Counts
are halved lazily once per missed tick (`halve`, shared with hemem): when the page is
next sampled, or in kmigraterd's next pass (`cooling_node` rescans every list: 12
chunks of 12.5% cover it), which computes each huge page's skewness
(`check_transhuge_cooling`).

Under `--scale F` the sample-count periods (adaptation, cooling) are F x the
full-scale counts (the miniature draws F of the samples: per-page counts are
scale-free, totals are not), and so are MEMTIS's byte figures (watermarks, the 10 GB
cooling trigger, the 12,800-page direct-demotion extra, the limit of 50 huge-page
splits per pass, at least 1) through `sim.scaled_bytes`.

kmigraterd ("kmigraterd", "Watermarks", `kmigraterd_demotion`,
`kmigraterd_promotion`), every 500 ms (both threads; one timer here, demotion first):
 1. deferred splits (at most 50 huge pages per node per pass,
    `deferred_split_scan_for_htmm`);
 2. after a cooling, the rescan (cool every page); after a threshold change, the
    re-sort; both run the split check on every huge page (`check_split_huge_page`);
 3. demotion (`need_toptier_demotion`, `demote_node`): with promotion demand D (the
    slow tier's active pages: bin >= hot) the fast tier must keep used + D + promotion
    watermark <= capacity (with D = 0: used + demotion watermark); the excess is
    used + D + promotion watermark - capacity, plus 12,800 pages (50 MiB) when direct
    demotion was requested (an allocation found the fast tier full:
    `alloc_pages_vma`, here `on_alloc`, which wakes the thread at once). Candidates:
    fast-tier pages below the warm threshold (`shrink_page_list`), coldest first (the
    kernel takes the inactive list's tail; we have no list order).
 4. promotion (`promote_node`, `promotion_available`): up to capacity - promotion
    watermark - used pages of the slow tier's active pages (bin >= hot), hottest
    first (the kernel takes the active list's tail), whole huge pages that fit.
Watermarks (`get_memcg_*_watermark`): promotion 3% of the fast capacity clamped to
[100 MiB, 1.5 GiB], demotion 2% clamped to [50 MiB, 1000 MiB] (the kernel's "MB" are
units of 256 pages). The floors assume a fast tier of hundreds of MB at least: on a
tier under 100 MiB the kernel's rule leaves no room to promote at all. The paper's
smallest fast tier is 740 MB (GAPBS PageRank at 1:16), where the floors are 13.5% and
6.8% of it; `floors=paper` (default) caps each floor at that share of the fast tier,
which changes nothing on fast tiers of 740 MB and more (full-scale figures) and lets
MEMTIS run on the small machines of the tests and of the capacity-bound trace setups
(docs/idt-traces.md, 52 MiB of DRAM at scale 1); `floors=kernel` keeps the kernel's
absolute floors. Migrations: `sim.migrate`, asynchronous (the mover's CPU, as
`migrate_pages(MIGRATE_ASYNC)` in kmigraterd), targets that never reclaim (a full
node stops the move). The kernel's capacity is the memcg's per-node limit
(`max_nr_base_pages`), here the node's capacity.

Splitting ("When to consider splitting", "How much to split", "Which huge pages to
split"), `split=on`: at a cooling, if the samples since the last decision exceed
max(allocated >> 2, fast capacity), a round starts (unless the previous round raised
the measured fast-tier hits by < 3%: then splitting is off for good); at the next
adaptation, budget N = (eHR - rHR) x sum_util / nr_records / avg_hp x (L_slow -
L_fast) / L_fast x 512 x gamma (`set_memcg_nr_split`, integer steps as in the kernel;
eHR = 95% of the samples that hit pages in the base-page hot set, rHR = samples on
the fast tier; latencies 80 / 270 (NVM) or 170 (CXL, also a remote-DRAM slow tier),
`latency=auto` by the slow node's kind) and the skew bins from 20 down
(`set_memcg_split_thres`). Skew per huge page at its cooling: hot_utils = subpages
with bin >= min(hot, base-page hot); skew = sum(count^2) / (11 hot_utils^2) in
`get_skew_idx` bins; 0 if hot_utils = 0 or the meta bin >= 13. The split check spends
the budget 512 pages per huge page, highest skew first (the kernel in list order).
A split copies each subpage's count to its base page. The simulator has no TLB: a
split costs only its work here (`split_cost`, 20 us of kmigraterd CPU per 2 MiB page:
freezing and remapping 512 PTEs, a choice; and one TLB shootdown of the app threads,
`machine.tlb_shootdown_s`), and its benefit is placement at 4 KiB granularity; the
lost TLB reach of split pages is not modelled (docs/memtis.md).

Not modelled: file pages (none here), the per-CPU ring buffers and lost samples,
PERF_RECORD_THROTTLE, `split_huge_page` failures, the LRU list order (see above),
the kernel's Active flag set on split subpages at bin >= hot - 1 (a transient until
the next re-sort), kmigraterd's own CPU beyond splits and `scan_cost` per page it
rescans (50 ns, a choice like the engine's `reclaim_scan_s`).

kswapd: enabling MEMTIS on a memcg sets every node's `kswapd_failures` to
MAX_RECLAIM_RETRIES (`memcg_htmm_write`, mm/memcontrol.c), i.e. switches kswapd off;
MEMTIS demotes only in kmigraterd. So `kswapd_demotion = False`; a direct reclaim of
the top node (an allocation policy such as `dram-always`) takes MEMTIS's demotion
candidates (`select_victims`). Allocation: the run's first-touch policy (MEMTIS's
`alloc_pages_vma` fills the fast tier to its limit, then the next node, which is
`dram-preferred`, the default).

Options (defaults): load_period=199, store_period=100007, quota=30 (permille of one
CPU; 0 = fixed periods), cpu_window=15s, poll=10ms, interval=500ms, adaptation=100000,
cooling=2000000, cooling_alloc=10GiB, thres_hot=1, warm=on, skip_cooling=on,
split=on, gamma=4 (tenths), split_period=2, split_max=50, latency=auto (or nvm, cxl),
floors=paper (or kernel), core=dedicated (or shared), sample_cost=300ns,
split_cost=20us, scan_cost=50ns.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from ...engine.memory import BLOCK, UNALLOC
from ...errors import TierlabError
from ...monitors.pebs import Pebs, parse_core
from ...params import parse_flag, parse_int
from ...units import PAGE, parse_duration, parse_size
from ..base import POLICIES, Policy
from ..hemem import HP, halve
from ...structures import unique_counts
from .bins import cooled_bins, memtis_cool, set_counts, split_bins

#: `pebs_period_list` (htmm.h): the 30 load sample periods, primes 199..19997
LOAD_PERIODS = (199, 293, 401, 499, 599, 701, 797, 907, 997, 1201, 1399, 1601, 1801,
                1999, 2503, 3001, 3499, 4001, 4507, 4999, 6007, 7001, 7993, 9001,
                10007, 12007, 13999, 16001, 17989, 19997)
#: `pebs_inst_period_list` (htmm.h): the store sample periods
STORE_PERIODS = (100003, 300007, 600011, 1000003, 1500003)
NBINS = 16  #: `get_idx` bins
NSKEW = 21  #: `get_skew_idx` bins (access_map)
#: latency constants (htmm.h), ns
DRAM_LAT, NVM_LAT, CXL_LAT = 80, 270, 170
LATENCIES = ("auto", "nvm", "cxl")
#: kernel watermark limits (htmm_migrater.c), in 4 KiB pages
DEMOTE_WMARK_LO, DEMOTE_WMARK_HI = 128 * 100, 2560 * 100
PROMOTE_WMARK_LO, PROMOTE_WMARK_HI = 256 * 100, 3840 * 100
DIRECT_EXTRA = 128 * 100  #: need_toptier_demotion's extra under direct demotion
#: the smallest fast tier of the paper's runs (GAPBS PageRank at 1:16,
#: memtis-userspace/bench_cmds/gapbs-pr.sh: BENCH_DRAM=740MB), in 4 KiB pages: with
#: `floors=paper` a watermark's floor is at most its share of such a tier
PAPER_MIN_FAST = 740 * 256
FLOORS = ("paper", "kernel")
SPLIT_MAX = 50  #: deferred_split_scan_for_htmm's nr_max per node per pass
MAX_SHIFT = 62
_POW2 = (1 << np.arange(NBINS, dtype=np.int64))  # 2^0 .. 2^15


def _pos_duration(v, what: str) -> float:
    s = parse_duration(v, f"memtis {what}")
    if s <= 0:
        raise TierlabError(f"bad memtis {what} {v!r}: expected a duration > 0")
    return s


#: pages per pass of the whole-page-map loop of `_nalloc`
_CHUNK = 1 << 20


def get_idx(counts) -> np.ndarray:
    """`get_idx`: floor(log2(count + 1)), capped at 15 (exact for counts < 2^53)."""
    c = np.asarray(counts, dtype=np.int64) + 1
    return np.minimum(np.frexp(c.astype(float))[1] - 1, NBINS - 1).astype(np.int64)


def get_skew_idx(num) -> np.ndarray:
    """`get_skew_idx`: the bit length of num below 1024 (0..10); from 1024 on, 11 plus
    the number of further 1024s (rounded up), at most 20."""
    n = np.asarray(num, dtype=np.int64)
    bl = np.searchsorted(_POW2[:11], np.minimum(n, 1023), side="right").astype(np.int64)
    big = 11 + np.minimum(9, np.maximum(n - 1, 0) // 1024)
    return np.where(n >= 1024, big, bl)


def clamp_wmark(pages: int, lo: int, hi: int) -> int:
    return int(min(max(pages, lo), hi))


@POLICIES.register("memtis")
class Memtis(Policy):
    """MEMTIS (SOSP'23): PEBS-sampled page-access histogram, hot threshold sized to the
    fast tier, warm set, cooling, and skew-driven huge-page splitting; kmigraterd
    promotes and demotes every 500 ms."""

    kswapd_demotion = False

    def __init__(self, load_period=199, store_period=100007, quota=30, cpu_window="15s",
                 poll="10ms", interval="500ms", adaptation=100000, cooling=2000000,
                 cooling_alloc="10GiB", thres_hot=1, warm="on", skip_cooling="on",
                 split="on", gamma=4, split_period=2, split_max=SPLIT_MAX,
                 latency="auto", floors="paper", core="dedicated", sample_cost="300ns",
                 split_cost="20us", scan_cost="50ns"):
        super().__init__(load_period=load_period, store_period=store_period, quota=quota,
                         cpu_window=cpu_window, poll=poll, interval=interval,
                         adaptation=adaptation, cooling=cooling,
                         cooling_alloc=cooling_alloc, thres_hot=thres_hot, warm=warm,
                         skip_cooling=skip_cooling, split=split, gamma=gamma,
                         split_period=split_period, split_max=split_max, latency=latency,
                         floors=floors, core=core, sample_cost=sample_cost,
                         split_cost=split_cost, scan_cost=scan_cost)
        self.load_period = parse_int(load_period, "memtis load_period", 1)
        self.store_period = parse_int(store_period, "memtis store_period", 1)
        self.quota = parse_int(quota, "memtis quota", 0, 1000)
        self.cpu_window = _pos_duration(cpu_window, "cpu_window")
        self.poll = poll
        _pos_duration(poll, "poll")
        self.interval = _pos_duration(interval, "interval")
        self.adaptation = parse_int(adaptation, "memtis adaptation", 1)
        self.cooling_period = parse_int(cooling, "memtis cooling", 1)
        self.cooling_alloc = parse_size(cooling_alloc, "memtis cooling_alloc")
        if self.cooling_alloc <= 0:
            raise TierlabError(f"bad memtis cooling_alloc {cooling_alloc!r}: expected a "
                               "size > 0")
        self.thres_hot = parse_int(thres_hot, "memtis thres_hot", 1, 15)
        self.warm = parse_flag(warm, "memtis warm")
        self.skip_cooling = parse_flag(skip_cooling, "memtis skip_cooling")
        self.split_on = parse_flag(split, "memtis split")
        self.gamma = parse_int(gamma, "memtis gamma", 0, 10)
        self.split_period = parse_int(split_period, "memtis split_period", 0, 62)
        self.split_max = parse_int(split_max, "memtis split_max", 1)
        self.latency = str(latency).strip().lower()
        if self.latency not in LATENCIES:
            raise TierlabError(f"bad memtis latency {latency!r}; valid: "
                               f"{', '.join(LATENCIES)}")
        self.floors = str(floors).strip().lower()
        if self.floors not in FLOORS:
            raise TierlabError(f"bad memtis floors {floors!r}; valid: {', '.join(FLOORS)}")
        self.core = parse_core(core)
        self.split_cost = parse_duration(split_cost, "memtis split_cost")
        self.scan_cost = parse_duration(scan_cost, "memtis scan_cost")
        if self.split_cost < 0 or self.scan_cost < 0:
            raise TierlabError("bad memtis split_cost/scan_cost: expected durations >= 0")
        self.monitor = Pebs(period=f"{self.load_period}+{self.load_period}+"
                                   f"{self.store_period}",
                            poll=poll, core=self.core, sample_cost=sample_cost,
                            busy="off", name="memtis-pebs")
        # thresholds (mem_cgroup_alloc)
        self.active = self.thres_hot
        self.warm_thres = self.thres_hot
        self.bp_active = self.thres_hot
        # sampling state
        self.clock = 0
        self.nr_sampled = 0
        self.nr_dram_sampled = 0
        self.max_dram_sampled = 0
        self.prev_dram_sampled = 0
        self.prev_max_dram_sampled = 0
        self.nr_max_sampled = 0
        self.nr_sampled_for_split = 0
        self.cooled = False
        self.need_cooling = False
        self.need_adjusting = False
        self.need_demotion = False
        self._wake = False
        self._pending_alloc_cooling = False
        # split state
        self.split_enabled = self.split_on
        self.split_happen = False
        self.need_split = False
        self.nr_split = 0
        self.nr_split_tail = 0
        self.split_threshold = 21
        self.access_map = np.zeros(NSKEW, dtype=np.int64)
        self.sum_util = 0
        self.num_util = 0
        # period adaptation
        self.li = 0
        self.si = 0
        self.cputime = 0
        self._cpu_last = 0.0
        # counters
        self.coolings = 0
        self.adaptations = 0
        self.promoted = 0
        self.demoted = 0
        self.direct_demotions = 0
        self.splits = 0
        self.split_rounds = 0
        self.period_changes = 0
        self.passes = 0

    # -- setup ---------------------------------------------------------------------
    def attach(self, sim) -> None:
        if getattr(sim, "real", False):  # before touching state LinuxSim lacks
            raise TierlabError("memtis: needs PEBS samples, which are simulated only "
                               "(user space cannot read them here); policies that run "
                               "for real: static, damon-tiering, idt")
        super().attach(sim)
        path = list(sim.machine.demotion)
        self.top = path[0]
        self.lower = path[1:]
        if not self.lower:
            raise TierlabError("memtis needs at least two tiers on the demotion path")
        self.npages = int(sim.mem.npages)
        nh = -(-self.npages // HP)
        self.nh = nh
        #: every 4 KiB page's cooling clock (a huge page's subpages carry its clock)
        #: (4 bytes: a clock counts coolings)
        self.pclk = np.zeros(nh * HP, dtype=np.int32)
        self.nall = np.zeros(nh, dtype=np.int64)  # allocated pages per huge page
        self.may_hot = np.zeros(nh * HP, dtype=bool)
        self.meta = np.zeros(nh, dtype=np.int64)  # huge pages' meta counts
        self.hclk = np.zeros(nh, dtype=np.int64)
        self.split = np.zeros(nh, dtype=bool)
        self.alive = np.zeros(nh, dtype=bool)
        self.skew = np.zeros(nh, dtype=np.int64)
        self.queued = np.zeros(nh, dtype=bool)
        self._ar = np.arange(HP, dtype=np.int64)
        f = float(sim.scaled_bytes(1.0))
        self.fscale = f
        pg = lambda n: max(int(round(n * f)), 1)  # noqa: E731  full-scale pages -> scaled
        self.cap = int(sim.mem.capacity[self.top])  # max_nr_dram_pages
        lo_p, lo_d = pg(PROMOTE_WMARK_LO), pg(DEMOTE_WMARK_LO)
        if self.floors == "paper":  # fast tiers smaller than any the paper ran
            lo_p = min(lo_p, self.cap * PROMOTE_WMARK_LO // PAPER_MIN_FAST)
            lo_d = min(lo_d, self.cap * DEMOTE_WMARK_LO // PAPER_MIN_FAST)
        self.promo_wmark = clamp_wmark(self.cap * 3 // 100, lo_p, pg(PROMOTE_WMARK_HI))
        self.demo_wmark = clamp_wmark(self.cap * 2 // 100, lo_d, pg(DEMOTE_WMARK_HI))
        self.direct_extra = pg(DIRECT_EXTRA)
        self.split_per_pass = max(int(round(self.split_max * f)), 1)
        self.cool_every = max(int(round(self.cooling_period * f)), 1)
        #: base page / subpage counts. A count gains 512 per sample and is halved at
        #: every clock tick (lazily, before its next gain), and the clock ticks every
        #: cool_every samples, so it stays below 1024 x cool_every plus a new page's
        #: hotness factor (<= 2^16): 4 bytes whenever that fits (2,000,000 samples at
        #: full scale: 2.05e9 < 2^32), else 8 (8 of memtis's 17 bytes a page)
        bound = 1024 * self.cool_every + (1 << 17)
        self.cnt = np.zeros(nh * HP, dtype=np.uint32 if bound < 2**32 else np.int64)
        #: pages per bin of their cooled counts (`histograms`), kept through every
        #: write of cnt or pclk below; None after a clock tick (recounted at the next use)
        self._ebins = None
        self.adapt_every = max(int(round(self.adaptation * f)), 1)
        self.alloc_step = max(int(sim.scaled_bytes(self.cooling_alloc)) // PAGE, 1)
        self.nr_alloc = 0
        kind = sim.machine.tiers[self.lower[0]].kind
        lat = self.latency
        if lat == "auto":
            lat = "nvm" if kind in ("optane", "nvm") else "cxl"
        self.slow_lat = NVM_LAT if lat == "nvm" else CXL_LAT
        self.monitor.fast = [self.top]
        self.monitor.attach(sim)
        self.monitor.subscribe(self._on_samples)
        self._cpu_last = float(self.monitor.cpu_seconds)
        if self.quota:
            sim.every(self.cpu_window, self._adapt_period)
        sim.every(self.interval, self.kmigraterd)
        if sim.mem.used.sum() > 0:  # pages placed before attach
            self._born_range(0, self.npages)

    # -- page state ------------------------------------------------------------------
    def _hotness_factor(self) -> int:
        """`get_accesses_from_idx(active_threshold + 1)`."""
        i = min(self.active + 1, 62)
        return 0 if i == 0 else 1 << i

    def _born_range(self, start: int, end: int) -> None:
        """First touch of [start, end): new huge pages and new pages start hot."""
        if end <= start:
            return
        h0, h1 = start // HP, (end - 1) // HP + 1
        hs = np.arange(h0, h1, dtype=np.int64)
        newc = self.clock + (1 if self.skip_cooling else 0)
        hf = self._hotness_factor()
        born = hs[~self.alive[hs]]
        if born.size:
            self.alive[born] = True
            self.split[born] = False
            self.queued[born] = False
            self.skew[born] = 0
            self.meta[born] = hf
            self.hclk[born] = newc
            # a new huge page's subpages outside [start, end) start at 0 (those inside
            # are set below): only the two edge huge pages can have such subpages
            edge = born[(born * HP < start) | ((born + 1) * HP > end)]
            idx = (edge[:, None] * HP + self._ar).ravel()
            idx = idx[(idx < start) | (idx >= end)]
            with self._writing(idx):
                self.cnt[idx] = 0
                self.may_hot[idx] = False
                self.pclk[idx] = newc
        with self._writing(slice(start, end)):
            self.cnt[start:end] = hf
            self.may_hot[start:end] = False
            self.pclk[start:end] = newc
        self.nall[hs] = self._nalloc(hs)

    def _cool_huge(self, hs, kind: str = "migration") -> None:
        """`check_transhuge_cooling` for huge pages whose clock is behind: skewness,
        hot_utils and the split statistics from the counts before halving, then halve
        subpages and meta once per missed tick."""
        hs = np.asarray(hs, dtype=np.int64)
        hs = hs[self.hclk[hs] < self.clock]
        step = _CHUNK // HP  # a cooling rescans every huge page: 1 Mi subpages a pass
        for a in range(0, hs.size, step):
            self._cool_huge_chunk(hs[a:a + step])
        if self.scan_cost and hs.size:  # the walk over 512 subpage records
            self.sim.charge_cpu(self.scan_cost * HP * hs.size, kind)

    def _cool_huge_chunk(self, hs) -> None:
        d = np.minimum(self.clock - self.hclk[hs], MAX_SHIFT)
        # the squares' sum, get_idx, hot_utils and refs, may_hot, the halving and the
        # kept bins: one pass
        hot_utils, refs, sq = memtis_cool(hs, d, HP, self.cnt, self.pclk, self.may_hot,
                                          self._ebins, min(self.active, self.bp_active),
                                          self.bp_active, self.clock, MAX_SHIFT, NBINS)
        self.meta[hs] = np.right_shift(self.meta[hs], d)
        midx = get_idx(self.meta[hs])
        hu = np.maximum(hot_utils, 1).astype(float)
        raw = np.floor(sq / 11.0 / hu / hu)
        sk = get_skew_idx(np.minimum(raw, 2 ** 62).astype(np.int64))
        sk = np.where((hot_utils == 0) | (midx >= 13), 0, sk)
        self.skew[hs] = sk
        self.access_map += np.bincount(sk, minlength=NSKEW)[:NSKEW]
        used = hot_utils > 0
        self.sum_util += int((refs[used] // HP).sum())
        self.num_util += int(used.sum())
        self.hclk[hs] = self.clock

    def _cool_base(self, ps) -> None:
        """`check_base_cooling` for base pages whose clock is behind."""
        ps = np.asarray(ps, dtype=np.int64)
        ps = ps[self.pclk[ps] < self.clock]
        for a in range(0, ps.size, _CHUNK):
            self._cool_base_chunk(ps[a:a + _CHUNK])

    def _cool_base_chunk(self, ps) -> None:
        d = np.minimum(self.clock - self.pclk[ps], MAX_SHIFT)
        c = self.cnt[ps].astype(np.int64)
        self.may_hot[ps] = get_idx(c) >= self.bp_active
        with self._writing(ps):
            self.cnt[ps] = np.right_shift(c, d)
            self.pclk[ps] = self.clock

    # -- samples ---------------------------------------------------------------------
    def _on_samples(self, batch, now: float) -> None:
        """ksamplingd: apply each sample in time order (`update_pginfo`), cooling and
        threshold adaptation at their sample counts."""
        if self._pending_alloc_cooling and len(batch):
            self._pending_alloc_cooling = False
            self._cooling()
        if len(batch) == 0:
            return
        p = batch.sample_pages
        p = p[self.sim.mem.node[p] != UNALLOC]
        n = p.shape[0]
        if n == 0:
            return
        on_top = self.sim.mem.node[p] == self.top
        k0 = self.nr_sampled
        # sample numbers k0+1 .. k0+n; boundaries at multiples of the periods (a
        # cooling sample does not also adapt: `update_pginfo`'s else-if)
        a = self.adapt_every
        first = (k0 // a + 1) * a
        ks = list(range(first, k0 + n + 1, a))
        c = self.cool_every
        ks += list(range((k0 // c + 1) * c, k0 + n + 1, c))
        ks = sorted(set(ks))
        pos = 0
        for k in ks:
            end = k - k0
            self._apply(p[pos:end], on_top[pos:end])
            pos = end
            self.nr_sampled = k
            if k % c == 0:
                self._cooling()
            else:
                self._adjust_threshold()
        if pos < n:
            self._apply(p[pos:], on_top[pos:])
        self.nr_sampled = k0 + n

    def _apply(self, p, on_top) -> None:
        """`update_base_page` / `update_huge_page` for one run of samples (no cooling or
        adaptation inside): lazy cooling first, then +512 per sample to the 4 KiB page
        and +1 to the huge page's meta; counts samples hitting may-hot pages (eHR)."""
        n = p.shape[0]
        if n == 0:
            return
        nd = int(np.count_nonzero(on_top))
        self.nr_dram_sampled += nd
        self.nr_sampled_for_split += n
        self.nr_max_sampled += n
        up, k = unique_counts(p)
        uh = up // HP  # ascending, as up is
        huge = ~self.split[uh]
        hh, hk = uh[huge], k[huge]
        first = np.ones(hh.shape[0], dtype=bool)
        first[1:] = hh[1:] != hh[:-1]
        starts = np.flatnonzero(first)
        self._cool_huge(hh[starts], "monitor")
        self._cool_base(up[~huge])
        # eHR: the first sample sees the page's may_hot; the j-th (j >= 2) sees the
        # count after j-1 increments: bin >= bp <=> c0 + 512 (j-1) + 1 >= 2^bp
        c0 = self.cnt[up].astype(np.int64)
        bp = self.bp_active
        thr = (1 << bp) if bp <= 15 else (1 << 62)
        jmin = np.maximum(-(-(thr - 1 - c0) // HP), 1)  # smallest j-1 >= 1 that is hot
        later = np.maximum(k - jmin, 0)  # of j-1 = 1 .. k-1
        self.max_dram_sampled += int(self.may_hot[up].sum() + later.sum())
        new = c0 + HP * k
        set_counts(self.cnt, self.pclk, up, new, self.clock, MAX_SHIFT, NBINS, self._ebins)
        self.may_hot[up] = get_idx(new) >= bp
        if starts.shape[0]:  # the samples of each huge page summed: its runs in hh
            self.meta[hh[starts]] += np.add.reduceat(hk, starts)

    # -- histogram and thresholds ----------------------------------------------------------
    def _groups(self):
        """The live huge pages: (those not split, those split)."""
        alive = np.flatnonzero(self.alive)
        split = self.split[alive]
        return alive[~split], alive[split]

    def _huge_counts(self, hs):
        """Cooled meta counts and allocated pages of huge pages `hs` (not split)."""
        return halve(self.meta[hs], self.hclk[hs], self.clock), self.nall[hs]

    def _split_chunks(self, sp):
        """The base pages of split huge pages `sp`, in address order, a chunk at a time
        (a long run splits most of them: 134 M pages at 512 GiB)."""
        step = _CHUNK // HP
        for a in range(0, sp.size, step):
            bp = (sp[a:a + step, None] * HP + self._ar).ravel()
            yield bp[bp < self.npages]

    def _split_pages(self, sp):
        """`_split_chunks`' allocated pages with their cooled counts, chunk by chunk."""
        node = self.sim.mem.node
        for bp in self._split_chunks(sp):
            bp = bp[node[bp] != UNALLOC]
            yield bp, halve(self.cnt[bp], self.pclk[bp], self.clock)

    def _ntop(self) -> np.ndarray:
        """Pages on the top node per huge page: the engine's block counts when a block
        is a huge page, else a reshape of the page map."""
        mem = self.sim.mem
        if getattr(mem, "blocks", None) is not None and BLOCK == HP:
            return mem.blocks[:, self.top].astype(np.int64)
        node = mem.node
        full = self.npages // HP
        out = np.zeros(self.nh, dtype=np.int64)
        out[:full] = np.count_nonzero(node[:full * HP].reshape(full, HP) == self.top,
                                      axis=1)
        if full < self.nh:
            out[full] = np.count_nonzero(node[full * HP:] == self.top)
        return out

    def _nalloc(self, hs) -> np.ndarray:
        node = self.sim.mem.node
        if hs.size == 0:
            return np.zeros(0, dtype=np.int64)
        h0, h1 = int(hs[0]), int(hs[-1]) + 1
        if h1 - h0 == hs.size and h1 * HP <= self.npages:  # a run: a reshape, no index
            out = np.empty(hs.size, dtype=np.int64)
            for a in range(h0, h1, _CHUNK // HP):
                b = min(a + _CHUNK // HP, h1)
                out[a - h0:b - h0] = np.count_nonzero(
                    node[a * HP:b * HP].reshape(b - a, HP) != UNALLOC, axis=1)
            return out
        idx = hs[:, None] * HP + self._ar
        nd = np.where(idx < self.npages, node[np.minimum(idx, self.npages - 1)], UNALLOC)
        return np.count_nonzero(nd != UNALLOC, axis=1)

    @contextmanager
    def _writing(self, pages):
        """A block writing cnt or pclk of `pages` (an index or a slice): they leave the
        kept bins before it and rejoin them after."""
        self._bins_add(pages, -1)
        yield
        self._bins_add(pages, 1)

    def _bins_add(self, pages, sign: int) -> None:
        if self._ebins is not None:
            self._ebins += sign * cooled_bins(np.ravel(self.cnt[pages]),
                                              np.ravel(self.pclk[pages]), self.clock,
                                              MAX_SHIFT, NBINS)

    def histograms(self):
        """(page histogram, estimated-base-page histogram), 16 bins each."""
        hs, sp = self._groups()
        hm, nall = self._huge_counts(hs)
        hg = np.bincount(get_idx(hm), weights=nall, minlength=NBINS)[:NBINS]
        if sp.size:
            hg = hg + split_bins(self.cnt, self.pclk, self.sim.mem.node, sp, HP, UNALLOC,
                                 self.clock, MAX_SHIFT, NBINS)
        # every 4 KiB page by its own count; unallocated pages have count 0 (bin 0).
        # The hot path of a run (every adaptation): lazy halving and get_idx in one
        # compiled pass (bit_length(count + 1) = floor(log2(count + 1)) + 1)
        if self._ebins is None:
            self._ebins = cooled_bins(self.cnt, self.pclk, self.clock, MAX_SHIFT, NBINS)
        ebp = self._ebins[1:NBINS + 1].copy()
        ebp[0] -= self.cnt.shape[0] - int(self.nall.sum())
        return hg.astype(np.int64), ebp.astype(np.int64)

    @staticmethod
    def _walk(hist, max_pages: int):
        """`__adjust_active_threshold`'s walk: (threshold, pages at or above it)."""
        nr = 0
        i = NBINS - 1
        while i >= 0:
            if nr + int(hist[i]) > max_pages:
                break
            nr += int(hist[i])
            i -= 1
        if i != NBINS - 1:
            i += 1
        return i, nr

    def _adjust_threshold(self) -> None:
        """`__adjust_active_threshold` (every adaptation period)."""
        self.adaptations += 1
        max_pages = self.cap - self.promo_wmark
        hg, ebp = self.histograms()
        idx_hot, nr_active = self._walk(hg, max_pages)
        need_warm = nr_active < max_pages * 75 // 100
        idx_bp, _ = self._walk(ebp, max_pages)
        idx_hot = max(idx_hot, self.thres_hot)
        idx_bp = max(idx_bp, self.thres_hot)
        if self.cooled:
            if idx_hot < self.active and self.active > 1:
                self.active -= 1
            if idx_bp < self.bp_active:
                self.bp_active = idx_bp
            self.cooled = False
            self.need_adjusting = True
            if self.need_split:
                self._set_nr_split()
                self._set_split_thres()
                self.nr_sampled_for_split = 0
                self.need_split = False
        else:
            if idx_hot > self.active:
                self.active = idx_hot
                self.need_adjusting = True
            elif self.split_happen and self.split_enabled and idx_hot < self.active:
                self.active = idx_hot
                self.need_adjusting = True
            self.bp_active = idx_bp
        self.warm_thres = self.active - 1 if (self.warm and need_warm) else self.active

    def _cooling(self) -> None:
        """`update_pginfo`'s cooling branch with `__cooling`."""
        self.coolings += 1
        if self.need_cooling:  # the previous rescan is not done: only the clock ticks
            self.clock += 1
            self._ebins = None
            return
        self.access_map[:] = 0
        self.sum_util = 0
        self.num_util = 0
        self.clock += 1
        self._ebins = None
        self.bp_active = max(self.bp_active - 1, 0)
        self.cooled = True
        self.need_cooling = True
        temp_rhr = self.prev_dram_sampled
        self.prev_dram_sampled = (self.prev_dram_sampled >> 1) + self.nr_dram_sampled
        self.nr_dram_sampled = 0
        self.prev_max_dram_sampled = ((self.prev_max_dram_sampled >> 1)
                                      + self.max_dram_sampled)
        self.max_dram_sampled = 0
        if not self.need_split and self.split_enabled:
            usage = int(self.sim.mem.used.sum()) >> self.split_period
            usage = max(usage, self.cap)
            if self.nr_sampled_for_split > usage:
                if self.split_happen and self.prev_dram_sampled < temp_rhr * 103 // 100:
                    self.split_enabled = False  # htmm_thres_split = 0, for good
                    return
                self.split_happen = False
                self.need_split = True
            else:
                self.nr_split += self.nr_split_tail
                self.nr_split_tail = 0
                self._set_split_thres()
        self.nr_max_sampled >>= 1

    # -- split budget --------------------------------------------------------------------
    def _set_nr_split(self) -> None:
        """`set_memcg_nr_split`: the number of 4 KiB pages to split (integer steps)."""
        self.nr_split = 0
        self.nr_split_tail = 0
        ehr = self.prev_max_dram_sampled * 95 // 100
        rhr = self.prev_dram_sampled
        if ehr <= rhr or self.num_util == 0:
            return
        avg = self.sum_util // self.num_util
        if avg == 0:
            return
        nr_records = (self.cool_every << 1) - (self.cool_every >> max(self.clock - 1, 0)
                                               if self.clock - 1 < 63 else 0)
        if nr_records <= 0:
            return
        self.split_rounds += 1
        n = (ehr - rhr) * self.sum_util // nr_records
        n //= avg
        n *= self.slow_lat - DRAM_LAT
        n //= DRAM_LAT
        n *= HP
        n *= self.gamma
        n //= 10
        self.nr_split = int(n)

    def _set_split_thres(self) -> None:
        """`set_memcg_split_thres`: skew bins from 20 down cover the budget."""
        if self.nr_split == 0:
            self.split_threshold = 21
            return
        nr = self.nr_split
        i = NSKEW - 1
        while i > 0:
            pages = int(self.access_map[i]) * HP
            if nr < pages:
                self.nr_split_tail = nr
                self.nr_split -= nr
                break
            nr -= pages
            i -= 1
        if i != NSKEW - 1:
            self.split_threshold = i + 1

    def _check_split(self, hs) -> np.ndarray:
        """`check_split_huge_page` over huge pages, highest skew first: which go to the
        deferred split queue (spending the budgets 512 pages each)."""
        if not self.split_enabled or self.split_threshold == 0 or hs.size == 0:
            return np.zeros(0, dtype=np.int64)
        hs = hs[~self.queued[hs]]
        tail_idx = self.split_threshold - 1
        hs = hs[self.skew[hs] >= tail_idx]
        if hs.size == 0:
            return hs
        hs = hs[np.lexsort((hs, -self.skew[hs]))]
        # pages above the tail bin spend nr_split, 512 pages each; once it is spent, and
        # for the tail bin, every page spends nr_split_tail (the kernel's rule, in
        # order of skew)
        k1 = min(int(np.count_nonzero(self.skew[hs] > tail_idx)), -(-self.nr_split // HP))
        self.nr_split = max(self.nr_split - HP * k1, 0)
        k2 = min(hs.size - k1, -(-self.nr_split_tail // HP))
        self.nr_split_tail = max(self.nr_split_tail - HP * k2, 0)
        out = hs[:k1 + k2]
        self.access_map = np.maximum(
            self.access_map - np.bincount(self.skew[out], minlength=NSKEW)[:NSKEW], 0)
        self.queued[out] = True
        return out

    def _do_splits(self, now: float) -> None:
        """`deferred_split_scan_for_htmm`: split at most `split_per_pass` queued huge
        pages per node (the node of the page's first allocated page)."""
        q = np.flatnonzero(self.queued & self.alive & ~self.split)
        self.queued[:] = self.queued & self.alive & ~self.split
        if q.size == 0:
            return
        idx = q[:, None] * HP + self._ar
        node = self.sim.mem.node
        nd = np.where(idx < self.npages, node[np.minimum(idx, self.npages - 1)], UNALLOC)
        first = np.where((nd != UNALLOC).any(axis=1), nd[np.arange(q.size),
                                                         np.argmax(nd != UNALLOC, axis=1)],
                         UNALLOC)
        pick = []
        for n in np.unique(first):
            pick.append(q[first == n][:self.split_per_pass])
        hs = np.concatenate(pick)
        self._cool_huge(hs)
        self.split[hs] = True
        self.queued[hs] = False
        sub = (hs[:, None] * HP + self._ar).ravel()
        with self._writing(sub):
            self.pclk[sub] = np.repeat(self.hclk[hs], HP)
        self.splits += int(hs.size)
        self.split_happen = True
        sim = self.sim
        if self.split_cost:
            sim.charge_cpu(self.split_cost * hs.size, "migration")
        # one TLB shootdown per split; scale-free as the engine's batches are
        sim.stall(hs.size / sim.scale * sim.machine.tlb_shootdown_s * sim.threads)

    # -- kmigraterd --------------------------------------------------------------------
    def _units(self, keep=None):
        """LRU units with their cooled bin and page counts on/off the top node:
        (ids, is_huge, bin, count, pages on top, pages elsewhere), huge pages first, then
        base pages in address order; only those `keep(bin, on, off)` selects (all
        without it). The base pages are taken a chunk at a time, so a caller that keeps
        a few (candidates for a move) never holds all of them."""
        def unit(ids, huge, cnt, on, off):
            b = get_idx(cnt)
            cols = (ids, np.full(ids.size, huge), b, cnt, on, off)
            if keep is None:
                return cols
            m = keep(b, on, off)
            return tuple(c[m] for c in cols)

        hs, sp = self._groups()
        hm, nall = self._huge_counts(hs)
        ntop = self._ntop()[hs]
        parts = [unit(hs, True, hm, ntop, nall - ntop)]
        node = self.sim.mem.node
        for bp, bc in self._split_pages(sp):
            btop = (node[bp] == self.top).astype(np.int64)
            parts.append(unit(bp, False, bc, btop, 1 - btop))
        return tuple(np.concatenate(c) for c in zip(*parts))

    def _movable(self, b, on, off) -> np.ndarray:
        """The units `_demote` and `_promote` look at: demotion candidates (all pages on
        top, below warm) and the slow-tier hot units (promotion candidates and the
        promotion demand)."""
        return ((on > 0) & (off == 0) & (b < self.warm_thres)) | \
            ((off > 0) & (b >= self.active))

    def _pages(self, ids, huge, on_top: bool) -> np.ndarray:
        """The allocated 4 KiB pages of units (in their order) on / off the top node."""
        if len(ids) == 0:
            return np.zeros(0, dtype=np.int64)
        node = self.sim.mem.node
        parts = []
        hs = ids[huge]
        if hs.size:
            idx = (hs[:, None] * HP + self._ar).ravel()
            parts.append((np.repeat(np.flatnonzero(huge), HP), idx))
        if (~huge).any():
            parts.append((np.flatnonzero(~huge), ids[~huge]))
        order = np.concatenate([a for a, _ in parts])
        pages = np.concatenate([b for _, b in parts])
        o = np.argsort(order, kind="stable")
        pages = pages[o]
        pages = pages[pages < self.npages]
        nd = node[pages]
        sel = (nd == self.top) if on_top else ((nd != self.top) & (nd != UNALLOC))
        return pages[sel]

    def kmigraterd(self, now: float) -> None:
        """One pass of both kmigraterd threads: splits, rescan, demote, promote."""
        self.passes += 1
        self._do_splits(now)
        self._rescan()
        units = self._units(self._movable)
        self._demote(units)
        self._promote(units)

    def _rescan(self) -> None:
        """`cooling_node` after a cooling (cool every page) or `adjusting_node` after a
        threshold change; both run the split check over the huge pages."""
        if not (self.need_cooling or self.need_adjusting):
            return
        hs, sp = self._groups()
        if self.need_cooling:
            self._cool_huge(hs)
            for bp in self._split_chunks(sp):
                self._cool_base(bp)
            if self.scan_cost and sp.size:
                self.sim.charge_cpu(self.scan_cost * (sp.size * HP), "migration")
            self.need_cooling = False
        else:  # adjusting_node (a pending re-sort waits for the pass after a cooling)
            self.need_adjusting = False
            if self.scan_cost:  # every list entry checked once
                self.sim.charge_cpu(self.scan_cost * (hs.size + int(self.nall[sp].sum())),
                                    "migration")
        self._check_split(hs)

    def _demand(self, b, off) -> int:
        """Promotion demand: slow-tier pages on the active list (bin >= hot)."""
        return int(off[b >= self.active].sum())

    def _demote(self, units) -> int:
        """`need_toptier_demotion` + `demote_node` (units: `_units(_movable)`)."""
        sim = self.sim
        used = int(sim.mem.used[self.top])
        ids, huge, b, cnt, on, off = units
        demand = self._demand(b, off)
        cap, maxw, minw = self.cap, self.promo_wmark, self.demo_wmark
        exceeded = 0
        direct = False
        if self.need_demotion and used + maxw > cap:
            direct = True
            exceeded = maxw - (cap - used) if used < cap else used + maxw - cap
            exceeded += self.direct_extra
        elif (used + demand + maxw > cap) if demand else (used + minw > cap):
            exceeded = used + demand + maxw - cap
        moved = 0
        if exceeded > 0:
            if direct:
                self.direct_demotions += 1
            cand = np.flatnonzero((on > 0) & (off == 0) & (b < self.warm_thres))
            cand = cand[np.lexsort((ids[cand], cnt[cand]))]  # coldest first
            sizes = on[cand]
            before = np.cumsum(sizes) - sizes
            cand = cand[before < exceeded]
            pages = self._pages(ids[cand], huge[cand], on_top=True)
            for node in self.lower:
                if moved >= pages.size:
                    break
                moved += sim.migrate(pages[moved:], node, reason="memtis-demote")
            self.demoted += moved
            if self.warm:
                low_active = min(demand, exceeded)
                if low_active and moved < low_active:
                    self.warm_thres = self.active
        if int(sim.mem.used[self.top]) + minw < cap:
            self.need_demotion = False
        return moved

    def _promote(self, units) -> int:
        """`promote_node` with `promotion_available` (units: `_units(_movable)` before
        this pass's demotion, which moved only pages below warm, never candidates
        here)."""
        sim = self.sim
        mem = sim.mem
        used = int(mem.used[self.top])
        room = self.cap - self.promo_wmark - used
        if room <= 0:
            return 0
        ids, huge, b, cnt, on, off = units
        cand = np.flatnonzero((off > 0) & (b >= self.active))
        if cand.size == 0:
            return 0
        nr = min(room, int(off[cand].sum()))
        fit = int(mem.free[self.top] - mem.wmark_min[self.top])
        cand = cand[np.lexsort((ids[cand], -cnt[cand]))]  # hottest first
        sizes = off[cand]
        cum = np.cumsum(sizes)
        before = cum - sizes
        cand = cand[(before < nr) & (cum <= fit)]
        pages = self._pages(ids[cand], huge[cand], on_top=False)
        moved = sim.migrate(pages, self.top, reason="memtis-promote")
        self.promoted += moved
        return moved

    # -- sampling period -------------------------------------------------------------
    def _adapt_period(self, now: float) -> None:
        """ksamplingd's CPU check every `cpu_window` (15 s)."""
        mon = self.monitor
        spent = float(mon.cpu_seconds) - self._cpu_last
        self._cpu_last = float(mon.cpu_seconds)
        cur = int(spent / (self.cpu_window * self.fscale) * 1000)  # permille of a CPU
        if not self.cputime:
            self.cputime = ((cur << 3) + (self.cputime << 1)) // 10
        else:
            self.cputime = cur
        li, si = self.li, self.si
        if self.cputime > self.quota + 5:
            li = min(li + 1, len(LOAD_PERIODS) - 1)
            si = min(si + 1, len(STORE_PERIODS) - 1)
        elif self.cputime < self.quota - 5 and li:
            li, si = li - 1, max(si - 1, 0)
        if (li, si) != (self.li, self.si):
            self.li, self.si = li, si
            self.set_periods(LOAD_PERIODS[li], STORE_PERIODS[si])

    def set_periods(self, load: int, store: int) -> None:
        """`pebs_update_period`: new sample periods from the next poll on."""
        mon = self.monitor
        for d in (mon.period, mon.sampler.period):
            d["fast_load"] = d["slow_load"] = int(load)
            d["store"] = int(store)
        self.period_changes += 1

    # -- hooks ---------------------------------------------------------------------
    def on_alloc(self, start: int, end: int, node: int) -> None:
        if not hasattr(self, "cnt") or end <= start:
            return
        self._born_range(start, end)
        mem = self.sim.mem
        used = int(mem.used[self.top])
        # alloc_pages_vma: the fast tier at its limit sends pages down and requests a
        # direct demotion; near it (demotion watermark) also requests one
        if used + self.demo_wmark >= self.cap:
            self.need_demotion = True
            self._wake = True
        total = int(mem.used.sum())
        if total >= self.nr_alloc + self.alloc_step:  # need_memcg_cooling
            self.nr_alloc = total
            self._pending_alloc_cooling = True

    def on_change(self) -> None:
        """kmigraterd_wakeup after an allocation asked for a direct demotion."""
        if self._wake and hasattr(self, "cnt"):
            self._wake = False
            self._demote(self._units(self._movable))

    def on_free(self, start: int, end: int) -> None:
        if not hasattr(self, "cnt") or end <= start:
            return
        with self._writing(slice(start, end)):
            self.cnt[start:end] = 0
        self.may_hot[start:end] = False
        h0, h1 = start // HP, (end - 1) // HP + 1
        hs = np.arange(h0, h1, dtype=np.int64)
        self.nall[hs] = self._nalloc(hs)
        dead = hs[self.nall[hs] == 0]
        self.alive[dead] = False
        self.split[dead] = False
        self.queued[dead] = False
        self.meta[dead] = 0

    def select_victims(self, node: int, n: int):
        """Direct reclaim of the top node: MEMTIS's demotion candidates (below warm),
        coldest first, then the rest of the inactive list."""
        if node != getattr(self, "top", None) or n <= 0 or not hasattr(self, "cnt"):
            return None
        top = max(self.warm_thres, self.active)
        ids, huge, b, cnt, on, off = self._units(lambda b, on, off: (on > 0) & (b < top))
        for limit in (self.warm_thres, self.active):
            cand = np.flatnonzero((on > 0) & (b < limit))
            if cand.size:
                cand = cand[np.lexsort((ids[cand], cnt[cand]))]
                pages = self._pages(ids[cand], huge[cand], on_top=True)[:n]
                if pages.size:
                    return pages
        return None

    def stats(self) -> dict:
        mon = self.monitor
        out = {"monitor": mon.stats(), "hot_threshold": int(self.active),
               "warm_threshold": int(self.warm_thres),
               "bp_hot_threshold": int(self.bp_active),
               "load_period": int(mon.period["fast_load"]),
               "store_period": int(mon.period["store"]),
               "period_changes": int(self.period_changes),
               "samples": int(self.nr_sampled), "coolings": int(self.coolings),
               "adaptations": int(self.adaptations), "passes": int(self.passes),
               "promoted_pages": int(self.promoted), "demoted_pages": int(self.demoted),
               "direct_demotions": int(self.direct_demotions),
               "splits": int(self.splits), "split_rounds": int(self.split_rounds),
               "split_enabled": bool(self.split_enabled),
               "ehr_samples": int(self.prev_max_dram_sampled),
               "rhr_samples": int(self.prev_dram_sampled)}
        if hasattr(self, "cnt"):
            ids, huge, b, cnt, on, off = self._units(lambda b, on, off: b >= self.active)
            hot = b >= self.active
            out["hot_pages"] = int((on + off)[hot].sum())
            out["hot_pages_fast"] = int(on[hot].sum())
            out["promotion_watermark_pages"] = int(self.promo_wmark)
            out["demotion_watermark_pages"] = int(self.demo_wmark)
        return out
