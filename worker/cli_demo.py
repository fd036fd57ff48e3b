"""``baml-studio demo``: the system's main job on the embedded stack, end to end (the README's first command).

1. find the running embedded stack in the run directory, or start one (``stack up --detach``);
2. write evidence with the synthetic profiler into a fresh profile directory;
3. ship it with the publisher through the gateway (the stack's publisher token);
4. wait, with a progress bar, until the SQS bridge and the Temporal worker have projected every
   finished execution (public facts in Boundary's ClickHouse, private values in Lance);
5. run one public and one private query through the coordinator and print the results.

The stack keeps running afterwards so the Temporal UI and the CLI can be explored;
``baml-studio stack down`` stops it.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from formats import query_output as qo
from formats.synth import SynthConfig, synthesize
from publisher import Publisher
from worker.cli_query import print_result
from worker.stack.state import StackState, load_stack_state, resolve_run_dir

console = Console()
NS_PER_S = 1_000_000_000


class DemoError(Exception):
    """A step failed; the message says which and what to do next."""


def ensure_stack(run_dir: Path) -> StackState:
    state = load_stack_state(run_dir)
    if state is not None and state.status == "healthy" and state.launcher_alive():
        console.print(f"using the running stack in {run_dir}")
        return state
    console.print(f"starting the embedded stack in {run_dir} (about 10 s)...")
    cmd = [sys.executable, "-m", "worker.cli", "stack", "up", "--detach", "--run-dir", str(run_dir)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    state = load_stack_state(run_dir)
    if done.returncode != 0 or state is None or state.status != "healthy":
        raise DemoError(
            f"the stack did not come up: {done.stderr.strip()[-800:] or done.stdout.strip()[-800:]}\n"
            f"logs are in {run_dir}; see `baml-studio stack status --run-dir {run_dir}`"
        )
    return state


def write_evidence(run_dir: Path, executions: int) -> tuple[Path, list[str], dict[str, Any]]:
    """Synthesize a corpus; returns its root, its stream euids and one invoice call to look up."""
    now = time.time_ns()
    root = run_dir / "demo" / f"profiles-{now // NS_PER_S}" / ".baml" / "profiles-v1"
    seed = random.SystemRandom().randrange(1, 2**31)
    # A clock origin of "a minute ago" keeps the corpus inside the queries' recent window and gives
    # every run its own stream ids (bulk euids derive from the seed and the clock origin).
    config = SynthConfig(seed=seed, processes=2, executions=executions, zero_unix_ns=now - 60 * NS_PER_S)
    truth = synthesize(root, config)
    finished = [e for e in truth.executions if e.status != "abandoned"]
    sample: dict[str, Any] = {}
    for execution in finished:
        for span in execution.spans:
            for value in span.values:
                body = value.json
                if isinstance(body, dict) and isinstance(body.get("invoice"), dict):
                    sample = {"function": span.function, "invoice": body["invoice"].get("id")}
                    break
            if sample:
                break
        if sample:
            break
    console.print(
        f"synthetic profiler wrote {len(truth.executions)} executions, {truth.calls} calls, "
        f"{truth.spans} spans in {len(truth.streams)} streams to {root}"
    )
    return root, sorted(truth.streams), {"finished": len(finished), **sample}


def ship(state: StackState, root: Path) -> None:
    if not state.publisher_token:
        raise DemoError("the stack state has no publisher token; restart it with `baml-studio stack up`")
    started = time.monotonic()
    with Publisher(gateway_url=state.gateway_url, token=state.publisher_token, profile_dir=root) as pub:
        pub.start()
        if not pub.flush_and_join(120):
            raise DemoError(f"the publisher did not finish shipping within 120 s: {pub.stats()}")
    console.print(
        f"publisher shipped everything to s3://{state.bucket} in {time.monotonic() - started:.1f} s"
    )


def run_query(state: StackState, sql: str) -> qo.QueryResult:
    if not state.user_token:
        raise DemoError("the stack state has no user token; restart it with `baml-studio stack up`")
    headers = {"Authorization": f"Bearer {state.user_token}"}
    with (
        httpx.Client(base_url=state.coordinator_url, headers=headers, timeout=120) as client,
        client.stream("POST", "/v1/query", json={"sql": sql}) as resp,
    ):
        if resp.status_code != 200:
            resp.read()
            raise DemoError(f"query failed with HTTP {resp.status_code}: {resp.text[:500]}")
        return qo.read_query_stream(resp.iter_lines())


def _streams_predicate(streams: list[str]) -> str:
    return "(" + " OR ".join(f"execution_id LIKE '{euid}%'" for euid in streams) + ")"


def wait_for_projection(state: StackState, streams: list[str], expected: int, timeout_s: float) -> None:
    sql = f"SELECT count() AS n FROM threads_v1 WHERE is_root AND {_streams_predicate(streams)}"
    deadline = time.monotonic() + timeout_s
    with Progress(
        TextColumn("projecting"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} executions"),
        TimeElapsedColumn(),
        console=console,
    ) as progress:
        task = progress.add_task("projection", total=expected)
        while True:
            result = run_query(state, sql)
            seen = int(result.rows[0]["n"]) if result.rows else 0
            progress.update(task, completed=seen)
            if seen >= expected:
                return
            if time.monotonic() > deadline:
                raise DemoError(
                    f"only {seen} of {expected} executions were projected within {timeout_s:.0f} s; "
                    "see `baml-studio status` and the worker and bridge logs in the run directory"
                )
            time.sleep(1.0)


def demo(
    run_dir: Annotated[Path | None, typer.Option("--run-dir", help="Stack run directory.")] = None,
    executions: Annotated[int, typer.Option(help="Executions the synthetic profiler writes.")] = 200,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for projection.")] = 180.0,
) -> None:
    """Start the embedded stack, write evidence, ship it, project it and query it."""
    directory = resolve_run_dir(run_dir)
    try:
        state = ensure_stack(directory)
        root, streams, sample = write_evidence(directory, executions)
        ship(state, root)
        wait_for_projection(state, streams, sample["finished"], timeout)
        scope = _streams_predicate(streams)
        console.rule("calls per function (public facts, answered by Boundary's ClickHouse)")
        public = run_query(
            state,
            "SELECT function_name, count() AS calls, round(quantile(0.95)(duration_ns) / 1e6, 1) AS p95_ms "
            f"FROM calls_v1 WHERE {scope} GROUP BY function_name ORDER BY calls DESC",
        )
        print_result(public.rows, public.outcome)
        if sample.get("invoice"):
            console.rule("one invoice by a private field (values read from Lance in your bucket)")
            private = run_query(
                state,
                "SELECT execution_id, function_name, args['invoice']['id'] AS invoice, "
                "args['invoice']['customer']['tier'] AS tier, duration_ns FROM calls_v1 "
                f"WHERE function_name = '{sample['function']}' AND {scope} "
                f"AND args['invoice']['id'] = '{sample['invoice']}'",
            )
            print_result(private.rows, private.outcome)
    except DemoError as exc:
        console.print(f"[red]demo failed:[/red] {exc}")
        raise typer.Exit(1) from None
    console.rule()
    console.print(f"Temporal UI (projection workflows): {state.temporal_ui_url}")
    console.print(f"coordinator: {state.coordinator_url}   gateway: {state.gateway_url}")
    console.print('more: baml-studio query "SELECT ..."   baml-studio status   baml-studio stack down')


def register(app: typer.Typer) -> None:
    app.command("demo")(demo)
