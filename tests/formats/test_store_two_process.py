"""A profiler process and a publisher process share one profile root concurrently.

The profiler writes meta/data segments and CAS values (many reused) in a loop;
the publisher lists committed sequences, verifies, advances the cursor, releases
segments, marks values shipped and expires them with a short window, all at once.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from formats.integrity import has_valid_trailer
from formats.profile_store import DiskBudget, Plane, ProfileStore, scan_physical_usage
from formats.profile_store.ledger import decode_usage_state

PROCS = Path(__file__).with_name("profile_store_procs.py")
EUID_HEX = "0190a1b2c3d47e5f8a9b0c1d2e3f4a5b"
PROFILER_SECONDS = 4.0


def test_profiler_and_publisher_processes_share_the_store_safely(tmp_path: Path) -> None:
    root = tmp_path / ".baml" / "profiles-v1"
    done_flag = tmp_path / "profiler.done"
    prof_out, pub_out = tmp_path / "profiler.json", tmp_path / "publisher.json"

    profiler = subprocess.Popen(
        [sys.executable, str(PROCS), "profiler", str(root), EUID_HEX, str(PROFILER_SECONDS), str(prof_out)]
    )
    publisher = subprocess.Popen(
        [sys.executable, str(PROCS), "publisher", str(root), str(done_flag), str(pub_out)]
    )
    try:
        assert profiler.wait(timeout=60) == 0
        done_flag.touch()
        assert publisher.wait(timeout=60) == 0
    finally:
        for proc in (profiler, publisher):
            if proc.poll() is None:
                proc.kill()
                proc.wait()

    wrote = json.loads(prof_out.read_text())
    shipped = json.loads(pub_out.read_text())
    assert wrote["error"] is None, wrote["error"]
    assert shipped["errors"] == [], shipped["errors"]
    # Overlap, not speed: a loaded CI machine gives fewer passes, but more than one means they interleaved.
    assert len(wrote["data"]) > 10 and shipped["passes"] > 1, "the two processes did not overlap"

    # Every committed segment was shipped exactly once, in order, and then released.
    assert shipped["shipped"]["data"] == wrote["data"]
    assert shipped["shipped"]["meta"] == wrote["meta"]
    store = ProfileStore(root, budget=DiskBudget(1 << 40, 0))
    assert store.list_committed(EUID_HEX, Plane.DATA) == []
    assert store.read_cursor(EUID_HEX).data == wrote["data"][-1]

    # Every value the profiler stored is either still on disk or was shipped.
    shipped_cids = set(shipped["shipped"]["cids"])
    for digest in set(wrote["cids"]):
        on_disk = (root / "cas" / "sha256" / digest[:2] / f"{digest}.bamlvalue").exists()
        assert on_disk or digest in shipped_cids, f"value {digest} lost before shipping"
    # Nothing left is partial: every remaining file verifies.
    for path in (root / "cas" / "sha256").rglob("*.bamlvalue"):
        assert has_valid_trailer(path.read_bytes()), path
    assert not store.stream_is_live(EUID_HEX)

    # The ledger equals the bytes on disk, and no temp file was left behind.
    assert decode_usage_state((root / "usage.state").read_bytes()) == scan_physical_usage(root)
    assert [p.name for p in (root / "tmp").iterdir()] == []
