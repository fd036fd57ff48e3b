"""Stop moto from reading every object of a bucket to list the few under a prefix.

moto's ``S3Backend.list_objects`` (``ListObjects`` and ``ListObjectsV2`` both) walks
``bucket.keys.items()``: a copy of the bucket's key dict, then a Python generator that looks each
key's newest version up through three Python calls, for every object in the bucket, before
testing the prefix. The customer's bucket holds everything (evidence objects, value packs and
every Lance dataset's data files and manifests), and Lance lists a dataset's ``_versions/`` at
each commit, about once a second per dataset. So moto's CPU per listing grew with everything the
stack had stored: 2.9 ms for 600 versions in a bucket of 10,600 objects, 40.5 ms in one of
100,600 (``bench/moto_listing.py``), where S3 serves a prefix from its index.

:func:`apply` gives ``list_objects`` the keys under the prefix alone: the names are matched first
(one C-level copy of the key names, then ``str.startswith``), and only the matches are looked up.
moto's own function then does everything else (delimiters, delete markers, order, markers,
truncation) on that subset, so a listing answers the same objects in the same order as before
(tests/stack/test_moto_listing_speedup.py). A listing without a prefix goes to moto's function
as it is. Still linear in the bucket's keys, at a fifth to a seventh of the cost (0.8 and 5.6 ms
in the same two buckets). Only the stack's moto process applies it.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

_applied = False


def prefixed(original: Callable[..., Any]) -> Callable[..., Any]:
    """``original`` (``S3Backend.list_objects``) given only the keys that start with the prefix."""
    from moto.s3.models import FakeTableStorageBucket

    def list_objects(
        self: Any,
        bucket: Any,
        prefix: str | None,
        delimiter: str | None,
        marker: str | None,
        max_keys: int | None,
    ) -> Any:
        if not prefix or isinstance(bucket, FakeTableStorageBucket):
            return original(self, bucket, prefix, delimiter, marker, max_keys)
        store = bucket.keys
        # list() of a dict's keys is one C call under the GIL: a consistent copy, as moto's own
        # dict(self) is, while other requests add and remove keys.
        pairs = [(name, store[name]) for name in list(dict.keys(store)) if name.startswith(prefix)]
        subset = SimpleNamespace(keys=SimpleNamespace(items=lambda: pairs))
        return original(self, subset, prefix, delimiter, marker, max_keys)

    return list_objects


def apply() -> None:
    """Patch moto's S3 backend in this process (idempotent)."""
    global _applied
    if _applied:
        return
    from moto.s3.models import S3Backend

    S3Backend.list_objects = prefixed(S3Backend.list_objects)  # type: ignore[method-assign]
    _applied = True
