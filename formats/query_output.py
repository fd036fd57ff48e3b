"""NDJSON query output: the row lines and the one final ``queryOutcome`` record (DESIGN.md section 6).

A query response (``POST /v1/query``, a background job's ``result.ndjson``) is zero or more
row objects, one JSON object per line and never wrapped, followed by exactly one line
``{"queryOutcome": {...}}``. This module is the one typed definition of that stream, used by
the coordinator (writer), background jobs, the CLI and tests (reader).

Row values are plain JSON: strings, numbers (integers are written exactly, including the
int64 nanosecond timestamps, which exceed a JavaScript double's 2**53: browsers must parse
them with a big-integer-aware reader), booleans, null, and private values as their JSON
rendering (docs/values-json.md). A row never has the single key ``queryOutcome``, so the
final record cannot be mistaken for a row.

Reader contract (:func:`iter_query_stream`, :func:`read_query_stream`): the result is
complete only if the outcome line arrived, it was the last line, its ``rows`` count equals
the rows read, and no line was malformed; anything else raises
:class:`IncompleteResultError`. Pure code: no I/O beyond the iterables it is given.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from formats.errors import FormatError

OUTCOME_KEY = "queryOutcome"
NDJSON_MEDIA_TYPE = "application/x-ndjson"

OutcomeStatus = Literal["complete", "partial", "failed"]
PrivateState = Literal["indexed", "pending", "not_applicable"]

PRIVATE_STATE_COLUMN = "private_state"


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SnapshotRef(_Record):
    """The one snapshot a query bound: Boundary's part and the Lance version read from the bucket."""

    snapshot_id: str | None = None
    catalog_version: int | None = None
    generation: int | None = None
    lance_version: int | None = None


class PendingCounts(_Record):
    """Public facts whose private rows were not yet in the bound Lance version."""

    executions: int = 0
    private_rows: int = 0


class Unavailable(_Record):
    """Evidence the query could not read, counted by kind and reason (never silently dropped)."""

    kind: str
    count: int
    reason: str


class BudgetLine(_Record):
    limit: int
    used: int = 0


class BudgetReport(_Record):
    wall_ms: BudgetLine
    rows: BudgetLine
    bytes: BudgetLine
    private_bytes: BudgetLine


class OutcomeError(_Record):
    code: str
    message: str
    remedy: str | None = None


class QueryOutcome(_Record):
    status: OutcomeStatus
    snapshot: SnapshotRef = Field(default_factory=SnapshotRef)
    rows: int = 0
    bytes: int = 0
    private_bytes_read: int = 0
    elapsed_ms: int = 0
    pending: PendingCounts = Field(default_factory=PendingCounts)
    unavailable: list[Unavailable] = Field(default_factory=list)
    budget: BudgetReport
    error: OutcomeError | None = None


class IncompleteResultError(FormatError):
    """The stream ended without its outcome, carried lines after it, or disagreed with its count."""

    reason = "incomplete_result"


# --- writer --------------------------------------------------------------------------------------


def json_value(value: Any) -> Any:
    """A row cell as JSON: non-finite floats become the value rendering's ``{"$float": ...}`` tags.

    Decimals (exact private numbers, docs/query.md "Exact numbers") are written as JSON integers
    when integral, whatever their size; others as the nearest double.
    """
    if isinstance(value, Decimal):
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        return json_value(float(value))
    if isinstance(value, float) and not math.isfinite(value):
        return {"$float": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, list):
        return [json_value(v) for v in value]
    if isinstance(value, dict):
        return {str(k): json_value(v) for k, v in value.items()}
    return value


def row_line(row: dict[str, Any]) -> bytes:
    """One row as an NDJSON line (UTF-8, newline-terminated)."""
    if len(row) == 1 and OUTCOME_KEY in row:
        # A result column literally named queryOutcome would look like the final record.
        raise ValueError(f"a result column may not be named {OUTCOME_KEY!r} alone")
    body = json.dumps({k: json_value(v) for k, v in row.items()}, ensure_ascii=False, separators=(",", ":"))
    return body.encode() + b"\n"


def outcome_line(outcome: QueryOutcome) -> bytes:
    return (
        json.dumps({OUTCOME_KEY: outcome.model_dump(mode="json")}, ensure_ascii=False, separators=(",", ":"))
        + "\n"
    ).encode()


# --- reader --------------------------------------------------------------------------------------


@dataclass
class QueryResult:
    rows: list[dict[str, Any]]
    outcome: QueryOutcome


def _parse_line(raw: bytes | str, number: int, source: str | None) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise IncompleteResultError(
            f"line {number} is not JSON ({type(exc).__name__})", file=source
        ) from None
    if not isinstance(obj, dict):
        raise IncompleteResultError(f"line {number} is not a JSON object", file=source)
    return obj


def parse_outcome(obj: dict[str, Any], *, source: str | None = None) -> QueryOutcome:
    try:
        return QueryOutcome.model_validate(obj[OUTCOME_KEY])
    except ValidationError as exc:
        fields = sorted({".".join(str(p) for p in e["loc"]) for e in exc.errors()})
        raise IncompleteResultError(
            f"malformed queryOutcome (fields: {', '.join(fields)})", file=source
        ) from None


class QueryStream:
    """Iterate rows; after iteration ends, :attr:`outcome` holds the verified outcome."""

    def __init__(self, lines: Iterable[bytes | str], *, source: str | None = None) -> None:
        self._lines = lines
        self._source = source
        self.outcome: QueryOutcome | None = None
        self.rows_read = 0

    def __iter__(self) -> Iterator[dict[str, Any]]:
        number = 0
        for raw in self._lines:
            number += 1
            if not raw.strip():
                continue
            if self.outcome is not None:
                raise IncompleteResultError(
                    f"line {number} follows the queryOutcome record", file=self._source
                )
            obj = _parse_line(raw, number, self._source)
            if len(obj) == 1 and OUTCOME_KEY in obj:
                self.outcome = parse_outcome(obj, source=self._source)
                continue
            self.rows_read += 1
            yield obj
        if self.outcome is None:
            raise IncompleteResultError(
                f"stream ended after {self.rows_read} rows without its queryOutcome record", file=self._source
            )
        if self.outcome.rows != self.rows_read:
            raise IncompleteResultError(
                f"queryOutcome reports {self.outcome.rows} rows, stream carried {self.rows_read}",
                file=self._source,
            )


def iter_query_stream(lines: Iterable[bytes | str], *, source: str | None = None) -> QueryStream:
    return QueryStream(lines, source=source)


def read_query_stream(lines: Iterable[bytes | str], *, source: str | None = None) -> QueryResult:
    stream = QueryStream(lines, source=source)
    rows = list(stream)
    assert stream.outcome is not None  # QueryStream raises otherwise
    return QueryResult(rows, stream.outcome)


def read_query_bytes(data: bytes, *, source: str | None = None) -> QueryResult:
    return read_query_stream(data.split(b"\n"), source=source)
