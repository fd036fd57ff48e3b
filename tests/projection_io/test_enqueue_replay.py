"""``enqueue_replay`` against the real SQS API (moto server over HTTP): an entry a batch reports in
``Failed`` is resent, counted only once SQS reports it ``Successful``, and reaches the queue once.

SQS answers a batch per entry and may fail some entries of it (throttling, an internal error);
that partial answer is hard to provoke from moto, so :class:`FailingEntries` wraps the real boto3
client: it withholds the chosen entries from the real call and reports them ``Failed``, as SQS
does. Everything else goes to the real queue.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError

from activities.maintenance_activities import _SEND_ATTEMPTS, ERR_ENQUEUE_FAILED, MaintenanceActivities
from activities.projection_activities import ProjectionActivities
from formats import object_keys
from formats.contracts import projection as c
from worker.bridge.messages import parse_message


class FailingEntries:
    """The real SQS client, except that ``send_message_batch`` fails the entries whose key
    ``fail(key, call)`` names (``call`` counts that key's sends from 1): they are not sent."""

    def __init__(self, real: Any, fail: Any) -> None:
        self._real = real
        self._fail = fail
        self.sends: Counter[str] = Counter()  # key -> entries sent for it, failed ones included
        self.calls = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def send_message_batch(self, *, QueueUrl: str, Entries: list[dict[str, Any]]) -> dict[str, Any]:
        self.calls += 1
        keep, failed = [], []
        for entry in Entries:
            key = parse_message(entry["MessageBody"]).events[0].key
            self.sends[key] += 1
            if self._fail(key, self.sends[key]):
                failed.append({"Id": entry["Id"], "SenderFault": False, "Code": "InternalError"})
            else:
                keep.append(entry)
        resp = dict(self._real.send_message_batch(QueueUrl=QueueUrl, Entries=keep)) if keep else {}
        resp["Failed"] = [*resp.get("Failed", []), *failed]
        resp.setdefault("Successful", [])
        return resp


@pytest.fixture
def queue(world: Any) -> Iterator[tuple[Any, str]]:
    sqs = world.moto.client("sqs")
    url = sqs.create_queue(QueueName=f"replay-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    yield sqs, url
    sqs.delete_queue(QueueUrl=url)


def maintenance(world: Any, sqs: Any, url: str) -> tuple[MaintenanceActivities, ProjectionActivities]:
    acts = ProjectionActivities(
        s3=world.s3,
        bucket=world.bucket,
        lance=world.lance,
        sink=world.acts.sink,
        settings=world.acts.settings,
        tenant_id=world.scope.tenant_id,
        sqs=sqs,
        queue_url=url,
    )
    return MaintenanceActivities(acts), acts


def keys_of(world: Any, n: int) -> tuple[str, ...]:
    euid = uuid.uuid4().hex
    return tuple(object_keys.meta_segment_key(world.scope, euid, seq) for seq in range(1, n + 1))


def delivered(sqs: Any, url: str) -> Counter[str]:
    """Every key the queue holds, with how many messages name it (drains the queue)."""
    got: Counter[str] = Counter()
    while True:
        resp = sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=0)
        messages = resp.get("Messages", [])
        if not messages:
            return got
        for m in messages:
            for event in parse_message(m["Body"]).events:
                got[event.key] += 1
            sqs.delete_message(QueueUrl=url, ReceiptHandle=m["ReceiptHandle"])


def test_failed_batch_entries_are_resent_and_counted_once_delivered(world: Any, queue: Any) -> None:
    sqs, url = queue
    keys = keys_of(world, 23)  # three batches: 10, 10, 3
    flaky = {keys[3], keys[12], keys[22]}  # one in each batch fails its first send
    double = FailingEntries(sqs, lambda key, call: key in flaky and call == 1)
    m, acts = maintenance(world, double, url)
    try:
        result = m.enqueue_replay(c.EnqueueInput(keys))
    finally:
        acts.close()
    assert result.sent == len(keys)
    assert {k for k, n in double.sends.items() if n == 2} == flaky  # resent once each, nothing else
    assert delivered(sqs, url) == Counter(dict.fromkeys(keys, 1))


def test_entries_that_keep_failing_raise_a_retryable_error_naming_count_and_code(
    world: Any, queue: Any
) -> None:
    sqs, url = queue
    keys = keys_of(world, 12)
    stuck = {keys[1], keys[11]}
    double = FailingEntries(sqs, lambda key, call: key in stuck)
    m, acts = maintenance(world, double, url)
    try:
        with pytest.raises(ApplicationError) as info:
            m.enqueue_replay(c.EnqueueInput(keys))
    finally:
        acts.close()
    err = info.value
    assert err.type == ERR_ENQUEUE_FAILED and not err.non_retryable
    assert "2 of 12" in str(err) and "InternalError" in str(err)
    assert err.details[0] == 2 and err.details[1] == ["InternalError"] and set(err.details[2]) == stuck
    assert "Records" not in str(err) and "eventSource" not in str(err)  # never a message body
    assert all(double.sends[k] == _SEND_ATTEMPTS for k in stuck)  # bounded: resent, then given up
    # The others reached the queue once each; the stuck ones never did.
    assert delivered(sqs, url) == Counter({k: 1 for k in keys if k not in stuck})
