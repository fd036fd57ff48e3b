"""Create the evidence bucket and the projection queues in the stack's object store (moto).

Idempotent: running it against an already set-up endpoint changes nothing. The S3 notification
configuration makes S3 enqueue one ``s3:TestEvent`` message; it is drained here so the queue
only ever holds real object-created events.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # boto3-stubs is a dev dependency
    from mypy_boto3_s3 import S3Client
    from mypy_boto3_s3.type_defs import QueueConfigurationTypeDef
    from mypy_boto3_sqs import SQSClient
    from mypy_boto3_sqs.literals import QueueAttributeNameType

NOTIFIED_SUFFIXES = (".bamlmeta.zst", ".bamlpack.zst")


@dataclass(frozen=True)
class ObjectStoreLayout:
    bucket: str
    queue_name: str
    dead_letter_queue_name: str
    visibility_timeout_s: int
    max_receive_count: int


@dataclass(frozen=True)
class ObjectStoreResources:
    bucket: str
    queue_url: str
    queue_arn: str
    dead_letter_queue_url: str
    dead_letter_queue_arn: str


def _queue(sqs: SQSClient, name: str, attributes: dict[QueueAttributeNameType, str]) -> tuple[str, str]:
    url: str = sqs.create_queue(QueueName=name)["QueueUrl"]
    if attributes:
        sqs.set_queue_attributes(QueueUrl=url, Attributes=attributes)
    arn: str = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    return url, arn


def _drain_test_events(sqs: SQSClient, queue_url: str) -> int:
    drained = 0
    while True:
        messages = sqs.receive_message(QueueUrl=queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
            "Messages", []
        )
        test_events = [m for m in messages if json.loads(m["Body"]).get("Event") == "s3:TestEvent"]
        for message in messages:
            if message in test_events:
                sqs.delete_message(QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"])
                drained += 1
            else:  # a real event: hand it back untouched
                sqs.change_message_visibility(
                    QueueUrl=queue_url, ReceiptHandle=message["ReceiptHandle"], VisibilityTimeout=0
                )
        if not test_events:
            return drained


def set_up_object_store(s3: S3Client, sqs: SQSClient, layout: ObjectStoreLayout) -> ObjectStoreResources:
    """Bucket with versioning, projection queue + DLQ with a redrive policy, notifications, no TestEvent."""
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if layout.bucket not in existing:
        s3.create_bucket(Bucket=layout.bucket)
    s3.put_bucket_versioning(Bucket=layout.bucket, VersioningConfiguration={"Status": "Enabled"})

    dlq_url, dlq_arn = _queue(sqs, layout.dead_letter_queue_name, {"MessageRetentionPeriod": "1209600"})
    redrive = {"deadLetterTargetArn": dlq_arn, "maxReceiveCount": str(layout.max_receive_count)}
    queue_url, queue_arn = _queue(
        sqs,
        layout.queue_name,
        {
            "VisibilityTimeout": str(layout.visibility_timeout_s),
            "MessageRetentionPeriod": "1209600",
            "RedrivePolicy": json.dumps(redrive),
        },
    )

    wanted: list[QueueConfigurationTypeDef] = [
        {
            "Id": f"projection{suffix.replace('.', '-')}",
            "QueueArn": queue_arn,
            "Events": ["s3:ObjectCreated:*"],
            "Filter": {"Key": {"FilterRules": [{"Name": "suffix", "Value": suffix}]}},
        }
        for suffix in NOTIFIED_SUFFIXES
    ]
    current = s3.get_bucket_notification_configuration(Bucket=layout.bucket).get("QueueConfigurations", [])
    if sorted(c.get("Id", "") for c in current) != sorted(w["Id"] for w in wanted):
        s3.put_bucket_notification_configuration(
            Bucket=layout.bucket, NotificationConfiguration={"QueueConfigurations": wanted}
        )
        _drain_test_events(sqs, queue_url)
    return ObjectStoreResources(layout.bucket, queue_url, queue_arn, dlq_url, dlq_arn)
