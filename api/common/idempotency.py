"""``Idempotency-Key`` helpers: header validation and a request digest.

The same key with the same request returns the same resource; the same key with a different
request is a 409. The digest covers method, route and the parsed body in canonical JSON, so
whitespace or key order in the caller's JSON does not change it.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from pydantic import BaseModel

from api.common.errors import BadRequest

IDEMPOTENCY_HEADER = "Idempotency-Key"
_VALID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")


def validate_key(value: str | None) -> str | None:
    if value is None:
        return None
    if not _VALID.match(value):
        raise BadRequest(
            "Idempotency-Key must be 1-128 characters of letters, digits, '.', '_', ':' or '-'",
            code="idempotency_key_invalid",
            remedy="Send a ULID or UUID as the key.",
        )
    return value


def request_digest(method: str, route: str, body: BaseModel | dict[str, Any] | None) -> str:
    if isinstance(body, BaseModel):
        payload: Any = body.model_dump(mode="json", exclude_unset=False)
    else:
        payload = body
    canonical = json.dumps(
        [method.upper(), route, payload], sort_keys=True, separators=(",", ":"), default=str
    )
    return hashlib.sha256(canonical.encode()).hexdigest()
