"""NOMAD's kernel mechanisms (Xiang et al., OSDI'24; ALGORITHMS.md, "NOMAD"): transactional
page migration (TPM) and the shadow copies of non-exclusive tiering.

Both live in the kernel (lingfenghsiang/Nomad: nomad.patch, async_promote_main.c), not in
the policy, and both depend on when the application writes a page, so they are modelled
here, on the engine's side of the policy interface, from the page's true write rate:

- TPM (`nomad_copy_and_remap_page`): the page is cleaned (its dirty PTE cleared and
  flushed), copied while it stays mapped, and remapped only if it was not written during
  the copy; a write aborts the transaction (the old page stays, the copy is wasted) and the
  promotion worker retries it, up to `retries` passes (10, `MIGRATE_ASYNC` retries). With
  the page written at w per second (Poisson) and a copy of T seconds, one attempt succeeds
  with probability exp(-w T).
- Shadows (`link_shadow_page`): after a successful TPM the old slow-tier frame is kept and
  the new PTE is write-protected. The first write drops the shadow (`do_wp_page` hunk: a
  write-protect fault); demoting a page whose shadow is still valid remaps it onto the
  shadow, no copy (`demotion_unmap_and_move`); under memory pressure on the shadow's node
  shadows are freed before anything else (`reclaim_shadow_page`, the `shrink_lruvec` hunk).
  A shadow frame takes capacity: it counts in `mem.held` of its node (so in `mem.free`),
  not in the process's pages (`mem.used`, RSS).

The first write to a shadowed page is drawn in units of work (the rate field's clock):
after Exp(1) / w_p work, w_p the page's writes per unit of work; when the field changes
the remaining time is drawn again (memoryless). Per shadow this keeps one node byte per
page (created at the first TPM) and, per live shadow, its page and expiry.
"""
from __future__ import annotations

import numpy as np

from ..kernels import SortedRun, page_dtype, push_tiered, take_through
from .memory import UNALLOC

#: a page's shadow generation: 2 bytes, so that a generation wraps (and forces a
#: compaction of every entry) once in 65,535 shadows of a page, not 255 (NOMAD at 10x
#: bench_memsim compacted at every few promotion batches)
GEN = np.uint16
GEN_MAX = np.iinfo(GEN).max


