"""The embeddable publisher: ships the profiler's closed files to the customer's bucket.

Public API: :class:`Publisher` (``start``, ``flush``, ``flush_and_join``, ``stats``, context manager),
:class:`PublisherSettings`, :class:`LambdaExtension`. See docs/publisher.md.
"""

from publisher.flush import FlushHooks, FlushReport
from publisher.publisher import Publisher
from publisher.settings import PublisherSettings

__all__ = ["FlushHooks", "FlushReport", "Publisher", "PublisherSettings"]
