"""``POST /v1/uploads/authorize``: keys from the token's scope, one HEAD per key, states in order.

HEADs run concurrently on the runtime's bounded pool (``head_concurrency``), one per distinct
key. Each object then gets ``upload_required`` with a create-only presigned PUT, ``stored``
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
    futures = {key: runtime.head_pool.submit(_check, runtime, bucket, item) for key, item in distinct.items()}
    verdicts = {key: fut.result() for key, fut in futures.items()}

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
