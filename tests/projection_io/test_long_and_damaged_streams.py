"""Streams the way real processes write them: running long past the walk bound, and damaged.

Projection is called as plain activity functions against moto, Lance on moto and Boundary. The
expected states are the upstream reader's rules (formats/reader_rules.py), computed here from
where each record landed, not from what the projector answered.
"""

from __future__ import annotations

from collections import Counter

from streams import Stream, build_stream, upload

from activities.engine_registry import decode_entry
from activities.projection.model import ENGINE_NOT_REGISTERED
from activities.settings import ProjectionSettings
from api.dataplane.lance_store import LEDGER
from formats import object_keys
from formats import reader_rules as rr
from formats.contracts import projection as c


def project(world, keys: list[str]) -> dict[str, c.ExecutionOutcome]:  # type: ignore[no-untyped-def]
    out: dict[str, c.ExecutionOutcome] = {}
    for key in keys:
        for o in world.acts.project_meta_object(c.ProjectMetaInput(key, 1)).outcomes:
            out[o.root_id] = o
    return out


def ledger(world, s: Stream) -> dict[str, tuple[str, str]]:  # type: ignore[no-untyped-def]
    table = world.lance.read(
        world.scope,
        LEDGER,
        columns=["root_id", "status", "index_state", "process_euid"],
        filter=f"process_euid = '{s.euid_hex}' AND generation = 1",
    )
    rows = table.to_pylist()
    return {r["root_id"]: (r["status"], r["index_state"]) for r in rows}


def test_long_stream_past_the_walk_bound_is_complete_through_the_registry(world) -> None:  # type: ignore[no-untyped-def]
    # 40 executions, two meta objects each: 81 meta objects, the walk bound lowered to 10, so
    # every execution after the first few has its EngineStarted far beyond the walk.
    world.acts.settings = ProjectionSettings(max_walk=10)
    s = build_stream(world.scope, [0] * 40)
    assert len(s.meta_keys) == 81
    upload(world.s3, world.bucket, s)
    got = project(world, s.meta_keys)
    assert Counter(o.outcome for o in got.values()) == Counter({c.PROJECTED: 40})
    states = ledger(world, s)
    assert set(states) == {e.execution_id for e in s.executions}
    assert set(states.values()) == {("succeeded", "complete")}
    key = object_keys.engine_registry_key(world.scope, s.euid_hex, 1)
    engine, seq = decode_entry(world.s3.get_object(Bucket=world.bucket, Key=key)["Body"].read())
    assert (engine.engine_id, seq) == (1, 1)
    # Duplicate delivery changes nothing.
    again = project(world, s.meta_keys[-10:])
    assert again == {k: got[k] for k in again} and len(again) == 5
    assert ledger(world, s) == states


def test_engine_not_registered_yet_is_pending_then_projected(world) -> None:  # type: ignore[no-untyped-def]
    world.acts.settings = ProjectionSettings(max_walk=5)
    s = build_stream(world.scope, [0] * 10)
    upload(world.s3, world.bucket, s)
    last = s.meta_keys[-1]
    first = project(world, [last])
    (outcome,) = first.values()
    assert (outcome.outcome, outcome.reason) == (c.PENDING, ENGINE_NOT_REGISTERED)
    project(world, [s.meta_keys[0]])  # meta sequence 1 arrives late: its projection registers the engine
    (again,) = project(world, [last]).values()
    assert again.outcome == c.PROJECTED
    assert ledger(world, s)[again.root_id] == ("succeeded", "complete")


