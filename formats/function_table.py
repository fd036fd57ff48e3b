"""Function tables: the body of a codec-2 CAS object (real source ``function_table.rs``).

Layout::

    u16 body_version = 1
    u32 function_count
    function_count × ( u32 function_id ‖ string fqn ‖ string display_name ‖ opt string definition_key
                       ‖ u8 kind ‖ opt string kind_detail ‖ u8 origin ‖ opt string source_file
                       ‖ opt (u32 file_id, u32 start, u32 end) ‖ opt string package_name
                       ‖ u16 namespace_count ‖ namespace_count × string )
    u32 file_count
    file_count × ( u32 file_id ‖ string path )

Functions are strictly ascending by ``function_id`` and files by ``file_id``.
``kind`` and ``origin`` are codes; 255 means unknown, and the real decoder maps
every unlisted code to "unknown". We keep the raw code so a table re-encodes
byte for byte. Source paths and spans are private data.
"""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass

from formats.errors import MalformedError, UnsupportedVersionError
from formats.wire import Reader, Writer

BODY_VERSION = 1
SUPPORTED_BODY_VERSIONS: tuple[int, ...] = (BODY_VERSION,)
CODE_UNKNOWN = 255
_SPAN = struct.Struct(">III")


class FunctionKind(enum.IntEnum):
    BYTECODE = 0
    SYS_OP = 1
    NATIVE = 2
    NATIVE_UNRESOLVED = 3


class FunctionOrigin(enum.IntEnum):
    USER_DEFINED = 0
    COMPANION = 1
    INTERNAL = 2
    BUILTIN = 3
    AUTO_DERIVE = 4


@dataclass(frozen=True, slots=True)
class FunctionSpan:
    file_id: int
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class FunctionEntry:
    function_id: int
    fqn: str
    display_name: str
    definition_key: str | None = None
    kind_code: int = CODE_UNKNOWN
    kind_detail: str | None = None
    origin_code: int = CODE_UNKNOWN
    source_file: str | None = None
    source_span: FunctionSpan | None = None
    package_name: str | None = None
    namespace: tuple[str, ...] = ()

    @property
    def kind(self) -> FunctionKind | None:
        return FunctionKind(self.kind_code) if self.kind_code < len(FunctionKind) else None

    @property
    def origin(self) -> FunctionOrigin | None:
        return FunctionOrigin(self.origin_code) if self.origin_code < len(FunctionOrigin) else None


@dataclass(frozen=True, slots=True)
class FunctionFile:
    file_id: int
    path: str


@dataclass(frozen=True, slots=True)
class FunctionTable:
    functions: tuple[FunctionEntry, ...] = ()
    files: tuple[FunctionFile, ...] = ()

    def function(self, function_id: int) -> FunctionEntry | None:
        for entry in self.functions:
            if entry.function_id == function_id:
                return entry
        return None

    def file_path(self, file_id: int) -> str | None:
        for f in self.files:
            if f.file_id == file_id:
                return f.path
        return None


def encode_function_table(table: FunctionTable) -> bytes:
    """The codec-2 body (wrap it with :func:`formats.cas.encode_cas_object`); deterministic."""
    w = Writer()
    w.u16(BODY_VERSION)
    w.u32(len(table.functions), "function_count")
    for f in table.functions:
        w.u32(f.function_id, "function_id")
        w.string(f.fqn, "fqn")
        w.string(f.display_name, "display_name")
        w.optional_string(f.definition_key, "definition_key")
        w.u8(f.kind_code, "kind")
        w.optional_string(f.kind_detail, "kind_detail")
        w.u8(f.origin_code, "origin")
        w.optional_string(f.source_file, "source_file")
        w.flag(f.source_span is not None)
        if f.source_span is not None:
            s = f.source_span
            w.u32(s.file_id, "span file_id")
            w.u32(s.start, "span start")
            w.u32(s.end, "span end")
        w.optional_string(f.package_name, "package_name")
        w.u16(len(f.namespace), "namespace_count")
        for part in f.namespace:
            w.string(part, "namespace")
    w.u32(len(table.files), "file_count")
    for file in table.files:
        w.u32(file.file_id, "file_id")
        w.string(file.path, "path")
    return w.getvalue()


def decode_function_table(
    data: bytes, *, file: str | None = None, base: int = 0, start: int = 0, end: int | None = None
) -> FunctionTable:
    """Decode a codec-2 body (``data[start:end]``, at absolute offset ``base + start``)."""
    r = Reader(data, file=file, start=start, end=end, base=base)
    version = r.u16("body_version")
    if version not in SUPPORTED_BODY_VERSIONS:
        r.fail(UnsupportedVersionError, f"function table body version {version}", at=start)
    count = r.u32("function_count")
    r.check_count(count, 4 + 4 + 4 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 2, "function_count")
    functions: list[FunctionEntry] = []
    for _ in range(count):
        at = r.pos
        function_id = r.u32("function_id")
        if functions and functions[-1].function_id >= function_id:
            r.fail(MalformedError, "functions are not ascending by function_id", reason="unordered", at=at)
        fqn = r.string("fqn")
        display_name = r.string("display_name")
        definition_key = r.optional_string("definition_key")
        kind_code = r.u8("kind")
        kind_detail = r.optional_string("kind_detail")
        origin_code = r.u8("origin")
        source_file = r.optional_string("source_file")
        span = FunctionSpan(*r.unpack(_SPAN, "source_span")) if r.flag("source_span") else None
        package_name = r.optional_string("package_name")
        namespace_count = r.u16("namespace_count")
        r.check_count(namespace_count, 4, "namespace_count")
        namespace = tuple(r.string("namespace") for _ in range(namespace_count))
        functions.append(
            FunctionEntry(
                function_id,
                fqn,
                display_name,
                definition_key,
                kind_code,
                kind_detail,
                origin_code,
                source_file,
                span,
                package_name,
                namespace,
            )
        )
    file_count = r.u32("file_count")
    r.check_count(file_count, 8, "file_count")
    files: list[FunctionFile] = []
    for _ in range(file_count):
        at = r.pos
        file_id = r.u32("file_id")
        if files and files[-1].file_id >= file_id:
            r.fail(MalformedError, "files are not ascending by file_id", reason="unordered", at=at)
        files.append(FunctionFile(file_id, r.string("path")))
    r.finish("function table")
    return FunctionTable(tuple(functions), tuple(files))
