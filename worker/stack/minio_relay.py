"""``python -m worker.stack.minio_relay``: forward MinIO bucket notifications to an SQS queue.

AWS S3 (and moto) deliver object-created events to SQS themselves; MinIO cannot target SQS, so
docker-compose points a MinIO webhook target at this relay, which sends each event's
``Records`` to the projection queue as the standard S3 event JSON the SQS bridge reads.
Settings: ``BAML_STUDIO_RELAY_*``. A failed send answers 503, so MinIO retries the event.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError
from fastapi import FastAPI, HTTPException, Request
from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from api.dataplane.aws import aws_client


class RelaySettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BAML_STUDIO_RELAY_", extra="ignore")

    host: str = Field(default="127.0.0.1", description="Address the relay listens on.")
    port: int = Field(default=8720, ge=1, le=65535, description="Port the relay listens on.")
    sqs_endpoint_url: str | None = Field(default="http://127.0.0.1:8702", description="SQS endpoint.")
    aws_region: str = Field(default="us-east-1", description="AWS region of the queue.")
    aws_access_key_id: str = Field(default="test", description="SQS access key id.")
    aws_secret_access_key: SecretStr = Field(default=SecretStr("test"), description="SQS secret access key.")
    queue_name: str = Field(default="baml-projection", description="Queue the events are sent to.")


@lru_cache
def get_settings() -> RelaySettings:
    return RelaySettings()


def create_app(settings: RelaySettings | None = None) -> FastAPI:
    app = FastAPI(title="MinIO to SQS notification relay", version="0.1.0")
    chosen = settings or get_settings()
    state: dict[str, Any] = {}

    def queue() -> tuple[Any, str]:
        if "sqs" not in state:
            sqs = aws_client(
                "sqs",
                chosen.sqs_endpoint_url,
                chosen.aws_region,
                chosen.aws_access_key_id,
                chosen.aws_secret_access_key,
            )
            state["sqs"], state["url"] = sqs, sqs.get_queue_url(QueueName=chosen.queue_name)["QueueUrl"]
        return state["sqs"], state["url"]

    @app.get("/healthz")
    def healthz() -> dict[str, str]:
        return {"status": "ok", "service": "minio-relay"}

    @app.post("/events")
    async def events(request: Request) -> dict[str, int]:
        try:
            payload = await request.json()
        except ValueError:
            raise HTTPException(400, "body is not JSON") from None
        records = payload.get("Records") if isinstance(payload, dict) else None
        if not records:  # MinIO's reachability probe and non-S3 payloads carry no records
            return {"sent": 0}
        try:
            sqs, url = queue()
            sqs.send_message(QueueUrl=url, MessageBody=json.dumps({"Records": records}))
        except (BotoCoreError, ClientError) as exc:
            raise HTTPException(503, f"queue unavailable: {type(exc).__name__}") from None
        return {"sent": len(records)}

    return app


def main() -> None:
    import uvicorn

    settings = get_settings()
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="warning")


if __name__ == "__main__":
    main()
