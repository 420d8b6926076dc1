"""NOMAD's kernel mechanisms ("Nomad: Non-Exclusive Memory Tiering via Transactional Page
Migration", Xiang et al., OSDI'24): transactional page migration (TPM) and the shadow
copies of non-exclusive tiering.

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
the remaining time is drawn again (memoryless).

State is kept for the shadowed pages only (the target of at most 16 bytes a page for
every policy, docs/benchmarks.md: a shadow byte and a 2-byte generation for every page
were 3 of NOMAD's 23 bytes a page at 10x bench_memsim, and a compaction's pass over
every entry through them 18% of its CPU): a bit per page, and per shadow an entry (page
and node) in creation order, a slot of a page -> entry map (`structures.PageMap`) and a
place in the runs by expiry.
"""
from __future__ import annotations

import numpy as np

from .memory import UNALLOC
from ..structures import (PageBits, PageMap, SortedRun, argsort_stable, page_dtype,
                          push_tiered, take_through)

#: an entry whose shadow is gone (its node byte)
DEAD = UNALLOC
#: the runs by expiry stop merging at this many entries (`push_tiered`'s cap): a merge,
#: and a compaction's filter of a run, holds the run twice (NOMAD at 10x bench_memsim:
#: one run of 11.8 M entries, 13 bytes each, set its peak)
RUN_CAP = 1 << 21


