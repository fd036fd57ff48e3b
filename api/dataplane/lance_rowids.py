"""How a Lance fragment stores its stable row ids, read from the manifest alone (no data read).

Why it matters: Lance answers a zone-map (and BTREE) range filter with physical row addresses and,
on a dataset with stable row ids, turns each selected address into a row id. For a fragment whose
row-id sequence is a ``range_with_bitmap`` segment, Lance 14 does that with a linear walk of the
bitmap per row, so the filter costs rows selected x segment size: 3.3 s where a scan of the same
column took 0.04 s (docs/query.md, "A zone map slower than a scan"). Lance writes that form when
a fragment's ids have more than about 3% gaps: rows deleted or updated before a compaction, or a
compaction that merges fragments whose id ranges are out of order.

The sequence is Lance's protobuf ``lance.table.RowIdSequence`` (``protos/rowids.proto``): repeated
``U64Segment segments = 1``, each segment one of ``range = 1``, ``range_with_holes = 2``,
``range_with_bitmap = 3``, ``sorted_array = 4``, ``array = 5``. Only which member is set matters
here, so each member is declared as bytes (an embedded message has the same wire form).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any

import lance
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

SEGMENT_KINDS = ("range", "range_with_holes", "range_with_bitmap", "sorted_array", "array")
EXTERNAL = "external"  # the sequence is stored in a file of its own: its segments are not read here


@cache
def _sequence_class() -> Any:
    f = descriptor_pb2.FileDescriptorProto(
        name="baml_studio_lance_rowids.proto", package="baml_studio_lance_rowids", syntax="proto3"
    )
    segment = f.message_type.add(name="U64Segment")
    segment.oneof_decl.add(name="kind")
    for number, name in enumerate(SEGMENT_KINDS, start=1):
        segment.field.add(
            name=name,
            number=number,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
            oneof_index=0,
        )
    sequence = f.message_type.add(name="RowIdSequence")
    sequence.field.add(
        name="segments",
        number=1,
        type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
        label=descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED,
        type_name=".baml_studio_lance_rowids.U64Segment",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(f)
    return message_factory.GetMessageClass(
        pool.FindMessageTypeByName("baml_studio_lance_rowids.RowIdSequence")
    )


def segment_kinds(fragment: lance.LanceFragment) -> tuple[str, ...] | None:
    """The kinds of the fragment's row-id segments, in order; None without stable row ids,
    ``(EXTERNAL,)`` when the sequence lives in a file of its own."""
    meta = fragment.metadata.row_id_meta
    if meta is None:
        return None
    stored = json.loads(meta.json())
    if "Inline" not in stored:
        return (EXTERNAL,)
    sequence = _sequence_class().FromString(bytes(stored["Inline"]))
    return tuple(str(s.WhichOneof("kind")) for s in sequence.segments)


def slow_zone_map(fragment: lance.LanceFragment) -> bool:
    """Whether a range filter answered by a scalar index is slow on this fragment: its row ids are
    a bitmap segment, or stored where this module does not look (assumed the worst)."""
    kinds = segment_kinds(fragment) or ()
    return "range_with_bitmap" in kinds or EXTERNAL in kinds
