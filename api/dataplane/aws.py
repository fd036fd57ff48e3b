"""boto3 clients of the object store and the queues, built one way for every process."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

import boto3
from botocore.config import Config
from pydantic import SecretStr

from formats.deployment_settings import reveal

if TYPE_CHECKING:  # boto3-stubs is a dev dependency: the types exist for mypy only
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_sqs import SQSClient

Service = Literal["s3", "sqs"]


@overload
def aws_client(
    service: Literal["s3"],
    endpoint_url: str | None,
    region: str,
    key_id: str,
    secret: str | SecretStr,
    *,
    read_timeout: float = ...,
    connect_timeout: float = ...,
    max_attempts: int = ...,
    max_pool_connections: int = ...,
) -> S3Client: ...
@overload
def aws_client(
    service: Literal["sqs"],
    endpoint_url: str | None,
    region: str,
    key_id: str,
    secret: str | SecretStr,
    *,
    read_timeout: float = ...,
    connect_timeout: float = ...,
    max_attempts: int = ...,
    max_pool_connections: int = ...,
) -> SQSClient: ...
@overload
def aws_client(
    service: Service,
    endpoint_url: str | None,
    region: str,
    key_id: str,
    secret: str | SecretStr,
    *,
    read_timeout: float = ...,
    connect_timeout: float = ...,
    max_attempts: int = ...,
    max_pool_connections: int = ...,
) -> S3Client | SQSClient: ...
def aws_client(
    service: Service,
    endpoint_url: str | None,
    region: str,
    key_id: str,
    secret: str | SecretStr,
    *,
    read_timeout: float = 10,
    connect_timeout: float = 2,
    max_attempts: int = 2,
    max_pool_connections: int = 10,
) -> S3Client | SQSClient:
    """A boto3 client (an empty ``endpoint_url`` means AWS's default endpoint), typed by its service.

    A long-polling SQS consumer must pass a ``read_timeout`` above its wait time; a client shared by
    worker threads needs ``max_pool_connections`` at least its thread count (else urllib3 discards
    and reopens connections).
    """
    config = Config(
        signature_version="s3v4" if service == "s3" else None,
        retries={"max_attempts": max_attempts, "mode": "standard"},
        connect_timeout=connect_timeout,
        read_timeout=read_timeout,
        max_pool_connections=max_pool_connections,
    )
    options: dict[str, Any] = {
        "endpoint_url": endpoint_url or None,
        "region_name": region,
        "aws_access_key_id": key_id,
        "aws_secret_access_key": reveal(secret),
        "config": config,
    }
    # One call per service: the stubs type boto3.client by its literal service name.
    if service == "s3":
        return boto3.client("s3", **options)
    return boto3.client("sqs", **options)


class ObjectStoreAccess(Protocol):
    """Settings (or a stack deployment) that name an object store and its credentials (read-only)."""

    @property
    def s3_endpoint_url(self) -> str | None: ...
    @property
    def aws_region(self) -> str: ...
    @property
    def aws_access_key_id(self) -> str: ...
    @property
    def aws_secret_access_key(self) -> str | SecretStr: ...


@overload
def object_store_client(access: ObjectStoreAccess, service: Literal["s3"] = ...) -> S3Client: ...
@overload
def object_store_client(access: ObjectStoreAccess, service: Literal["sqs"]) -> SQSClient: ...
@overload
def object_store_client(access: ObjectStoreAccess, service: Service) -> S3Client | SQSClient: ...
def object_store_client(access: ObjectStoreAccess, service: Service = "s3") -> S3Client | SQSClient:
    """The client of a worker-side process: shared by its threads, reading values up to 16 MiB."""
    return aws_client(
        service,
        access.s3_endpoint_url,
        access.aws_region,
        access.aws_access_key_id,
        access.aws_secret_access_key,
        read_timeout=60,
        max_attempts=5,
        max_pool_connections=32,
    )
