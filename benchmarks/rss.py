"""Peak resident memory of a call, above the RSS just before it, sampled from /proc (Linux)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

PAGE = os.sysconf("SC_PAGE_SIZE")
LIVE_MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
"""Environment for a measuring subprocess: glibc serves every allocation above 128 KiB by mmap and
returns it when freed, so the RSS follows the live tensors instead of what earlier calls left in
malloc's free lists."""


def rss_bytes() -> int:
    """Current resident set size of this process."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * PAGE


def peak_rss_growth_mb(fn: Callable[[], object], interval: float = 0.002) -> float:
    """Run ``fn`` while a thread samples RSS every ``interval`` s; the peak above the start, in MB."""
    start = rss_bytes()
    peak = start
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, rss_bytes())
            time.sleep(interval)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        fn()
    finally:
        done.set()
        thread.join()
    return (max(peak, rss_bytes()) - start) / 2**20
