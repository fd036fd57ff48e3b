"""``python -m worker.sqs_bridge``: the SQS bridge process.

Today it watches the projection queue and its dead-letter queue and logs their message counts;
it does not receive messages. A receive would count toward the redrive limit and move untouched
events to the dead-letter queue, so the bridge only starts receiving once it can start the
projection workflows (a later issue). Each look at the queues rewrites the heartbeat file (if
configured) with the counts, which ``baml-studio stack status`` reads.
"""

from __future__ import annotations

import logging
import signal
import threading
from typing import Any

from worker.settings import SqsBridgeSettings, get_bridge_settings
from worker.stack.object_store_setup import aws_client
from worker.temporal_worker import write_heartbeat

log = logging.getLogger("baml_studio.sqs_bridge")

_COUNTS = ("ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible")


def queue_counts(sqs: Any, queue_url: str) -> dict[str, int]:
    attributes = sqs.get_queue_attributes(QueueUrl=queue_url, AttributeNames=list(_COUNTS))["Attributes"]
    return {"visible": int(attributes[_COUNTS[0]]), "in_flight": int(attributes[_COUNTS[1]])}


def run_bridge(settings: SqsBridgeSettings, stop: threading.Event) -> None:
    sqs = aws_client(
        "sqs",
        settings.sqs_endpoint_url,
        settings.aws_region,
        settings.aws_access_key_id,
        settings.aws_secret_access_key,
    )
    queue_url = sqs.get_queue_url(QueueName=settings.queue_name)["QueueUrl"]
    dlq_url = sqs.get_queue_url(QueueName=settings.dead_letter_queue_name)["QueueUrl"]
    log.info("watching queue %s", settings.queue_name)
    last: dict[str, object] | None = None
    while not stop.is_set():
        counts: dict[str, object] = {"queue": queue_counts(sqs, queue_url), "dlq": queue_counts(sqs, dlq_url)}
        if counts != last:
            log.info("queue counts %s", counts)
            last = counts
        if settings.heartbeat_file:
            write_heartbeat(settings.heartbeat_file, counts)
        stop.wait(settings.poll_interval_s)
    log.info("stopped")


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_bridge(get_bridge_settings(), stop)


if __name__ == "__main__":
    main()
