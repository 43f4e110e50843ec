"""The C allocator's two thresholds, set once per process where the C library is glibc (Linux), so that
the memory a search frees is kept for the next one rather than given back to the system after each.

Lance (pylance) frees a search's read buffers when it ends, tens of MiB of them in a thread's arena for
an exact vector search of 10,000 notes. glibc trims an arena's free top back to the system once it
exceeds the trim threshold, 128 KiB until a chunk mapped apart is freed (then twice that chunk), so
each recall at 10,000 notes handed about 24 MiB back (one madvise(MADV_DONTNEED) of a thread's heap a
recall, under strace) and the next search faulted it in again, zeroed by the kernel: 2,000-5,500 minor
page faults and 8-17 ms of system time a recall, where LanceDB's own hybrid search in the same process
faulted 100-650 times (4-7 ms). How often depends on what the process freed before (a large mapped chunk
freed once raises both thresholds): one bench process measured 660 faults a recall, others 2,000-3,300.
At 1,000 notes it did not happen (20-30 faults): recall ran at LanceDB's speed there, and at up to
twice its time at 10,000 (issue 51).

Pinned at the most glibc's own adjustment reaches (32 MiB mapped apart, 64 MiB of free top kept), the
memory stays in the arenas: 60-300 faults a recall, in every process. What is kept is at most
TRIM_THRESHOLD of free top in each arena a search used; the engine still hands it back when a client
leaves (`give_back`, server/engine.py). A process whose environment sets either threshold itself
(GLIBC_TUNABLES, MALLOC_MMAP_THRESHOLD_, MALLOC_TRIM_THRESHOLD_) is left as it asked. Both are set or
neither: once one is set glibc stops adjusting the other, and one alone (the other left at 128 KiB) made
every search fault several times as often as the default.
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading

M_TRIM_THRESHOLD = -1  # glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 * 2**20  # glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit: the most it takes
TRIM_THRESHOLD = 2 * MMAP_THRESHOLD  # what glibc's dynamic adjustment pairs with it

_lock = threading.Lock()
_done: bool | None = None  # whether the thresholds were set; None: not tried yet


def _asked_otherwise() -> bool:
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return (
        "glibc.malloc.mmap_threshold" in tunables
        or "glibc.malloc.trim_threshold" in tunables
        or "MALLOC_MMAP_THRESHOLD_" in os.environ
        or "MALLOC_TRIM_THRESHOLD_" in os.environ
    )


def _glibc() -> ctypes.CDLL | None:
    """The C library where it is glibc (Linux), else None: musl's mallopt and malloc_trim do nothing."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    return libc if hasattr(libc, "gnu_get_libc_version") and hasattr(libc, "malloc_trim") else None


def keep_search_buffers() -> bool:
    """Set the thresholds (module docstring), once per process; whether they are set. Nothing happens
    outside Linux, under another C library, or where the environment sets them itself."""
    global _done
    with _lock:
        if _done is not None:
            return _done
        _done = False
        libc = None if _asked_otherwise() else _glibc()
        if libc is None:
            return False
        mallopt = libc.mallopt
        mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        mallopt.restype = ctypes.c_int
        _done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
        return _done


def give_back() -> None:
    """The free memory of every arena given back to the system (glibc's malloc_trim), whatever the thresholds
    keep: what the engine does when a client leaves (server/engine.py). Elsewhere nothing happens."""
    libc = _glibc()
    if libc is not None:
        libc.malloc_trim(0)
