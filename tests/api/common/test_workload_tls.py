"""The one client TLS definition: how a process finds its deployment's certificate in a TLS dir."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.common.workload_identity import ensure_dev_pki, issue_client_cert
from api.dataplane.workload_tls import ClientTls, discover


def test_in_dir_names_the_files_the_dev_pki_writes(tmp_path: Path) -> None:
    pki = ensure_dev_pki(tmp_path, "dep-a", "cell-1")
    assert ClientTls.in_dir(tmp_path, "dep-a") == ClientTls.of(pki)
    assert all(p.exists() for p in (pki.ca_cert, pki.client_cert, pki.client_key))


def test_the_single_certificate_names_deployment_and_cell(tmp_path: Path) -> None:
    pki = ensure_dev_pki(tmp_path, "dep-a", "cell-1")
    # Boundary's own readiness certificate sits beside it and is never a deployment's identity.
    issue_client_cert(tmp_path, "boundary-self-check", "cell-1")
    found = discover(tmp_path, deployment_id=None, cell=None, remedy="set X")
    assert (found.tls, found.deployment_id, found.cell) == (ClientTls.of(pki), "dep-a", "cell-1")
    assert discover(tmp_path, deployment_id=None, cell="cell-9", remedy="set X").cell == "cell-9"


def test_two_certificates_need_the_deployment_named(tmp_path: Path) -> None:
    ensure_dev_pki(tmp_path, "dep-a", "cell-1")
    issue_client_cert(tmp_path, "dep-b", "cell-2")
    with pytest.raises(RuntimeError, match=r"no single client certificate in .*: set THE_VARIABLE"):
        discover(tmp_path, deployment_id=None, cell=None, remedy="set THE_VARIABLE")
    found = discover(tmp_path, deployment_id="dep-b", cell=None, remedy="set X")
    assert (found.deployment_id, found.cell) == ("dep-b", "cell-2")
    assert found.tls == ClientTls.in_dir(tmp_path, "dep-b")


def test_a_named_deployment_without_its_certificate_is_refused(tmp_path: Path) -> None:
    ensure_dev_pki(tmp_path, "dep-a", "cell-1")
    with pytest.raises(RuntimeError, match="no single client certificate"):
        discover(tmp_path, deployment_id="dep-z", cell=None, remedy="set X")
