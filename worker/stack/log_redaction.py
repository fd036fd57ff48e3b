"""Keep presigned URLs out of request logs.

A presigned URL's query string is a credential (``X-Amz-Credential``, ``X-Amz-Signature``): anyone
holding it may PUT the object until it expires. The stack's moto logs every request line through
werkzeug; this filter cuts the query string from any line that carries a signature, leaving the
method, path and status (identifiers only) for debugging.
"""

from __future__ import annotations

import logging
import re

# A query string holding a presigned signature, up to the end of the URL in the line.
_SIGNED_QUERY = re.compile(r"\?[^\s\"]*(?:X-Amz-Signature|Signature=)[^\s\"]*", re.IGNORECASE)
REDACTED = "?<presigned query redacted>"


def redact(text: str) -> str:
    return _SIGNED_QUERY.sub(REDACTED, text)


class RedactPresignedQueries(logging.Filter):
    """Rewrites the record's message and string arguments; never drops a record."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        return True


def redact_request_logs(*loggers: str) -> None:
    """Install the filter on these loggers (default: werkzeug's, which moto's server logs through)."""
    for name in loggers or ("werkzeug",):
        logging.getLogger(name).addFilter(RedactPresignedQueries())
