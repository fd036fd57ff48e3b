"""The embedded stack's S3 journal: every S3 change moto accepted, in order, to replay on start.

moto keeps S3 in memory. Its own recorder (``MOTO_ENABLE_RECORDING``) writes requests only, so a
replay cannot know which new version id or upload id stands for which recorded one: versioned
deletes (erasure) and multipart parts would then miss their targets (docs/stack.md, "Why not
moto's recorder"). This journal records each accepted S3 change with the ids its response
carried; a replay maps every recorded id to the one the replayed response carries and rewrites
later requests with it, so versions, delete markers and multipart uploads come back exact.

Entry layout (one per accepted request, appended under one lock in the order moto applied them)::

    +-------------------------------+-------------------------+------+
    | header: JSON, one line, "\\n" | body: header["n"] bytes | "\\n" |
    +-------------------------------+-------------------------+------+

    header = {"m": method, "p": PATH_INFO, "q": QUERY_STRING, "h": {WSGI header key: value},
              "n": body length, "ids": [version/upload/delete-marker ids in the response]}

A torn last entry (the process was killed while appending) is detected by :func:`read_entries`
and cut off: its client never got an answer, as if the request had failed.

Pure except for :class:`JournalWriter` and :func:`read_entries`, which touch only the file.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qsl, urlencode

MUTATING_METHODS = frozenset({"PUT", "POST", "DELETE"})
# Presigned-URL parameters: a replay signs with a header instead (an old URL has expired).
_PRESIGN = frozenset(
    {
        "X-Amz-Algorithm",
        "X-Amz-Credential",
        "X-Amz-Date",
        "X-Amz-Expires",
        "X-Amz-SignedHeaders",
        "X-Amz-Signature",
        "X-Amz-Security-Token",
    }
)
_ID_PARAMS = ("versionId", "uploadId")
_RESPONSE_IDS = re.compile(rb"<(?:VersionId|DeleteMarkerVersionId|UploadId)>([^<]*)</")
_REQUEST_VERSION_IDS = re.compile(rb"(<VersionId>)([^<]*)(</VersionId>)")
# Headers that describe the body as sent: wrong once a replay rewrites the body.
_BODY_DIGESTS = ("HTTP_CONTENT_MD5", "HTTP_X_AMZ_SDK_CHECKSUM_ALGORITHM")


class JournalError(ValueError):
    """The journal file is not a journal (a damaged entry before the last)."""


@dataclass
class Entry:
    method: str
    path: str
    query: str
    headers: dict[str, str]
    body: bytes
    ids: list[str] = field(default_factory=list)

    def header_line(self) -> bytes:
        doc = {"m": self.method, "p": self.path, "q": self.query, "h": self.headers, "n": len(self.body)}
        return json.dumps({**doc, "ids": self.ids}, separators=(",", ":")).encode() + b"\n"

    def encode(self) -> bytes:
        return self.header_line() + self.body + b"\n"


def service_of(environ: dict[str, Any]) -> str | None:
    """The AWS service a request is signed for (header or presigned query), or None when unsigned."""
    auth = str(environ.get("HTTP_AUTHORIZATION") or "")
    scope = ""
    if "Credential=" in auth:
        scope = auth.split("Credential=", 1)[1].split(",", 1)[0]
    else:
        query = dict(parse_qsl(str(environ.get("QUERY_STRING") or ""), keep_blank_values=True))
        scope = query.get("X-Amz-Credential", "")
    parts = scope.split("/")
    return parts[3].lower() if len(parts) == 5 else None


def is_s3_change(environ: dict[str, Any]) -> bool:
    """Whether a request may change S3 state (and so belongs in the journal)."""
    method = str(environ.get("REQUEST_METHOD", "")).upper()
    if method not in MUTATING_METHODS or str(environ.get("PATH_INFO", "")).startswith("/moto-api"):
        return False
    service = service_of(environ)
    # moto serves unsigned requests as S3 by default; SQS and the rest are always signed here.
    return service in (None, "s3")


def request_headers(environ: dict[str, Any]) -> dict[str, str]:
    keys = [k for k in environ if k.startswith("HTTP_") or k in ("CONTENT_TYPE", "CONTENT_LENGTH")]
    return {k: str(environ[k]) for k in keys}


def response_ids(headers: list[tuple[str, str]], body: bytes) -> list[str]:
    """Every id a later request may name: the version id header, then the ids in the XML body."""
    found = [v for k, v in headers if k.lower() == "x-amz-version-id"]
    return found + [m.decode() for m in _RESPONSE_IDS.findall(body)]


@dataclass
class IdMap:
    """Recorded id -> id the replayed store gave the same version, upload or delete marker."""

    ids: dict[str, str] = field(default_factory=dict)

    def learn(self, recorded: list[str], replayed: list[str]) -> bool:
        """Pair the ids of one response; False when the replay answered with another shape."""
        if len(recorded) != len(replayed):
            return False
        for old, new in zip(recorded, replayed, strict=True):
            if old != "null":
                self.ids[old] = new
        return True

    def get(self, value: str) -> str:
        return self.ids.get(value, value)


def _authorization(region: str) -> str:
    # moto does not verify signatures (no IAM enforcement in the stack); the scope names S3.
    scope = f"replay/20000101/{region}/s3/aws4_request"
    return f"AWS4-HMAC-SHA256 Credential={scope}, SignedHeaders=host, Signature=0"


def rewrite(entry: Entry, ids: IdMap, region: str) -> Entry:
    """The request to replay: recorded ids mapped to the replayed ones, signed by header."""
    pairs = parse_qsl(entry.query, keep_blank_values=True)
    query = urlencode([(k, ids.get(v) if k in _ID_PARAMS else v) for k, v in pairs if k not in _PRESIGN])
    headers = {k: v for k, v in entry.headers.items() if k != "HTTP_X_AMZ_DATE"}
    headers["HTTP_AUTHORIZATION"] = _authorization(region)
    source = headers.get("HTTP_X_AMZ_COPY_SOURCE")
    if source and "versionId=" in source:
        path, _, version = source.partition("?versionId=")
        headers["HTTP_X_AMZ_COPY_SOURCE"] = f"{path}?versionId={ids.get(version)}"
    body = entry.body
    if b"<VersionId>" in body:
        body = _REQUEST_VERSION_IDS.sub(lambda m: m[1] + ids.get(m[2].decode()).encode() + m[3], body)
        if body != entry.body:
            for key in _BODY_DIGESTS:
                headers.pop(key, None)
            for key in [k for k in headers if k.startswith("HTTP_X_AMZ_CHECKSUM_")]:
                del headers[key]
            headers["CONTENT_LENGTH"] = str(len(body))
    return Entry(entry.method, entry.path, query, headers, body, entry.ids)


def read_entries(path: Path) -> Iterator[tuple[int, Entry]]:
    """(offset, entry) of every whole entry; stops at a torn tail (see :func:`repair`)."""
    with open(path, "rb") as handle:
        while True:
            offset = handle.tell()
            entry = _read_one(handle)
            if entry is None:
                return
            yield offset, entry


def _read_one(handle: IO[bytes]) -> Entry | None:
    line = handle.readline()
    if not line.endswith(b"\n"):
        return None
    try:
        doc = json.loads(line)
        size = int(doc["n"])
        entry = Entry(str(doc["m"]), str(doc["p"]), str(doc["q"]), dict(doc["h"]), b"", list(doc["ids"]))
    except (ValueError, KeyError, TypeError):
        return None
    entry.body = handle.read(size)
    if len(entry.body) != size or handle.read(1) != b"\n":
        return None
    return entry


def whole_length(path: Path) -> int:
    """Bytes of the journal up to the end of its last whole entry."""
    end = 0
    with open(path, "rb") as handle:
        while _read_one(handle) is not None:
            end = handle.tell()
    return end


class JournalWriter:
    """Appends entries; the caller holds :attr:`lock` across moto's handling and the append, so
    the journal's order is the order moto applied the changes."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.lock = threading.Lock()
        self._handle = open(path, "ab")  # noqa: SIM115 (kept open for the process's life)

    def append(self, entry: Entry) -> None:
        # One write per entry, flushed before the client gets its answer: a killed process loses
        # nothing it acknowledged (the page cache survives the process; a machine crash may not).
        self._handle.write(entry.encode())
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()
