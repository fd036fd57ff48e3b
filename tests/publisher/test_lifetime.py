"""A Publisher's lifetime: a closed, dropped publisher is freed (the per-process fork hook holds it
only weakly), and a live one is still reset in a forked child."""

from __future__ import annotations

import gc
import json
import os
import sys
import weakref
from pathlib import Path

import pytest
from publisher_harness import TOKEN, free_port

from publisher import Publisher, PublisherSettings


def _publisher(root: Path) -> Publisher:
    # Nothing listens at the gateway's port: these tests never need it to answer.
    return Publisher(
        PublisherSettings(
            gateway_url=f"http://127.0.0.1:{free_port()}",
            token=TOKEN,
            profile_dir=root,
            backoff_base_seconds=0.01,
            backoff_cap_seconds=0.05,
        )
    )


def _is_freed(ref: weakref.ref[Publisher]) -> bool:
    gc.collect()
    return ref() is None


def test_a_closed_publisher_is_freed(tmp_path: Path) -> None:
    pub = _publisher(tmp_path / "profiles-v1")
    pub.close()
    ref = weakref.ref(pub)
    del pub
    assert _is_freed(ref), "something still holds the closed publisher"


def test_a_started_and_joined_publisher_is_freed(tmp_path: Path) -> None:
    pub = _publisher(tmp_path / "profiles-v1").start()
    assert pub.flush_and_join(5.0)
    ref = weakref.ref(pub)
    del pub
    assert _is_freed(ref), "something still holds the joined publisher"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_resets_a_live_publisher(tmp_path: Path) -> None:
    pub = _publisher(tmp_path / "profiles-v1").start()
    try:
        # One flush run by the thread: the parent now holds the lock and has counted a request.
        assert pub.flush(10.0)
        assert pub._thread is not None and pub._thread.is_alive()
        assert pub._lease is not None and pub._flush_requested == 1
        parent_cond, parent_pools = pub._cond, pub._flusher._pools
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: report what the fork hook left, then leave without pytest's exit
            status = 1
            try:
                os.close(read_end)
                seen = {
                    "thread": pub._thread is None,
                    "lease": pub._lease is None,
                    "cond": pub._cond is not parent_cond,
                    "counters": pub._flush_requested == pub._flushes_done == 0,
                    "pools": pub._flusher._pools is not parent_pools,
                }
                os.write(write_end, json.dumps(seen).encode())
                status = 0
            finally:
                sys.stdout.flush()
                os._exit(status)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as child_out:
            report = child_out.read()
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        seen = json.loads(report)
        assert seen == dict.fromkeys(("thread", "lease", "cond", "counters", "pools"), True), seen
        # The parent's publisher is untouched by the child's hook.
        assert pub._thread is not None and pub._cond is parent_cond
    finally:
        assert pub.flush_and_join(5.0)