class ShadowCopies:
    """The shadow frames of promoted pages and the TPM transactions of one run."""

    def __init__(self, sim):
        self.sim = sim
        mem = sim.mem
        self.node = np.full(mem.npages, UNALLOC, dtype=np.uint8)  #: shadow's node per page
        #: each page's shadow generation (bumped at every new shadow): an entry of
        #: `pages` is live only while its page's shadow is there and of its generation,
        #: so a page shadowed again needs no search for its old entry
        self.gen = np.zeros(mem.npages, dtype=GEN)
        #: the entries in creation order, in the first `_n` places of buffers that
        #: double when full (a copy of every entry at each `add` made NOMAD quadratic
        #: in its promotions; the places past `_n` stay untouched): the shadowed pages
        #: (live or stale; 4 bytes while page numbers fit) and each entry's generation
        self._pdt = page_dtype(mem.npages)
        self._pages = np.zeros(1024, dtype=self._pdt)
        self._egen = np.zeros(1024, dtype=GEN)
        self._n = 0
        #: the same entries by the work at which each page is first written: a few
        #: sorted runs (keys: that work; tag: the generation; `kernels.push_tiered`),
        #: so a tick takes the expired prefixes instead of comparing every entry (NOMAD
        #: at 10x bench_memsim: a quarter of its time)
        self._runs: list[SortedRun] = []
        self._dead = 0  #: entries known stale (compacted once a quarter of them)
        #: per node, an entry index before which no entry is a live shadow on it (an
        #: entry that is not a live shadow on a node never becomes one): `reclaim`
        #: starts its scan there
        self._rptr: dict = {}
        self.rng = sim.rng_for("nomad-shadows")
        self.created = 0
        self.remapped = 0
        #: shadows freed, by cause: "write" (write-protect fault), "reclaimed" (memory
        #: pressure on their node), "other" (the page freed or moved elsewhere)
        self.dropped = {"write": 0, "reclaimed": 0, "other": 0}
        self.tpm_attempts = 0
        self.tpm_aborts = 0
        self.tpm_failed = 0

    # -- bookkeeping -------------------------------------------------------------------
    @property
    def pages(self) -> np.ndarray:
        return self._pages[:self._n]

    @property
    def egen(self) -> np.ndarray:
        return self._egen[:self._n]

    def _live(self) -> np.ndarray:
        p = self.pages
        return (self.node[p] != UNALLOC) & (self.gen[p] == self.egen)

    def per_node(self) -> np.ndarray:
        """Shadow frames held on each node, recounted from the live entries (the engine
        keeps the same counts incrementally in `mem.held`)."""
        k = self.sim.machine.nnodes
        live = self.node[self.pages[self._live()]]
        return np.bincount(live, minlength=256)[:k]

    def _first_write(self, pages) -> np.ndarray:
        """Work until each page's next write (Exp with the page's write rate)."""
        _, w = self.sim.timeline.field.rate_of(pages)
        e = self.rng.exponential(1.0, size=len(pages))
        with np.errstate(divide="ignore"):
            return self.sim.work + np.where(w > 0, e / np.where(w > 0, w, 1.0), np.inf)

    def add(self, pages, src) -> None:
        """Keep the old frames of `pages` (on nodes `src`) as their shadows."""
        if len(pages) == 0:
            return
        # a wrap could revive a stale entry: then none may be left
        self._compact(force=bool((self.gen[pages] == GEN_MAX).any()))
        self.gen[pages] += 1
        self.node[pages] = src
        k = self.sim.machine.nnodes
        self.sim.mem.held += np.bincount(src, minlength=256)[:k]
        n, m = self._n, len(pages)
        if n + m > self._pages.shape[0]:
            cap = max(2 * self._pages.shape[0], n + m)
            pg, eg = np.empty(cap, self._pdt), np.empty(cap, GEN)
            pg[:n], eg[:n] = self.pages, self.egen
            self._pages, self._egen = pg, eg
        self._pages[n:n + m] = pages
        self._egen[n:n + m] = self.gen[pages]
        self._n = n + m
        self._index(self._first_write(pages), self._pages[n:n + m], self._egen[n:n + m])
        self.created += len(pages)

    def _index(self, expire, pages, egen) -> None:
        """Entries into the runs by expiry (a stable sort, then merges while the run
        before is at most twice as long)."""
        o = np.argsort(expire, kind="stable")
        push_tiered(self._runs, SortedRun(expire[o], np.asarray(pages, self._pdt)[o],
                                          np.asarray(egen)[o]))

    def drop(self, pages, count: str = "other") -> int:
        """Free the shadows of `pages` (those that have one); returns how many."""
        pages = np.asarray(pages, dtype=np.int64)
        if pages.size == 0:
            return 0
        sn = self.node[pages]
        has = sn != UNALLOC
        n = int(has.sum())
        if n:
            k = self.sim.machine.nnodes
            self.sim.mem.held -= np.bincount(sn[has], minlength=256)[:k]
            self.node[pages[has]] = UNALLOC
            self.dropped[count] += n
            self._dead += n  # each had one live entry
        return n

    def remap(self, pages, nodes) -> None:
        """`pages` are demoted onto their shadows (on `nodes`): the frames become the
        pages' own again."""
        k = self.sim.machine.nnodes
        self.node[pages] = UNALLOC
        self.sim.mem.held -= np.bincount(nodes, minlength=256)[:k]
        self.remapped += len(pages)
        self._dead += len(pages)

    def _compact(self, force: bool = False) -> None:
        """Drop the stale entries: all of them when forced, else once they are a
        quarter of the entries (each pass is over every entry)."""
        if not force and 4 * self._dead <= self.pages.shape[0]:
            return
        live = self._live()
        if not live.all():
            k = int(live.sum())
            self._pages[:k] = self.pages[live]
            self._egen[:k] = self.egen[live]
            self._n = k
            self._rptr = {}
            runs = []
            for r in self._runs:
                e, p, g = r.live()
                keep = (self.node[p] != UNALLOC) & (self.gen[p] == g)
                if keep.any():
                    runs.append(SortedRun(e[keep], p[keep], g[keep]))
            self._runs = runs
        self._dead = 0

    # -- events ------------------------------------------------------------------------
    def expire_writes(self) -> int:
        """Drop the shadows whose page has been written by now (write-protect faults);
        returns how many (the engine charges one fault each)."""
        if self.pages.size == 0:
            return 0
        self._compact()
        got = take_through(self._runs, self.sim.work)
        if not got:
            return 0
        p, g = np.concatenate([x[1] for x in got]), np.concatenate([x[2] for x in got])
        return self.drop(p[(self.node[p] != UNALLOC) & (self.gen[p] == g)], "write")

    def redraw(self) -> None:
        """The field changed: draw each live shadow's first write again."""
        self._compact(force=True)
        self._runs = []
        if self.pages.size:
            self._index(self._first_write(self.pages), self.pages, self.egen)

    def reclaim(self, node: int, n: int) -> int:
        """Free up to n shadow frames on `node` (memory pressure there), oldest first."""
        if n <= 0 or self.pages.size == 0:
            return 0
        self._compact()
        i = self._rptr.get(node, 0)
        need, got = int(n), []
        step = max(4 * need, 4096)
        while need > 0 and i < self._n:
            p, g = self._pages[i:min(i + step, self._n)], self._egen[i:min(i + step, self._n)]
            on = np.flatnonzero((self.node[p] == node) & (self.gen[p] == g))[:need]
            got.append(p[on])
            need -= on.shape[0]
            # the entries up to the last one taken are no live shadow on the node now
            i = i + int(on[-1]) + 1 if need == 0 else i + p.shape[0]
        self._rptr[node] = i
        if not got:
            return 0
        return self.drop(np.concatenate(got), "reclaimed")

    def tpm_outcome(self, pages, copy_s: float, retries: int):
        """Which transactions of `pages` commit within `retries` attempts of `copy_s`
        seconds each, and the attempts each took (every attempt copies the page)."""
        sim = self.sim
        _, w = sim.timeline.field.rate_of(pages)
        p_ok = np.exp(-w * sim.throughput() * copy_s)
        n = len(pages)
        tries = np.full(n, retries, dtype=np.int64)
        pos = p_ok > 0
        if pos.any():
            tries[pos] = np.minimum(self.rng.geometric(np.minimum(p_ok[pos], 1.0)),
                                    retries + 1)
        ok = tries <= retries
        tries = np.minimum(tries, retries)
        self.tpm_attempts += int(tries.sum())
        self.tpm_aborts += int((tries - ok).sum())
        self.tpm_failed += int((~ok).sum())
        return ok, tries

    def stats(self) -> dict:
        return {"shadows_live": int(self.per_node().sum()), "shadows_created": self.created,
                "shadow_remaps": self.remapped,
                **{f"shadows_dropped_{k}": v for k, v in self.dropped.items()},
                "tpm_attempts": self.tpm_attempts, "tpm_aborts": self.tpm_aborts,
                "tpm_failed": self.tpm_failed}
