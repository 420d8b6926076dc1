"""The page map's compiled passes: the map as one bitmap per node (`NodeBits`, which
kswapd's hands and the LRU passes walk 64 addresses a word), the bookkeeping of every
migration (page map, bitmaps, per-node and per-block counts, the moved pages' rates by
node), whole address ranges moved or filled without listing their pages, pages of
ranges not on given nodes, and AutoTiering's LAP list (a node's pages by access-history
byte)."""
from __future__ import annotations

import numpy as np

from ..field import range_pages
from ..jit import cttz, helper, kernel
from ..structures import _bits_range, _upper, page_dtype


@kernel
def _bits_build(node_map, k):
    n = node_map.shape[0]
    bits = np.zeros((k, (n + 63) >> 6), np.uint64)
    one = np.uint64(1)
    for p in range(n):
        v = node_map[p]
        if v < k:
            bits[v, p >> 6] |= one << np.uint64(p & 63)
    return bits


@helper
def _skip_empty(row, sel, sel_on, use_sel, w, wlast, wend):
    # `_walk`'s next address after a word without a hit that ends at wend: past the
    # words w .. wlast - 1 without one either (row's bits, with sel's where use_sel:
    # set if sel_on, else clear), in a loop of two loads and a test a word (the hands
    # of the inactive lists cross stretches of other lists' and nodes' pages); the
    # window's last word, wlast, is left to `_walk`, which masks it
    if w >= wlast:
        return wend
    if not use_sel:
        while w < wlast and row[w] == 0:
            w += 1
    elif sel_on:
        while w < wlast and (row[w] & sel[w]) == 0:
            w += 1
    else:
        while w < wlast and (row[w] & ~sel[w]) == 0:
            w += 1
    return np.int64(w) << 6


@helper
def _walk_init(start, limit, npages, s, tm):
    # `_walk`'s state for a hand from `start`: [pos, end, i, scanned, chunk, n, j, nxt,
    # prev, last, open, q, done]; tm[0] the least pass time met
    s[0] = start % max(npages, 1)
    s[1] = 0
    s[2] = 0
    s[3] = 0
    s[4] = max(4 * limit, 4096)
    s[5] = 0
    s[6] = 0
    s[7] = np.iinfo(np.int64).max
    s[8] = -1
    s[9] = -1
    s[10] = 0
    s[11] = 0
    s[12] = 0
    tm[0] = np.inf


@helper
def _walk(row, npages, limit, flags, mask, value, use_flags, sel, sel_on, use_sel,
          bounds, times, use_bounds, out, which, s, tm):
    # the hand of `pages_on_bits` (its state in s, tm: `_walk_init`), resumable: the
    # next hits into out (and their intervals into which) until out is full or the
    # hand is done (s[12]); returns how many. A full buffer stops at the next hit's
    # address, where the next call reloads its word: the caller may change the
    # bitmaps' bits of the pages handed out meanwhile, none of those ahead
    pos, end, i, scanned, chunk, n = s[0], s[1], s[2], s[3], s[4], s[5]
    j, nxt, prev, last, opened, q = s[6], s[7], s[8], s[9], s[10], s[11]
    tmin = tm[0]
    m = bounds.shape[0]
    lastb = m - 2
    big = np.iinfo(np.int64).max
    cap = out.shape[0]
    k = 0
    full = False
    while True:
        if not opened:
            if n >= limit or scanned >= npages:
                s[12] = 1
                break
            end = min(pos + chunk, npages, pos + npages - scanned)
            i = pos
            opened = 1
        stop = False
        while i < end:
            w = i >> 6
            wend = min((w + 1) << 6, end)
            word = row[w]
            if use_sel:
                word &= sel[w] if sel_on else ~sel[w]
            word >>= np.uint64(i & 63)
            if wend - i < 64:
                word &= (np.uint64(1) << np.uint64(wend - i)) - np.uint64(1)
            if word == 0:
                i = _skip_empty(row, sel, sel_on, use_sel, w + 1, (end - 1) >> 6, wend)
                continue
            while word:
                a = i + np.int64(cttz(word))
                if not use_flags or (flags[a] & mask) == value:
                    if n == limit:  # a hit past the limit: the window ends after the last
                        end = last + 1
                        stop = True
                        break
                    if k == cap:  # resumed here
                        i = a
                        full = True
                        break
                    out[k] = a
                    if use_bounds:
                        if a < prev or n == 0 or a >= nxt:  # another interval
                            if a < prev or n == 0:
                                j = _upper(bounds, a, 0, m) - 1
                            else:
                                while j + 1 < m and bounds[j + 1] <= a:
                                    j += 1
                            q = min(max(j, 0), lastb)
                            nxt = bounds[j + 1] if j + 1 < m else big
                            if times[q] < tmin:
                                tmin = times[q]
                        prev = a
                        which[k] = q
                    k += 1
                    n += 1
                    last = a
                word &= word - np.uint64(1)
            if stop or full:
                break
            i = wend
        if full:
            break
        scanned += end - pos
        pos = end % npages
        chunk = min(2 * chunk, 1 << 22)
        opened = 0
    s[0], s[1], s[2], s[3], s[4], s[5] = pos, end, i, scanned, chunk, n
    s[6], s[7], s[8], s[9], s[10], s[11] = j, nxt, prev, last, opened, q
    tm[0] = tmin
    return k


