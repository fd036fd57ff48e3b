"""``POST /v1/uploads/authorize``: keys from the token's scope, S3 checks per key, states in order.

HEADs run concurrently on the runtime's bounded pool (``head_concurrency``), one per distinct
key. Segments are the exception (issue 12: a backlog of small segments cost one S3 round trip per
object here): a request naming at least ``list_min_segments`` sequences of one plane lists that
sequence range once (ListObjectsV2; sequences are zero-padded, so key order is sequence order);
a key the listing does not show is absent, and only the keys it shows get a HEAD for their
checksum. A key created between the listing and the PUT makes the create-only PUT answer 412,
after which the publisher re-authorizes and gets ``stored``.

Each object then gets ``upload_required`` with a create-only presigned PUT, ``stored``
(same checksum) or ``conflict`` (different bytes). A failing S3 call fails the whole request
with 503: a partial answer would leave the publisher unable to tell absent from unknown.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import Counter

from api.gateway.evidence_store import required_headers
from api.gateway.object_plan import (
    PlannedObject,
    Verdict,
    decide_state,
    identity_fields,
    plan_objects,
    sha256_b64,
)
from api.gateway.publisher_auth import NoEvidencePrefix, PublisherIdentity
from api.gateway.runtime import GatewayRuntime
from formats import upload_wire as uw

_log = logging.getLogger(__name__)


def evidence_bucket(runtime: GatewayRuntime, environment_id: str) -> str:
    bucket = runtime.settings.bucket_for(environment_id)
    if bucket is None:
        raise NoEvidencePrefix(
            f"environment {environment_id} has no evidence bucket in this deployment",
            remedy="Stop shipping; ask the operator to configure the environment's bucket.",
        )
    if not runtime.store.bucket_exists(bucket):
        raise NoEvidencePrefix(
            f"the evidence bucket of environment {environment_id} does not exist",
            remedy="Stop shipping; ask the operator to create the bucket.",
        )
    return bucket


def _check(runtime: GatewayRuntime, bucket: str, item: PlannedObject) -> Verdict:
    stored = runtime.store.head(bucket, item.key)
    verdict = decide_state(stored, item.size_bytes, item.checksum_sha256)
    if verdict is not Verdict.NEEDS_HASH:
        return verdict
    digest = runtime.store.sha256_b64(bucket, item.key, runtime.settings.hash_fallback_max_bytes)
    if digest is None:
        # Too large to read here (or deleted meanwhile): never claim stored without proof.
        return Verdict.CONFLICT
    return Verdict.STORED if digest == sha256_b64(item.checksum_sha256) else Verdict.CONFLICT


def _listed_absent(runtime: GatewayRuntime, bucket: str, distinct: dict[str, PlannedObject]) -> set[str]:
    """Segment keys found absent by one listing per plane, where a listing is cheaper than HEADs."""
    planes: dict[str, list[tuple[int, str]]] = {}
    for key, item in distinct.items():
        if isinstance(item.entry, uw.SegmentObject):
            planes.setdefault(key.rsplit("/", 1)[0], []).append((item.entry.sequence, key))
    ranges: list[tuple[str, str, list[str]]] = []
    for members in planes.values():
        members.sort()
        span = members[-1][0] - members[0][0] + 1
        # A sparse range would list keys nobody asked about: HEAD those requests instead.
        if len(members) >= runtime.settings.list_min_segments and span <= 4 * len(members):
            ranges.append((members[0][1], members[-1][1], [k for _, k in members]))
    futures = [runtime.head_pool.submit(runtime.store.keys_between, bucket, a, b) for a, b, _ in ranges]
    absent: set[str] = set()
    for (_, _, wanted), fut in zip(ranges, futures, strict=True):
        present = fut.result()
        absent.update(k for k in wanted if k not in present)
    return absent


def authorize(
    runtime: GatewayRuntime, identity: PublisherIdentity, request: uw.AuthorizeRequest
) -> uw.AuthorizeResponse:
    env = identity.scope.environment_id
    config = runtime.config_for(env)
    planned = plan_objects(
        identity.scope,
        request,
        max_objects=config.max_objects_per_authorize,
        max_object_bytes=config.max_object_bytes,
    )
    bucket = evidence_bucket(runtime, env)

    distinct: dict[str, PlannedObject] = {}
    for item in planned:
        distinct.setdefault(item.key, item)
    absent = _listed_absent(runtime, bucket, distinct) if runtime.settings.list_min_segments else set()
    futures = {
        key: runtime.head_pool.submit(_check, runtime, bucket, item)
        for key, item in distinct.items()
        if key not in absent
    }
    verdicts = {key: fut.result() for key, fut in futures.items()}
    verdicts.update((key, Verdict.UPLOAD_REQUIRED) for key in absent)

    ttl = runtime.settings.presign_ttl_seconds or config.upload_url_ttl_seconds
    # Taken before signing, so the URL never expires before the time we announce.
    expires_at = dt.datetime.now(dt.UTC).replace(microsecond=0) + dt.timedelta(seconds=ttl)
    answers: list[uw.AuthorizedObject] = []
    for item in planned:
        verdict = verdicts[item.key]
        fields: dict[str, object] = {"kind": item.entry.kind, "key": item.key, **identity_fields(item.entry)}
        if verdict is Verdict.UPLOAD_REQUIRED:
            fields |= {
                "state": "upload_required",
                "upload_url": runtime.store.presign_put(
                    bucket, item.key, item.size_bytes, item.checksum_sha256, ttl
                ),
                "required_headers": required_headers(item.size_bytes, item.checksum_sha256),
                "expires_at": expires_at,
            }
        else:
            fields["state"] = verdict.value
        answers.append(uw.AuthorizedObject.model_validate(fields))

    counts = Counter(a.state for a in answers)
    _log.info(
        "authorized flush=%s token=%s environment=%s objects=%d upload_required=%d stored=%d conflict=%d",
        request.flush_id,
        identity.token_id,
        env,
        len(answers),
        counts["upload_required"],
        counts["stored"],
        counts["conflict"],
    )
    return uw.AuthorizeResponse(flush_id=request.flush_id, objects=answers)
