"""The exact-match key of a value leaf: ``path=<canonical JSON>`` (pure).

One definition shared by the projection, which writes the ``key`` column of ``value_leaves_v1``
(activities/projection/private_rows.py), and the query coordinator, which looks a private
equality up by it (api/coordinator/executor.py): both must spell a key byte for byte alike.
"""

from __future__ import annotations

import hashlib
import json
import math

# Longer scalar texts are keyed by digest so the exact-match index stays small.
KEY_MAX_VALUE_CHARS = 256

Scalar = str | int | float | bool | None


def scalar_json(value: Scalar) -> str:
    """Canonical JSON text of a scalar: integral floats as their exact integer, NaN/Infinity tagged.

    Any size: a double beyond 2**53 is an integer too, so ``1e20`` and ``100000000000000000000``
    key alike, as they compare equal (docs/query.md "Exact numbers").
    """
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            word = "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
            return json.dumps({"$float": word})
        if value.is_integer():
            return str(int(value))
        return json.dumps(value)
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, ensure_ascii=False)


def exact_match_key(path_text: str, value: Scalar) -> str:
    """The ``key`` column for a leaf at ``path_text`` holding ``value``: ``path=<canonical JSON>``.

    ``args['invoice']['id'] = 'INV-1042'`` looks up ``invoice.id="INV-1042"``; a scalar whose
    JSON text exceeds :data:`KEY_MAX_VALUE_CHARS` is keyed as ``path=#sha256:<hex>`` of that text.
    """
    text = scalar_json(value)
    if len(text) > KEY_MAX_VALUE_CHARS:
        text = "#sha256:" + hashlib.sha256(text.encode()).hexdigest()
    return f"{path_text}={text}"