@kernel
def _pages_on_bits(row, npages, start, limit, flags, mask, value, use_flags, sel,
                   sel_on, use_sel, bounds, times, use_bounds):
    # with use_bounds also each page's interval of `bounds` (`PassTimes.index`:
    # searchsorted(bounds, a, "right") - 1, clipped, by a forward walk over the ascending
    # pages, bisecting where the hand wraps) and the least of their `times`: the hand
    # (`_walk`) in one call, into a buffer that holds every hit
    out = np.empty(min(limit, npages), np.int64)
    which = np.empty(out.shape[0] if use_bounds else 0, np.int64)
    s = np.empty(13, np.int64)
    tm = np.empty(1)
    _walk_init(start, limit, npages, s, tm)
    n = _walk(row, npages, limit, flags, mask, value, use_flags, sel, sel_on, use_sel,
              bounds, times, use_bounds, out, which, s, tm)
    return out[:n], s[0], s[3], which[:n], tm[0]


class NodeBits:
    """One bit per page and node: page p is on node r iff bit p of row r is set (the
    page map as `k` bitmaps, k/8 bytes per page), kept through every placement, free
    and move (`move_pages`), so a CLOCK hand over one node's pages reads 64 addresses
    per word and stops only at that node's pages (`pages_on`)."""

    def __init__(self, node_map, k: int):
        self.npages = node_map.shape[0]
        self.bits = _bits_build(node_map, np.uint8(k))

    def fill(self, start: int, end: int, node: int) -> None:
        _bits_range(self.bits, int(node), int(start), int(end), True)

    def clear(self, start: int, end: int) -> None:
        """Pages [start, end) on no node."""
        _bits_range(self.bits, -1, int(start), int(end), False)

    def pages_on(self, node: int, start: int, limit: int, flags=None, mask: int = 0,
                 value: int = 0, sel=None, sel_on: bool = True, passes=None):
        """`Memory.pages_on`: up to `limit` pages on `node` (with flags & mask ==
        value, given flags; with their bit in the bitmap `sel` set, or clear if not
        `sel_on`, given sel) from address `start`, wrapping, by windows that start near
        the need and double; returns (pages, next hand position, addresses scanned).
        Given `passes` (a `PassTimes`), also (`passes.index(pages)`, the least of those
        pass times) from the same pass: a hand's pass-time intervals without a second
        walk over its pages."""
        use, use_sel = flags is not None, sel is not None
        f = flags if use else np.zeros(1, np.uint8)
        b = sel if use_sel else np.zeros(1, np.uint64)
        use_b = passes is not None
        bounds = passes.bounds if use_b else np.zeros(2, np.int64)
        times = passes.times if use_b else np.zeros(1)
        pages, pos, scanned, which, tmin = _pages_on_bits(
            self.bits[node], self.npages, int(start), int(limit), f, np.uint8(mask),
            np.uint8(value), use, b, bool(sel_on), use_sel, bounds, times, use_b)
        if use_b:
            return pages, pos, scanned, (which, float(tmin))
        return pages, pos, scanned


@kernel
def _move_pages(node_map, bits, use_bits, blocks, used, pages, cur, dsts, block):
    # Memory.move: page map, node bitmaps, pages per node and per block, one pass
    one = np.uint64(1)
    for i in range(pages.shape[0]):
        p = pages[i]
        c, d = cur[i], dsts[i]
        node_map[p] = d
        if use_bits:
            b = one << np.uint64(p & 63)
            bits[c, p >> 6] &= ~b
            bits[d, p >> 6] |= b
        used[d] += 1
        used[c] -= 1
        q = p // block
        blocks[q, c] -= 1
        blocks[q, d] += 1


