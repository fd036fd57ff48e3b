"""WorkGate: the executions a worker holds at once stay under its capacity, small objects pass
together, an object bigger than the gate still runs (alone), and a waiter keeps beating."""

from __future__ import annotations

import threading
import time

from activities.work_gate import WorkGate


def _hold_all(gate: WorkGate, weights: list[int], seconds: float = 0.05) -> int:
    """Every weight held once for ``seconds`` from its own thread; the most slots ever held."""
    most = 0
    lock = threading.Lock()

    def one(w: int) -> None:
        nonlocal most
        with gate.hold(w):
            with lock:
                most = max(most, gate.held)
            time.sleep(seconds)

    threads = [threading.Thread(target=one, args=(w,)) for w in weights]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert gate.held == 0
    return most


def test_small_objects_hold_the_gate_together() -> None:
    gate = WorkGate(100)
    together = threading.Barrier(60, timeout=10)  # broken unless all 60 hold their slot at once
    failed: list[BaseException] = []

    def one() -> None:
        with gate.hold(1):
            try:
                together.wait()
            except threading.BrokenBarrierError as exc:
                failed.append(exc)

    threads = [threading.Thread(target=one) for _ in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not failed and gate.held == 0


def test_big_objects_never_hold_more_than_the_capacity() -> None:
    assert _hold_all(WorkGate(100), [40] * 6) <= 100  # two at a time


def test_an_object_bigger_than_the_gate_takes_all_of_it_and_runs() -> None:
    gate = WorkGate(10)
    assert _hold_all(gate, [500, 3, 3]) <= 10


def test_a_waiter_beats_while_it_waits() -> None:
    gate = WorkGate(1)
    beats: list[float] = []
    release = threading.Event()

    def holder() -> None:
        with gate.hold(1):
            release.wait(5)

    t = threading.Thread(target=holder)
    t.start()
    while gate.held == 0:
        time.sleep(0.01)
    threading.Timer(0.35, release.set).start()
    with gate.hold(1, waiting=lambda: beats.append(time.monotonic()), every_s=0.1):
        pass
    t.join(5)
    assert len(beats) >= 2
