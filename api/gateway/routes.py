"""The publisher's two gateway endpoints (publisher guide, "The two endpoints")."""

from __future__ import annotations

from fastapi import APIRouter, Response

from api.common.errors import problem_responses
from api.gateway.authorize import authorize
from api.gateway.deps import Publisher, Runtime
from formats import upload_wire as uw

router = APIRouter(tags=["publisher"], responses=problem_responses(401, 403, 429, 503))

CONFIG_CACHE_CONTROL = f"{uw.CONFIG_CACHE_CONTROL}, private"
"""Starts with ``max-age=300`` as the guide says; ``private`` because the answer is per token."""


@router.get(
    uw.CONFIG_PATH,
    operation_id="getPublisherConfig",
    response_model=uw.PublisherConfig,
    summary="Publisher configuration of the token's environment",
)
def get_publisher_config(publisher: Publisher, runtime: Runtime, response: Response) -> uw.PublisherConfig:
    config = runtime.config_for(publisher.scope.environment_id)
    response.headers["Cache-Control"] = CONFIG_CACHE_CONTROL
    return config


@router.post(
    uw.AUTHORIZE_PATH,
    operation_id="authorizeUploads",
    response_model=uw.AuthorizeResponse,
    response_model_exclude_none=True,  # stored/conflict entries carry no URL fields, as in the guide
    summary="Authorize one flush's objects: a create-only presigned PUT, stored or conflict for each",
    responses=problem_responses(400, 409, 413),
)
def authorize_uploads(
    body: uw.AuthorizeRequest, publisher: Publisher, runtime: Runtime, response: Response
) -> uw.AuthorizeResponse:
    response.headers["Cache-Control"] = "no-store"  # the answer holds presigned URLs
    return authorize(runtime, publisher, body)
