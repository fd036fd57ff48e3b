"""Builders of authorize requests for the gateway tests (random bytes, real checksums)."""

from __future__ import annotations

import hashlib
import secrets
import socket
from typing import Any

from ulid import ULID

BUCKET = "gw-evidence"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def blob(size: int = 200) -> bytes:
    return secrets.token_bytes(size)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def new_euid() -> str:
    return secrets.token_hex(16)


def new_flush_id() -> str:
    return str(ULID())


def new_cid() -> str:
    return "bamlv_1_" + secrets.token_hex(32)


def segment(kind: str, sequence: int, data: bytes) -> dict[str, Any]:
    return {"kind": kind, "sequence": sequence, "size_bytes": len(data), "checksum_sha256": sha(data)}


def pack(data: bytes, entries: int = 3) -> dict[str, Any]:
    return {
        "kind": "value_pack",
        "size_bytes": len(data),
        "checksum_sha256": sha(data),
        "entry_count": entries,
    }


def cas(kind: str, data: bytes, cid: str | None = None) -> dict[str, Any]:
    return {
        "kind": kind,
        "cid": cid or new_cid(),
        "codec": 1 if kind == "value" else 2,
        "size_bytes": len(data),
        "checksum_sha256": sha(data),
    }


def body(
    objects: list[dict[str, Any]], *, euid: str | None = None, flush_id: str | None = None
) -> dict[str, Any]:
    return {"process_euid": euid or new_euid(), "flush_id": flush_id or new_flush_id(), "objects": objects}


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}
