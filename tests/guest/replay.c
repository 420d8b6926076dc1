/* replay: replay a recorded page-access trace on a real kernel, as tierlab's `trace:PATH`
 * workload replays it in the simulator, so the kernel's own tiering can be compared with it.
 *
 * Usage: replay --trace F.rpl [--copies K] [--per-window N] [--seconds S] [--loop]
 *               [--interval-ms I] [--hot-pages H] [--seed X] [--thp]
 *               [--ready-file P] [--done-file P] [--debug-counts P]
 *
 * F.rpl comes from tests/guest/replay_export.py (format in its docstring): one copy's page
 * layout (the simulator's compaction and per-copy stride span_pages), then per window the
 * records (page offset, reads, writes) and the window's recorded accesses A.
 *
 * Memory: one anonymous mmap of K x span_pages pages, 2 MiB aligned (so the trace's 2 MiB
 * offsets are real ones), copy c at page c x span_pages; no mbind: the kernel's default
 * policy places first touches (local node, then the next when full), as the simulator's
 * dram-preferred allocation. MADV_NOHUGEPAGE unless --thp (4 KiB first touches).
 *
 * Replay (docs/trace-format.md, "Replay (`trace:PATH`)"): windows in order. At the start of
 * window i the pages first seen in window i are first-touched (one written word each) in
 * ascending address order over the whole layout: copy 0's new pages, then copy 1's, ...
 * (the simulator allocates _replicate(sorted new pages)). Then each copy replays N accesses
 * of the window (N = A, or --per-window N: the simulator's per_window), of which
 * round(N x S / A) touch pages (S = the window's reads + writes; S = A unless the trace
 * recorded unattributed accesses, which the simulator also leaves without a page): all
 * K x round(N S / A) of them are drawn independently, each picking a copy uniformly, a
 * record with probability (reads + writes) / S (Walker alias table) and a write with
 * probability writes / (reads + writes), and touching one random 8-byte word of the page.
 * --loop starts again at window 0 after the last (first touches only in pass 0); without it
 * the run ends after the last window. --seconds S (0: no limit) and SIGTERM/SIGINT end it
 * earlier; "done" is printed in every case.
 *
 * Hot pages: the H pages with the most reads + writes over the whole trace, ties to the
 * lower page offset, then to the lower copy. Their nodes are read with move_pages(2) in
 * status mode (pagenode.h) once right after "ready" and every I ms (I = 0: never).
 *
 * Output (stdout, one JSON object per line; --ready-file/--done-file get a copy):
 *   {"event":"ready","pid":P,"base":ADDR,"span_pages":n,"copies":K,"windows":W,"hot_pages":H,
 *    "uptime":u,...}   (uptime: CLOCK_BOOTTIME seconds, the clock of /proc/uptime; also in
 *    every progress line)
 *   {"event":"progress","t":s,"ops":n,"ops_per_s":x,"window":i,"pass":p,
 *    "hot_nodes":{"0":a,"1":b},"hot_absent":c,...}       t: seconds since ready
 *   {"event":"done","ops":n,"writes":w,"ops_per_s":x,"windows_done":d,"seconds":s,...}
 * ops are page accesses (first touches not included), ops_per_s in progress lines is over
 * the last interval, in "done" over the whole run; "per_window":0 in "ready" means the
 * recorded accesses, "accesses_per_pass" is the page accesses of one pass over all copies.
 *
 * --debug-counts PATH (for tests/test_replay_program.py), text lines; page = index from the
 * mapping base (copy c, offset o: c x span_pages + o):
 *   # comment lines
 *   H rank page                        the hot pages, rank 0 the hottest
 *   T window page                      a first touch, in the order made
 *   C pass window page reads writes    accesses replayed in a window (pages with any only;
 *                                      the last window is partial if the run was stopped)
 *
 * Exit: 0, or 2 on a usage or setup error (one line on stderr; file errors name the byte
 * offset). Build: gcc -O2 -static -o replay replay.c   (raw syscalls; no libnuma)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"
#include "pagenode.h"

#define PAGE 4096UL
#define CHUNK_BYTES (2UL << 20)
#define REC_BYTES 12
#define NONE UINT32_MAX

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

static inline uint64_t rng_next(uint64_t *s)
{   /* splitmix64: every output bit is usable */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

