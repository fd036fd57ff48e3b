"""moto's SQS with a deep queue: as released, and with the stack's patches (moto_sqs_speedup.py).

    .venv/bin/python bench/moto_sqs.py [--messages 2000] [--in-flight 1500]

The projection queue holds every message the bridge has in hand until its workflow ends, so under
a backlog it is thousands deep. Prints the time of one send + receive + get_queue_attributes at
that depth, both ways in the same run, and the ratio.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def one_round_ms(messages: int, in_flight: int, rounds: int = 20) -> float:
    from moto.sqs.models import sqs_backends

    backend = sqs_backends["123456789012"]["us-east-1"]
    name = f"q{time.time_ns()}"
    backend.create_queue(name)
    for i in range(messages):
        backend.send_message(name, f"m{i}")
    held = 0
    while held < in_flight:  # held in flight, as the bridge holds messages while workflows run
        held += len(backend.receive_message(name, 10, 0, 600))
    started = time.perf_counter()
    for _ in range(rounds):
        backend.send_message(name, "x")
        backend.receive_message(name, 10, 0, 600)
        backend.get_queue_attributes(name, ["ApproximateNumberOfMessages"])
    return (time.perf_counter() - started) / rounds * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--in-flight", type=int, default=1500)
    args = ap.parse_args()
    released = one_round_ms(args.messages, args.in_flight)
    from worker.stack import moto_sqs_speedup

    moto_sqs_speedup.apply()
    patched = one_round_ms(args.messages, args.in_flight)
    print(f"send + receive + get_queue_attributes, {args.messages} messages ({args.in_flight} in flight):")
    print(f"  moto as released       {released:8.1f} ms")
    print(f"  with moto_sqs_speedup  {patched:8.1f} ms   (ratio {released / patched:.0f}x)")


if __name__ == "__main__":
    main()
