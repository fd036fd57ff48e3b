"""``baml-studio publish`` against the real gateway app and moto."""

from __future__ import annotations

import json

import typer
from publisher_harness import EUID, TOKEN, write_stream
from typer.testing import CliRunner

from formats.profile_store import ProfileStore
from worker import cli_publish


def test_publish_once_prints_stats(env) -> None:  # type: ignore[no-untyped-def]
    write_stream(env.root, EUID, data=2, meta=1)
    app = typer.Typer()
    cli_publish.register(app)
    app.command("noop")(lambda: None)  # keep "publish" a subcommand
    result = CliRunner().invoke(
        app, ["publish", str(env.root), "--gateway-url", env.gw_proxy.url, "--token", TOKEN, "--stats"]
    )
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout[result.stdout.index("{") :])
    assert stats["objects_shipped"] == {"data_segment": 2, "meta_segment": 1}
    assert TOKEN not in result.output
    assert ProfileStore(env.root).read_cursor(EUID).data == 2
