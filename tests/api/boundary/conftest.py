"""Fixtures live in boundary_fixtures.py so tests can import its helpers by a unique name."""

from boundary_fixtures import metastore, metastore_url, mysql_server, world, world_any  # noqa: F401
