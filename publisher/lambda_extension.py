"""AWS Lambda: flush on the Extensions API ``SHUTDOWN`` event (guide: 1 s interval, ~2 s to flush).

``LambdaExtension(publisher).start()`` registers with the Extensions API at
``$AWS_LAMBDA_RUNTIME_API`` for ``SHUTDOWN`` and waits for events on a daemon thread. On
``SHUTDOWN`` it calls ``publisher.flush_and_join`` with the time left before ``deadlineMs``
(at most ``shutdown_budget_seconds``), so the last segments ship before the sandbox is frozen.
Run the publisher with ``lambda_mode=True`` (``BAML_PUBLISHER_LAMBDA_MODE=1``) for the 1 s interval.
"""

from __future__ import annotations

import logging
import os
import threading
import time

import httpx

from publisher.publisher import Publisher

log = logging.getLogger("baml.publisher")

EXTENSION_NAME = "baml-publisher"
_API = "2020-01-01/extension"


class LambdaExtension:
    def __init__(
        self,
        publisher: Publisher,
        *,
        runtime_api: str | None = None,
        name: str = EXTENSION_NAME,
        shutdown_budget_seconds: float = 1.8,
    ) -> None:
        api = runtime_api or os.environ.get("AWS_LAMBDA_RUNTIME_API")
        if not api:
            raise ValueError("AWS_LAMBDA_RUNTIME_API is not set: not running inside Lambda")
        self.publisher = publisher
        self._base = f"http://{api}/{_API}"
        self._name = name
        self._budget = shutdown_budget_seconds
        self._http = httpx.Client(timeout=httpx.Timeout(None, connect=2.0))
        self._thread: threading.Thread | None = None
        self.shutdown_flushed: bool | None = None
        self.done = threading.Event()

    def start(self) -> LambdaExtension:
        response = self._http.post(
            f"{self._base}/register",
            headers={"Lambda-Extension-Name": self._name},
            json={"events": ["SHUTDOWN"]},
        )
        response.raise_for_status()
        extension_id = response.headers["Lambda-Extension-Identifier"]
        self.publisher.start()
        self._thread = threading.Thread(
            target=self._loop, args=(extension_id,), name="baml-publisher-lambda", daemon=True
        )
        self._thread.start()
        return self

    def _loop(self, extension_id: str) -> None:
        try:
            while True:
                response = self._http.get(
                    f"{self._base}/event/next", headers={"Lambda-Extension-Identifier": extension_id}
                )
                response.raise_for_status()
                event = response.json()
                if event.get("eventType") == "SHUTDOWN":
                    budget = self._budget
                    deadline_ms = event.get("deadlineMs")
                    if isinstance(deadline_ms, (int, float)):
                        budget = min(budget, max(0.0, deadline_ms / 1000 - time.time() - 0.1))
                    self.shutdown_flushed = self.publisher.flush_and_join(budget)
                    return
        except Exception as exc:  # never crash the runtime
            log.error("publisher Lambda extension stopped: %s", type(exc).__name__)
            self.publisher.metrics.count("errors", "lambda_extension")
        finally:
            self._http.close()
            self.done.set()
