"""Child processes for the profile store tests (run as ``python profile_store_procs.py ROLE ...``).

Roles:
  hold ROOT EUID                      open the stream, print "ready", wait for stdin to close
  crash ROOT EUID                     open the stream and SIGKILL itself between temp write and rename
  profiler ROOT EUID SECONDS OUT      write meta/data/CAS files in a loop; results as JSON to OUT
  publisher ROOT DONE_FLAG OUT        ship in a loop until DONE_FLAG exists, then one final pass
"""

from __future__ import annotations

import json
import os
import random
import signal
import sys
import time
import traceback
from pathlib import Path

from formats.cas import decode_cas_file, encode_cas_object
from formats.integrity import append_trailer, verify_trailer
from formats.profile_store import DiskBudget, Plane, ProfileStore

BUDGET = DiskBudget(max_project_bytes=1 << 40, minimum_free_bytes=0)


def hold(root: str, euid: str) -> None:
    with ProfileStore(root, budget=BUDGET).open_stream(euid):
        print("ready", flush=True)
        sys.stdin.read()


def crash(root: str, euid: str) -> None:
    def die(_tmp: Path) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    writer = ProfileStore(root, budget=BUDGET).open_stream(euid, before_rename=die)
    writer.write_meta(1, append_trailer(b"meta-1" * 100))


def profiler(root: str, euid: str, seconds: str, out: str) -> None:
    result: dict[str, object] = {"meta": [], "data": [], "cids": [], "error": None}
    rng = random.Random(7)
    pool = [encode_cas_object(1, f"value-{i}".encode() * rng.randint(1, 300)) for i in range(40)]
    try:
        with ProfileStore(root, budget=BUDGET).open_stream(euid) as writer:
            deadline = time.monotonic() + float(seconds)
            seq = 0
            while time.monotonic() < deadline:
                seq += 1
                writer.write_data(seq, append_trailer(rng.randbytes(rng.randint(200, 4000))))
                result["data"].append(seq)  # type: ignore[attr-defined]
                if seq % 2 == 0:
                    meta = len(result["meta"]) + 1  # type: ignore[arg-type]
                    writer.write_meta(meta, append_trailer(rng.randbytes(rng.randint(100, 600))))
                    result["meta"].append(meta)  # type: ignore[attr-defined]
                value = rng.choice(pool) if rng.random() < 0.8 else encode_cas_object(1, rng.randbytes(500))
                path = writer.put_cas(value)
                result["cids"].append(path.name.split(".")[0])  # type: ignore[attr-defined]
    except BaseException:
        result["error"] = traceback.format_exc()
    Path(out).write_text(json.dumps(result))


def _ship_once(store: ProfileStore, shipped: dict[str, list], errors: list[str]) -> None:
    for euid in store.list_streams():
        cursor = store.read_cursor(euid)
        new_cursor = {}
        for plane, done in ((Plane.DATA, cursor.data), (Plane.META, cursor.meta)):
            high = store.committed_high_water(euid, plane)
            last = done
            for seq in store.list_committed(euid, plane, after=done):
                if seq > high:
                    break
                if seq != last + 1:
                    errors.append(f"gap in {plane.value}: {last} then {seq}")
                    break
                path = store.segment_path(euid, plane, seq)
                try:
                    verify_trailer(path.read_bytes(), file=str(path))
                except Exception as exc:
                    errors.append(f"listed file failed: {exc}")
                    break
                shipped[plane.value].append(seq)
                last = seq
            new_cursor[plane] = last
        store.write_cursor(euid, meta=new_cursor[Plane.META], data=new_cursor[Plane.DATA])
        store.release_segments(euid, Plane.DATA, new_cursor[Plane.DATA])
        store.release_segments(euid, Plane.META, new_cursor[Plane.META])
    for cas in store.pending_cas():
        try:
            decode_cas_file(str(cas.path))
        except Exception as exc:
            errors.append(f"pending CAS failed: {exc}")
            continue
        store.mark_shipped(cas.path)
        shipped["cids"].append(cas.digest)
    store.expire_shipped_values(time.time(), 0.2)


def publisher(root: str, done_flag: str, out: str) -> None:
    shipped: dict[str, list] = {"meta": [], "data": [], "cids": []}
    errors: list[str] = []
    passes = 0
    try:
        store = ProfileStore(root, budget=BUDGET)
        with store.acquire_publisher_lock():
            while not Path(done_flag).exists():
                _ship_once(store, shipped, errors)
                passes += 1
                time.sleep(0.01)
            _ship_once(store, shipped, errors)
    except BaseException:
        errors.append(traceback.format_exc())
    Path(out).write_text(json.dumps({"shipped": shipped, "errors": errors, "passes": passes}))


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    {"hold": hold, "crash": crash, "profiler": profiler, "publisher": publisher}[role](*args)
