"""The memory allocators of a long-lived, many-threaded service process (the worker).

Two allocators hold the worker's heap: glibc's ``malloc`` (Python's objects above 512 bytes, and
Lance, whose Rust code allocates through it) and Arrow's memory pool (pyarrow's buffers: the rows
a meta object's batches and tables are built from). Both keep memory per thread: glibc in up to
eight arenas per core, each grown by whichever thread took it; Arrow's default pool, mimalloc,
in a heap of pages per thread. The worker runs up to ``activity_threads`` (256) activities at once,
so each thread's leftovers add up, and the process's RSS rose with every object while the data
the worker keeps grew far less (docs/projection-runtime.md, "Worker", "Memory").
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

log = logging.getLogger(__name__)

ArrowPool = Literal["system", "mimalloc", "jemalloc", "default"]
# mallopt's parameter number for the arena cap (glibc's malloc.h).
_M_ARENA_MAX = -8


@functools.cache
def _libc() -> ctypes.CDLL | None:
    # find_library runs ldconfig in a subprocess: once per process, not per memory line.
    name = ctypes.util.find_library("c")
    return ctypes.CDLL(name) if name else None


def cap_malloc_arenas(arena_max: int) -> bool:
    """At most ``arena_max`` glibc arenas from now on (0: glibc's default, eight per core).

    Takes effect for arenas created after the call, so a process calls it first thing. Threads
    beyond the cap share arenas (a lock per allocation they contend for); the GIL already
    serialises the Python threads, and the measured CPU did not move (the docs' section). Returns
    whether the cap is set: False on a C library without ``mallopt`` (musl), where it is skipped.
    """
    if arena_max <= 0:
        return False
    mallopt = getattr(_libc(), "mallopt", None)
    if mallopt is None:
        log.warning("no mallopt in the C library: glibc's arena cap is not set")
        return False
    return bool(mallopt(_M_ARENA_MAX, arena_max))


def use_arrow_pool(pool: ArrowPool) -> str:
    """Make ``pool`` pyarrow's default memory pool; returns the backend in use.

    "system" is glibc's malloc, capped above; "default" keeps pyarrow's choice (mimalloc where it
    is built in, or what ``ARROW_DEFAULT_MEMORY_POOL`` names).
    """
    import pyarrow as pa  # here: worker.settings imports this module's ArrowPool, the bridge too

    if pool == "system":
        pa.set_memory_pool(pa.system_memory_pool())
    elif pool == "mimalloc":
        pa.set_memory_pool(pa.mimalloc_memory_pool())
    elif pool == "jemalloc":
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    return pa.default_memory_pool().backend_name


def tune_allocators(arena_max: int, arrow_pool: ArrowPool) -> str:
    """Both of the above, logged once: what a worker runs with is in its log. Returns Arrow's
    backend in use."""
    capped = cap_malloc_arenas(arena_max)
    backend = use_arrow_pool(arrow_pool)
    log.info(
        "memory: glibc arenas %s, Arrow pool %s",
        f"at most {arena_max}" if capped else "glibc's default",
        backend,
    )
    return backend


def trim_malloc() -> bool:
    """Hand glibc's free memory back to the system (``malloc_trim(0)``); whether glibc did.

    glibc returns freed memory to the system on its own only from the top of an arena's heap:
    chunks freed below live ones stay with the process. In the hour's soak of 2026-12-05 that
    held memory grew from 83 to 238 MB in a worker whose memory in use stayed level.
    ``malloc_trim`` walks every arena and releases the free pages anywhere in it (glibc 2.8 and
    later), so a long-lived process calls it now and then. False on a C library without it (musl).
    """
    trim = getattr(_libc(), "malloc_trim", None)
    return bool(trim(0)) if trim is not None else False


class _MallInfo2(ctypes.Structure):
    # glibc 2.33+'s struct mallinfo2 (malloc.h), every field a size_t.
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            *("arena", "ordblks", "smblks", "hblks", "hblkhd"),
            *("usmblks", "fsmblks", "uordblks", "fordblks", "keepcost"),
        )
    ]


@dataclass(frozen=True)
class MemorySnapshot:
    """Where a process's memory is, in MiB: what a soak or a long run samples to tell a cache
    filling up (in use grows, then stops) from an allocator holding freed memory (free grows)."""

    rss: float
    rss_anon: float
    malloc_in_use: float | None  # glibc: allocated chunks, every arena, mmapped ones included
    malloc_free: float | None  # glibc: freed chunks it keeps in its arenas
    arrow_pool: float  # bytes pyarrow's default pool has handed out and not had back

    def describe(self) -> str:
        glibc = (
            f", glibc in use {self.malloc_in_use:.0f} / free {self.malloc_free:.0f}"
            if self.malloc_in_use is not None and self.malloc_free is not None
            else ""
        )
        rss = f"RSS {self.rss:.0f} MiB (anonymous {self.rss_anon:.0f})"
        return f"{rss}{glibc}, Arrow pool {self.arrow_pool:.0f}"


def resident_mib() -> dict[str, float]:
    """The kernel's count of this process's resident memory, in MiB: ``VmRSS`` and ``RssAnon``
    (one read of /proc; no allocator walked)."""
    status = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "RssAnon"):
            status[key] = int(value.split()[0]) / 1024
    return status


def memory_snapshot() -> MemorySnapshot:
    import pyarrow as pa

    status = resident_mib()
    in_use = free = None
    mallinfo2 = getattr(_libc(), "mallinfo2", None)  # glibc 2.33 and later
    if mallinfo2 is not None:
        mallinfo2.restype = _MallInfo2
        info = mallinfo2()
        in_use, free = (info.uordblks + info.hblkhd) / 2**20, info.fordblks / 2**20
    return MemorySnapshot(
        rss=status.get("VmRSS", 0.0),
        rss_anon=status.get("RssAnon", 0.0),
        malloc_in_use=in_use,
        malloc_free=free,
        arrow_pool=pa.total_allocated_bytes() / 2**20,
    )


def python_heap_top(n: int = 5) -> str:
    """While tracemalloc traces (the worker's ``trace_python_heap``, or ``PYTHONTRACEMALLOC``: a
    diagnosis, it slows allocation), the ``n`` source lines holding the most Python memory, for
    the memory line; "" when tracemalloc is off."""
    import tracemalloc

    if not tracemalloc.is_tracing():
        return ""
    sites = []
    for stat in tracemalloc.take_snapshot().statistics("lineno")[:n]:
        frame = stat.traceback[0]
        where = "/".join(frame.filename.split("/")[-2:])  # package/module.py
        sites.append(f"{where}:{frame.lineno} {stat.size / 2**20:.1f} MiB")
    return "; Python heap: " + ", ".join(sites)
