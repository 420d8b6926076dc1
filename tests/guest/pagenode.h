/* pagenode.h: which NUMA node holds each of this process's pages, via move_pages(2) in
 * status mode (raw syscall SYS_move_pages, no libnuma). With nodes == NULL nothing moves:
 * the kernel (mm/migrate.c, do_pages_stat) stores in status[i] the node of page i, or a
 * negative errno: -ENOENT when no page is present there (never touched), -EFAULT when the
 * address is not mapped.
 *
 *   struct pagenode_count c;
 *   pagenode_count(pages, n, status, &c);       status: caller's int[n]
 *   pagenode_json(&c, "hot", buf, sizeof buf);   "hot_nodes":{"0":a,"1":b},"hot_absent":c
 *
 * Every page lands in exactly one bucket: a node (present) or `absent` (any negative
 * status, or the whole query when move_pages itself fails, e.g. ENOSYS on a kernel without
 * CONFIG_NUMA), so the node counts plus absent always sum to n. `error` counts the absent
 * pages whose status was not -ENOENT (or all n when the query failed, with query_errno set);
 * pagenode_json adds "NAME_errors" and "NAME_query_errno" only when they are non-zero.
 * Static inline functions: include it from several programs (replay.c, hotcold.c).
 */
#ifndef PAGENODE_H
#define PAGENODE_H

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PAGENODE_MAX 64         /* nodes counted one by one; higher ones go to `error` */

struct pagenode_count {
    unsigned long node[PAGENODE_MAX];   /* present pages on each node */
    unsigned long absent;               /* pages with a negative status (never touched: -ENOENT) */
    unsigned long error;                /* of those, status other than -ENOENT */
    int query_errno;                    /* move_pages failed as a whole (0: it did not) */
};

/* Status query of n pages of the calling process: 0, or -errno of move_pages. */
static inline long pagenode_status(void **pages, unsigned long n, int *status)
{
    if (n == 0)
        return 0;
    if (syscall(SYS_move_pages, 0, n, pages, NULL, status, 0) < 0)
        return -errno;
    return 0;
}

/* Query n pages and count them per node into *c (status: scratch of n ints). */
static inline void pagenode_count(void **pages, unsigned long n, int *status,
                                  struct pagenode_count *c)
{
    memset(c, 0, sizeof *c);
    long r = pagenode_status(pages, n, status);
    if (r < 0) {
        c->absent = c->error = n;
        c->query_errno = (int)-r;
        return;
    }
    for (unsigned long i = 0; i < n; i++) {
        int s = status[i];
        if (s >= 0 && s < PAGENODE_MAX) {
            c->node[s]++;
        } else {
            c->absent++;
            if (s != -ENOENT)
                c->error++;
        }
    }
}

/* Append "NAME_nodes":{...},"NAME_absent":n[,"NAME_errors":e][,"NAME_query_errno":E] to
 * buf (no braces around it); nodes without pages are left out. Returns the length written,
 * or -1 if buf is too small. */
static inline int pagenode_json(const struct pagenode_count *c, const char *name, char *buf,
                                size_t len)
{
    size_t k = 0;
    int w = snprintf(buf, len, "\"%s_nodes\":{", name);
    if (w < 0 || (size_t)w >= len)
        return -1;
    k = (size_t)w;
    const char *sep = "";
    for (int i = 0; i < PAGENODE_MAX; i++) {
        if (!c->node[i])
            continue;
        w = snprintf(buf + k, len - k, "%s\"%d\":%lu", sep, i, c->node[i]);
        if (w < 0 || (size_t)w >= len - k)
            return -1;
        k += (size_t)w;
        sep = ",";
    }
    w = snprintf(buf + k, len - k, "},\"%s_absent\":%lu", name, c->absent);
    if (w < 0 || (size_t)w >= len - k)
        return -1;
    k += (size_t)w;
    if (c->error) {
        w = snprintf(buf + k, len - k, ",\"%s_errors\":%lu", name, c->error);
        if (w < 0 || (size_t)w >= len - k)
            return -1;
        k += (size_t)w;
    }
    if (c->query_errno) {
        w = snprintf(buf + k, len - k, ",\"%s_query_errno\":%d", name, c->query_errno);
        if (w < 0 || (size_t)w >= len - k)
            return -1;
        k += (size_t)w;
    }
    return (int)k;
}

#endif /* PAGENODE_H */