def move_pages(node_map, bits, blocks, used, pages, cur, dsts, block: int) -> None:
    """`Memory.move` in one pass: pages[i] (distinct) from cur[i] to dsts[i] in the page
    map, the node bitmaps (`bits`, or None), the pages per node and per block; the
    numpy form scattered, bit-moved and bincounted over every block the moves span."""
    use = bits is not None
    _move_pages(node_map, bits if use else np.zeros((1, 1), np.uint64), use,
                blocks, used, pages, cur, dsts, np.int64(block))


@kernel
def _relocate_sums(pages, cur, dsts, starts, ends, read, write, rank, epoch, stamp,
                   sums, counts):
    # Simulation._relocate: per-node sums of the moved pages' read and write rates
    # (rows: read by destination, read by source, write by destination, write by
    # source, each summed in page order as np.bincount does), moves per source and
    # destination node, promotions (rank falls), ping-pongs (promoted within one stamp
    # of its demotion, uint8 arithmetic) and the demoted pages' stamps
    m = starts.shape[0]
    npro = 0
    pingpong = 0
    for i in range(pages.shape[0]):
        p = pages[i]
        j = _upper(starts, p, 0, m) - 1  # the segment holding p: the last start <= p
        r = 0.0
        w = 0.0
        if j >= 0 and p < ends[j]:
            r = read[j]
            w = write[j]
        c, d = cur[i], dsts[i]
        sums[0, d] += r
        sums[1, c] += r
        sums[2, d] += w
        sums[3, c] += w
        counts[0, c] += 1
        counts[1, d] += 1
        if rank[d] < rank[c]:
            npro += 1
            st = np.int64(epoch[p])
            if st != 0 and ((stamp - st) & 255) % 255 <= 1:
                pingpong += 1
        else:
            epoch[p] = stamp
    return npro, pingpong


def relocate_sums(pages, cur, dsts, field, rank, epoch, stamp: int):
    """The per-page part of `Simulation._relocate` in one pass: returns (sums, counts,
    promotions, ping-pongs) with sums[0..3] the moved pages' read rates by destination
    and by source node and their write rates likewise (np.bincount's order, so the
    same bits), counts[0], counts[1] the pages by source and by destination; sets the
    demoted pages' stamps in `epoch`."""
    sums = np.zeros((4, 256))
    counts = np.zeros((2, 256), np.int64)
    npro, pp = _relocate_sums(pages, cur, dsts, field.starts, field.ends,
                              field.read, field.write, rank, epoch,
                              np.int64(stamp), sums, counts)
    return sums, counts, int(npro), int(pp)


@kernel
def _range_movable(node_map, starts, ends, dst, total):
    # Simulation._movable of the pages of ranges [starts[r], ends[r]) in order (the
    # ranges disjoint, so each page once): those allocated and not on dst, with nodes
    pages = np.empty(total, np.int64)
    cur = np.empty(total, np.uint8)
    n = 0
    for r in range(starts.shape[0]):
        for p in range(starts[r], ends[r]):
            c = node_map[p]
            if c != 255 and c != dst:
                pages[n] = p
                cur[n] = c
                n += 1
    return pages, cur, n


def range_movable(node_map, starts, ends, dst: int):
    """`Simulation._movable(range_pages(starts, ends), dst)` for disjoint ranges
    (`disjoint_ranges`) in one pass over their pages: (pages, nodes) of the allocated
    pages not on dst, range by range, without the page list, its repeat and the
    dedup pass (IDT moves whole regions: 847 M pages in bench_memsim at 10x)."""
    starts = np.asarray(starts, dtype=np.int64)
    ends = np.asarray(ends, dtype=np.int64)
    total = int((ends - starts).sum()) if starts.shape[0] else 0
    pages, cur, n = _range_movable(node_map, starts, ends, int(dst), total)
    if 2 * n < total:  # do not keep the whole buffer alive for a few pages
        return pages[:n].copy(), cur[:n].copy()
    return pages[:n], cur[:n]


