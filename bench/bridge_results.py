"""What the bridge's messages in hand cost while their workflows run: the waits for results and
the visibility extensions (worker/bridge/completions.py, worker/bridge/visibility.py).

    .venv/bin/python bench/bridge_results.py [--held 250,1000] [--window 30]

For each number held and setting, against a Temporal dev server of its own and the stack's moto
(``python -m worker.stack.moto_store``, with the stack's patches to moto's SQS), through the
client the bridge makes for itself (``aws_client``: its timeouts and pool), that many meta
objects' messages are sent; the real bridge receives them, starts their runs (the bridge tests'
stand-in workflow, waiting for ``values_landed``) and holds them. Over ``--window`` seconds it
prints the CPU of the Temporal server, of the bridge's process and of moto, per second; then every
run is signalled and it prints how long until the bridge deleted the last message, and how many
results it found by its visibility query. Three settings, in turn: as before 2026-12-07 (a long
poll per message, and each extended every 20 s for 60 s), the long polls capped at
``result_long_polls``, and the defaults (that, and a started message extended for
``started_visibility_timeout_s``, every third of it); the ratios are the defaults' over the first.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
# The bridge tests' stand-in workflows: the real names and contracts, outcomes chosen by the key.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "bridge"))
# The benches' moto: the stack's (worker/stack/moto_store.py) in a process of its own.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "projection_io"))

from conftest import free_port, start_moto_process
from fake_workflows import FakeProjectMeta
from proc_cpu import process_cpu
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from api.dataplane.aws import aws_client
from formats.contracts import ids
from worker.bridge.messages import replay_body
from worker.settings import SqsBridgeSettings
from worker.sqs_bridge import Bridge, GenerationCache, sqs_call_threads
from worker.stack.launcher import temporal_binary

# The bridge tests' stand-in waits for values_landed when the key says "pending" (here, the environment).
KEY = "evidence/v1/t1/p1/pending/streams/{stream}/meta/{seq:020d}.bamlmeta.zst"


def _server_pid() -> int:
    """The Temporal dev server: this process's child running the temporal binary."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and b"temporal" in cmd:
            return int(pid)
    raise RuntimeError("no Temporal dev server among this process's children")


