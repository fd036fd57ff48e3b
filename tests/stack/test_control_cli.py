"""``baml-studio tenants`` and ``tokens`` against the running stack's Boundary control API."""

from __future__ import annotations

import json

import pytest
from stack_fixtures import cli

from worker.stack.state import StackState

pytestmark = pytest.mark.stack


def _json(*args: str) -> dict[str, object]:
    result = cli(*args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)  # type: ignore[no-any-return]


def test_create_tenant_then_list_it(running_stack: StackState) -> None:
    run = ("--run-dir", running_stack.run_dir)
    created = _json("tenants", "create", "acme", *run)
    assert created["name"] == "acme"
    listed = _json("tenants", "list", *run)
    assert created["tenant_id"] in [t["tenant_id"] for t in listed["items"]]  # type: ignore[union-attr, index]
    table = cli("tenants", "list", *run)
    assert "acme" in table.stdout and "dev-tenant" in table.stdout


def test_issue_list_rotate_revoke_a_publisher_token(running_stack: StackState) -> None:
    run = ("--run-dir", running_stack.run_dir)
    issued = _json("tokens", "issue", "--kind", "publisher", "--name", "checkout", *run)
    # Without an explicit scope the stack's development environment is used.
    assert issued["environment_id"] == running_stack.environment_id
    assert issued["permissions"] == ["publish"]
    assert str(issued["secret"]).startswith("bst_pub_")
    listed = _json("tokens", "list", "--environment-id", str(running_stack.environment_id), *run)
    assert issued["token_id"] in [t["token_id"] for t in listed["items"]]  # type: ignore[union-attr, index]

    rotation = _json("tokens", "rotate", str(issued["token_id"]), *run)
    replacement = rotation["replacement"]
    assert replacement["rotated_from"] == issued["token_id"]  # type: ignore[index]
    assert replacement["secret"] != issued["secret"]  # type: ignore[index]

    revoked = _json("tokens", "revoke", str(replacement["token_id"]), *run)  # type: ignore[index]
    assert revoked["revoked_at"] is not None


def test_issued_user_token_is_shown_in_a_table_with_its_secret_once(running_stack: StackState) -> None:
    result = cli("tokens", "issue", "--kind", "user", "--name", "analyst", "--run-dir", running_stack.run_dir)
    assert result.returncode == 0, result.stderr
    assert "secret (shown once): bst_usr_" in result.stdout
    listing = cli("tokens", "list", "--run-dir", running_stack.run_dir)
    assert "analyst" in listing.stdout and "bst_usr_" in listing.stdout  # the display prefix only
    assert result.stdout.split("secret (shown once): ")[1].strip() not in listing.stdout


def test_explicit_url_and_token_reach_the_control_api_without_a_stack_file(
    running_stack: StackState, tmp_path: object
) -> None:
    result = cli(
        "tenants",
        "list",
        "--json",
        "--run-dir",
        str(tmp_path),
        env={
            "BAML_STUDIO_CLI_BOUNDARY_URL": running_stack.boundary_control_url,
            "BAML_STUDIO_CLI_TOKEN": str(running_stack.operator_token),
        },
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["items"]


def test_errors_say_what_to_do(running_stack: StackState, tmp_path: object) -> None:
    no_stack = cli("tenants", "list", "--run-dir", str(tmp_path))
    assert no_stack.returncode == 2  # a configuration error, before any request
    assert "no running stack found" in no_stack.stderr and "--boundary-url" in no_stack.stderr

    bad_token = cli("tenants", "list", "--run-dir", running_stack.run_dir, "--token", "nonsense")
    assert bad_token.returncode == 1 and "HTTP 401" in bad_token.stderr and "--token" in bad_token.stderr

    bad_name = cli("tenants", "create", "not a name!", "--run-dir", running_stack.run_dir)
    assert bad_name.returncode == 1 and "HTTP 422" in bad_name.stderr

    unknown = cli("tokens", "revoke", "tok_unknown", "--run-dir", running_stack.run_dir)
    assert unknown.returncode == 1 and "HTTP 404" in unknown.stderr

    bad_kind = cli("tokens", "issue", "--kind", "admin", "--name", "x", "--run-dir", running_stack.run_dir)
    assert bad_kind.returncode == 1 and "--kind must be" in bad_kind.stderr

    unreachable = cli("tenants", "list", "--boundary-url", "http://127.0.0.1:1", "--token", "x")
    assert unreachable.returncode == 1 and "cannot reach" in unreachable.stderr
