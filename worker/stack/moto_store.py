"""``python -m worker.stack.moto_store``: moto's S3 and SQS server, with S3 kept across restarts.

The same moto server application as ``python -m moto.server`` (its dispatcher and request
handler), wrapped so that every S3 change it accepts is appended to the journal
(worker/stack/s3_journal.py) before the client gets its answer. On start, before the port
opens, the journal is replayed into the fresh in-memory moto, its recorded ids mapped to the
new ones, and rewritten with the new ids (atomically: a crash during the replay leaves the old
journal). The stack's health probe therefore sees S3 only once the bucket is whole again.

SQS is not journaled: the launcher creates the queues again and starts a replay scan of the
bucket (``Replay`` workflow), which enqueues every object the derived stores do not hold yet.

``<journal>.restore.json`` tells the launcher what the last start restored (entries, bytes,
seconds). Log lines carry counts only, never keys' contents or bodies.
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from worker.stack.s3_journal import (
    Entry,
    IdMap,
    JournalWriter,
    is_s3_change,
    read_entries,
    request_headers,
    response_ids,
    rewrite,
    whole_length,
)

log = logging.getLogger("baml_studio.moto_store")

WsgiApp = Callable[[dict[str, Any], Any], Iterable[bytes]]


def _call(app: WsgiApp, environ: dict[str, Any]) -> tuple[int, list[tuple[str, str]], bytes]:
    answer: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        answer["status"], answer["headers"] = status, headers
        return lambda _data: None

    chunks = app(environ, start_response)
    try:
        body = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close:
            close()
    return int(str(answer["status"]).split()[0]), list(answer["headers"]), body


class JournaledApp:
    """The moto application; S3 changes go through one lock and into the journal when accepted."""

    def __init__(self, app: WsgiApp, journal: JournalWriter) -> None:
        self.app = app
        self.journal = journal

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if not is_s3_change(environ):
            return self.app(environ, start_response)
        from werkzeug.wsgi import get_input_stream

        body = get_input_stream(environ).read()
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        environ.pop("HTTP_TRANSFER_ENCODING", None)
        with self.journal.lock:
            status, headers, answer = _call(self.app, dict(environ))
            if 200 <= status < 300:
                entry = Entry(
                    str(environ["REQUEST_METHOD"]).upper(),
                    str(environ.get("PATH_INFO", "")),
                    str(environ.get("QUERY_STRING", "")),
                    request_headers(environ),
                    body,
                    response_ids(headers, answer),
                )
                entry.headers["CONTENT_LENGTH"] = str(len(body))
                self.journal.append(entry)
        start_response(f"{status} {_reason(status)}", headers)
        return [answer]


def _reason(status: int) -> str:
    from http import HTTPStatus

    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return ""


def _environ(entry: Entry) -> dict[str, Any]:
    raw = entry.path + (f"?{entry.query}" if entry.query else "")
    return {
        "REQUEST_METHOD": entry.method,
        "PATH_INFO": entry.path,
        "QUERY_STRING": entry.query,
        "RAW_URI": raw,
        "REQUEST_URI": raw,
        "SCRIPT_NAME": "",
        "SERVER_NAME": "127.0.0.1",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": "127.0.0.1",
        "wsgi.version": (1, 0),
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(entry.body),
        "wsgi.errors": sys.stderr,
        "wsgi.multithread": False,
        "wsgi.multiprocess": False,
        "wsgi.run_once": False,
        **entry.headers,
    }


def restore(app: WsgiApp, journal: Path, region: str) -> dict[str, Any]:
    """Replay the journal into ``app`` and rewrite it with the ids the replay gave. Returns figures."""
    started = time.monotonic()
    figures: dict[str, Any] = {"entries": 0, "bytes": 0, "refused": 0, "seconds": 0.0, "torn_tail": False}
    if not journal.exists():
        return figures
    end = whole_length(journal)
    figures["torn_tail"] = end != journal.stat().st_size
    ids = IdMap()
    fresh = journal.with_name(journal.name + ".rewrite")
    last_log = started
    with open(fresh, "wb") as out:
        for offset, entry in read_entries(journal):
            if offset >= end:
                break
            replayed = rewrite(entry, ids, region)
            status, headers, answer = _call(app, _environ(replayed))
            new_ids = response_ids(headers, answer)
            if not 200 <= status < 300 or not ids.learn(entry.ids, new_ids):
                # Accepted once, refused now: the state it built on differs. Counted, never hidden.
                figures["refused"] += 1
                log.warning("replayed %s answered %d (entry %d)", entry.method, status, figures["entries"])
                continue
            replayed.ids = new_ids
            out.write(replayed.encode())
            figures["entries"] += 1
            figures["bytes"] += len(entry.body)
            now = time.monotonic()
            if now - last_log > 2:
                log.info("restoring S3: %d entries, %.1f MB", figures["entries"], figures["bytes"] / 1e6)
                last_log = now
        out.flush()
        os.fsync(out.fileno())
    os.replace(fresh, journal)
    figures["seconds"] = round(time.monotonic() - started, 2)
    return figures


def moto_app() -> WsgiApp:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    from worker.stack import (
        moto_dispatch_speedup,
        moto_listing_speedup,
        moto_sqs_locking,
        moto_sqs_speedup,
        moto_timestamp_speedup,
    )

    moto_sqs_locking.apply()  # a notification sent during a delete must not be lost (moto_sqs_locking.py)
    moto_sqs_speedup.apply()  # the queue's depth must not slow every request (moto_sqs_speedup.py)
    moto_dispatch_speedup.apply()  # nor a directory listing per request (moto_dispatch_speedup.py)
    moto_timestamp_speedup.apply()  # nor a date parse per key listed (moto_timestamp_speedup.py)
    moto_listing_speedup.apply()  # nor the bucket's every key per listing (moto_listing_speedup.py)
    app = DomainDispatcherApplication(create_backend_app)
    app.debug = True  # type: ignore[attr-defined]  # as moto.server sets it
    return app  # type: ignore[return-value]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--journal", type=Path, required=True, help="S3 journal file")
    parser.add_argument("--region", default="us-east-1")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    os.environ.setdefault("MOTO_PORT", str(args.port))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))

    from moto.moto_server.werkzeug_app import MotoRequestHandler
    from werkzeug.serving import run_simple

    args.journal.parent.mkdir(parents=True, exist_ok=True)
    app = moto_app()
    figures = restore(app, args.journal, args.region)
    figures["at"] = time.time()
    Path(f"{args.journal}.restore.json").write_text(json.dumps(figures))
    log.info(
        "S3 restored: %d entries, %.1f MB in %.2fs (%d refused%s)",
        figures["entries"],
        figures["bytes"] / 1e6,
        figures["seconds"],
        figures["refused"],
        ", torn last entry cut" if figures["torn_tail"] else "",
    )

    every_request = os.environ.get("BAML_STUDIO_MOTO_REQUEST_LOG", "") == "1"

    class PathOnlyLog(MotoRequestHandler):  # type: ignore[misc]
        """Request log lines without the query (a presigned URL's carries its credential and
        signature), for server errors only unless ``BAML_STUDIO_MOTO_REQUEST_LOG=1``: a line per
        request took 16% of moto's CPU under bench/soak.py (the handler's lock, across threads)."""

        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            if every_request or str(code).startswith("5"):
                self.log("info", '"%s %s" %s', self.command, self.path.split("?", 1)[0], code)

    journaled = JournaledApp(app, JournalWriter(args.journal))
    run_simple(args.host, args.port, journaled, threaded=True, request_handler=PathOnlyLog)  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