static const char *prog = "replay";

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", prog);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(2);
}

static void usage(void)
{
    die("usage: replay --trace F.rpl [--copies K] [--per-window N] [--seconds S] [--loop] "
        "[--interval-ms I] [--hot-pages H] [--seed X] [--thp] [--ready-file P] "
        "[--done-file P] [--debug-counts P]");
}

static void emit(const char *line)
{
    fputs(line, stdout);
    fflush(stdout);
}

static uint64_t rd64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t parse_u64(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || end == s || *end || *s == '-')
        die("bad %s '%s' (a non-negative integer)", what, s);
    return v;
}

static double parse_secs(const char *s)
{
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || !(v >= 0)) die("bad --seconds '%s' (seconds >= 0)", s);
    return v;
}

/* ---- the trace ------------------------------------------------------------------------ */

struct window {
    uint64_t nrec, acc, sum;    /* records, recorded accesses A, reads + writes S */
    uint64_t rec;               /* first record (index into off/rd/wr) */
    uint64_t new_begin, new_end;    /* pages first seen here: touched[new_begin..new_end) */
};

static uint64_t span, nwin, nrec_all, ntouched;
static struct window *win;
static uint32_t *off, *rd, *wr;         /* all records */
static uint32_t *touched;               /* distinct offsets, in first-touch order */
static uint64_t *touched_total;         /* their reads + writes over the trace */

static void load(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0) die("%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0) die("%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode)) die("%s: not a regular file", path);
    size_t size = (size_t)st.st_size, got = 0;
    unsigned char *b = malloc(size ? size : 1);
    if (!b) die("%s: out of memory (%zu bytes)", path, size);
    while (got < size) {
        ssize_t r = read(fd, b + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) die("%s: read failed at byte %zu: %s", path, got, r ? strerror(errno) : "EOF");
        got += (size_t)r;
    }
    close(fd);
    if (size < 8 || memcmp(b, "TLRPL001", 8))
        die("%s: bad magic at byte 0 (not an .rpl file from replay_export.py)", path);
    if (size < 24) die("%s: truncated header at byte 8 (%zu of 24 bytes)", path, size);
    span = rd64(b + 8);
    nwin = rd64(b + 16);
    if (span == 0 || span > UINT32_MAX) die("%s: bad span_pages %llu at byte 8", path,
                                            (unsigned long long)span);
    /* every window takes >= 16 bytes: a larger count is a truncated file, found below */
    uint64_t cap = (size - 24) / 16 + 1;
    win = calloc(nwin && nwin < cap ? nwin : cap, sizeof *win);
    uint64_t maxrec = size / REC_BYTES + 1;
    off = malloc(maxrec * 4); rd = malloc(maxrec * 4); wr = malloc(maxrec * 4);
    uint32_t *idx = malloc(span * sizeof *idx);     /* offset -> index in touched, or NONE */
    touched = malloc(maxrec * 4);
    touched_total = calloc(maxrec, 8);
    if (!win || !off || !rd || !wr || !idx || !touched || !touched_total)
        die("%s: out of memory", path);
    memset(idx, 0xff, span * sizeof *idx);
    size_t pos = 24;
    for (uint64_t i = 0; i < nwin; i++) {
        if (size - pos < 16)
            die("%s: truncated header of window %llu at byte %zu (%zu of 16 bytes)", path,
                (unsigned long long)i, pos, size - pos);
        struct window *w = &win[i];
        w->nrec = rd64(b + pos);
        w->acc = rd64(b + pos + 8);
        if (w->nrec > (size - pos - 16) / REC_BYTES)
            die("%s: truncated records of window %llu at byte %zu (%llu announced, %zu present)",
                path, (unsigned long long)i, pos + 16, (unsigned long long)w->nrec,
                (size - pos - 16) / REC_BYTES);
        pos += 16;
        w->rec = nrec_all;
        w->new_begin = ntouched;
        for (uint64_t j = 0; j < w->nrec; j++, pos += REC_BYTES) {
            uint64_t k = nrec_all++;
            off[k] = rd32(b + pos);
            rd[k] = rd32(b + pos + 4);
            wr[k] = rd32(b + pos + 8);
            if (off[k] >= span)
                die("%s: page offset %u >= span_pages %llu at byte %zu", path, off[k],
                    (unsigned long long)span, pos);
            if (j && off[k] <= off[k - 1])
                die("%s: page offsets not strictly increasing in window %llu at byte %zu",
                    path, (unsigned long long)i, pos);
            uint64_t c = (uint64_t)rd[k] + wr[k];
            w->sum += c;
            if (c == 0) continue;   /* not a touch (replay_export.py leaves these out) */
            if (idx[off[k]] == NONE) {
                idx[off[k]] = (uint32_t)ntouched;
                touched[ntouched++] = off[k];
            }
            touched_total[idx[off[k]]] += c;
        }
        w->new_end = ntouched;
    }
    if (pos != size) die("%s: trailing bytes at byte %zu (after %llu windows)", path, pos,
                         (unsigned long long)nwin);
    free(idx);
    free(b);
}

