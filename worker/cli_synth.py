"""``baml-studio synth OUT``: write a synthetic profile directory (bulk or live) and its ground truth."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from formats.synth import LiveSynth, SynthConfig, SynthConfigError, synthesize
from formats.synth.config import DAMAGE_MODES


def synth_command(
    out: Annotated[Path, typer.Argument(help="Profile directory to write (created if missing).")],
    seed: Annotated[int, typer.Option(help="Seed: the same seed and options give the same bytes.")] = 1,
    executions: Annotated[int, typer.Option(help="Executions in total (bulk mode).")] = 1000,
    processes: Annotated[int, typer.Option(help="Streams (one per simulated process).")] = 1,
    engines: Annotated[int, typer.Option(help="Engines per process.")] = 1,
    rate: Annotated[float, typer.Option(help="Executions started per second, per process.")] = 50.0,
    unfinished: Annotated[int, typer.Option(help="Executions per stream left without RootEnded.")] = 0,
    p_failed: Annotated[float, typer.Option(help="Fraction of failed executions.")] = 0.05,
    p_large: Annotated[float, typer.Option(help="Fraction of values over 32 KiB.")] = 0.002,
    p_too_large: Annotated[
        float, typer.Option(help="Fraction of values over the single-value limit.")
    ] = 0.0005,
    truth: Annotated[
        Path | None, typer.Option(help="Ground truth JSON lines (default OUT/../truth.jsonl).")
    ] = None,
    live: Annotated[
        bool, typer.Option(help="Write in real time until --duration elapses or Ctrl-C.")
    ] = False,
    duration: Annotated[float, typer.Option(help="Live mode: seconds to run.")] = 10.0,
    builds: Annotated[
        int, typer.Option(help="Distinct builds: process p runs build p % builds (1: one program id).")
    ] = 1,
    long: Annotated[
        int,
        typer.Option(
            help="Long mode: one process, two engines (the second starts half-way), at least this "
            "many meta objects (0: off; replaces --processes, --engines, --rate, --executions)."
        ),
    ] = 0,
    damage: Annotated[
        list[str] | None,
        typer.Option(
            help=f"Damage mode for process 0's stream (bulk only; repeatable): {', '.join(DAMAGE_MODES)}."
        ),
    ] = None,
) -> None:
    """Write real-format profiler streams with a seeded synthetic workload."""
    console = Console(stderr=True)
    try:
        options: dict[str, object] = {
            "seed": seed,
            "unfinished_per_process": unfinished,
            "p_failed": p_failed,
            "p_large_value": p_large,
            "p_too_large_value": p_too_large,
            "builds": builds,
            "damage": tuple(damage or ()),
        }
        if long:
            config = SynthConfig.long_run(long, **options)
        else:
            config = SynthConfig(
                executions=executions,
                processes=processes,
                engines_per_process=engines,
                rate_per_second=rate,
                **options,  # type: ignore[arg-type]
            )
        if live and config.damage:
            raise SynthConfigError("--damage runs in bulk mode only (without --live)")
    except SynthConfigError as exc:
        console.print(f"[red]bad option:[/red] {exc}")
        raise typer.Exit(2) from None
    truth_path = truth or out.parent / "truth.jsonl"
    started = time.perf_counter()
    if live:
        synth = LiveSynth(out, config, truth_path=truth_path).start()
        with contextlib.suppress(KeyboardInterrupt):
            time.sleep(duration)
        result = synth.stop()
    else:
        result = synthesize(out, config, truth_path=truth_path)
    elapsed = max(time.perf_counter() - started, 1e-9)
    console.print(
        f"wrote {len(result.executions)} executions, {result.calls} calls, {result.spans} spans in "
        f"{len(result.streams)} streams: {result.data_segments} data + {result.meta_segments} meta segments, "
        f"{result.cas_objects} CAS objects, {elapsed:.2f} s ({result.calls / elapsed:,.0f} calls/s)"
    )
    for done in result.damage:
        console.print(
            f"damage {done['mode']}: "
            + ", ".join(f"{k}={v}" for k, v in done.items() if k not in ("mode", "roots"))
        )
    console.print(f"profile directory: {out}\nground truth: {truth_path}")


def register(app: typer.Typer) -> None:
    app.command("synth")(synth_command)
