"""The synthetic BAML project: its source files, where each function sits in them, its program id.

The real profiler's program id is a content hash of the files handed to the compiler
(:func:`formats.ids.content_program_id`), so two processes running byte-identical builds share
a program id, and so the same context keys and function table. The synthetic project is a
small set of ``baml_src/*.baml`` texts; build ``b > 0`` starts every file with a one-line
comment naming the build, which (like any byte change upstream) gives a new program id and
shifts every function's source span.
"""

from __future__ import annotations

from dataclasses import dataclass

from formats.ids import program_content_hash
from formats.synth.plan import FUNCTIONS, FunctionDef, Kind

# file_id -> file name; the table's ``source_file`` is the name, its file list the path.
SOURCE_FILE = {0: "invoices.baml", 1: "support.baml", 2: "billing.baml", 3: "utils.baml"}
_FILE_OF_TOP = {"invoices": 0, "support": 1, "billing": 2, "utils": 3}


def file_id_of(fqn: str) -> int:
    return _FILE_OF_TOP[fqn.split(".", 1)[0]]


def source_path(file_id: int) -> str:
    return f"baml_src/{SOURCE_FILE[file_id]}"


def _definition(f: FunctionDef) -> str:
    if f.kind is Kind.LLM:
        return (
            f"function {f.display_name}(text: string) -> string {{\n"
            f'  client "openai/gpt-4o-mini"\n'
            f'  prompt #"{{{{ text }}}}"#\n'
            f"}}\n"
        )
    return f"function {f.display_name}(input: map<string, string>) -> string {{\n  input\n}}\n"


@dataclass(frozen=True)
class Project:
    """One build of the synthetic project."""

    build: int
    files: dict[str, bytes]  # path -> bytes, as the compiler sees them
    spans: dict[int, tuple[int, int, int]]  # function_id -> (file_id, start, end): bytes [start, end)

    def program_hash(self, baml_version: str) -> bytes:
        return program_content_hash(baml_version, self.files.items())


def project(build: int) -> Project:
    """The files of build ``build`` and each function's byte span in them (pure)."""
    texts: dict[int, str] = {fid: (f"// build {build}\n" if build else "") for fid in SOURCE_FILE}
    spans: dict[int, tuple[int, int, int]] = {}
    for f in FUNCTIONS:
        fid = file_id_of(f.fqn)
        start = len(texts[fid].encode())
        texts[fid] += _definition(f)
        # Half-open byte range over the definition, up to and including its closing brace.
        spans[f.function_id] = (fid, start, len(texts[fid].encode()) - 1)
        texts[fid] += "\n"
    files = {source_path(fid): text.encode() for fid, text in texts.items()}
    return Project(build, files, spans)
