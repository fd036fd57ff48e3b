"""Contract tests against the production backends of docker-compose (ClickHouse server, MinIO, MySQL),
run with testcontainers wherever a Docker engine answers; skipped with the reason elsewhere."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest

pytestmark = pytest.mark.docker


def _docker_engine_reason() -> str | None:
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        import docker

        docker.from_env(timeout=3).ping()
    except Exception:
        return f"no Docker engine answers at {host}"
    return None


_REASON = _docker_engine_reason()
requires_docker = pytest.mark.skipif(_REASON is not None, reason=_REASON or "")


@pytest.fixture(scope="module")
def clickhouse() -> Iterator[Any]:
    from testcontainers.clickhouse import ClickHouseContainer

    with ClickHouseContainer("clickhouse/clickhouse-server:25.3.6.56") as container:
        yield container


@requires_docker
def test_clickhouse_server_through_clickhouse_connect(clickhouse: Any) -> None:
    import clickhouse_connect

    client = clickhouse_connect.get_client(
        host=clickhouse.get_container_host_ip(),
        port=int(clickhouse.get_exposed_port(8123)),
        username=clickhouse.username,
        password=clickhouse.password,
    )
    client.command(
        "CREATE TABLE t (tenant_id String, v UInt64) ENGINE = ReplacingMergeTree(v) ORDER BY tenant_id"
    )
    client.insert("t", [["a", 1], ["a", 2], ["b", 1]], column_names=["tenant_id", "v"])
    rows = client.query("SELECT tenant_id, v FROM t FINAL ORDER BY tenant_id").result_rows
    assert rows == [("a", 2), ("b", 1)]


@requires_docker
def test_minio_versioned_bucket_and_create_only_put() -> None:
    from botocore.exceptions import ClientError
    from testcontainers.minio import MinioContainer

    from api.dataplane.aws import aws_client

    with MinioContainer("minio/minio:RELEASE.2024-10-13T13-34-11Z") as minio:
        config = minio.get_config()
        s3 = aws_client(
            "s3", f"http://{config['endpoint']}", "us-east-1", config["access_key"], config["secret_key"]
        )
        s3.create_bucket(Bucket="baml-evidence")
        s3.put_bucket_versioning(Bucket="baml-evidence", VersioningConfiguration={"Status": "Enabled"})
        s3.put_object(Bucket="baml-evidence", Key="k.bamlmeta.zst", Body=b"x", IfNoneMatch="*")
        with pytest.raises(ClientError) as refused:
            s3.put_object(Bucket="baml-evidence", Key="k.bamlmeta.zst", Body=b"y", IfNoneMatch="*")
        assert refused.value.response["ResponseMetadata"]["HTTPStatusCode"] == 412


@requires_docker
def test_mysql_metastore_url_through_sqlalchemy() -> None:
    import sqlalchemy
    from testcontainers.mysql import MySqlContainer

    with MySqlContainer("mysql:8.4.3", dialect="pymysql") as mysql:
        engine = sqlalchemy.create_engine(mysql.get_connection_url())
        with engine.connect() as connection:
            assert connection.execute(sqlalchemy.text("SELECT 1")).scalar() == 1