def test_damaged_stream_follows_the_readers_rules(world) -> None:  # type: ignore[no-untyped-def]
    # Executions 0..7 start in cycles 0..7; execution 1 ends two cycles later, so its RootStarted
    # and RootEnded straddle cycle 2's meta-pre object, which is lost (it also held execution 2's
    # RootStarted). Execution 4's admitted batch was lost (flag bit 0). Execution 5's data
    # segment is missing and execution 6's fails its checksum.
    s = build_stream(world.scope, [0, 2, 0, 0, 0, 0, 0, 0], lost_admitted=frozenset({4}))
    by_index = [e.execution_id for e in s.executions]
    lost_meta = s.meta_key(s.where[by_index[2]][0])  # type: ignore[arg-type]
    missing_data = s.data_key(s.where[by_index[5]][2])  # type: ignore[arg-type]
    bad_data = s.data_key(s.where[by_index[6]][2])  # type: ignore[arg-type]
    upload(world.s3, world.bucket, s, skip={lost_meta, missing_data}, corrupted={bad_data})
    gaps = [object_keys.parse_evidence_key(lost_meta).sequence]
    expected = {}
    for e in s.executions:
        started, ended, data = s.where[e.execution_id]
        intact = s.data_key(data) not in (missing_data, bad_data)  # type: ignore[arg-type]
        expected[e.execution_id] = rr.index_state(
            started_seq=None if s.meta_key(started or 1) == lost_meta else started,
            ended_seq=ended,
            root_started_lost=e.root_started_lost,
            gaps=gaps,  # type: ignore[arg-type]
            data_intact=intact,
        )
    assert [expected[i] for i in by_index] == [
        "complete",
        "index_corrupt",  # a gap strictly between RootStarted and RootEnded
        "index_corrupt",  # RootEnded without RootStarted, flag bit 0 clear
        "complete",
        "root_started_lost",
        "index_corrupt",  # missing data segment in range
        "index_corrupt",  # corrupt data segment in range
        "complete",
    ]
    got = project(world, [k for k in s.meta_keys if k != lost_meta])
    assert {r: ledger(world, s)[r][1] for r in got} == expected
    want_outcome = {
        r: c.INDEX_CORRUPT if st == rr.INDEX_CORRUPT else c.PROJECTED for r, st in expected.items()
    }
    assert {r: o.outcome for r, o in got.items()} == want_outcome
    # Partial facts: the corrupt executions with a readable data segment keep their calls.
    calls = world.lance.read(world.scope, "calls_v1", columns=["execution_id"])
    with_calls = set(calls["execution_id"].to_pylist())
    assert {by_index[1], by_index[2], by_index[4]} <= with_calls
    assert by_index[5] not in with_calls and by_index[6] not in with_calls


def test_late_root_ended_wins_over_the_sweep(world) -> None:  # type: ignore[no-untyped-def]
    s = build_stream(world.scope, [0, 1])
    late = s.meta_keys[-1]  # the RootEnded of execution 1
    upload(world.s3, world.bucket, s, skip={late})
    project(world, s.meta_keys[:-1])
    scope = c.ScopeRef(world.scope.tenant_id, world.scope.project_id, world.scope.environment_id)
    swept = world.maintenance.sweep(c.SweepInput(scope, silence_limit_s=0))
    target = s.executions[1].execution_id
    assert {o.root_id: o.outcome for o in swept.outcomes if o.root_id == target} == {target: c.ABANDONED}
    assert ledger(world, s)[target] == ("abandoned", "no_root_ended")
    world.s3.put_object(Bucket=world.bucket, Key=late, Body=s.bodies[late])
    (outcome,) = project(world, [late]).values()
    assert outcome.outcome == c.PROJECTED  # no digest conflict with the sweep's batches
    assert ledger(world, s)[target] == ("succeeded", "complete")
    table = world.client.resident_query(
        f"SELECT status, index_state FROM threads_v1 FINAL WHERE is_root AND execution_id = '{target}'",
        world.scope.environment_id,
        generation=1,
        catalog_version=1,
    )
    assert table.to_pylist() == [{"status": "succeeded", "index_state": "complete"}]


def test_replay_rebuilds_the_engine_registry_before_it_enqueues(world) -> None:  # type: ignore[no-untyped-def]
    # The registry is derived: with it gone (a new bucket for the derived stores, an operator's
    # cleanup), the replay scan registers every engine it reads, and projection needs no walk to it.
    s = build_stream(world.scope, [0] * 6)
    upload(world.s3, world.bucket, s)
    key = object_keys.engine_registry_key(world.scope, s.euid_hex, 1)
    scope = c.ScopeRef(world.scope.tenant_id, world.scope.project_id, world.scope.environment_id)
    page = world.maintenance.replay_scan(c.ReplayScanInput(scope, 1))
    assert set(page.missing_meta_keys) >= set(s.meta_keys[2::2])  # every RootEnded object is due
    engine, seq = decode_entry(world.s3.get_object(Bucket=world.bucket, Key=key)["Body"].read())
    assert (engine.engine_id, seq) == (1, 1)
    # Projected with a walk bound too short to reach meta 1: the rebuilt registry answers.
    world.acts.settings = ProjectionSettings(max_walk=2)
    got = project(world, [s.meta_keys[-1]])
    assert [o.outcome for o in got.values()] == [c.PROJECTED]


