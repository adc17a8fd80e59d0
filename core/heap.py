"""Freed memory handed back to the system between the phases of a long retarget (docs/solver.md "Speed and
memory").

On Linux, glibc keeps the memory of freed blocks for reuse, and once a large block has been freed it raises its
mmap threshold to that size, so later tensors up to that size come from its heap: a 10 000-frame solve's many
temporaries of a few MB leave hundreds of MB held after they are freed (measured: ``tools/bench/run.py
--memory-child``), on top of which the metrics build theirs. ``release_free_memory`` asks glibc to return its free
heap (``malloc_trim``); elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

_TRIM = None


def release_free_memory() -> bool:
    """Return the C heap's free memory to the system (glibc's ``malloc_trim(0)``); True when it ran. Live arrays
    are untouched; a no-op where the C library has no ``malloc_trim`` (macOS, Windows, musl)."""
    global _TRIM
    if _TRIM is None:
        _TRIM = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                _TRIM = libc.malloc_trim
                _TRIM.argtypes = [ctypes.c_size_t]
                _TRIM.restype = ctypes.c_int
            except (OSError, AttributeError):
                _TRIM = False
    if not _TRIM:
        return False
    _TRIM(0)
    return True


__all__ = ["release_free_memory"]