@kernel
def _relocate_ranges(node_map, bits, use_bits, blocks, used, block, flags, mask, nr,
                     starts, ends, dst, room, f_starts, f_ends, read, write, rank,
                     epoch, stamp, sums, counts):
    # Simulation.migrate of the pages of disjoint ranges to dst, range by range: the
    # first `room` allocated pages not on dst get, page by page, what move_pages,
    # move_counts and relocate_sums do to a page list (none of them reads what another
    # writes, so one pass in page order does the same); returns (moved, promotions,
    # ping-pongs). Their per-page bodies are repeated here on purpose: as compiled
    # helpers (even inlined) the pass took 4x as long (60fdac1, reverted)
    one = np.uint64(1)
    m = f_starts.shape[0]
    n = 0
    npro = 0
    pingpong = 0
    for r in range(starts.shape[0]):
        if n >= room:
            break
        j = _upper(f_starts, starts[r], 0, m) - 1
        for p in range(starts[r], ends[r]):
            c = node_map[p]
            if c == 255 or c == dst:
                continue
            if n >= room:
                break
            n += 1
            # move_pages
            node_map[p] = dst
            if use_bits:
                b = one << np.uint64(p & 63)
                bits[c, p >> 6] &= ~b
                bits[dst, p >> 6] |= b
            used[dst] += 1
            used[c] -= 1
            q = p // block
            blocks[q, c] -= 1
            blocks[q, dst] += 1
            # move_counts
            if flags[p] & mask:
                nr[c] -= 1
                nr[dst] += 1
            # relocate_sums (the segment by a forward walk: p ascends within a range)
            while j + 1 < m and f_starts[j + 1] <= p:
                j += 1
            rr = 0.0
            ww = 0.0
            if j >= 0 and p < f_ends[j]:
                rr = read[j]
                ww = write[j]
            sums[0, dst] += rr
            sums[1, c] += rr
            sums[2, dst] += ww
            sums[3, c] += ww
            counts[0, c] += 1
            counts[1, dst] += 1
            if rank[dst] < rank[c]:
                npro += 1
                st = np.int64(epoch[p])
                if st != 0 and ((stamp - st) & 255) % 255 <= 1:
                    pingpong += 1
            else:
                epoch[p] = stamp
    return n, npro, pingpong


def relocate_ranges(mem_node, bits, blocks, used, block: int, flags, mask: int, nr,
                    starts, ends, dst: int, room: int, field, rank, epoch, stamp: int):
    """`Simulation.migrate(range_pages(starts, ends), dst)` for disjoint ranges
    (`disjoint_ranges`) up to `room` pages, in one pass over the ranges: the page map,
    node bitmaps (`bits` or None), per-node and per-block counts (`move_pages`), the
    active counts `nr` of pages with flags & mask (`move_counts`) and `relocate_sums`'
    sums, counts, promotions, ping-pongs and stamps, page by page in the same order.
    Returns (moved, sums, counts, promotions, ping-pongs)."""
    sums = np.zeros((4, 256))
    counts = np.zeros((2, 256), np.int64)
    use = bits is not None
    n, npro, pp = _relocate_ranges(
        mem_node, bits if use else np.zeros((1, 1), np.uint64), use, blocks, used,
        np.int64(block), flags, np.uint8(mask), nr, np.asarray(starts, dtype=np.int64),
        np.asarray(ends, dtype=np.int64), np.uint8(dst), np.int64(room), field.starts,
        field.ends, field.read, field.write, rank, epoch, np.int64(stamp), sums, counts)
    return int(n), sums, counts, int(npro), int(pp)


def disjoint_ranges(starts, ends) -> bool:
    """Whether the ranges [starts[i], ends[i]) are non-empty and pairwise disjoint (so
    their pages, listed range by range, are distinct)."""
    if starts.shape[0] == 0:
        return True
    if not bool(np.all(ends > starts)):
        return False
    order = np.argsort(starts, kind="stable")
    return bool(np.all(ends[order[:-1]] <= starts[order[1:]]))


