"""The committed protobuf module is exactly what protoc makes from the committed .proto."""

from __future__ import annotations

from pathlib import Path

from formats.proto import baml_outbound_pb2 as pb
from formats.proto.generate import PROTO_DIR, generate


def test_regenerating_from_the_proto_gives_the_committed_files(tmp_path: Path) -> None:
    for fresh in generate(tmp_path):
        committed = PROTO_DIR / fresh.name
        assert committed.read_bytes() == fresh.read_bytes(), (
            f"{fresh.name} drifted: run python -m formats.proto.generate"
        )


# Wire facts from the real schema (bridge_ctypes .../baml_outbound.proto) and trace encoder.
REAL_VALUE_FIELDS = {
    "null_value": 2,
    "string_value": 3,
    "int_value": 4,
    "float_value": 5,
    "bool_value": 6,
    "class_value": 7,
    "enum_value": 8,
    "list_value": 11,
    "map_value": 12,
    "media_value": 17,
    "uint8array_value": 19,
    "bigint_value": 20,
}


def test_field_numbers_match_the_real_message() -> None:
    fields = {f.name: f.number for f in pb.BamlOutboundValue.DESCRIPTOR.fields}
    assert fields == REAL_VALUE_FIELDS
    assert {f.name: f.number for f in pb.BamlValueClass.DESCRIPTOR.fields} == {
        "name": 1,
        "fields": 2,
        "type_args": 3,
    }
    assert {f.name: f.number for f in pb.BamlOutboundMapEntry.DESCRIPTOR.fields} == {"key": 1, "value": 2}
    assert {f.name: f.number for f in pb.BamlValueList.DESCRIPTOR.fields} == {"items": 2}
    assert {f.name: f.number for f in pb.BamlValueMap.DESCRIPTOR.fields} == {"entries": 3}
    assert {f.name: f.number for f in pb.BamlValueEnum.DESCRIPTOR.fields} == {
        "name": 1,
        "value": 2,
        "is_dynamic": 3,
    }
    media = {f.name: f.number for f in pb.BamlValueMedia.DESCRIPTOR.fields}
    assert media == {"media": 1, "mime_type": 2, "url": 3, "base64": 4, "file": 5}
    assert {v.name: v.number for v in pb.MediaTypeEnum.DESCRIPTOR.values} == {
        "MEDIA_TYPE_UNSPECIFIED": 0,
        "IMAGE": 1,
        "AUDIO": 2,
        "PDF": 3,
        "VIDEO": 4,
        "OTHER": 5,
    }


def test_generated_code_runs_on_the_installed_runtime() -> None:
    message = pb.BamlOutboundValue(int_value=7)
    assert pb.BamlOutboundValue.FromString(message.SerializeToString()).int_value == 7
