"""The project's one JSON rendering of codec-1 values (docs/values-json.md).

Natural mode (the default, used by inspect output and query results) reads like the
value: a class or map is an object, so ``args['invoice']['id']`` addresses a field;
an enum is its variant name; a list is an array; scalars are JSON scalars. Values
JSON cannot carry exactly become one-key tagged objects whose key starts with ``$``:
``$int`` (beyond +/-(2**53 - 1)), ``$bigint``, ``$float`` (NaN/Infinity), ``$bytes``,
``$media``, ``$omitted``, ``$unknown``. Object keys that start with ``$`` are written
with one more ``$`` (``$x`` -> ``$$x``), so a tag never collides with a key.

Lossless mode adds what natural mode drops (class names, enum type names, generic
arguments, duplicate keys) and :func:`from_json_obj` reads it back to the same value.

:func:`leaves` flattens a value into typed leaves with paths, the rows of the
private projection (``role, path, string, number, bool``); :func:`path_text` is the
canonical text of a path: ``invoice.id``, ``items[0].sku``, ``["odd key"][2]``.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

from formats import value_codec as vc

JSON: TypeAlias = Any  # None | bool | int | float | str | list[JSON] | dict[str, JSON]
PathElement: TypeAlias = str | int
LeafKind = Literal["null", "string", "number", "bool", "bytes", "media", "omitted", "array", "object"]

MAX_SAFE_INT = 2**53 - 1
CANONICAL_NAN_BITS = 0x7FF8000000000000
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MEDIA_KINDS = {name: number for number, name in vc.MEDIA_KIND_NAMES.items()}


def escape_key(key: str) -> str:
    """The object key a class field or map key is rendered under (``$``-prefixed keys get one more ``$``)."""
    return "$" + key if key.startswith("$") else key


def unescape_key(key: str) -> str:
    return key[1:] if key.startswith("$$") else key


# --- rendering ------------------------------------------------------------------------------------------


def to_json_obj(value: vc.Value, *, lossless: bool = False) -> JSON:
    """Render ``value`` as plain Python JSON data (dict/list/str/int/float/bool/None)."""
    if isinstance(value, vc.Null):
        return None
    if isinstance(value, vc.String):
        return value.value
    if isinstance(value, vc.Bool):
        return value.value
    if isinstance(value, vc.Int):
        return value.value if -MAX_SAFE_INT <= value.value <= MAX_SAFE_INT else {"$int": str(value.value)}
    if isinstance(value, vc.Float):
        return _float(value)
    if isinstance(value, vc.BigInt):
        number = value.as_int()
        if number is not None and vc.BigInt.from_int(number).text == value.text:
            return {"$bigint": str(number)}
        return {"$bigint_hex": value.text}  # text the engine passed through unparsed, kept verbatim
    if isinstance(value, vc.Bytes):
        return {"$bytes": base64.b64encode(value.value).decode("ascii")}
    if isinstance(value, vc.Enum):
        if not lossless:
            return value.value
        out: dict[str, JSON] = {"$enum": value.name, "value": value.value}
        if value.is_dynamic:
            out["dynamic"] = True
        return out
    if isinstance(value, vc.List):
        return [to_json_obj(item, lossless=lossless) for item in value.items]
    if isinstance(value, vc.Map):
        return _object(value.entries, lossless, None, ())
    if isinstance(value, vc.Class):
        return _object(value.fields, lossless, value.name, value.type_args)
    if isinstance(value, vc.Media):
        media: dict[str, JSON] = {"kind": value.kind_name}
        if value.mime_type is not None:
            media["mime_type"] = value.mime_type
        if value.source is not None:
            media[value.source] = value.content
        return {"$media": media}
    if isinstance(value, vc.Omitted):
        return {"$omitted": value.reason, "message": value.message}
    if isinstance(value, vc.Unknown):
        return {"$unknown": True}
    raise TypeError(f"not a codec-1 value: {type(value).__name__}")


def _float(value: vc.Float) -> JSON:
    number = value.value
    if math.isfinite(number):
        return number
    if math.isnan(number):
        tagged: dict[str, JSON] = {"$float": "NaN"}
        if value.bits != CANONICAL_NAN_BITS:
            tagged["bits"] = f"{value.bits:016x}"
        return tagged
    return {"$float": "Infinity" if number > 0 else "-Infinity"}


def _object(
    entries: tuple[tuple[str, vc.Value], ...],
    lossless: bool,
    class_name: str | None,
    type_args: tuple[bytes, ...],
) -> JSON:
    out: dict[str, JSON] = {}
    if lossless and class_name is not None:
        out["$class"] = class_name
        if type_args:
            out["$type_args"] = [base64.b64encode(t).decode("ascii") for t in type_args]
    keys = [k for k, _ in entries]
    if lossless and len(set(keys)) != len(keys):
        # Protobuf allows repeated keys; keep every entry, in order.
        pairs = [[k, to_json_obj(v, lossless=True)] for k, v in entries]
        if class_name is None:
            return {"$map": pairs}
        out["$fields"] = pairs
        return out
    for key, item in entries:
        out[escape_key(key)] = to_json_obj(
            item, lossless=lossless
        )  # natural mode: a repeated key's last wins
    return out


def to_json_text(value: vc.Value, *, lossless: bool = False) -> str:
    """Compact JSON text (no whitespace, UTF-8 kept, field order as in the value)."""
    return json.dumps(
        to_json_obj(value, lossless=lossless), ensure_ascii=False, separators=(",", ":"), allow_nan=False
    )


# --- reading lossless JSON back -------------------------------------------------------------------------


class ValueJsonError(ValueError):
    """JSON that is not a lossless rendering of a value."""


def from_json_obj(obj: JSON) -> vc.Value:
    """Inverse of ``to_json_obj(value, lossless=True)``."""
    if obj is None:
        return vc.Null()
    if isinstance(obj, bool):
        return vc.Bool(obj)
    if isinstance(obj, int):
        return vc.Int(obj)
    if isinstance(obj, float):
        return vc.Float.of(obj)
    if isinstance(obj, str):
        return vc.String(obj)
    if isinstance(obj, list):
        return vc.List(tuple(from_json_obj(item) for item in obj))
    if not isinstance(obj, dict):
        raise ValueJsonError(f"unexpected JSON type {type(obj).__name__}")
    tags = [k for k in obj if k.startswith("$") and not k.startswith("$$")]
    if not tags:
        return vc.Map(tuple((unescape_key(k), from_json_obj(v)) for k, v in obj.items()))
    tag = tags[0]
    try:
        return _from_tagged(tag, obj)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueJsonError(f"bad {tag} object") from exc


def _from_tagged(tag: str, obj: dict[str, JSON]) -> vc.Value:
    if tag == "$class":
        type_args = tuple(base64.b64decode(t, validate=True) for t in obj.get("$type_args", []))
        if "$fields" in obj:
            fields = tuple((str(k), from_json_obj(v)) for k, v in obj["$fields"])
        else:
            fields = tuple(
                (unescape_key(k), from_json_obj(v))
                for k, v in obj.items()
                if k not in ("$class", "$type_args")
            )
        return vc.Class(obj["$class"], fields, type_args)
    if tag == "$map":
        return vc.Map(tuple((str(k), from_json_obj(v)) for k, v in obj["$map"]))
    if tag == "$enum":
        return vc.Enum(obj["$enum"], obj["value"], bool(obj.get("dynamic", False)))
    if tag == "$int":
        return vc.Int(int(obj["$int"]))
    if tag == "$bigint":
        return vc.BigInt.from_int(int(obj["$bigint"]))
    if tag == "$bigint_hex":
        return vc.BigInt(obj["$bigint_hex"])
    if tag == "$float":
        if "bits" in obj:
            return vc.Float(int(obj["bits"], 16))
        return vc.Float.of(float({"NaN": "nan", "Infinity": "inf", "-Infinity": "-inf"}[obj["$float"]]))
    if tag == "$bytes":
        return vc.Bytes(base64.b64decode(obj["$bytes"], validate=True))
    if tag == "$media":
        media = obj["$media"]
        kind_name = media["kind"]
        kind = _MEDIA_KINDS[kind_name] if kind_name in _MEDIA_KINDS else int(kind_name.removeprefix("kind_"))
        source = next((s for s in ("url", "base64", "file") if s in media), None)
        return vc.Media(kind, media.get("mime_type"), source, media[source] if source else "")  # type: ignore[arg-type]
    if tag == "$omitted":
        return vc.Omitted(obj["$omitted"], obj["message"])
    if tag == "$unknown":
        return vc.Unknown()
    raise ValueJsonError(f"unknown tag {tag}")


# --- leaves and paths -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Leaf:
    path: tuple[PathElement, ...]
    kind: LeafKind
    scalar: str | int | float | bool | None

    @property
    def path_text(self) -> str:
        return path_text(self.path)


def leaves(value: vc.Value) -> Iterator[Leaf]:
    """Typed leaves in document order; keys in paths are escaped like the JSON rendering.

    Scalars become ``string`` (strings and enum variant names), ``number`` (ints,
    floats and bigints as exact Python numbers), ``bool`` and ``null``; bytes give a
    ``bytes`` leaf with base64 text, media a ``media`` leaf with its URL or file (None
    for inline data), omitted or unknown parts an ``omitted`` leaf with the reason,
    and empty lists and objects an ``array``/``object`` leaf, so no path vanishes.
    A key repeated in one class or map yields one leaf path, as in the natural rendering.
    """
    stack: list[tuple[tuple[PathElement, ...], vc.Value]] = [((), value)]
    while stack:  # iterative: deep values cannot exhaust Python's recursion limit
        path, node = stack.pop()
        if isinstance(node, vc.List):
            if not node.items:
                yield Leaf(path, "array", None)
            stack.extend(((*path, i), child) for i, child in reversed(list(enumerate(node.items))))
        elif isinstance(node, (vc.Map, vc.Class)):
            # Same rule as the natural rendering: a repeated key keeps its first position and last value.
            kids: dict[PathElement, vc.Value] = {}
            for key, child in vc.children(node):
                kids[escape_key(str(key))] = child
            if not kids:
                yield Leaf(path, "object", None)
            stack.extend(((*path, key), child) for key, child in reversed(kids.items()))
        else:
            yield _scalar_leaf(path, node)


def _scalar_leaf(path: tuple[PathElement, ...], node: vc.Value) -> Leaf:
    if isinstance(node, vc.Null):
        return Leaf(path, "null", None)
    if isinstance(node, vc.String):
        return Leaf(path, "string", node.value)
    if isinstance(node, vc.Enum):
        return Leaf(path, "string", node.value)
    if isinstance(node, vc.Bool):
        return Leaf(path, "bool", node.value)
    if isinstance(node, vc.Int):
        return Leaf(path, "number", node.value)
    if isinstance(node, vc.Float):
        return Leaf(path, "number", node.value)
    if isinstance(node, vc.BigInt):
        number = node.as_int()
        return Leaf(path, "number", number) if number is not None else Leaf(path, "string", node.text)
    if isinstance(node, vc.Bytes):
        return Leaf(path, "bytes", base64.b64encode(node.value).decode("ascii"))
    if isinstance(node, vc.Media):
        return Leaf(path, "media", node.content if node.source in ("url", "file") else None)
    if isinstance(node, vc.Omitted):
        return Leaf(path, "omitted", node.reason)
    return Leaf(path, "omitted", "unknownVariant")


def path_text(path: tuple[PathElement, ...]) -> str:
    """``("invoice", "id")`` -> ``invoice.id``; ``("items", 0, "sku")`` -> ``items[0].sku``; root: ``""``."""
    out: list[str] = []
    for element in path:
        if isinstance(element, int):
            out.append(f"[{element}]")
        elif _IDENT.fullmatch(element):
            out.append(f".{element}" if out else element)
        else:
            out.append(f"[{json.dumps(element, ensure_ascii=False)}]")
    return "".join(out)


_TOKEN = re.compile(r'\.?([A-Za-z_][A-Za-z0-9_]*)|\[(0|[1-9][0-9]*)\]|\[("(?:[^"\\]|\\.)*")\]')


def parse_path_text(text: str) -> tuple[PathElement, ...]:
    """Inverse of :func:`path_text`; raises ValueError for text it would not produce."""
    path: list[PathElement] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or (m.group(1) is not None and (text[pos] == ".") == (pos == 0)):
            raise ValueError(f"bad path text at character {pos}")
        if m.group(1) is not None:
            path.append(m.group(1))
        elif m.group(2) is not None:
            path.append(int(m.group(2)))
        else:
            path.append(json.loads(m.group(3)))
        pos = m.end()
    if path_text(tuple(path)) != text:
        raise ValueError("path text is not in canonical form")
    return tuple(path)