class ShadowCopies:
    """The shadow frames of promoted pages and the TPM transactions of one run."""

    def __init__(self, sim):
        self.sim = sim
        mem = sim.mem
        self._has = PageBits.zeros(mem.npages)  #: pages with a live shadow
        #: the entries in creation order, in the first `_n` places of buffers that
        #: double when full (a copy of every entry at each `add` made NOMAD quadratic
        #: in its promotions; the places past `_n` stay untouched): each shadow's page
        #: (4 bytes while page numbers fit) and node, `DEAD` once the shadow is gone
        self._pdt = page_dtype(mem.npages)
        #: entry indexes: 4 bytes while twice the pages fit (entries are compacted
        #: before the dead outnumber half the live)
        self._idt = np.int32 if 2 * mem.npages < 2**31 else np.int64
        self._pages = np.zeros(1024, dtype=self._pdt)
        self._enode = np.full(1024, DEAD, dtype=np.uint8)
        self._n = 0
        self._dead = 0  #: entries of shadows gone (compacted once half the live)
        self._entry = PageMap(self._pdt, self._idt)  #: live shadow's page -> its entry
        #: the entries by the work at which each page is first written: a few sorted
        #: runs (keys: that work; pages: the entry; `structures.push_tiered`), so a tick
        #: takes the expired prefixes instead of comparing every entry (NOMAD at 10x
        #: bench_memsim: a quarter of its time); an entry taken whose shadow is gone
        #: is passed over
        self._runs: list[SortedRun] = []
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
    def shadowed(self):
        """(pages, nodes) of the live shadows, in creation order."""
        e = self._enode[:self._n]
        live = e != DEAD
        return self._pages[:self._n][live].astype(np.int64), e[live]

    def entries(self) -> int:
        """Entries kept, live or not (bounded by compaction)."""
        return self._n

    def node_of(self, pages) -> np.ndarray:
        """The node of each page's shadow, `UNALLOC` for a page without one."""
        pages = np.asarray(pages, dtype=np.int64)
        out = np.full(pages.shape[0], UNALLOC, dtype=np.uint8)
        has = np.flatnonzero(self._has.get(pages))
        if has.shape[0]:
            out[has] = self._enode[self._entry.get(pages[has])]
        return out

    def per_node(self) -> np.ndarray:
        """Shadow frames held on each node, recounted from the live entries (the engine
        keeps the same counts incrementally in `mem.held`)."""
        k = self.sim.machine.nnodes
        return np.bincount(self._enode[:self._n], minlength=256)[:k]

    def _first_write(self, pages) -> np.ndarray:
        """Work until each page's next write (Exp with the page's write rate)."""
        _, w = self.sim.timeline.field.rate_of(pages)
        e = self.rng.exponential(1.0, size=len(pages))
        with np.errstate(divide="ignore"):
            return self.sim.work + np.where(w > 0, e / np.where(w > 0, w, 1.0), np.inf)

    def add(self, pages, src) -> None:
        """Keep the old frames of `pages` (distinct, none shadowed; on nodes `src`) as
        their shadows."""
        if len(pages) == 0:
            return
        self._compact()
        pages = np.asarray(pages, dtype=np.int64)
        k = self.sim.machine.nnodes
        self.sim.mem.held += np.bincount(src, minlength=256)[:k]
        n, m = self._n, len(pages)
        if n + m > self._pages.shape[0]:
            cap = max(2 * self._pages.shape[0], n + m)
            pg, nd = np.empty(cap, self._pdt), np.empty(cap, np.uint8)
            pg[:n], nd[:n] = self._pages[:n], self._enode[:n]
            self._pages, self._enode = pg, nd
        self._pages[n:n + m] = pages
        self._enode[n:n + m] = src
        self._n = n + m
        idx = np.arange(n, n + m, dtype=self._idt)
        self._entry.put(pages, idx)
        self._has.set(pages, True)
        self._index(self._first_write(pages), idx)
        self.created += m

    def _index(self, expire, idx) -> None:
        """Entries into the runs by expiry (a stable sort, by radix past 256 entries,
        then merges while the run before is at most twice as long, up to `RUN_CAP`)."""
        o = argsort_stable(expire)
        push_tiered(self._runs, SortedRun(expire[o], idx[o], np.zeros(o.shape[0], np.uint8)),
                    RUN_CAP)

    def take(self, pages) -> np.ndarray:
        """Each page's shadow taken out of the bookkeeping (its frame still held until
        `release`): the node it was on, `UNALLOC` for a page without one."""
        pages = np.asarray(pages, dtype=np.int64)
        out = np.full(pages.shape[0], UNALLOC, dtype=np.uint8)
        if self._n == self._dead:
            return out
        has = np.flatnonzero(self._has.get(pages))
        if has.shape[0] == 0:
            return out
        p = pages[has]
        e = self._entry.pop(p)
        if (e < 0).any():  # a page listed twice: its shadow is gone at the first
            has, p, e = has[e >= 0], p[e >= 0], e[e >= 0]
        out[has] = self._enode[e]
        self._enode[e] = DEAD
        self._has.set(p, False)
        self._dead += p.shape[0]
        return out

    def release(self, nodes, count: str) -> None:
        """The frames of shadows taken (on `nodes`) freed, counted under `count`, or
        become their pages' own ("remap": demoted onto their shadows)."""
        k = self.sim.machine.nnodes
        self.sim.mem.held -= np.bincount(nodes, minlength=256)[:k]
        if count == "remap":
            self.remapped += len(nodes)
        else:
            self.dropped[count] += len(nodes)

    def drop(self, pages, count: str = "other") -> int:
        """Free the shadows of `pages` (those that have one); returns how many."""
        if len(pages) == 0 or self._n == self._dead:
            return 0
        nodes = self.take(pages)
        nodes = nodes[nodes != UNALLOC]
        self.release(nodes, count)
        return nodes.shape[0]

    def drop_range(self, start: int, end: int) -> int:
        """`drop` of the pages [start, end) (freed)."""
        if self._n == self._dead or not self._has.any(start, end):
            return 0
        return self.drop(np.arange(start, end, dtype=np.int64))

    def _compact(self, force: bool = False) -> None:
        """Drop the dead entries: all of them when forced, else once they are more than
        half the live (each pass is over every entry, but only over them: no page's
        state is read)."""
        live_n = self._n - self._dead
        if self._dead == 0 or not force and 2 * self._dead <= live_n:
            return
        e = self._enode[:self._n]
        live = e != DEAD
        new = np.cumsum(live, dtype=self._idt)
        new -= 1
        self._pages[:live_n] = self._pages[:self._n][live]
        self._enode[:live_n] = e[live]
        self._entry.remap(new)
        for j, r in enumerate(self._runs):  # each run replaced as it is filtered
            w, i, t = r.live()
            keep = live[i]
            self._runs[j] = SortedRun(w[keep], new[i[keep]], t[keep])
        self._runs = [r for r in self._runs if len(r)]
        self._n = live_n
        self._dead = 0
        self._rptr = {}

    # -- events ------------------------------------------------------------------------
    def expire_writes(self) -> int:
        """Drop the shadows whose page has been written by now (write-protect faults);
        returns how many (the engine charges one fault each)."""
        if self._n == self._dead:
            return 0
        self._compact()
        got = take_through(self._runs, self.sim.work)
        if not got:
            return 0
        i = np.concatenate([x[1] for x in got])
        return self.drop(self._pages[i[self._enode[i] != DEAD]], "write")

    def redraw(self) -> None:
        """The field changed: draw each live shadow's first write again."""
        self._compact(force=True)
        self._runs = []
        if self._n:
            self._index(self._first_write(self._pages[:self._n]),
                        np.arange(self._n, dtype=self._idt))

    def reclaim(self, node: int, n: int) -> int:
        """Free up to n shadow frames on `node` (memory pressure there), oldest first."""
        if n <= 0 or self._n == self._dead:
            return 0
        self._compact()
        i = self._rptr.get(node, 0)
        need, got = int(n), []
        step = max(4 * need, 4096)
        while need > 0 and i < self._n:
            on = np.flatnonzero(self._enode[i:min(i + step, self._n)] == node)[:need]
            got.append(i + on)
            need -= on.shape[0]
            # the entries up to the last one taken are no live shadow on the node now
            i = i + int(on[-1]) + 1 if need == 0 else min(i + step, self._n)
        self._rptr[node] = i
        return self.drop(self._pages[np.concatenate(got)], "reclaimed") if got else 0

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
