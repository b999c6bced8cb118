"""A process's own peak memory, for the benchmarks that measure each step in a process of its own."""
from __future__ import annotations

import resource


def peak_rss_mb() -> float:
    """This process's peak resident memory: VmHWM where there is /proc. getrusage's ru_maxrss
    is not this process's alone: Linux carries the high-water mark of the process that started
    it into it across exec, so a child of a measuring process that holds a lock file's bytes
    would report them as its own."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) / 1024
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
