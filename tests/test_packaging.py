"""The console script and the top-level packages exist as DESIGN.md section 2 lays them out."""

import importlib

import pytest


@pytest.mark.parametrize("package", ["formats", "publisher", "api", "activities", "workflows", "worker"])
def test_top_level_package_imports(package: str) -> None:
    assert importlib.import_module(package).__name__ == package
