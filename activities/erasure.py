"""The erasure activities: resolve the selector, delete the streams' objects (every version), erase
Boundary's facts, commit Lance versions without the rows, delete what no remaining root references,
remove old Lance versions, and verify all of it for the receipt.

:class:`ErasureActivities` receives its clients once (boto3 S3, the Boundary client, the
:class:`LanceStore`). Every method is a Temporal activity taking and returning one frozen dataclass
(formats/contracts/erasure.py) and a plain function a test can call. Every step is idempotent:
deleting what is already gone deletes nothing, Boundary replays a completed projection erasure by
its Idempotency-Key, Lance deletes by predicate. A crash at any point is repaired by running the
step again. Logs carry counts and identifiers only.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import asdict
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.evidence_reader import EvidenceReader
from activities.heartbeat import heartbeat
from api.dataplane.boundary_client import BoundaryClient
from api.dataplane.lance_store import LEDGER, LanceStore
from formats import meta_segment as ms
from formats import object_keys
from formats.contracts import ScopeRef
from formats.contracts import erasure as e
from formats.errors import FormatError
from formats.object_keys import InvalidKeyError, Scope
from formats.value_pack import read_pack

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

log = logging.getLogger("baml_studio.erasure")

# Lance datasets holding rows of one execution, and the column naming it.
ROOT_DATASETS: dict[str, str] = {
    "value_leaves_v1": "execution_id",
    "calls_v1": "execution_id",
    "errors_v1": "execution_id",
    LEDGER: "root_id",
    # Last: the CID references are what the shared-CAS step counts.
    "cid_refs_v1": "root_id",
}
# Datasets keyed by the program (engine) of the erased streams.
PROGRAM_DATASETS = ("function_definitions_v1", "source_files_v1")
AFFECTED_DATASETS = (*ROOT_DATASETS, *PROGRAM_DATASETS, "values_v1")

_IN_CHUNK = 500  # identifiers per IN (...) list
_STREAM_CHUNK = 50  # streams per starts_with(...) OR ... predicate
_SEAL_KEY = "baml.erasure.last"  # dataset config written by the id-free commit before cleanup
_FACT_CHUNK = 10_000  # Boundary's limit of root_ids per request
_HEX = frozenset("0123456789abcdef")

# Fault injection for the crash tests: the worker process exits right after this activity has
# done its work and before it reports (the worst moment: the work is done, the result is lost).
CRASH_AFTER_ENV = "BAML_STUDIO_ERASURE_TEST_CRASH_AFTER"


def _crash_point(step: str) -> None:
    if os.environ.get(CRASH_AFTER_ENV) == step:
        log.warning("test crash after %s", step)
        os._exit(75)


def _scope(ref: ScopeRef) -> Scope:
    return Scope(ref.tenant_id, ref.project_id, ref.environment_id)


def _hex_ids(values: Iterable[str], length: int | None = None) -> list[str]:
    out = []
    for v in values:
        if not v or not set(v) <= _HEX or (length is not None and len(v) != length):
            raise ApplicationError("identifier is not lowercase hex", type="BadSelector", non_retryable=True)
        out.append(v)
    return out


def _in_list(values: Iterable[str]) -> str:
    # Identifiers only (validated hex): nothing a caller wrote reaches a filter unchecked.
    return ", ".join(f"'{v}'" for v in values)


def _chunks(values: list[str], size: int) -> Iterator[list[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _now_ns() -> int:
    return time.time_ns()


class ErasureActivities:
    def __init__(self, *, s3: S3Client, bucket: str, boundary: BoundaryClient, lance: LanceStore) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.boundary = boundary
        self.lance = lance
        self._plans: dict[str, e.ErasurePlan] = {}

    def activities(self) -> list[Any]:
        return [
            self.resolve,
            self.delete_stream_objects,
            self.erase_facts,
            self.erase_lance_rows,
            self.delete_unreferenced,
            self.cleanup_lance_versions,
            self.verify,
            self.discard_plan,
        ]

    # --- the plan, by reference ---------------------------------------------------------------

    def _store_plan(self, erasure_id: str, plan: e.ErasurePlan) -> e.PlanRef:
        body = json.dumps(asdict(plan), sort_keys=True, separators=(",", ":")).encode()
        key = object_keys.erasure_plan_key(_scope(plan.scope), erasure_id)
        self.s3.put_object(Bucket=self.bucket, Key=key, Body=body)
        digest = hashlib.sha256(body).hexdigest()
        return e.PlanRef(key, digest, plan.scope, plan.euids, len(plan.root_ids))

    def _plan(self, ref: e.PlanRef) -> e.ErasurePlan:
        """The plan the workflow recorded (a digest mismatch means another resolve overwrote it)."""
        cached = self._plans.get(ref.digest)
        if cached is not None:
            return cached
        body = self.s3.get_object(Bucket=self.bucket, Key=ref.key)["Body"].read()
        if hashlib.sha256(body).hexdigest() != ref.digest:
            raise ApplicationError("the stored erasure plan changed", type="PlanChanged", non_retryable=True)
        raw = json.loads(body)
        plan = e.ErasurePlan(
            ScopeRef(**raw["scope"]),
            tuple(
                e.StreamPlan(s["euid"], tuple(s["root_ids"]), tuple(s["program_ids"]), s["object_versions"])
                for s in raw["streams"]
            ),
            tuple(raw["candidate_cids"]),
        )
        self._plans = {ref.digest: plan}  # one erasure at a time per activity thread is the norm
        return plan

    # --- S3 helpers --------------------------------------------------------------------------

    def _listing(self, prefix: str, bucket: str | None = None) -> Iterator[tuple[str, str, bool, bool]]:
        """(key, version id, is delete marker, is latest) of every version under ``prefix``."""
        kwargs: dict[str, Any] = {"Bucket": bucket or self.bucket, "Prefix": prefix}
        while True:
            page = self.s3.list_object_versions(**kwargs)
            for v in page.get("Versions", []):
                yield v["Key"], v.get("VersionId") or "null", False, bool(v.get("IsLatest"))
            for m in page.get("DeleteMarkers", []):
                yield m["Key"], m.get("VersionId") or "null", True, bool(m.get("IsLatest"))
            if not page.get("IsTruncated"):
                return
            kwargs["KeyMarker"] = page.get("NextKeyMarker")
            kwargs["VersionIdMarker"] = page.get("NextVersionIdMarker")

    def _versions(self, prefix: str) -> Iterator[tuple[str, str, bool]]:
        """(key, version id, is delete marker) of every version under ``prefix``."""
        return ((k, v, marker) for k, v, marker, _ in self._listing(prefix))

    def _noncurrent(self, prefix: str, bucket: str) -> list[tuple[str, str, bool]]:
        """Versions under ``prefix`` that no reader sees: older versions and delete markers (a key
        whose latest version is a delete marker has only such versions)."""
        return [
            (k, v, marker) for k, v, marker, latest in self._listing(prefix, bucket) if marker or not latest
        ]

    def _delete_versions(self, entries: list[tuple[str, str, bool]], bucket: str | None = None) -> int:
        deleted = 0
        for start in range(0, len(entries), 1000):
            batch = entries[start : start + 1000]
            resp = self.s3.delete_objects(
                Bucket=bucket or self.bucket,
                Delete={"Objects": [{"Key": k, "VersionId": v} for k, v, _ in batch], "Quiet": True},
            )
            errors = resp.get("Errors", [])
            if errors:
                codes = sorted({str(err.get("Code")) for err in errors})
                raise ApplicationError(f"S3 refused {len(errors)} deletions ({', '.join(codes)})")
            deleted += len(batch)
            heartbeat("delete", deleted)
        return deleted

    def _delete_prefix(self, prefix: str) -> tuple[int, int]:
        entries = list(self._versions(prefix))
        self._delete_versions(entries)
        markers = sum(1 for _, _, is_marker in entries if is_marker)
        return len(entries) - markers, markers

    # --- resolve -----------------------------------------------------------------------------

    def _resident(self, scope: Scope, sql: str) -> pa.Table:
        generation = self.boundary.active_generation(scope.environment_id).generation
        return self.boundary.resident_query(
            sql, scope.environment_id, generation=generation, catalog_version=1
        )

    def _euids_for(self, scope: Scope, selector: e.Selector) -> set[str]:
        if selector.process_euids:
            return set(_hex_ids(selector.process_euids, 32))
        found: set[str] = set()
        if selector.execution_ids:
            ids = _hex_ids(selector.execution_ids, 64)
            # The root ThreadRef starts with the stream's euid, so an execution that was never
            # projected still names its stream; the public facts confirm the projected ones.
            found.update(x[:32] for x in ids)
            for chunk in _chunks(ids, _IN_CHUNK):
                table = self._resident(
                    scope,
                    "SELECT DISTINCT process_euid FROM threads_v1 "
                    f"WHERE is_root AND execution_id IN ({_in_list(chunk)})",
                )
                found.update(table["process_euid"].to_pylist())
            return found
        lo, hi = int(selector.time_from_ns or 0), int(selector.time_to_ns or 0)
        table = self._resident(
            scope,
            "SELECT DISTINCT process_euid FROM threads_v1 "
            f"WHERE is_root AND started_at_ns >= {lo} AND started_at_ns < {hi}",
        )
        found.update(table["process_euid"].to_pylist())
        return found

    def _stream_from_meta(
        self, reader: EvidenceReader, scope: Scope, euid: str
    ) -> tuple[set[str], set[str], set[str], int]:
        """Roots, program ids and table CIDs named by the stream's meta objects, and object versions."""
        roots: set[str] = set()
        programs: set[str] = set()
        tables: set[str] = set()
        prefix = object_keys.stream_prefix(scope, euid)
        versions = sum(1 for _ in self._versions(prefix))
        for obj in reader.list_objects(prefix + "meta/"):
            try:
                segment = reader.meta_strict(obj.key)
            except (LookupError, FormatError, InvalidKeyError):
                continue  # unreadable: its roots are still found through Lance and Boundary
            for record in segment.records:
                if isinstance(record, ms.RootStarted | ms.RootEnded):
                    roots.add(record.root.execution_id)
                elif isinstance(record, ms.EngineStarted):
                    programs.add(record.program_id.hex())
                    if record.function_table_cid is not None:
                        tables.add(record.function_table_cid.hex())
            heartbeat("meta", euid)
        return roots, programs, tables, versions

    def _pack_cids(self, reader: EvidenceReader, scope: Scope, euid: str) -> set[str]:
        cids: set[str] = set()
        for obj in reader.list_objects(object_keys.stream_prefix(scope, euid) + "values/"):
            try:
                data = reader.get_file(obj.key)
                if data is None:
                    continue
                pack = read_pack(data, file=obj.key, verify_entries=False)
            except FormatError:
                continue
            cids.update(entry.cid.removeprefix(object_keys.CID_PREFIX) for entry in pack.entries)
        return cids

    def _lance_roots(self, scope: Scope, euids: list[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for dataset in (LEDGER, "cid_refs_v1"):
            for chunk in _chunks(euids, _IN_CHUNK):
                table = self.lance.read(
                    scope,
                    dataset,
                    columns=["root_id", "process_euid"],
                    filter=f"process_euid IN ({_in_list(chunk)})",
                )
                for root, euid in zip(
                    table["root_id"].to_pylist(), table["process_euid"].to_pylist(), strict=True
                ):
                    out.setdefault(euid, set()).add(root)
        return out

    def _resident_pairs(
        self, scope: Scope, values: list[str], sql: str, first: str, second: str
    ) -> Iterator[tuple[str, str]]:
        """(first, second) column pairs of a resident query run once per chunk of ``values``
        (``sql`` names the chunk's IN list ``{ids}``)."""
        for chunk in _chunks(values, _IN_CHUNK):
            table = self._resident(scope, sql.format(ids=_in_list(chunk)))
            yield from zip(table[first].to_pylist(), table[second].to_pylist(), strict=True)

    def _fact_roots(self, scope: Scope, euids: list[str]) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        sql = (
            "SELECT DISTINCT process_euid, execution_id FROM threads_v1"
            " WHERE is_root AND process_euid IN ({ids})"
        )
        for euid, root in self._resident_pairs(scope, euids, sql, "process_euid", "execution_id"):
            out.setdefault(euid, set()).add(root)
        return out

    def _referenced_cids(self, scope: Scope, roots: list[str]) -> set[str]:
        cids: set[str] = set()
        for chunk in _chunks(roots, _IN_CHUNK):
            table = self.lance.read(
                scope, "cid_refs_v1", columns=["cid"], filter=f"root_id IN ({_in_list(chunk)})"
            )
            cids.update(table["cid"].to_pylist())
        return cids

    @activity.defn(name=e.RESOLVE)
    def resolve(self, inp: e.ResolveInput) -> e.PlanRef:
        """Streams and root ids the selector covers, and the values and tables they referenced.

        Roots come from three places, so an execution that was never projected (or whose facts
        are already gone) is still covered: the stream's meta objects, the Lance ledger and CID
        references, and the public facts (threads_v1 root rows).
        """
        scope = _scope(inp.scope)
        euids = sorted(self._euids_for(scope, inp.selector))
        reader = EvidenceReader(self.s3, self.bucket)
        from_lance = self._lance_roots(scope, euids) if euids else {}
        from_facts = self._fact_roots(scope, euids) if euids else {}
        streams: list[e.StreamPlan] = []
        candidates: set[str] = set()
        for euid in euids:
            roots, programs, tables, versions = self._stream_from_meta(reader, scope, euid)
            roots |= from_lance.get(euid, set()) | from_facts.get(euid, set())
            if not roots and not versions:
                continue  # nothing of this stream exists here: not matched
            candidates |= tables | self._pack_cids(reader, scope, euid)
            streams.append(e.StreamPlan(euid, tuple(sorted(roots)), tuple(sorted(programs)), versions))
        plan_roots = sorted({r for s in streams for r in s.root_ids})
        candidates |= self._referenced_cids(scope, plan_roots)
        log.info(
            "erasure resolved erasure_id=%s selector=%s streams=%d roots=%d candidates=%d",
            inp.erasure_id,
            inp.selector.kind,
            len(streams),
            len(plan_roots),
            len(candidates),
        )
        return self._store_plan(
            inp.erasure_id, e.ErasurePlan(inp.scope, tuple(streams), tuple(sorted(candidates)))
        )

    # --- step 1: S3 --------------------------------------------------------------------------

    @activity.defn(name=e.DELETE_STREAM_OBJECTS)
    def delete_stream_objects(self, inp: e.PlanInput) -> e.DeleteObjectsResult:
        """Delete every version and delete marker under each erased stream's prefix."""
        plan = self._plan(inp.plan)
        scope = _scope(plan.scope)
        versions = markers = 0
        for stream in plan.streams:
            v, m = self._delete_prefix(object_keys.stream_prefix(scope, stream.euid))
            versions += v
            markers += m
            # The stream's engine registry entries and sweep state are derived from its meta
            # objects: they go too (not counted with the evidence versions the plan listed).
            self._delete_prefix(object_keys.engine_registry_prefix(scope, stream.euid))
            self._delete_prefix(object_keys.sweep_state_prefix(scope, stream.euid))
            heartbeat("stream", stream.euid)
        log.info(
            "erasure objects deleted erasure_id=%s versions=%d markers=%d", inp.erasure_id, versions, markers
        )
        _crash_point(e.DELETE_STREAM_OBJECTS)
        return e.DeleteObjectsResult(versions, markers, len(plan.streams))

    # --- step 2: Boundary --------------------------------------------------------------------

    @activity.defn(name=e.ERASE_FACTS)
    def erase_facts(self, inp: e.PlanInput) -> e.EraseFactsResult:
        """``POST /projection-erasures`` from generation 1 (every generation), 10,000 roots a call."""
        plan = self._plan(inp.plan)
        roots = list(plan.root_ids)
        deleted: dict[str, int] = {}
        remaining = 0
        for index, chunk in enumerate(_chunks(roots, _FACT_CHUNK)):
            # One key per chunk and round: a retry replays Boundary's completed answer.
            key = f"{inp.erasure_id}.r{inp.round}.c{index}"
            answer = self.boundary.projection_erasure(
                plan.scope.environment_id, e.FIRST_GENERATION, chunk, idempotency_key=key
            )
            for rel, n in answer.deleted.items():
                deleted[rel] = deleted.get(rel, 0) + n
            remaining += answer.remaining_total
            heartbeat("facts", index)
        if remaining:
            raise ApplicationError(
                f"Boundary still holds {remaining} fact rows of the erased roots", type="FactsRemain"
            )
        log.info(
            "erasure facts erased erasure_id=%s roots=%d rows=%d",
            inp.erasure_id,
            len(roots),
            sum(deleted.values()),
        )
        _crash_point(e.ERASE_FACTS)
        return e.EraseFactsResult(e.FIRST_GENERATION, deleted, remaining)

    # --- step 3: Lance -----------------------------------------------------------------------

    def _delete_rows(self, scope: Scope, dataset: str, column: str, values: list[str]) -> int:
        return self._delete_where(
            scope, dataset, (f"{column} IN ({_in_list(chunk)})" for chunk in _chunks(values, _IN_CHUNK))
        )

    def _delete_streams(self, scope: Scope, dataset: str, column: str, euids: list[str]) -> int:
        """Every row of these streams: an execution id starts with its stream's euid. One commit per
        ``_STREAM_CHUNK`` streams instead of one per ``_IN_CHUNK`` roots (a 10,000-root stream: 1, not 20)."""
        return self._delete_where(
            scope,
            dataset,
            (
                " OR ".join(f"starts_with({column}, '{euid}')" for euid in chunk)
                for chunk in _chunks(_hex_ids(euids, 32), _STREAM_CHUNK)
            ),
        )

    def _delete_where(self, scope: Scope, dataset: str, predicates: Iterable[str]) -> int:
        deleted = 0
        for predicate in predicates:
            ds = self.lance.open(scope, dataset)
            if ds is None:
                return 0
            n = int(ds.count_rows(filter=predicate))
            if n:
                ds.delete(predicate)
                deleted += n
            heartbeat("lance", dataset, deleted)
        return deleted

    def _materialize_deletions(self, scope: Scope, dataset: str) -> bool:
        """Rewrite every fragment that masks deleted rows, so no current data file holds them.

        A Lance delete only writes a deletion mask; the bytes stay in the data file until the
        fragment is rewritten. Runs whenever a mask exists, so a retry after a crash completes it.
        """
        ds = self.lance.open(scope, dataset)
        if ds is None or not any(f.metadata.deletion_file is not None for f in ds.get_fragments()):
            return False
        ds.optimize.compact_files(materialize_deletions=True, materialize_deletions_threshold=0.0)
        return True

    def _programs_in_use(self, scope: Scope, programs: list[str], erased: Iterable[str]) -> dict[str, int]:
        """Program id -> how many streams outside ``erased`` still use it (absent: none does).

        A stream uses a program when one of its EngineStarted records names it, and every call it
        projects carries that program id next to the stream's euid (public ``calls_v1``). Those
        calls are the reference count: the rule Boundary applies to the public
        function_definitions_v1 rows, so the Lance rows and the public facts of a program go
        together. Runs after ``erase_facts``; the erased streams are excluded anyway, so the
        answer does not depend on that order.
        """
        gone = set(erased)
        used: dict[str, set[str]] = {}
        sql = (
            "SELECT program_id, process_euid FROM calls_v1"
            " WHERE program_id IN ({ids}) GROUP BY program_id, process_euid"
        )
        for program, euid in self._resident_pairs(scope, programs, sql, "program_id", "process_euid"):
            if euid not in gone:
                used.setdefault(program, set()).add(euid)
        return {program: len(streams) for program, streams in sorted(used.items())}

    def _program_fact_rows(self, scope: Scope, programs: list[str]) -> int:
        """Public function_definitions_v1 rows of these programs (Boundary's active generation)."""
        total = 0
        for chunk in _chunks(programs, _IN_CHUNK):
            table = self._resident(
                scope,
                f"SELECT count() AS n FROM function_definitions_v1 WHERE program_id IN ({_in_list(chunk)})",
            )
            total += int(table["n"][0].as_py())
        return total

    def _lance_rows_of(self, scope: Scope, dataset: str, programs: list[str]) -> int:
        ds = self.lance.open(scope, dataset)
        return 0 if ds is None else _count_in(ds, "program_id", programs)

    @activity.defn(name=e.ERASE_LANCE_ROWS)
    def erase_lance_rows(self, inp: e.PlanInput) -> e.EraseLanceResult:
        """Commit new versions without the erased roots' rows and the rows of their programs that
        no remaining stream uses (a shared build's program stays while another stream runs it)."""
        plan = self._plan(inp.plan)
        scope = _scope(plan.scope)
        euids = list(plan.euids)
        programs = _hex_ids(plan.program_ids)
        in_use = self._programs_in_use(scope, programs, euids) if programs else {}
        kept = [p for p in programs if p in in_use]
        erased = [p for p in programs if p not in in_use]
        rows: dict[str, int] = {}
        compacted: list[str] = []
        # The plan covers whole streams (an execution selector erases its stream): delete by stream.
        for dataset, column in ROOT_DATASETS.items():
            rows[dataset] = self._delete_streams(scope, dataset, column, euids)
        for dataset in PROGRAM_DATASETS:
            rows[dataset] = self._delete_rows(scope, dataset, "program_id", erased)
        for dataset in (*ROOT_DATASETS, *PROGRAM_DATASETS):
            if self._materialize_deletions(scope, dataset):
                compacted.append(dataset)
            heartbeat("lance", dataset)
        rows_kept = {d: self._lance_rows_of(scope, d, kept) for d in PROGRAM_DATASETS} if kept else {}
        facts_kept = {"function_definitions_v1": self._program_fact_rows(scope, kept)} if kept else {}
        log.info(
            "erasure lance rows deleted erasure_id=%s rows=%d programs_erased=%d programs_kept=%d",
            inp.erasure_id,
            sum(rows.values()),
            len(erased),
            len(kept),
        )
        _crash_point(e.ERASE_LANCE_ROWS)
        return e.EraseLanceResult(rows, tuple(compacted), in_use, tuple(erased), rows_kept, facts_kept)

    # --- step 3b: shared CAS -----------------------------------------------------------------

    @activity.defn(name=e.DELETE_UNREFERENCED)
    def delete_unreferenced(self, inp: e.PlanInput) -> e.DeleteUnreferencedResult:
        """Delete large values, function tables and values_v1 rows no remaining root references.

        Runs after the erased roots' CID references are gone, so what ``cid_refs_v1`` still holds
        is exactly what the remaining streams reference.
        """
        plan = self._plan(inp.plan)
        scope = _scope(plan.scope)
        candidates = sorted(_hex_ids(plan.candidate_cids, 64))
        still: set[str] = set()
        for chunk in _chunks(candidates, _IN_CHUNK):
            table = self.lance.read(
                scope, "cid_refs_v1", columns=["cid"], filter=f"cid IN ({_in_list(chunk)})"
            )
            still.update(table["cid"].to_pylist())
        unreferenced = [c for c in candidates if c not in still]
        # Most candidates are small values that only ever lived in packs: list the CAS prefixes
        # once and match, rather than two listings per candidate.
        wanted = {
            key
            for cid in unreferenced
            for key in (object_keys.large_value_key(scope, cid), object_keys.table_key(scope, cid))
        }
        entries: list[tuple[str, str, bool]] = []
        if wanted:
            cas_prefix = f"{object_keys.evidence_prefix(scope)}cas/"
            entries = [v for v in self._versions(cas_prefix) if v[0] in wanted]
        objects = len({k for k, _, _ in entries})
        self._delete_versions(entries)
        values_rows = self._delete_rows(scope, "values_v1", "cid", unreferenced)
        self._materialize_deletions(scope, "values_v1")
        log.info(
            "erasure shared objects erasure_id=%s deleted=%d kept=%d values_rows=%d",
            inp.erasure_id,
            objects,
            len(still),
            values_rows,
        )
        _crash_point(e.DELETE_UNREFERENCED)
        return e.DeleteUnreferencedResult(objects, len(still), values_rows, len(still))

    # --- old Lance versions ------------------------------------------------------------------

    @activity.defn(name=e.CLEANUP_LANCE_VERSIONS)
    def cleanup_lance_versions(self, inp: e.CleanupInput) -> e.CleanupResult:
        """Remove every version but the newest of each affected dataset (retain window 0), then the
        noncurrent S3 versions of the dataset's files.

        Files a concurrent writer has written but not yet committed are referenced by no
        manifest, and Lance never deletes such "unverified" files younger than 7 days, so an
        in-flight projection is safe. Readers pinned to an older version lose it (by design).
        Tagged versions are kept by Lance and reported.

        In a versioned bucket Lance's deletes (cleanup, compaction) only add delete markers: the
        old data files, manifests and transaction files, which hold the erased rows and the delete
        predicate's ids, stay as noncurrent versions. Lance reads only current objects, so removing
        every noncurrent version under the dataset changes nothing a reader sees.

        The deletes' own versions hold the erased ids too (the predicate, in the transaction file
        and the manifest). A delete that removed whole fragments leaves nothing to compact, so its
        version would stay the newest and survive the cleanup: a config-only commit first makes
        an id-free version the newest.
        """
        scope = _scope(inp.scope)
        removed: dict[str, int] = {}
        tagged: dict[str, int] = {}
        purged: dict[str, int] = {}
        for dataset in AFFECTED_DATASETS:
            ds = self.lance.open(scope, dataset)
            if ds is None:
                continue
            ds.update_config({_SEAL_KEY: inp.erasure_id})
            stats = ds.cleanup_old_versions(
                older_than=timedelta(0), retain_versions=1, error_if_tagged_old_versions=False
            )
            removed[dataset] = int(stats.old_versions)
            tagged[dataset] = sum(1 for t in ds.tags.list().values() if int(t["version"]) < ds.version)
            purged[dataset] = self._purge_noncurrent(scope, dataset)
            heartbeat("cleanup", dataset)
        log.info(
            "erasure lance versions removed erasure_id=%s versions=%d noncurrent_objects=%d",
            inp.erasure_id,
            sum(removed.values()),
            sum(purged.values()),
        )
        _crash_point(e.CLEANUP_LANCE_VERSIONS)
        return e.CleanupResult(removed, tagged, _now_ns(), purged)

    def _dataset_prefix(self, scope: Scope, dataset: str) -> tuple[str, str] | None:
        """(bucket, key prefix) of a dataset kept in S3; None for a local one (tests, benches)."""
        if self.lance.bucket is None:
            return None
        return self.lance.bucket, object_keys.lance_dataset_key(scope, dataset).rstrip("/") + "/"

    def _purge_noncurrent(self, scope: Scope, dataset: str) -> int:
        where = self._dataset_prefix(scope, dataset)
        if where is None:
            return 0
        bucket, prefix = where
        entries = self._noncurrent(prefix, bucket)
        # Older versions first, markers last: a marker removed before its key's older versions
        # would make one of them current again if this activity stopped in between.
        entries.sort(key=lambda entry: entry[2])
        return self._delete_versions(entries, bucket)

    def _noncurrent_left(self, scope: Scope) -> dict[str, int]:
        left: dict[str, int] = {}
        for dataset in AFFECTED_DATASETS:
            where = self._dataset_prefix(scope, dataset)
            if where is not None:
                left[dataset] = len(self._noncurrent(where[1], where[0]))
        return left

    # --- receipt -----------------------------------------------------------------------------

    def lance_counts(
        self, scope: Scope, plan: e.ErasurePlan, programs: list[str]
    ) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """Rows of the erased roots (and of the erased ``programs``) in each dataset: newest version,
        every retained version, and how many versions each dataset retains."""
        current: dict[str, int] = {}
        retained: dict[str, int] = {}
        versions: dict[str, int] = {}
        roots = list(plan.root_ids)
        checks = [(d, c, roots) for d, c in ROOT_DATASETS.items()] + [
            (d, "program_id", programs) for d in PROGRAM_DATASETS
        ]
        for dataset, column, values in checks:
            ds = self.lance.open(scope, dataset)
            if ds is None:
                current[dataset] = retained[dataset] = versions[dataset] = 0
                continue
            listed = ds.versions()
            versions[dataset] = len(listed)
            current[dataset] = _count_in(ds, column, values)
            total = 0
            for v in listed:
                old = self.lance.open(scope, dataset, version=int(v["version"]))
                if old is not None:
                    total += _count_in(old, column, values)
            retained[dataset] = total
            heartbeat("verify", dataset)
        return current, retained, versions

    @activity.defn(name=e.VERIFY)
    def verify(self, inp: e.PlanInput) -> e.VerifyResult:
        """Count what remains of the erased streams in every store (all zero for a receipt)."""
        plan = self._plan(inp.plan)
        scope = _scope(plan.scope)
        by_stream = {
            s.euid: sum(1 for _ in self._versions(object_keys.stream_prefix(scope, s.euid)))
            for s in plan.streams
        }
        facts: dict[str, int] = {}
        roots = list(plan.root_ids)
        for chunk in _chunks(roots, _FACT_CHUNK):
            counts = self.boundary.projection_fact_counts(scope.environment_id, chunk, generation=None)
            for rel, n in counts.counts.items():
                facts[rel] = facts.get(rel, 0) + n
        # A program a remaining stream still uses keeps its rows: only the others must be gone.
        programs = _hex_ids(plan.program_ids)
        in_use = self._programs_in_use(scope, programs, plan.euids) if programs else {}
        erased_programs = [p for p in programs if p not in in_use]
        if erased_programs:
            facts["function_definitions_v1"] = self._program_fact_rows(scope, erased_programs)
        current, retained, versions = self.lance_counts(scope, plan, erased_programs)
        masks: dict[str, int] = {}
        for dataset in AFFECTED_DATASETS:
            ds = self.lance.open(scope, dataset)
            masks[dataset] = (
                0 if ds is None else sum(1 for f in ds.get_fragments() if f.metadata.deletion_file)
            )
        noncurrent = self._noncurrent_left(scope)
        _crash_point(e.VERIFY)
        return e.VerifyResult(
            s3_object_versions=sum(by_stream.values()),
            s3_objects_by_stream=by_stream,
            boundary_fact_rows=facts,
            boundary_fact_total=sum(facts.values()),
            lance_rows_current=current,
            lance_rows_retained_versions=retained,
            lance_versions_retained=versions,
            lance_fragments_with_deletions=masks,
            verified_at_ns=_now_ns(),
            lance_noncurrent_object_versions=noncurrent,
            programs_in_use=in_use,
        )

    @activity.defn(name=e.DISCARD_PLAN)
    def discard_plan(self, inp: e.PlanInput) -> int:
        """Delete the stored plan (every version): it lists the erased roots. Returns versions deleted."""
        deleted = self._delete_versions(list(self._versions(inp.plan.key)))
        self._plans.pop(inp.plan.digest, None)
        _crash_point(e.DISCARD_PLAN)
        return deleted


def _count_in(ds: Any, column: str, values: list[str]) -> int:
    total = 0
    for chunk in _chunks(values, _IN_CHUNK):
        total += int(ds.count_rows(filter=f"{column} IN ({_in_list(chunk)})"))
    return total
