/* hotcold: a workload with a known hot and cold range, verifiable contents.
 *
 * Usage: hotcold --hot-mib H --cold-mib C --seconds S [--init-node N] [--hot-node N]
 *                [--cold-node N] [--init-mode bind|preferred] [--write-share F]
 *                [--interval-ms I] [--seed X] [--cold-touch-per-s R] [--thp]
 *                [--ready-file PATH] [--done-file PATH] [--hot-windows K --move-ms T]
 *
 * Layout: one PROT_NONE reservation [guard|hot|guard|cold|guard]; hot and cold are made
 * accessible separately, so they are two VMAs that never merge (own lines in numa_maps).
 * With --init-node/--hot-node/--cold-node the range is mbind()ed to that node for the first
 * touch, then its policy is reset to MPOL_DEFAULT, so it starts there but may migrate.
 *
 * Contents: every 64-bit word w at address a holds (gen << 32) | h32(a ^ seed) and each page
 * has an xor checksum of its words in a separate array. Reads check the low half of a word;
 * writes store a new generation and update the page checksum. The final pass checks every
 * word's low half and every page's xor: zeroed, swapped, stale (lost write) or torn pages fail.
 *
 * Moving hot set (--hot-windows K --move-ms T): the hot range is K equal windows; the
 * accesses go to window (elapsed / T) mod K, so the hot set moves to the next window every
 * T ms (as tierlab's gups:dynamic), and the windows left behind turn cold.
 *
 * Output (stdout, one JSON object per line; --ready-file/--done-file get a copy):
 *   {"event":"ready-nodes","windows":[[n0,n1],...],"cold":[n0,n1]}   each hot window's
 *    and the cold range's pages on nodes 0 and 1 after the fill, just before ready
 *   {"event":"ready","pid":P,"hot":[start,end],"cold":[start,end],...}
 *   {"event":"progress","t":s,"ops":n,"window":w,"uptime":u,"hot_nodes":{"0":a,"1":b},
 *    "hot_absent":c,...}     every I ms (I=0: none); hot_* count the current window's pages
 *    per node (move_pages status query, pagenode.h); uptime is CLOCK_BOOTTIME's seconds,
 *    the clock of /proc/uptime
 *   {"event":"done","checksum":"ok"|"bad","bad_pages":n,"ops":n,...}
 * Exit: 0 all pages verified, 1 corruption found, 2 usage/setup error. SIGTERM/SIGINT end the
 * access phase early; the verification still runs.
 * Build: gcc -O2 -static -o hotcold hotcold.c   (raw syscalls; no libnuma)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "guest.h"
#include "pagenode.h"

#define MPOL_DEFAULT 0
#define MPOL_PREFERRED 1
#define MPOL_BIND 2

static volatile sig_atomic_t stop_flag;
static void on_signal(int sig) { (void)sig; stop_flag = 1; }

static inline uint64_t h32(uint64_t x)
{
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x & 0xffffffffULL;
}

static inline uint64_t rng_next(uint64_t *s)
{   /* xorshift64* */
    uint64_t x = *s;
    x ^= x >> 12; x ^= x << 25; x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

static long mbind_sys(void *addr, size_t len, int mode, const unsigned long *mask,
                      unsigned long maxnode)
{
    return syscall(SYS_mbind, addr, len, mode, mask, maxnode, 0);
}

static void emit(FILE *copy, const char *line)
{
    fputs(line, stdout);
    fflush(stdout);
    if (copy) { fputs(line, copy); fflush(copy); }
}

struct range { char *start; size_t pages; int node; };

static uint64_t *csum;          /* per-page xor, hot pages first, then cold */
static long pg;
static size_t wpp;              /* 64-bit words per page */
static uint64_t seed = 1;

