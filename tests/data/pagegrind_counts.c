/* Known per-page access counts for tests/test_trace_record.py (built with gcc -O1).

   Maps NPAGES + 1 fresh pages (at a fixed hint address, away from anything the
   dynamic loader ever mapped), then: page p gets READS(p) loads and WRITES(p) stores
   of 8-byte words, interleaved across pages; one unaligned 8-byte load straddles the
   last counted page and the extra page (pagegrind counts it on the first page only).

   Usage: pagegrind_counts [EXIT_CODE]. Prints "addr=0x... pages=N" to stdout and a
   line to stderr, then exits with EXIT_CODE (default 0). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

#define NPAGES 8
#define WORDS (4096 / 8)
#define READS(p) (3 * (p) + 2)
#define WRITES(p) ((p) * (p) + 1)

typedef uint64_t __attribute__((aligned(1))) unaligned_u64;

int main(int argc, char **argv)
{
    size_t len = (NPAGES + 1) * 4096;
    int prot = PROT_READ | PROT_WRITE;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS;
    void *m = mmap((void *)0x1000000000UL, len, prot, flags | MAP_FIXED_NOREPLACE, -1, 0);
    if (m == MAP_FAILED)
        m = mmap(NULL, len, prot, flags, -1, 0);
    if (m == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    volatile uint64_t *a = m;
    uint64_t sum = 0;
    int rounds = WRITES(NPAGES - 1) > READS(NPAGES - 1) ? WRITES(NPAGES - 1) : READS(NPAGES - 1);

    printf("addr=%p pages=%d\n", m, NPAGES);
    fflush(stdout);
    for (int j = 0; j < rounds; j++)
        for (int p = 0; p < NPAGES; p++) {
            if (j < READS(p))
                sum += a[p * WORDS + (j % WORDS)];
            if (j < WRITES(p))
                a[p * WORDS + ((7 * j) % WORDS)] = (uint64_t)j;
        }
    sum += *(volatile unaligned_u64 *)((char *)m + NPAGES * 4096 - 4);
    fprintf(stderr, "pagegrind_counts: done (%llu)\n", (unsigned long long)(sum & 1));
    return argc > 1 ? atoi(argv[1]) : 0;
}
