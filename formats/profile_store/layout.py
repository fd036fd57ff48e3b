"""Names and paths of the profile directory (pure; no I/O).

```text
<root>/                                   <project>/.baml/profiles-v1 or $BAML_PROFILE_DIR
  publish.lock                            accounting lock: every commit and ledger update
  publisher.lock                          held for its lifetime by the one publisher of the root
  usage.state                             BAMLUSE1 ledger (see ledger.py)
  tmp/<uuid32>.pending                    write temporaries; tmp/usage-state.pending
  streams/<euid32hex>/stream.lock         exclusive while the stream's writer is open
  streams/<euid32hex>/meta/<seq20>.bamlmeta
  streams/<euid32hex>/data/<seq20>.bamldata
  streams/<euid32hex>/publisher.cursor    last shipped sequence per plane (cursor.py)
  cas/sha256/<hex2>/<hex64>.bamlvalue     (+ <hex64>.bamlvalue.shipped, zero-length)
<root>.lock                               beside the root: store lease (shared while open,
                                          exclusive for clean)
```
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from formats.segment_names import Plane

ENV_PROFILE_DIR = "BAML_PROFILE_DIR"
ROOT_NAME = "profiles-v1"

PUBLISH_LOCK = "publish.lock"
PUBLISHER_LOCK = "publisher.lock"
USAGE_STATE = "usage.state"
USAGE_PENDING = "tmp/usage-state.pending"
TMP_DIR = "tmp"
STREAMS_DIR = "streams"
CAS_DIR = "cas/sha256"
STREAM_LOCK = "stream.lock"
CURSOR_FILE = "publisher.cursor"
CAS_SUFFIX = ".bamlvalue"
SHIPPED_SUFFIX = ".shipped"
PENDING_SUFFIX = ".pending"

_SEQ_RE = re.compile(r"^(\d{20})\.(bamlmeta|bamldata)$")
_EUID_RE = re.compile(r"^[0-9a-f]{32}$")
_CAS_RE = re.compile(r"^([0-9a-f]{64})\.bamlvalue$")
MAX_SEQUENCE = 2**64 - 1

__all__ = ["Plane"]  # re-exported: the one Plane type of formats/


def default_root(project_dir: Path | str) -> Path:
    """``$BAML_PROFILE_DIR`` when set and non-empty, else ``<project>/.baml/profiles-v1``."""
    override = os.environ.get(ENV_PROFILE_DIR)
    if override:
        return Path(override)
    return Path(project_dir) / ".baml" / ROOT_NAME


def lease_lock_path(root: Path) -> Path:
    """The store lease lives beside the root so ``clean`` can hold it while removing the root."""
    return root.parent / f"{root.name}.lock"


def euid_hex(euid: bytes | str) -> str:
    """Normalise a 16-byte euid or its 32-hex form; anything else is a ValueError."""
    if isinstance(euid, bytes | bytearray):
        if len(euid) != 16:
            raise ValueError(f"euid must be 16 bytes, got {len(euid)}")
        return bytes(euid).hex()
    text = euid.lower()
    if not _EUID_RE.match(text):
        raise ValueError("euid must be 32 lowercase hex characters")
    return text


def is_euid_dir_name(name: str) -> bool:
    return _EUID_RE.match(name) is not None


def stream_dir(root: Path, euid: bytes | str) -> Path:
    return root / STREAMS_DIR / euid_hex(euid)


def plane_dir(root: Path, euid: bytes | str, plane: Plane) -> Path:
    return stream_dir(root, euid) / plane.value


def segment_name(plane: Plane, seq: int) -> str:
    check_sequence(seq)
    return f"{seq:020d}.{plane.extension}"


def segment_path(root: Path, euid: bytes | str, plane: Plane, seq: int) -> Path:
    return plane_dir(root, euid, plane) / segment_name(plane, seq)


def parse_segment_name(name: str, plane: Plane) -> int | None:
    """The sequence of a final segment name of ``plane``, or None for anything else."""
    match = _SEQ_RE.match(name)
    if match is None or match.group(2) != plane.extension:
        return None
    seq = int(match.group(1))
    return seq if 1 <= seq <= MAX_SEQUENCE else None


def check_sequence(seq: int) -> None:
    if not 1 <= seq <= MAX_SEQUENCE:
        raise ValueError(f"sequence {seq} outside 1..2^64-1")


def cas_path(root: Path, cid: bytes) -> Path:
    digest = cid.hex()
    return root / CAS_DIR / digest[:2] / f"{digest}{CAS_SUFFIX}"


def marker_path(value_path: Path) -> Path:
    return value_path.with_name(value_path.name + SHIPPED_SUFFIX)


_CAS_BUCKET_RE = re.compile(r"^[0-9a-f]{2}$")


def is_cas_bucket_name(name: str) -> bool:
    """``cas/sha256/<hex2>``: the first two hex digits of the digests inside."""
    return _CAS_BUCKET_RE.match(name) is not None


def parse_cas_name(name: str) -> str | None:
    """The 64-hex digest of a CAS file name, or None."""
    match = _CAS_RE.match(name)
    return match.group(1) if match else None
