"""What one gateway process holds: settings, the S3 client, the Boundary client, the rate
limiter, the HEAD thread pool and a short cache of each environment's publisher config.

The Boundary client is built on first use, so the gateway starts (and answers ``/healthz``)
before the deployment's certificate exists, as in the embedded stack where both start together.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from api.dataplane.boundary_client import BoundaryClient
from api.gateway.evidence_store import EvidenceStore
from api.gateway.publisher_auth import BoundaryUnavailable, build_boundary_client, fetch_config
from api.gateway.rate_limit import TokenBucketLimiter
from api.gateway.settings import GatewaySettings
from formats import upload_wire as uw

_log = logging.getLogger(__name__)


class GatewayRuntime:
    def __init__(
        self,
        settings: GatewaySettings,
        *,
        boundary: BoundaryClient | None = None,
        store: EvidenceStore | None = None,
    ) -> None:
        self.settings = settings
        self.store = store or EvidenceStore(settings)
        self.limiter = TokenBucketLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)
        self.head_pool = ThreadPoolExecutor(
            max_workers=settings.head_concurrency, thread_name_prefix="gw-head"
        )
        self._boundary = boundary
        self._boundary_lock = threading.Lock()
        self._configs: dict[str, tuple[float, uw.PublisherConfig]] = {}
        self._configs_lock = threading.Lock()

    @property
    def boundary(self) -> BoundaryClient:
        with self._boundary_lock:
            if self._boundary is None:
                try:
                    self._boundary = build_boundary_client(self.settings)
                except (RuntimeError, OSError, ValueError) as exc:
                    # Not ready (the certificate is written by the stack) or misconfigured.
                    _log.error("boundary client not configured error=%s", type(exc).__name__)
                    raise BoundaryUnavailable(
                        "the gateway has no workload identity for the control plane yet",
                        remedy="Back off with jitter and retry.",
                    ) from None
            return self._boundary

    def config_for(self, environment_id: str) -> uw.PublisherConfig:
        now = time.monotonic()
        with self._configs_lock:
            hit = self._configs.get(environment_id)
        if hit is not None and hit[0] > now:
            return hit[1]
        config = fetch_config(self.boundary, environment_id)
        if self.settings.config_cache_seconds > 0:
            with self._configs_lock:
                if len(self._configs) > 10_000:
                    self._configs.clear()
                self._configs[environment_id] = (now + self.settings.config_cache_seconds, config)
        return config

    def close(self) -> None:
        self.head_pool.shutdown(wait=False, cancel_futures=True)
        self.store.close()
        if self._boundary is not None:
            self._boundary.close()