static void fill(struct range *r, size_t csum_off, int mode)
{
    size_t len = r->pages * pg;
    if (r->node >= 0) {
        unsigned long mask = 1UL << r->node;
        if (mbind_sys(r->start, len, mode, &mask, sizeof(mask) * 8 + 1) < 0) {
            fprintf(stderr, "hotcold: mbind(node %d): %s\n", r->node, strerror(errno));
            exit(2);
        }
    }
    for (size_t p = 0; p < r->pages; p++) {
        uint64_t *w = (uint64_t *)(r->start + p * pg), x = 0;
        for (size_t i = 0; i < wpp; i++) {
            w[i] = h32((uint64_t)(uintptr_t)&w[i] ^ seed);
            x ^= w[i];
        }
        csum[csum_off + p] = x;
    }
    if (r->node >= 0 && mbind_sys(r->start, len, MPOL_DEFAULT, NULL, 0) < 0) {
        fprintf(stderr, "hotcold: mbind(default): %s\n", strerror(errno));
        exit(2);
    }
}

static size_t verify(struct range *r, size_t csum_off)
{
    size_t bad = 0;
    for (size_t p = 0; p < r->pages; p++) {
        uint64_t *w = (uint64_t *)(r->start + p * pg), x = 0;
        int ok = 1;
        for (size_t i = 0; i < wpp; i++) {
            uint64_t v = w[i];
            if ((v & 0xffffffffULL) != h32((uint64_t)(uintptr_t)&w[i] ^ seed)) ok = 0;
            x ^= v;
        }
        if (x != csum[csum_off + p]) ok = 0;
        if (!ok) {
            if (bad < 5)
                fprintf(stderr, "hotcold: bad page at %p\n", (void *)w);
            bad++;
        }
    }
    return bad;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: hotcold --hot-mib H --cold-mib C --seconds S [--init-node N] [--hot-node N]\n"
            "               [--cold-node N] [--init-mode bind|preferred] [--write-share F]\n"
            "               [--interval-ms I] [--seed X] [--cold-touch-per-s R] [--thp]\n"
            "               [--ready-file PATH] [--done-file PATH]\n"
            "               [--hot-windows K --move-ms T]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    double hot_mib = 64, cold_mib = 256, seconds = 30, write_share = 0.2, cold_rate = 1.0;
    long interval_ms = 1000, windows = 1;
    double move_ms = 0;
    int hot_node = -1, cold_node = -1, thp = 0, mode = MPOL_BIND;
    const char *ready_file = NULL, *done_file = NULL;
    static struct option opts[] = {
        {"hot-mib", 1, 0, 'h'}, {"cold-mib", 1, 0, 'c'}, {"seconds", 1, 0, 's'},
        {"init-node", 1, 0, 'n'}, {"hot-node", 1, 0, 'H'}, {"cold-node", 1, 0, 'C'},
        {"init-mode", 1, 0, 'm'}, {"write-share", 1, 0, 'w'}, {"interval-ms", 1, 0, 'i'},
        {"seed", 1, 0, 'S'}, {"cold-touch-per-s", 1, 0, 'r'}, {"thp", 0, 0, 'T'},
        {"ready-file", 1, 0, 'R'}, {"done-file", 1, 0, 'D'}, {"hot-windows", 1, 0, 'K'},
        {"move-ms", 1, 0, 'M'}, {"help", 0, 0, '?'}, {0, 0, 0, 0}};
    int o;
    while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) switch (o) {
        case 'h': hot_mib = atof(optarg); break;
        case 'c': cold_mib = atof(optarg); break;
        case 's': seconds = atof(optarg); break;
        case 'n': hot_node = cold_node = atoi(optarg); break;
        case 'H': hot_node = atoi(optarg); break;
        case 'C': cold_node = atoi(optarg); break;
        case 'm':
            if (!strcmp(optarg, "bind")) mode = MPOL_BIND;
            else if (!strcmp(optarg, "preferred")) mode = MPOL_PREFERRED;
            else usage();
            break;
        case 'w': write_share = atof(optarg); break;
        case 'i': interval_ms = atol(optarg); break;
        case 'S': seed = strtoull(optarg, 0, 0); break;
        case 'r': cold_rate = atof(optarg); break;
        case 'T': thp = 1; break;
        case 'R': ready_file = optarg; break;
        case 'D': done_file = optarg; break;
        case 'K': windows = atol(optarg); break;
        case 'M': move_ms = atof(optarg); break;
        default: usage();
    }
    if (optind != argc || hot_mib <= 0 || cold_mib < 0 || seconds < 0 || write_share < 0 ||
        write_share > 1 || hot_node > 63 || cold_node > 63 || windows < 1 || move_ms < 0)
        usage();
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);

    pg = sysconf(_SC_PAGESIZE);
    wpp = pg / sizeof(uint64_t);
    struct range hot = {0}, cold = {0};
    hot.pages = (size_t)(hot_mib * 1048576.0 / pg);
    cold.pages = (size_t)(cold_mib * 1048576.0 / pg);
    if (hot.pages < (size_t)windows) usage();
    size_t win_pages = hot.pages / (size_t)windows;
    hot.node = hot_node; cold.node = cold_node;
    size_t total = (hot.pages + cold.pages + 3) * pg;
    char *base = mmap(NULL, total, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (base == MAP_FAILED) { perror("hotcold: mmap"); return 2; }
    hot.start = base + pg;
    cold.start = hot.start + (hot.pages + 1) * pg;
    if (mprotect(hot.start, hot.pages * pg, PROT_READ | PROT_WRITE) ||
        (cold.pages && mprotect(cold.start, cold.pages * pg, PROT_READ | PROT_WRITE))) {
        perror("hotcold: mprotect"); return 2;
    }
    if (!thp) {   /* exact 4 KiB accounting in numa_maps and the migration counters */
        madvise(hot.start, hot.pages * pg, MADV_NOHUGEPAGE);
        if (cold.pages) madvise(cold.start, cold.pages * pg, MADV_NOHUGEPAGE);
    }
    csum = mmap(NULL, (hot.pages + cold.pages) * sizeof(uint64_t), PROT_READ | PROT_WRITE,
                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (csum == MAP_FAILED) { perror("hotcold: mmap"); return 2; }

    double t0 = now();
    fill(&hot, 0, mode);
    if (cold.pages) fill(&cold, hot.pages, mode);
    double fill_s = now() - t0;
    void **win_addr = malloc(win_pages * sizeof(void *));
    int *win_status = malloc(win_pages * sizeof(int));
    if (!win_addr || !win_status) { perror("hotcold: malloc"); return 2; }

    /* where the fill left every window and the cold range (a policy run with the fill,
     * as tierlab exec, may have moved pages meanwhile) */
    {
        size_t most = hot.pages > cold.pages ? hot.pages : cold.pages;
        void **addr = malloc((most ? most : 1) * sizeof(void *));
        int *status = malloc((most ? most : 1) * sizeof(int));
        if (!addr || !status) { perror("hotcold: malloc"); return 2; }
        struct pagenode_count pc;
        printf("{\"event\":\"ready-nodes\",\"windows\":[");
        for (long w = 0; w < windows; w++) {
            for (size_t q = 0; q < win_pages; q++)
                addr[q] = hot.start + (w * win_pages + q) * pg;
            pagenode_count(addr, win_pages, status, &pc);
            printf("%s[%lu,%lu]", w ? "," : "", pc.node[0], pc.node[1]);
        }
        for (size_t q = 0; q < cold.pages; q++)
            addr[q] = cold.start + q * pg;
        pagenode_count(addr, cold.pages, status, &pc);
        printf("],\"cold\":[%lu,%lu]}\n", pc.node[0], pc.node[1]);
        fflush(stdout);
        free(addr); free(status);
    }

    char line[1024];
    snprintf(line, sizeof line,
             "{\"event\":\"ready\",\"pid\":%d,\"hot\":[%lu,%lu],\"cold\":[%lu,%lu],"
             "\"page_size\":%ld,\"hot_pages\":%zu,\"cold_pages\":%zu,\"hot_node\":%d,"
             "\"cold_node\":%d,\"seconds\":%g,\"write_share\":%g,\"seed\":%llu,\"fill_s\":%.3f,"
             "\"windows\":%ld,\"window_pages\":%zu,\"move_ms\":%g,\"uptime\":%.3f}\n",
             getpid(), (unsigned long)hot.start, (unsigned long)(hot.start + hot.pages * pg),
             (unsigned long)cold.start, (unsigned long)(cold.start + cold.pages * pg), pg,
             hot.pages, cold.pages, hot_node, cold_node, seconds, write_share,
             (unsigned long long)seed, fill_s, windows, win_pages, move_ms, boottime());
    emit(NULL, line);
    write_file(ready_file, line);

    /* access phase */
    uint64_t rng = seed * 0x9E3779B97F4A7C15ULL + 1, ops = 0, writes = 0, cold_ops = 0;
    uint64_t read_bad = 0, sink = 0, gen = 1, last_ops = 0;
    uint32_t wthresh = (uint32_t)(write_share * 4294967295.0);
    double start = now(), end = start + seconds, next = start + interval_ms / 1000.0;
    double cold_gap = cold_rate > 0 ? 1.0 / cold_rate : 1e300, next_cold = start + cold_gap;
    double t = start, last_t = start;
    size_t win = 0;
    while (!stop_flag && t < end) {
        if (move_ms > 0)
            win = (size_t)((t - start) * 1000.0 / move_ms) % (size_t)windows;
        for (int k = 0; k < 4096; k++) {
            uint64_t r = rng_next(&rng);
            size_t p = win * win_pages + (size_t)((r >> 32) % win_pages);
            size_t i = (size_t)((r >> 8) & (wpp - 1));
            uint64_t *w = (uint64_t *)(hot.start + p * pg) + i;
            uint64_t v = *w;
            if ((v & 0xffffffffULL) != h32((uint64_t)(uintptr_t)w ^ seed)) read_bad++;
            if ((uint32_t)rng_next(&rng) < wthresh) {
                uint64_t nv = (gen++ << 32) | (v & 0xffffffffULL);
                *w = nv;
                csum[p] ^= v ^ nv;
                writes++;
            } else sink += v;
        }
        ops += 4096;
        t = now();
        if (cold.pages && t >= next_cold) {    /* the cold range is read almost never */
            uint64_t r = rng_next(&rng);
            sink += *(volatile uint64_t *)(cold.start + (r % cold.pages) * pg);
            cold_ops++;
            next_cold += cold_gap;
        }
        if (interval_ms > 0 && t >= next) {
            struct pagenode_count pc;
            char nodes[512];
            for (size_t q = 0; q < win_pages; q++)
                win_addr[q] = hot.start + (win * win_pages + q) * pg;
            pagenode_count(win_addr, win_pages, win_status, &pc);
            if (pagenode_json(&pc, "hot", nodes, sizeof nodes) < 0) nodes[0] = 0;
            printf("{\"event\":\"progress\",\"t\":%.3f,\"ops\":%llu,\"writes\":%llu,"
                   "\"ops_per_s\":%.0f,\"cold_ops\":%llu,\"read_bad\":%llu,\"window\":%zu,"
                   "\"uptime\":%.3f%s%s}\n",
                   t - start, (unsigned long long)ops, (unsigned long long)writes,
                   (ops - last_ops) / (t - last_t), (unsigned long long)cold_ops,
                   (unsigned long long)read_bad, win, boottime(), nodes[0] ? "," : "", nodes);
            last_ops = ops; last_t = t;
            next += interval_ms / 1000.0;
            if (next < t) next = t + interval_ms / 1000.0;
        }
    }
    double run_s = now() - start;

    double v0 = now();
    size_t bad_hot = verify(&hot, 0);
    size_t bad_cold = cold.pages ? verify(&cold, hot.pages) : 0;
    double verify_s = now() - v0;
    size_t bad = bad_hot + bad_cold;
    snprintf(line, sizeof line,
             "{\"event\":\"done\",\"checksum\":\"%s\",\"bad_pages\":%zu,\"bad_hot\":%zu,"
             "\"bad_cold\":%zu,\"read_bad\":%llu,\"ops\":%llu,\"writes\":%llu,\"cold_ops\":%llu,"
             "\"run_s\":%.3f,\"ops_per_s\":%.0f,\"verify_s\":%.3f,\"stopped\":%s,\"sink\":%llu}\n",
             (bad || read_bad) ? "bad" : "ok", bad, bad_hot, bad_cold,
             (unsigned long long)read_bad, (unsigned long long)ops, (unsigned long long)writes,
             (unsigned long long)cold_ops, run_s, run_s > 0 ? ops / run_s : 0.0, verify_s,
             stop_flag ? "true" : "false", (unsigned long long)(sink & 0xff));
    emit(NULL, line);
    write_file(done_file, line);
    return (bad || read_bad) ? 1 : 0;
}
