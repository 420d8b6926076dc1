"""The Linux layer of the real backend: NUMA topology from sysfs (`topology`),
move_pages(2) and the mempolicy system calls (`syscalls`), and /proc readers
(`procfs`). Import the submodules directly; this package imports nothing."""