def test_a_sweep_tick_reads_only_what_arrived_since_the_last(world) -> None:  # type: ignore[no-untyped-def]
    # Execution 1 never ends, and execution 2's RootEnded (in the last meta object) comes late. The
    # first tick reads the silent stream and closes both; the next lists the stream after its last
    # key and reads nothing, until a meta object arrives.
    s = build_stream(world.scope, [0, None, 0])
    late = s.meta_keys[-1]
    upload(world.s3, world.bucket, s, skip={late})
    project(world, s.meta_keys[:-1])
    scope = c.ScopeRef(world.scope.tenant_id, world.scope.project_id, world.scope.environment_id)
    maintenance = world.maintenance  # one worker's: its memory lasts across ticks
    calls: list[tuple[str, dict[str, object]]] = []

    def seen(params, model, **_):  # type: ignore[no-untyped-def]
        calls.append((model.name, dict(params)))

    world.acts.s3.meta.events.register("before-parameter-build.s3", seen)
    meta_prefix = object_keys.stream_prefix(world.scope, s.euid_hex) + "meta/"

    def meta_listings() -> list[dict[str, object]]:
        return [p for op, p in calls if op == "ListObjectsV2" and p.get("Prefix") == meta_prefix]

    def reads() -> list[object]:
        return [p["Key"] for op, p in calls if op == "GetObject"]

    target = s.executions[1].execution_id
    # Another worker lists the stream while it is not yet silent: it knows it, and has not closed it.
    other = world.maintenance
    assert other.sweep(c.SweepInput(scope, silence_limit_s=10**6)).streams_silent == 0
    calls.clear()
    first = maintenance.sweep(c.SweepInput(scope, silence_limit_s=0))
    open_roots = {s.executions[1].execution_id, s.executions[2].execution_id}
    assert {o.root_id: o.outcome for o in first.outcomes} == dict.fromkeys(open_roots, c.ABANDONED)
    assert reads() and all("StartAfter" not in p for p in meta_listings())

    calls.clear()
    second = maintenance.sweep(c.SweepInput(scope, silence_limit_s=0))
    assert second.outcomes == () and second.streams_silent == first.streams_silent
    assert reads() == []  # not one meta segment read again
    assert [p.get("StartAfter") for p in meta_listings()] == [s.meta_keys[-2]]

    world.s3.put_object(Bucket=world.bucket, Key=late, Body=s.bodies[late])
    calls.clear()
    third = maintenance.sweep(c.SweepInput(scope, silence_limit_s=0))
    assert third.outcomes == ()  # both are in the ledger already
    assert meta_listings()[0].get("StartAfter") == s.meta_keys[-2] and late in reads()
    calls.clear()
    assert maintenance.sweep(c.SweepInput(scope, silence_limit_s=0)).outcomes == ()
    assert reads() == [] and [p.get("StartAfter") for p in meta_listings()] == [late]
    assert ledger(world, s)[target] == ("abandoned", "no_root_ended")

    # The other worker finds the stream silent, and closed by this one's tick: it reads the state,
    # not the stream's segments.
    calls.clear()
    assert other.sweep(c.SweepInput(scope, silence_limit_s=0)).outcomes == ()
    assert reads() == [object_keys.sweep_state_key(world.scope, s.euid_hex)]

    # A worker that starts reads what the last tick kept of the stream in the bucket: one GET of
    # its state and a listing after its last key, not the stream's listing and segments again.
    calls.clear()
    restarted = world.maintenance
    assert restarted.sweep(c.SweepInput(scope, silence_limit_s=0)).outcomes == ()
    assert reads() == [object_keys.sweep_state_key(world.scope, s.euid_hex)]
    assert [p.get("StartAfter") for p in meta_listings()] == [late]
