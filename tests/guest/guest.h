/* guest.h: what the guest's C programs share (static inline; hotcold.c, replay.c).
 * now(): CLOCK_MONOTONIC seconds, for intervals; boottime(): CLOCK_BOOTTIME seconds, the
 * clock of /proc/uptime, which the guest's samplers (placement.py, the scenarios' uptime)
 * report, so the programs' lines line up with theirs; write_file(): a ready/done line
 * written to PATH.tmp and renamed, so readers see the whole line or nothing. */
#ifndef GUEST_H
#define GUEST_H

#include <stdio.h>
#include <time.h>

static inline double boottime(void)
{
    struct timespec t;
    clock_gettime(CLOCK_BOOTTIME, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static inline double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static inline void write_file(const char *path, const char *line)
{
    if (!path) return;
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    if (!f) { perror(path); return; }
    fputs(line, f);
    fclose(f);
    rename(tmp, path);
}

#endif /* GUEST_H */