@kernel
def _pages_not_on(node_map, blocks, starts, ends, nodes, block, pages, of, fill):
    # Memory.pages_not_on: the blocks with allocated pages off the range's node (by
    # their counts), then their pages in the range off it, range by range; counted
    # only, or (fill) written to pages and of
    n = 0
    for i in range(starts.shape[0]):
        s, e, d = starts[i], ends[i], nodes[i]
        for b in range(s // block, (e - 1) // block + 1 if e > s else s // block):
            other = -np.int64(blocks[b, d])
            for k in range(blocks.shape[1]):
                other += blocks[b, k]
            if other <= 0:
                continue  # every allocated page of the block is on d
            for p in range(max(s, b * block), min(e, (b + 1) * block)):
                v = node_map[p]
                if v != 255 and v != d:
                    if fill:
                        pages[n] = p
                        of[n] = i
                    n += 1
    return n


def pages_not_on(node_map, blocks, starts, ends, nodes, block: int):
    """`Memory.pages_not_on` in two passes (count, then fill arrays of that size),
    without expanding blocks into address arrays (the oracle on the redis trace: 54% of
    its CPU was that expansion) and without a buffer larger than the result."""
    k = _pages_not_on
    none = np.zeros(0, np.int64)
    n = k(node_map, blocks, starts, ends, nodes, np.int64(block), none, none, False)
    pages, of = np.empty(n, np.int64), np.empty(n, np.int64)
    k(node_map, blocks, starts, ends, nodes, np.int64(block), pages, of, True)
    return pages, of


@helper(inline=True)
def _lap_bytes(node_map, p0, p1, node, byte, lut, out, cnt, fill):
    # `_pages_by_byte`'s work on the map's bytes [p0, p1): each page of `node` counted
    # under its key lut[byte[p]] (fill=False; returns how many) or placed at its key's
    # next slot of out (returns 0)
    seen = 0
    for p in range(p0, p1):
        if node_map[p] == node:
            k = lut[byte[p]]
            if fill:
                out[cnt[k]] = p
                cnt[k] += 1
            else:
                cnt[k + 1] += 1
                seen += 1
    return seen


@kernel
def _pages_by_byte(node_map, words, blocks, block, node, byte, lut, out):
    # the pages on `node` in address order, stably sorted by lut[byte[p]] into out (a
    # counting sort over 256 keys: one pass counts, one places); only blocks whose
    # counts hold pages of the node are read, and in them the map as uint64 `words`:
    # only words holding the node's byte are read byte by byte (a line of eight words
    # at a time was slower at AutoTiering's density); returns how many pages were found
    n = node_map.shape[0]
    cnt = np.zeros(257, np.int64)
    lo = np.uint64(0x0101010101010101)
    hi = np.uint64(0x8080808080808080)
    pat = np.uint64(node) * lo
    wpb = block // 8
    nw = words.shape[0]
    seen = 0
    for fill in range(2):
        if fill:
            if seen != out.shape[0]:
                return seen
            for k in range(256):
                cnt[k + 1] += cnt[k]
        for b in range(blocks.shape[0]):
            if blocks[b, node] == 0:
                continue
            for w in range(b * wpb, min((b + 1) * wpb, nw)):
                x = words[w] ^ pat
                if ((x - lo) & ~x & hi) != 0:  # some byte of the word is the node's
                    seen += _lap_bytes(node_map, w * 8, w * 8 + 8, node, byte, lut, out,
                                       cnt, fill)
            seen += _lap_bytes(node_map, max(b * block, nw * 8), min((b + 1) * block, n),
                               node, byte, lut, out, cnt, fill)
    return seen


def pages_by_byte(node_map, blocks, block: int, node: int, byte, lut,
                  buf=None) -> np.ndarray:
    """The pages on `node`, ordered by lut[byte[page]] (uint8), equal keys in address
    order: what `np.argsort(lut[byte[p]], kind="stable")` gives over
    `np.flatnonzero(node_map == node)`, in two passes over the blocks holding the
    node's pages (`blocks`: pages per node per `block` addresses), skipping the
    map's 8-byte words without the node's byte. Pages in 4 bytes while every page
    fits (8 beyond 2^31 pages). Written into `buf` (returned as its prefix) when it
    is large enough and of that type: a caller that refreshes such a list often saves
    the page faults of a fresh array each time."""
    total = int(blocks[:, node].sum())
    pdt = page_dtype(node_map.shape[0])
    if buf is None or buf.shape[0] < total or buf.dtype != pdt:
        buf = np.empty(total, pdt)
    out = buf[:total]
    if block % 8:
        raise ValueError(f"pages_by_byte: block {block} is not a multiple of 8")
    words = node_map[: node_map.shape[0] // 8 * 8].view(np.uint64)
    seen = _pages_by_byte(node_map, words, blocks, np.int64(block), np.int64(node),
                          byte, np.ascontiguousarray(lut, dtype=np.uint8), out)
    if seen != total:
        raise RuntimeError(f"pages_by_byte: the page map holds {seen} pages of node "
                           f"{node}, its block counts {total}")
    return out


def _fill_ranges_numpy(arr, starts, ends, value):
    arr[range_pages(starts, ends)] = value


@kernel(numpy=_fill_ranges_numpy)
def _fill_ranges(arr, starts, ends, value):
    for r in range(starts.shape[0]):
        for p in range(starts[r], ends[r]):
            arr[p] = value


def fill_ranges(arr, starts, ends, value) -> None:
    """arr[range_pages(starts, ends)] = value, without the page list."""
    _fill_ranges(arr, np.asarray(starts, dtype=np.int64),
                 np.asarray(ends, dtype=np.int64), arr.dtype.type(value))
