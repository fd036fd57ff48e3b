"""Ship a backlog with the publisher thread in bounded flushes and die (os._exit) when the ``n``-th
cursor write is about to happen: a restart mid-backlog (tests/publisher/test_backlog.py)."""

from __future__ import annotations

import os
import sys
import time

from publisher import FlushHooks, Publisher, PublisherSettings

gateway_url, token, root, die_at, per_flush = sys.argv[1:6]
writes = 0


def before_cursor() -> None:
    global writes
    writes += 1
    if writes == int(die_at):
        os._exit(17)


settings = PublisherSettings(
    gateway_url=gateway_url, token=token, profile_dir=root, max_flush_objects=int(per_flush)
)
Publisher(settings, hooks=FlushHooks(before_cursor=before_cursor)).start()
time.sleep(60)
os._exit(0)  # not reached when the hook fires
