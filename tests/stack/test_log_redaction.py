"""Request lines keep their method, path and status, never a presigned URL's credential query."""

from __future__ import annotations

import logging

import pytest

from worker.stack.log_redaction import REDACTED, redact_request_logs

PRESIGNED = (
    "PUT /baml-evidence/evidence/v1/t/p/e/streams/x.bamlmeta.zst?X-Amz-Algorithm=AWS4-HMAC-SHA256"
    "&X-Amz-Credential=AKIA%2F20261201%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261201T000000Z"
    "&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature=" + "ab" * 32 + " HTTP/1.1"
)


def test_werkzeug_request_lines_lose_a_signed_query(caplog: pytest.LogCaptureFixture) -> None:
    redact_request_logs("test.werkzeug")
    logger = logging.getLogger("test.werkzeug")
    with caplog.at_level(logging.INFO, logger="test.werkzeug"):
        logger.info('"%s" %s %s', PRESIGNED, "200", "-")  # werkzeug's own format
        logger.info('"%s" %s %s', "GET /baml-evidence?list-type=2&prefix=evidence/v1/ HTTP/1.1", "200", "-")
    signed, listing = caplog.messages
    assert "X-Amz-" not in signed and "ab" * 32 not in signed
    assert signed == f'"PUT /baml-evidence/evidence/v1/t/p/e/streams/x.bamlmeta.zst{REDACTED} HTTP/1.1" 200 -'
    assert "list-type=2&prefix=evidence/v1/" in listing  # unsigned queries are identifiers: kept
