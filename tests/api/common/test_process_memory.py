"""The worker's allocator settings take effect: glibc stops creating arenas at the cap, and
pyarrow's buffers come from the pool named; an unknown pool is refused by the settings, by name.

Arenas are counted in a fresh interpreter from glibc's own report (``malloc_stats``, one "Arena n:"
block per arena): each new thread's first allocation takes an arena of its own while fewer than
the cap exist, so 12 threads make more than two arenas unless the cap holds."""

from __future__ import annotations

import asyncio
import ctypes
import logging
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from api.common.process_memory import cap_malloc_arenas, memory_snapshot, use_arrow_pool
from worker.settings import TemporalWorkerSettings
from worker.temporal_worker import _trim_malloc

ROOT = Path(__file__).resolve().parents[3]

_THREADS = textwrap.dedent(
    """
    import ctypes, sys, threading
    from api.common.process_memory import cap_malloc_arenas
    cap = int(sys.argv[1])
    if cap:
        assert cap_malloc_arenas(cap)
    start = threading.Barrier(12)
    def work():
        start.wait()  # all alive at once: none can inherit a finished thread's arena
        held = [bytearray(4096) for _ in range(200)]  # above pymalloc's 512 bytes: glibc's malloc
        start.wait()
        del held
    threads = [threading.Thread(target=work) for _ in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc_stats()  # to stderr
    """
)


def _arenas(cap: int) -> int:
    run = subprocess.run(
        [sys.executable, "-c", _THREADS, str(cap)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return sum(line.startswith("Arena ") for line in run.stderr.splitlines())


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_arena_cap_holds_for_threads_started_after_it() -> None:
    assert _arenas(0) > 2  # uncapped, the threads spread over arenas of their own
    assert _arenas(2) <= 2


def test_no_cap_is_set_for_zero() -> None:
    assert cap_malloc_arenas(0) is False


def test_pyarrow_allocates_from_the_pool_named() -> None:
    before = pa.default_memory_pool()
    try:
        assert use_arrow_pool("system") == "system"
        system = pa.system_memory_pool()
        held = system.bytes_allocated()
        buffers = pa.array(range(100_000), pa.int64())
        assert system.bytes_allocated() >= held + 800_000
        del buffers
        assert use_arrow_pool("default") == "system"  # "default" leaves the pool as it is
    finally:
        pa.set_memory_pool(before)


def test_the_worker_defaults_to_the_system_pool_and_two_arenas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BAML_STUDIO_WORKER_ARROW_MEMORY_POOL", raising=False)
    monkeypatch.delenv("BAML_STUDIO_WORKER_MALLOC_ARENA_MAX", raising=False)
    settings = TemporalWorkerSettings()
    assert (settings.arrow_memory_pool, settings.malloc_arena_max) == ("system", 2)
    monkeypatch.setenv("BAML_STUDIO_WORKER_ARROW_MEMORY_POOL", "tcmalloc")
    with pytest.raises(ValidationError, match="arrow_memory_pool"):
        TemporalWorkerSettings()


def test_a_snapshot_sees_what_malloc_and_arrow_hold() -> None:
    before = memory_snapshot()
    block = bytearray(b"\x01") * (64 << 20)  # written through: resident, from glibc (mmapped)
    values = pa.array(range(4_000_000), pa.int64())  # 30.5 MiB from Arrow's pool
    after = memory_snapshot()
    assert after.rss - before.rss >= 60
    assert after.rss_anon - before.rss_anon >= 60
    assert before.malloc_in_use is not None and after.malloc_in_use is not None
    assert after.malloc_in_use - before.malloc_in_use >= 63
    assert after.arrow_pool - before.arrow_pool >= 30
    del block, values


_HELD_BELOW_A_LIVE_CHUNK = textwrap.dedent(
    """
    import ctypes
    from api.common.process_memory import memory_snapshot, trim_malloc
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    chunks = [libc.malloc(1024) for _ in range(100_000)]  # about 100 MiB from the main arena
    for c in chunks:
        ctypes.memset(c, 1, 1024)  # resident
    fence = libc.malloc(1024)  # a live chunk above them: glibc cannot shrink the heap's top
    before = memory_snapshot().rss_anon
    for c in chunks:
        libc.free(c)
    freed = memory_snapshot().rss_anon
    assert trim_malloc()
    print(before, freed, memory_snapshot().rss_anon)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_trimming_returns_memory_glibc_holds_below_a_live_chunk() -> None:
    # A fresh interpreter: the test's own heap does not blur the figures.
    run = subprocess.run(
        [sys.executable, "-c", _HELD_BELOW_A_LIVE_CHUNK], cwd=ROOT, capture_output=True, text=True, check=True
    )
    before, freed, trimmed = map(float, run.stdout.split())
    assert freed > before - 20  # free() alone kept the 100 MiB
    assert trimmed < freed - 80  # malloc_trim gave it back


def test_the_worker_trims_malloc_every_minute_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BAML_STUDIO_WORKER_MALLOC_TRIM_INTERVAL_S", raising=False)
    assert TemporalWorkerSettings().malloc_trim_interval_s == 60.0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_worker_logs_what_a_trim_returned(caplog: pytest.LogCaptureFixture) -> None:
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    chunks = [libc.malloc(1024) for _ in range(50_000)]
    for c in chunks:
        ctypes.memset(c, 1, 1024)
    fence = libc.malloc(1024)
    for c in chunks:
        libc.free(c)

    async def one_tick() -> None:
        task = asyncio.create_task(_trim_malloc(0.05))
        await asyncio.sleep(0.3)
        task.cancel()

    with caplog.at_level(logging.INFO, logger="baml_studio.temporal_worker"):
        asyncio.run(one_tick())
    libc.free(fence)
    returned = [
        int(m.group(1))
        for r in caplog.records
        if (m := re.search(r"malloc_trim returned (\d+) MiB", r.getMessage()))
    ]
    assert returned and returned[0] >= 30  # about 49 MiB freed below a live chunk


def test_with_tracemalloc_on_the_heap_line_names_the_lines_holding_most() -> None:
    code = textwrap.dedent(
        """
        import tracemalloc
        from api.common.process_memory import python_heap_top
        assert python_heap_top() == ""  # off: nothing, at no cost
        tracemalloc.start()
        held = [bytes(1000) for _ in range(20_000)]
        print(python_heap_top(2))
        """
    )
    run = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert run.stdout.startswith("; Python heap: <string>:6 19.")  # 20,000 blocks of ~1 KB, first
