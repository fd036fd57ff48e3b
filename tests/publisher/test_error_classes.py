"""What a failed gateway call is counted as: no token is the gateway's 401 ("unauthorized"), a gateway
that cannot be reached is a network error, and a request httpx refuses to send is neither."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from publisher_harness import EUID, TOKEN, free_port, write_stream

from publisher import Publisher, PublisherSettings
from publisher.transport import GatewayClient, GatewayRequestInvalid


def _publisher(url: str, token: str, root: Path) -> Publisher:
    return Publisher(
        PublisherSettings(gateway_url=url, token=token, profile_dir=root, backoff_base_seconds=0.01)
    )


def test_an_unreachable_gateway_is_a_network_error_not_unauthorized(tmp_path: Path) -> None:
    root = tmp_path / "profiles-v1"
    write_stream(root, EUID, data=1, meta=1)
    pub = _publisher(f"http://127.0.0.1:{free_port()}", TOKEN, root)  # nothing listens there
    report = pub.run_once(10)
    pub.close()
    assert report is not None and not report.ok and report.failed  # kept for the next flush
    errors = pub.stats()["errors"]
    assert {"config_network", "authorize_network"} <= set(errors), errors
    assert not [k for k in errors if k.endswith(("_401", "_403", "_local"))], errors
    assert pub.stopped_reason is None  # a network error never stops shipping as "unauthorized"


def test_a_request_httpx_refuses_is_not_counted_as_the_network() -> None:
    listener = socket.create_server(("127.0.0.1", 0))  # connects succeed; nothing is ever answered
    url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    client = GatewayClient(url, "bst_pub_with\nnewline", read_timeout=2)  # an unsendable header
    try:
        with pytest.raises(GatewayRequestInvalid) as refused:
            client.get_config()
        assert refused.value.label == "local"
    finally:
        client.close()
        listener.close()


def test_no_token_still_reaches_the_gateway(env) -> None:  # type: ignore[no-untyped-def]
    # The proxy forwards to the real gateway app; what it received is what left the publisher.
    write_stream(env.root, EUID, data=1, meta=1)
    pub = _publisher(env.gw_proxy.url, "", env.root)
    pub.run_once(10)
    pub.close()
    assert env.gw_proxy.seen, "the request reached the gateway (not refused locally by httpx)"
    assert "config_network" not in pub.stats()["errors"]
