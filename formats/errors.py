"""The one error family raised by every decoder in ``formats``.

Contract: a decoder returns a value or raises a subclass of :class:`FormatError`.
Nothing else (``struct.error``, ``IndexError``, ``UnicodeDecodeError``, ``KeyError``,
``zstandard.ZstdError``, protobuf's ``DecodeError``...) escapes a decoder.

Every error names the file (a path or object key, when known), the byte offset
where the problem was found, and a short machine-readable ``reason`` plus a
human message. ``reason`` values are stable strings used by tests, quarantine
markers and ``baml-studio inspect``.
"""

from __future__ import annotations


class FormatError(Exception):
    """Bad input: the bytes are not a valid object of the expected format."""

    reason: str = "malformed"

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        offset: int | None = None,
        reason: str | None = None,
    ) -> None:
        self.message = message
        self.file = file
        self.offset = offset
        if reason is not None:
            self.reason = reason
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.file or "<bytes>"
        at = f" at offset {self.offset}" if self.offset is not None else ""
        return f"{where}{at}: {self.reason}: {self.message}"

    def with_file(self, file: str) -> FormatError:
        """Return this error naming ``file`` (used by callers that know the path)."""
        if self.file is None:
            self.file = file
            self.args = (self._render(),)
        return self

    def to_dict(self) -> dict[str, object]:
        return {"file": self.file, "offset": self.offset, "reason": self.reason, "message": self.message}


class TruncatedError(FormatError):
    """The input ended before a declared length or field."""

    reason = "truncated"


class MalformedError(FormatError):
    """A field holds a value the format does not allow (bad tag, ordering, flag...)."""

    reason = "malformed"


class BadMagicError(FormatError):
    reason = "bad_magic"


class UnsupportedVersionError(FormatError):
    reason = "unsupported_version"


class ChecksumMismatchError(FormatError):
    """The trailing SHA-256 (or a CID) does not match the bytes."""

    reason = "checksum_mismatch"


class IdentityMismatchError(FormatError):
    """The euid or sequence inside a file disagrees with its path."""

    reason = "identity_mismatch"


class LimitExceededError(FormatError):
    """A length exceeds a hard limit (64 KiB string cap, bytes left, value limit)."""

    reason = "limit_exceeded"


class TrailingBytesError(FormatError):
    reason = "trailing_bytes"
