"""The publisher: a named daemon thread that ships the profile root, and its host-facing API.

    with Publisher(gateway_url=..., token=..., profile_dir=...) as pub:
        ...                       # the host runs; the thread flushes every interval
    # __exit__ = flush_and_join(5 s): one last flush, then the thread ends

The host is never blocked or crashed: every error inside the thread is logged (identifiers only)
and counted, never raised; ``flush_and_join`` waits at most its timeout, all steps sharing one
deadline. Memory is bounded by ``max_flush_bytes`` per flush.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import weakref
from typing import Any

from formats.profile_store import ProfileStore, PublisherBusy, PublisherLease
from formats.upload_wire import PublisherConfig
from publisher.flush import Flusher, FlushHooks, FlushReport, ShippingStopped
from publisher.metrics import PublisherMetrics
from publisher.settings import TOKEN_ENV, PublisherSettings
from publisher.transport import GatewayClient, GatewayError, GatewayStopped, S3Putter

log = logging.getLogger("baml.publisher")

LAMBDA_FLUSH_INTERVAL_SECONDS = 1.0
THREAD_NAME = "baml-publisher"


# os.register_at_fork keeps its callbacks for the life of the process and cannot drop one, so a
# callback per instance (a bound method) would keep every Publisher ever made alive. One hook per
# process walks the publishers still alive instead; the set holds them weakly.
_live_publishers: weakref.WeakSet[Publisher] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for pub in list(_live_publishers):
        pub._after_fork()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


class Publisher:
    """Ships one profile root. ``start()`` once; ``flush_and_join(timeout)`` once at the end."""

    def __init__(
        self,
        settings: PublisherSettings | None = None,
        *,
        store: ProfileStore | None = None,
        hooks: FlushHooks | None = None,
        **overrides: Any,
    ) -> None:
        self.settings = settings or PublisherSettings(**overrides)
        self.store = store or ProfileStore(self.settings.resolved_profile_dir())
        self.metrics = PublisherMetrics()
        self.config = PublisherConfig()
        if not self.settings.token.get_secret_value().strip():
            # The host is not stopped for it: the gateway's 401 stops shipping ("unauthorized") and
            # set_token() resumes it. The CLI refuses to start without one (require_token).
            log.warning("publisher has no token: set %s; shipping stays stopped until set_token()", TOKEN_ENV)
        self._gateway = GatewayClient(
            self.settings.gateway_url,
            self.settings.token.get_secret_value(),
            connect_timeout=self.settings.connect_timeout_seconds,
            read_timeout=self.settings.gateway_timeout_seconds,
            max_connections=self.settings.upload_concurrency,
        )
        self._putter = S3Putter(
            connect_timeout=self.settings.connect_timeout_seconds,
            min_body_timeout=self.settings.min_body_timeout_seconds,
            bytes_per_second=self.settings.body_bytes_per_second,
            max_connections=self.settings.upload_concurrency,
        )
        self._flusher = Flusher(
            self.store, self._gateway, self._putter, self.settings, self.metrics, hooks=hooks
        )
        self._lease: PublisherLease | None = None
        self._cond = threading.Condition()
        self._stop = False
        self._flush_requested = 0
        self._flushes_done = 0
        self._final_deadline: float | None = None
        self._thread: threading.Thread | None = None
        self._stopped_reason: str | None = None  # "unauthorized", "capture_disabled", "busy"
        self._config_loaded_at: float | None = None
        self._last_report: FlushReport | None = None
        self._last_usage: int | None = None
        _live_publishers.add(self)

    # ----------------------------------------------------------------------------- host API

    @property
    def flush_interval(self) -> float:
        interval = float(self.config.flush_interval_seconds)
        return min(interval, LAMBDA_FLUSH_INTERVAL_SECONDS) if self.settings.lambda_mode else interval

    @property
    def stopped_reason(self) -> str | None:
        return self._stopped_reason

    @property
    def last_report(self) -> FlushReport | None:
        return self._last_report

    def stats(self) -> dict[str, Any]:
        """Counters and gauges (guide, "Observability"), plus the thread's state."""
        return self.metrics.snapshot()

    def set_token(self, token: str) -> None:
        """Use a new publisher token (after a rotation or a revocation). A publisher stopped by 401/403
        reloads its config with it at its next poll and resumes shipping."""
        self._gateway.set_token(token)
        with self._cond:
            if self._stopped_reason == "unauthorized":
                self._config_loaded_at = None  # poll at once
            self._cond.notify_all()

    def start(self) -> Publisher:
        with self._cond:
            if self._thread is not None:
                return self
            self._stop = False
            self._thread = threading.Thread(target=self._run, name=THREAD_NAME, daemon=True)
            self._thread.start()
        return self

    def flush(self, timeout: float = 30.0) -> bool:
        """Ask the thread for a flush now and wait for it (at most ``timeout``); True when it ran."""
        deadline = time.monotonic() + timeout
        with self._cond:
            if self._thread is None or not self._thread.is_alive():
                return False
            self._flush_requested += 1
            target = self._flush_requested
            self._cond.notify_all()
            while self._flushes_done < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self._thread.is_alive():
                    return False
                self._cond.wait(left)
        return True

    def flush_and_join(self, timeout: float = 5.0) -> bool:
        """One last flush, then end the thread; every step shares one deadline. True when it ended."""
        deadline = time.monotonic() + timeout
        with self._cond:
            thread = self._thread
            if thread is None:
                self._close_clients()
                return True
            self._stop = True
            self._final_deadline = deadline
            self._cond.notify_all()
        thread.join(max(0.0, deadline - time.monotonic()))
        ended = not thread.is_alive()
        if ended:
            with self._cond:
                self._thread = None
        else:
            log.warning("publisher did not finish within %.1f s; unshipped files stay on disk", timeout)
        return ended

    def run_once(self, timeout: float = 120.0) -> FlushReport | None:
        """Synchronous single flush without the thread (CLI ``publish --once``, tests)."""
        deadline = time.monotonic() + timeout
        if not self._ensure_lease():
            return None
        try:
            self._refresh_config(force=True)
            if self._stopped_reason is not None:
                return None
            report = self._flush_once(deadline)
            # No flush after this call: its meta wave must end while the lease is held.
            if report is not None:
                self._drain(report)
            return report
        finally:
            self._release_lease()

    def close(self) -> None:
        """Release the lock and clients without a final flush (a running meta wave ends first, while
        the lock is still held, so its cursor is written)."""
        self._close_clients()
        self._release_lease()

    def __enter__(self) -> Publisher:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.flush_and_join(5.0)

    # ----------------------------------------------------------------------------- thread body

    def _run(self) -> None:
        try:
            self._loop()
        except BaseException:  # the host must never see publisher errors
            log.exception("publisher thread ended by an internal error")
            self.metrics.count("errors", "internal_fatal")
        finally:
            self.metrics.set_state("stopped")
            self._close_clients()  # ends a running meta wave and writes its cursor under the lock
            self._release_lease()
            with self._cond:
                self._flushes_done = self._flush_requested
                self._cond.notify_all()

    def _loop(self) -> None:
        next_flush = time.monotonic()
        while True:
            with self._cond:
                stopping = self._stop
            if stopping:
                self._final_flush()
                return
            if not self._ensure_lease():
                self._wait(self.settings.stopped_poll_seconds)
                continue
            self._refresh_config()
            if self._stopped_reason is not None:
                self._wait(self.settings.stopped_poll_seconds)
                self._mark_requests_done()
                continue
            now = time.monotonic()
            requested = self._requested()
            if (
                now >= next_flush
                and not requested
                and self._flusher.unchanged_since_clean_flush(self.settings.idle_recheck_seconds)
            ):
                # Nothing committed or released since a flush that left nothing to do.
                self.metrics.count("flushes", "unchanged")
                next_flush = now + self.flush_interval
                continue
            if now >= next_flush or requested or self._pressure():
                report = self._flush_once(now + self.settings.flush_deadline_seconds)
                self._mark_requests_done()
                next_flush = time.monotonic() + (
                    0 if report is not None and report.more else self.flush_interval
                )
                continue
            self._wait(min(next_flush - now, self.settings.pressure_check_seconds))

    def _final_flush(self) -> None:
        deadline = self._final_deadline or time.monotonic() + 5.0
        if self._stopped_reason is not None or not self._ensure_lease():
            return
        while time.monotonic() < deadline:
            report = self._flush_once(deadline)
            if report is None or not report.more:
                return

    def _drain(self, report: FlushReport) -> None:
        try:
            self._flusher.drain(report)
        except ShippingStopped:
            self._set_stopped("unauthorized")
            self._config_loaded_at = None
        except Exception as exc:
            log.error("publisher flush failed: %s", type(exc).__name__)
            self.metrics.count("errors", f"flush_{type(exc).__name__}")

    def _flush_once(self, deadline: float) -> FlushReport | None:
        self.metrics.set_state("flushing")
        try:
            report = self._flusher.flush(self.config, deadline=deadline)
        except ShippingStopped:
            self._set_stopped("unauthorized")
            self._config_loaded_at = None  # reload config before resuming
            return None
        except Exception as exc:  # a store or filesystem error: count it, keep running
            log.error("publisher flush failed: %s", type(exc).__name__)
            self.metrics.count("errors", f"flush_{type(exc).__name__}")
            return None
        finally:
            if self._stopped_reason is None:
                self.metrics.set_state("idle")
        self._last_report = report
        return report

    # ----------------------------------------------------------------------------- helpers

    def _wait(self, seconds: float) -> None:
        with self._cond:
            if self._stop or self._flush_requested > self._flushes_done:
                return
            self._cond.wait(max(0.0, seconds))

    def _requested(self) -> bool:
        with self._cond:
            return self._flush_requested > self._flushes_done

    def _mark_requests_done(self) -> None:
        with self._cond:
            self._flushes_done = self._flush_requested
            self._cond.notify_all()

    def _pressure(self) -> bool:
        """Flush early when the store grew by a pack's worth since the last look (guide: pending bytes
        above ``pack_max_entry_bytes``). One 48-byte read, no lock (the ledger is replaced by rename)."""
        signature = self.store.ledger_signature()
        if signature is None:
            return False
        usage = signature[0]
        last, self._last_usage = self._last_usage, usage
        return last is not None and usage - last > self.config.pack_max_entry_bytes

    def _set_stopped(self, reason: str | None) -> None:
        if reason != self._stopped_reason:
            if reason is None:
                log.info("publisher resumes shipping")
            else:
                log.warning("publisher stops shipping: %s; files are kept", reason)
        self._stopped_reason = reason
        self.metrics.set_state(reason or "idle")

    def _refresh_config(self, *, force: bool = False) -> None:
        now = time.monotonic()
        period = (
            self.settings.stopped_poll_seconds
            if self._stopped_reason
            else self.settings.config_refresh_seconds
        )
        if not force and self._config_loaded_at is not None and now - self._config_loaded_at < period:
            return
        try:
            config = self._gateway.get_config()
        except GatewayStopped as exc:
            self.metrics.count("errors", f"config_{exc.status}")
            self._config_loaded_at = now
            self._set_stopped("unauthorized")
            return
        except GatewayError as exc:  # 429/5xx/network/bad body: keep the last configuration
            self.metrics.count("errors", f"config_{exc.label}")
            self._config_loaded_at = now - period + min(period, self.settings.stopped_poll_seconds)
            if self._stopped_reason == "unauthorized":
                return
            return
        self.config = config
        self._config_loaded_at = now
        self._set_stopped(None if config.capture_enabled else "capture_disabled")

    def _ensure_lease(self) -> bool:
        if self._lease is not None and self._lease.held:
            return True
        try:
            self._lease = self.store.acquire_publisher_lock()
        except PublisherBusy:
            self._set_stopped("busy")
            return False
        except Exception as exc:
            self.metrics.count("errors", f"lock_{type(exc).__name__}")
            return False
        if self._stopped_reason == "busy":
            self._set_stopped(None)
        return True

    def _release_lease(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            try:
                lease.close()
            except Exception:
                self.metrics.count("errors", "lock_release")

    def _close_clients(self) -> None:
        self._flusher.close()
        self._gateway.close()
        self._putter.close()

    def _after_fork(self) -> None:
        # A forked child has no publisher thread and must not share the parent's lock or sockets.
        self._thread = None
        self._lease = None
        self._cond = threading.Condition()
        self._flush_requested = self._flushes_done = 0
        self._flusher.after_fork()
