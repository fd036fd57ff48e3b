"""The worker's timing lines per meta object read back by the patterns beside their formats
(bench/soak.py reports the activity's phases from them)."""

from __future__ import annotations

from activities.projection_activities import LANCE_LINE, PHASE_LINES, PROJECTED_LINE, READ_LINE


def test_each_timing_line_reads_back_as_its_phases() -> None:
    lines = [READ_LINE % (2, 0.25), PROJECTED_LINE % (2, 0.5, 1.25, 2.0), LANCE_LINE % (0.75, 0.125)]
    found = []
    for line in lines:
        logged = "2026-12-06 INFO baml_studio.projection " + line
        found.append([m.groups() for p in PHASE_LINES if (m := p.search(logged))])
    assert found == [
        [("read", "0.250")],
        [("values+assemble", "0.500", "boundary", "1.250")],
        [("datasets", "0.750", "ledger", "0.125")],
    ]