/* ---- hot pages -------------------------------------------------------------------------- */

struct hot { uint64_t total; uint32_t off; };

static int hot_cmp(const void *a, const void *b)
{
    const struct hot *x = a, *y = b;
    if (x->total != y->total) return x->total > y->total ? -1 : 1;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* the h hottest pages (indices from the base), copies of a page next to each other */
static uint64_t *hot_pages(uint64_t copies, uint64_t *h)
{
    struct hot *t = malloc((ntouched ? ntouched : 1) * sizeof *t);
    if (*h > ntouched * copies) *h = ntouched * copies;
    uint64_t *out = malloc((*h ? *h : 1) * sizeof *out);
    if (!t || !out) die("out of memory");
    for (uint64_t i = 0; i < ntouched; i++) { t[i].total = touched_total[i]; t[i].off = touched[i]; }
    qsort(t, ntouched, sizeof *t, hot_cmp);
    for (uint64_t k = 0; k < *h; k++)
        out[k] = (k % copies) * span + t[k / copies].off;
    free(t);
    return out;
}

/* ---- run state -------------------------------------------------------------------------- */

static char *base;
static uint64_t copies = 1, per_window, hot_n = 256, seed = 1;
static double seconds, t_ready, next_progress, last_t;
static long interval_ms = 1000;
static uint64_t ops, writes_n, first_touched, last_ops, cur_window, cur_pass, sink;
static void **hot_ptr;
static int *hot_status;
static FILE *dbg;

static void progress(double t)
{
    struct pagenode_count c;
    char nodes[2048], line[4096];
    pagenode_count(hot_ptr, hot_n, hot_status, &c);
    if (pagenode_json(&c, "hot", nodes, sizeof nodes) < 0) strcpy(nodes, "\"hot_nodes\":{}");
    snprintf(line, sizeof line,
             "{\"event\":\"progress\",\"t\":%.3f,\"ops\":%llu,\"writes\":%llu,"
             "\"ops_per_s\":%.0f,\"window\":%llu,\"pass\":%llu,\"first_touched\":%llu,"
             "\"uptime\":%.3f,%s}\n",
             t - t_ready, (unsigned long long)ops, (unsigned long long)writes_n,
             t > last_t ? (ops - last_ops) / (t - last_t) : 0.0, (unsigned long long)cur_window,
             (unsigned long long)cur_pass, (unsigned long long)first_touched, boottime(), nodes);
    emit(line);
    last_ops = ops; last_t = t;
}

/* Between chunks of work: progress lines; 1 when the run must end. */
static int tick(void)
{
    if (stop_flag) return 1;
    double t = now();
    if (seconds > 0 && t - t_ready >= seconds) return 1;
    if (interval_ms > 0 && t >= next_progress) {
        progress(t);
        next_progress += interval_ms / 1000.0;
        if (next_progress < t) next_progress = t + interval_ms / 1000.0;
    }
    return 0;
}

/* Page accesses of a window, all copies: copies x round(N x S / A), N = --per-window or A */
static uint64_t window_ops(const struct window *w)
{
    uint64_t n = per_window ? per_window : w->acc;
    if (!w->acc || !w->sum) return 0;
    return copies * (uint64_t)(((unsigned __int128)n * w->sum + w->acc / 2) / w->acc);
}

/* Walker/Vose alias table of weights w[0..n): pick j uniformly, keep it if the coin is
 * below thr[j] (out of 2^32), else take alias[j]. */
static void build_alias(uint64_t n, const uint32_t *r, const uint32_t *w, uint64_t sum,
                        uint64_t *thr, uint32_t *alias, double *p, uint32_t *small,
                        uint32_t *large)
{
    uint64_t ns = 0, nl = 0;
    for (uint64_t j = 0; j < n; j++) {
        p[j] = ((double)r[j] + w[j]) * (double)n / (double)sum;
        alias[j] = (uint32_t)j;
        if (p[j] < 1.0) small[ns++] = (uint32_t)j; else large[nl++] = (uint32_t)j;
    }
    while (ns && nl) {
        uint32_t s = small[--ns], l = large[nl - 1];
        thr[s] = (uint64_t)(p[s] * 4294967296.0);
        alias[s] = l;
        p[l] -= 1.0 - p[s];
        if (p[l] < 1.0) { nl--; small[ns++] = l; }
    }
    while (nl) thr[large[--nl]] = 1ULL << 32;
    while (ns) thr[small[--ns]] = 1ULL << 32;  /* rounding leftovers: ~1 */
}

int main(int argc, char **argv)
{
    const char *trace = NULL, *ready_file = NULL, *done_file = NULL, *debug_file = NULL;
    int loop = 0, thp = 0;
    static struct option opts[] = {
        {"trace", 1, 0, 't'}, {"copies", 1, 0, 'k'}, {"per-window", 1, 0, 'n'},
        {"seconds", 1, 0, 's'}, {"loop", 0, 0, 'l'}, {"interval-ms", 1, 0, 'i'},
        {"hot-pages", 1, 0, 'H'}, {"seed", 1, 0, 'S'}, {"thp", 0, 0, 'T'},
        {"ready-file", 1, 0, 'R'}, {"done-file", 1, 0, 'D'}, {"debug-counts", 1, 0, 'C'},
        {"help", 0, 0, '?'}, {0, 0, 0, 0}};
    int o;
    opterr = 0;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) switch (o) {
        case 't': trace = optarg; break;
        case 'k': copies = parse_u64(optarg, "--copies"); break;
        case 'n': per_window = parse_u64(optarg, "--per-window"); break;
        case 's': seconds = parse_secs(optarg); break;
        case 'l': loop = 1; break;
        case 'i': interval_ms = (long)parse_u64(optarg, "--interval-ms"); break;
        case 'H': hot_n = parse_u64(optarg, "--hot-pages"); break;
        case 'S': seed = parse_u64(optarg, "--seed"); break;
        case 'T': thp = 1; break;
        case 'R': ready_file = optarg; break;
        case 'D': done_file = optarg; break;
        case 'C': debug_file = optarg; break;
        default: usage();
    }
    if (optind != argc || !trace) usage();
    if (copies < 1 || copies > (1u << 20)) die("bad --copies %llu (1 to 2^20)",
                                               (unsigned long long)copies);
    if (sysconf(_SC_PAGESIZE) != (long)PAGE)
        die("page size %ld: traces have 4 KiB pages", sysconf(_SC_PAGESIZE));
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    load(trace);
    if (span > (SIZE_MAX / PAGE - 512) / copies)
        die("%llu copies of %llu pages do not fit the address space",
            (unsigned long long)copies, (unsigned long long)span);
    size_t len = (size_t)(copies * span) * PAGE;
    char *raw = mmap(NULL, len + CHUNK_BYTES, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (raw == MAP_FAILED) die("mmap of %zu bytes: %s", len, strerror(errno));
    base = (char *)(((uintptr_t)raw + CHUNK_BYTES - 1) & ~(uintptr_t)(CHUNK_BYTES - 1));
    if (base > raw) munmap(raw, (size_t)(base - raw));
    if (base + len < raw + len + CHUNK_BYTES)
        munmap(base + len, (size_t)(raw + len + CHUNK_BYTES - (base + len)));
    if (!thp) madvise(base, len, MADV_NOHUGEPAGE);

    uint64_t *hot = hot_pages(copies, &hot_n);
    hot_ptr = malloc((hot_n ? hot_n : 1) * sizeof *hot_ptr);
    hot_status = malloc((hot_n ? hot_n : 1) * sizeof *hot_status);
    if (!hot_ptr || !hot_status) die("out of memory");
    for (uint64_t k = 0; k < hot_n; k++) hot_ptr[k] = base + hot[k] * PAGE;

    /* per-window scratch, sized for the largest window */
    uint64_t maxn = 1, accesses = 0;
    for (uint64_t i = 0; i < nwin; i++) {
        if (win[i].nrec > maxn) maxn = win[i].nrec;
        accesses += window_ops(&win[i]);
    }
    uint64_t *thr = malloc(maxn * sizeof *thr), *wthr = malloc(maxn * sizeof *wthr);
    uint32_t *alias = malloc(maxn * 4), *small = malloc(maxn * 4), *large = malloc(maxn * 4);
    double *p = malloc(maxn * sizeof *p);
    uint64_t *dcount = NULL;
    if (!thr || !wthr || !alias || !small || !large || !p) die("out of memory");
    if (debug_file) {
        dbg = fopen(debug_file, "w");
        if (!dbg) die("%s: %s", debug_file, strerror(errno));
        dcount = calloc(maxn * copies * 2, sizeof *dcount);   /* [record][copy][r, w] */
        if (!dcount) die("out of memory");
        fprintf(dbg, "# replay debug counts v1: span_pages %llu copies %llu windows %llu\n"
                "# H rank page | T window page | C pass window page reads writes\n",
                (unsigned long long)span, (unsigned long long)copies,
                (unsigned long long)nwin);
        for (uint64_t k = 0; k < hot_n; k++)
            fprintf(dbg, "H %llu %llu\n", (unsigned long long)k, (unsigned long long)hot[k]);
    }

    char line[4096];
    snprintf(line, sizeof line,
             "{\"event\":\"ready\",\"pid\":%d,\"base\":%lu,\"page_size\":%lu,\"span_pages\":%llu,"
             "\"copies\":%llu,\"windows\":%llu,\"touched_pages\":%llu,\"hot_pages\":%llu,"
             "\"per_window\":%llu,\"accesses_per_pass\":%llu,\"loop\":%s,\"seconds\":%g,"
             "\"interval_ms\":%ld,\"seed\":%llu,\"thp\":%s,\"uptime\":%.3f}\n",
             getpid(), (unsigned long)base, PAGE, (unsigned long long)span,
             (unsigned long long)copies, (unsigned long long)nwin,
             (unsigned long long)(ntouched * copies), (unsigned long long)hot_n,
             (unsigned long long)per_window, (unsigned long long)accesses,
             loop ? "true" : "false", seconds, interval_ms, (unsigned long long)seed,
             thp ? "true" : "false", boottime());
    emit(line);
    write_file(ready_file, line);
    t_ready = last_t = now();
    next_progress = t_ready + interval_ms / 1000.0;
    if (interval_ms > 0) progress(t_ready);

    uint64_t rng = seed * 0x9E3779B97F4A7C15ULL + 1, windows_done = 0, passes = 0;
    int ended = 0;
    for (uint64_t pass = 0; !ended; pass++) {
        uint64_t pass_ops = ops;
        for (uint64_t i = 0; i < nwin && !ended; i++) {
            struct window *w = &win[i];
            cur_window = i; cur_pass = pass;
            if (tick()) { ended = 1; break; }
            if (pass == 0) {        /* first touches: copy-major, ascending offsets */
                for (uint64_t c = 0; c < copies && !ended; c++)
                    for (uint64_t k = w->new_begin; k < w->new_end; k++) {
                        uint64_t pg = c * span + touched[k];
                        *(volatile uint64_t *)(base + pg * PAGE) = pg + 1;
                        first_touched++;
                        if (dbg) fprintf(dbg, "T %llu %llu\n", (unsigned long long)i,
                                         (unsigned long long)pg);
                        if ((first_touched & 4095) == 0 && tick()) { ended = 1; break; }
                    }
                if (ended) break;
            }
            uint64_t todo = window_ops(w);
            const uint32_t *ro = off + w->rec, *rr = rd + w->rec, *rw = wr + w->rec;
            uint64_t m = w->nrec;
            if (todo) {
                build_alias(m, rr, rw, w->sum, thr, alias, p, small, large);
                for (uint64_t j = 0; j < m; j++) {
                    uint64_t c = (uint64_t)rr[j] + rw[j];
                    wthr[j] = c ? ((uint64_t)rw[j] << 32) / c : 0;
                }
            }
            uint64_t done_here = 0;
            while (done_here < todo) {
                uint64_t chunk = todo - done_here < 4096 ? todo - done_here : 4096;
                for (uint64_t k = 0; k < chunk; k++) {
                    uint64_t r1 = rng_next(&rng), r2 = rng_next(&rng), r3 = rng_next(&rng);
                    uint64_t j = ((r1 >> 32) * m) >> 32;
                    if ((r1 & 0xffffffffULL) >= thr[j]) j = alias[j];
                    uint64_t c = ((r2 >> 32) * copies) >> 32;
                    int is_w = (r2 & 0xffffffffULL) < wthr[j];
                    volatile uint64_t *a = (volatile uint64_t *)
                        (base + (c * span + ro[j]) * PAGE) + (r3 & (PAGE / 8 - 1));
                    if (is_w) { *a = r3; writes_n++; } else sink += *a;
                    if (dcount) dcount[(j * copies + c) * 2 + is_w]++;
                }
                done_here += chunk;
                ops += chunk;
                if (tick()) { ended = 1; break; }
            }
            if (!ended) windows_done++;
            if (dcount && todo) {
                for (uint64_t j = 0; j < m; j++)
                    for (uint64_t c = 0; c < copies; c++) {
                        uint64_t *d = &dcount[(j * copies + c) * 2];
                        if (d[0] || d[1])
                            fprintf(dbg, "C %llu %llu %llu %llu %llu\n",
                                    (unsigned long long)pass, (unsigned long long)i,
                                    (unsigned long long)(c * span + ro[j]),
                                    (unsigned long long)d[0], (unsigned long long)d[1]);
                        d[0] = d[1] = 0;
                    }
            }
        }
        if (!ended) passes++;
        if (!loop || ops == pass_ops) break;  /* a pass without accesses would spin */
    }
    double t_end = now(), run_s = t_end - t_ready;
    if (dbg && fclose(dbg)) die("%s: %s", debug_file, strerror(errno));
    snprintf(line, sizeof line,
             "{\"event\":\"done\",\"ops\":%llu,\"writes\":%llu,\"ops_per_s\":%.0f,"
             "\"windows_done\":%llu,\"passes\":%llu,\"first_touched\":%llu,\"seconds\":%.3f,"
             "\"stopped\":%s,\"sink\":%llu}\n",
             (unsigned long long)ops, (unsigned long long)writes_n,
             run_s > 0 ? ops / run_s : 0.0, (unsigned long long)windows_done,
             (unsigned long long)passes, (unsigned long long)first_touched, run_s,
             stop_flag ? "true" : "false", (unsigned long long)(sink & 0xff));
    emit(line);
    write_file(done_file, line);
    return 0;
}