def _queue(sqs: Any) -> str:
    name = uuid.uuid4().hex[:12]
    dlq = sqs.create_queue(QueueName=f"dlq-{name}")["QueueUrl"]
    arn = sqs.get_queue_attributes(QueueUrl=dlq, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    redrive = json.dumps({"deadLetterTargetArn": arn, "maxReceiveCount": "5"})
    return str(sqs.create_queue(QueueName=f"q-{name}", Attributes={"RedrivePolicy": redrive})["QueueUrl"])


def _counts(sqs: Any, url: str) -> tuple[int, int]:
    a = sqs.get_queue_attributes(
        QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"]
    )["Attributes"]
    return int(a["ApproximateNumberOfMessages"]), int(a["ApproximateNumberOfMessagesNotVisible"])


async def _until(what: str, cond: Any, timeout: float) -> None:
    end = time.monotonic() + timeout
    while not await asyncio.to_thread(cond):
        if time.monotonic() > end:
            raise RuntimeError(f"timed out waiting for {what}")
        await asyncio.sleep(0.5)


async def one(
    env: WorkflowEnvironment, sqs: Any, moto_pid: int, held: int, window: float, long_polls: int, started: int
) -> dict[str, float]:
    url = _queue(sqs)
    stream = uuid.uuid4().hex
    keys = [KEY.format(stream=stream, seq=i) for i in range(1, held + 1)]
    for start in range(0, held, 10):
        entries = [
            {"Id": str(i), "MessageBody": replay_body("b", k)} for i, k in enumerate(keys[start : start + 10])
        ]
        sqs.send_message_batch(QueueUrl=url, Entries=entries)
    tq = f"tq-{uuid.uuid4().hex[:8]}"
    settings = SqsBridgeSettings(
        task_queue=tq, result_long_polls=long_polls, started_visibility_timeout_s=started, max_in_flight=32
    )
    bridge = Bridge(
        settings,
        sqs=sqs,
        client=env.client,
        generations=GenerationCache(lambda _env: 1, 60),
        queue_url=url,
        dlq_url=url,
    )
    stop = asyncio.Event()
    server = _server_pid()
    async with Worker(
        env.client, task_queue=tq, workflows=[FakeProjectMeta], max_concurrent_workflow_tasks=50
    ):
        running = asyncio.create_task(bridge.run(stop))
        await _until("every message in hand", lambda: _counts(sqs, url) == (0, held), 600)
        await asyncio.sleep(10)  # the starts' own work settles
        s0, b0, m0, t0 = process_cpu(server), time.process_time(), process_cpu(moto_pid), time.monotonic()
        await asyncio.sleep(window)
        s1, b1, m1, t1 = process_cpu(server), time.process_time(), process_cpu(moto_pid), time.monotonic()
        sent = time.monotonic()
        for k in keys:
            await env.client.get_workflow_handle(ids.project_meta_id(1, k)).signal("values_landed")
        signalled = time.monotonic() - sent
        await _until("every message deleted", lambda: bridge.tally["delete"] >= held, 600)
        drained = time.monotonic() - sent
        stop.set()
        await asyncio.wait_for(running, 30)
    span = t1 - t0
    return {
        "server": (s1 - s0) / span * 1000,
        "bridge": (b1 - b0) / span * 1000,
        "moto": (m1 - m0) / span * 1000,
        "signalled": signalled,
        "drained": drained,
        "by_query": float(bridge.tally["results_by_query"]),
        "throttled": float(bridge.tally["result_throttled"]),
    }


async def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--held", default="250,1000,2000", help="messages in hand, comma-separated")
    ap.add_argument("--window", type=float, default=30.0, help="seconds over which CPU is measured")
    args = ap.parse_args()
    port = free_port()
    moto = start_moto_process(port)
    try:
        # Today's defaults; before 2026-12-07 a started message was extended as one not yet
        # started still is (``visibility_timeout_s``), and every result was long-polled.
        default = SqsBridgeSettings()
        # The client run_bridge makes: a read timeout above the long poll, a connection per call thread.
        sqs = aws_client(
            "sqs",
            f"http://127.0.0.1:{port}",
            "us-east-1",
            "b",
            "b",
            read_timeout=default.wait_time_s + 10,
            max_pool_connections=sqs_call_threads(default),
        )
        print(
            "held  long polls, extension of a started message   CPU ms/s: server  bridge    moto"
            "   signals -> all deleted  found by query  polls refused"
        )
        for held in [int(h) for h in args.held.split(",")]:
            rows = {}
            for label, polls, started in (
                ("each, 20 s", held + 1, default.visibility_timeout_s),
                (
                    f"{default.result_long_polls}, 20 s",
                    default.result_long_polls,
                    default.visibility_timeout_s,
                ),
                (
                    f"{default.result_long_polls}, 200 s",
                    default.result_long_polls,
                    default.started_visibility_timeout_s,
                ),
            ):
                # A dev server of its own: the runs of the settings before would otherwise stay in
                # its visibility store, and every later query (and the server's CPU) would pay for them.
                env = await WorkflowEnvironment.start_local(dev_server_existing_path=str(temporal_binary()))
                async with env:
                    r = rows[label] = await one(env, sqs, moto.pid, held, args.window, polls, started)
                print(
                    f"{held:5d} {label:>15s}           {r['server']:7.1f} {r['bridge']:7.1f}"
                    f" {r['moto']:7.1f}   {r['drained']:6.1f} s ({r['signalled']:.1f} s signalling)"
                    f"  {r['by_query']:6.0f}  {r['throttled']:6.0f}",
                    flush=True,
                )
            a, b = rows["each, 20 s"], rows[label]
            print(
                f"{held:5d}           ratio default / as before: server {_ratio(b, a, 'server')},"
                f" bridge {_ratio(b, a, 'bridge')}, moto {_ratio(b, a, 'moto')};"
                f" drain {_ratio(b, a, 'drained')}",
                flush=True,
            )
    finally:
        moto.terminate()
        moto.wait()


def _ratio(b: dict[str, float], a: dict[str, float], key: str) -> str:
    return f"{b[key] / a[key]:.2f}" if a[key] else "n/a (no CPU measured: a longer --window)"


if __name__ == "__main__":
    asyncio.run(main())
