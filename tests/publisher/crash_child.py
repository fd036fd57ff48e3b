"""Run one flush and die (os._exit) after every PUT, before the cursor advances (checklist item 3)."""

from __future__ import annotations

import os
import sys

from publisher import FlushHooks, Publisher, PublisherSettings

gateway_url, token, root = sys.argv[1:4]
hooks = FlushHooks(before_cursor=lambda: os._exit(17))
pub = Publisher(PublisherSettings(gateway_url=gateway_url, token=token, profile_dir=root), hooks=hooks)
pub.run_once(60)
os._exit(0)  # not reached when the hook fires
