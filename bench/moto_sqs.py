"""moto's SQS with a deep queue: as released, and with the stack's patches (moto_sqs_speedup.py).

    .venv/bin/python bench/moto_sqs.py [--depths 2000,8000,16000] [--in-flight-share 0.75]

The projection queue holds every message the bridge has in hand until its workflow ends, so under
a backlog it is thousands deep (14,000 in a 10-minute soak at 100 executions/s). At each depth
(that many messages, the share in flight, as the bridge holds them while workflows run) prints
the time of one send (an S3 notification: moto sends it inside PutObject), one receive and one
get_queue_attributes of two counts (the bridge's status): moto as released, with the stack's
message-state checks, and with its attribute reads too (``ratio``: the last two), in the same run,
and how each grows with the depth.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

OPS = ("send", "receive", "attributes")


def per_op_ms(messages: int, in_flight: int, rounds: int = 5) -> dict[str, float]:
    from moto.sqs.models import Message, sqs_backends

    backend = sqs_backends["123456789012"]["us-east-1"]
    name = f"q{time.time_ns()}"
    queue = backend.create_queue(name)
    # Filled and held in flight directly (moto as released takes minutes to send thousands), as
    # the bridge holds them while their workflows run.
    for i in range(messages):
        message = Message(f"id{i}", f"m{i}")
        message.mark_sent()
        if i < in_flight:
            message.mark_received(600)
        queue._messages.append(message)
    calls = {
        "send": lambda: backend.send_message(name, "x"),
        "receive": lambda: backend.receive_message(name, 10, 0, 600),
        "attributes": lambda: backend.get_queue_attributes(
            name, ["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
        ),
    }
    out = {}
    for op in OPS:
        started = time.perf_counter()
        for _ in range(rounds):
            calls[op]()
        out[op] = (time.perf_counter() - started) / rounds * 1000
    backend.delete_queue(name)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--depths", default="2000,8000,16000")
    ap.add_argument("--in-flight-share", type=float, default=0.75)
    args = ap.parse_args()
    depths = [int(d) for d in args.depths.split(",")]
    from worker.stack import moto_sqs_speedup

    steps = {"released": lambda: None}
    steps["message checks"] = moto_sqs_speedup.apply_message_checks  # the patch of 2026-12-02
    steps["+ attribute reads"] = moto_sqs_speedup.apply_attribute_reads  # the patch of 2026-12-06
    runs: dict[str, dict[int, dict[str, float]]] = {}
    for label, patch in steps.items():  # each step adds its patch to the ones before
        patch()
        runs[label] = {d: per_op_ms(d, int(d * args.in_flight_share)) for d in depths}
    released, before, patched = runs.values()
    print(f"ms per call, {args.in_flight_share:.0%} of the messages in flight")
    print(f"{'messages':>9} {'call':>10} {'released':>10} {'checks':>9} {'+ reads':>9} {'ratio':>7}")
    for d in depths:
        for op in OPS:
            r, b, p = released[d][op], before[d][op], patched[d][op]
            print(f"{d:9d} {op:>10} {r:10.2f} {b:9.2f} {p:9.2f} {b / p:6.1f}x")
    first, last = depths[0], depths[-1]
    print(f"growth from {first} to {last} messages ({last / first:.0f}x the depth):")
    for op in OPS:
        print(
            f"  {op:>10}: released {released[last][op] / released[first][op]:.1f}x,"
            f" message checks {before[last][op] / before[first][op]:.1f}x,"
            f" + attribute reads {patched[last][op] / patched[first][op]:.1f}x"
        )


if __name__ == "__main__":
    main()
