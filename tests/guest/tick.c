/* tick: sleep T microseconds at a time, forever, on the CPU it is pinned to (taskset).
 *
 * Usage: tick MICROSECONDS
 *
 * Under QEMU's TCG the emulated TLB holds a whole hot range, so a page's PTE accessed bit,
 * once cleared without a TLB flush (DAMON's mkold, the multi-gen LRU's aging), is set again
 * only after that vCPU's TLB is flushed: an address-space switch does it. A real CPU's TLB
 * holds a few MiB, and a hot range larger than that sets the bit again at its next access.
 * One tick per CPU switches the CPU's address space every T us (tests/guest/README.md,
 * "The emulator's TLB"). Exit: 2 on a usage error; otherwise runs until killed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    long us = argc == 2 ? atol(argv[1]) : 0;
    if (us <= 0) {
        fprintf(stderr, "usage: tick MICROSECONDS (> 0)\n");
        return 2;
    }
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    for (;;)
        nanosleep(&ts, NULL);
}
