"""Stop moto's server from listing its own package directory on every request.

``DomainDispatcherApplication.get_backend_for_host`` asks ``host in backends.list_of_moto_modules()``
for each request, and that generator lists moto's package directory and runs ``os.path.isdir``
on each of its ~200 entries, under the dispatcher's lock. Sampled with py-spy under
``bench/projection.py --shape small`` (moto in its own process, about 90 S3 requests a second),
that dispatch was about 18% of moto's CPU (``get_application`` 10%, ``isdir`` 5%, the generator
itself 2.4%), and every S3 and SQS request of the stack waits behind it.

The directory is moto's installed package: it does not change while the process runs, so
:func:`apply` answers from one listing made on first use (the same names, checked against moto's
own function by tests/stack/test_moto_dispatch_speedup.py). Only the stack's moto process applies it.
"""

from __future__ import annotations

import functools

_applied = False


def apply() -> None:
    """Idempotent: the first call patches ``moto.backends.list_of_moto_modules``."""
    global _applied
    if _applied:
        return
    from moto import backends

    listing = backends.list_of_moto_modules
    backends.list_of_moto_modules = functools.cache(lambda: frozenset(listing()))  # type: ignore[assignment]
    _applied = True
