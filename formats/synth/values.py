"""Synthetic codec-1 values: realistic argument, output and error values of every variant.

Bulk generation reuses a seeded pool of encoded values (body, CID, CAS bytes, JSON
rendering computed once) so a million calls cost a pool lookup each, not an encode.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from formats import cas, value_json
from formats import value_codec as vc
from formats.synth import content

CODEC_VALUE = 1


@dataclass(frozen=True)
class PooledValue:
    """One encoded value, ready to reference from a ValueOccurrence and write to the CAS."""

    body_len: int
    cid: bytes
    cid_str: str
    cas_bytes: bytes  # the whole CAS object file (84-byte frame + body)
    json: Any  # formats.value_json rendering

    @classmethod
    def of(cls, value: vc.Value) -> PooledValue:
        body = vc.encode_value(value)
        cid = cas.value_cid(CODEC_VALUE, body)
        return cls(
            body_len=len(body),
            cid=cid,
            cid_str=cas.cid_to_string(cid),
            cas_bytes=cas.encode_cas_object(CODEC_VALUE, body),
            json=value_json.to_json_obj(value),
        )


def _s(text: str) -> vc.String:
    return vc.String(text)


def _money(rng: random.Random) -> vc.Float:
    return vc.Float.of(round(rng.uniform(5, 5000), 2))


def customer(rng: random.Random) -> vc.Class:
    return vc.Class(
        "Customer",
        (
            ("name", _s(content.customer_name(rng))),
            ("tier", vc.Enum("Tier", content.tier(rng))),
            ("email", _s(f"user{rng.randint(1, 99999)}@example.com") if rng.random() < 0.8 else vc.Null()),
            ("account_number", vc.BigInt.from_int(rng.getrandbits(96))),
        ),
    )


def invoice(rng: random.Random) -> vc.Class:
    items = []
    for _ in range(rng.randint(1, 4)):
        sku, name = rng.choice(content.PRODUCTS)
        items.append(
            vc.Class(
                "LineItem",
                (
                    ("sku", _s(sku)),
                    ("name", _s(name)),
                    ("quantity", vc.Int(rng.randint(1, 20))),
                    ("unit_price", _money(rng)),
                ),
            )
        )
    return vc.Class(
        "Invoice",
        (
            ("id", _s(content.invoice_id(rng))),
            ("customer", customer(rng)),
            ("items", vc.List(tuple(items))),
            ("total", _money(rng)),
            ("currency", vc.Enum("Currency", rng.choice(content.CURRENCIES))),
            ("paid", vc.Bool(rng.random() < 0.7)),
            ("notes", _s(content.free_text(rng))),
        ),
    )


def root_args(rng: random.Random) -> vc.Map:
    """Arguments of a root function: named, so ``args['invoice']['id']`` addresses them."""
    entries: list[tuple[str, vc.Value]] = [("invoice", invoice(rng))]
    roll = rng.random()
    if roll < 0.2:
        entries.append(
            (
                "attachment",
                vc.Media(1, "image/png", "url", f"https://cdn.example.com/{rng.randint(1, 9999)}.png"),
            )
        )
    elif roll < 0.3:
        entries.append(("signature", vc.Bytes(rng.randbytes(16))))
    elif roll < 0.4:
        entries.append(
            ("metadata", vc.Map((("source", _s("email")), ("priority", vc.Int(rng.randint(1, 5))))))
        )
    return vc.Map(tuple(entries))


def llm_args(rng: random.Random) -> vc.Map:
    return vc.Map(
        (
            ("text", _s(content.free_text(rng))),
            ("customer", customer(rng)),
        )
    )


def llm_output(rng: random.Random) -> vc.Value:
    roll = rng.random()
    if roll < 0.6:
        return vc.Class(
            "TicketClassification",
            (
                ("sentiment", vc.Enum("Sentiment", rng.choice(content.SENTIMENTS))),
                ("score", vc.Float.of(round(rng.random(), 4))),
                ("summary", _s(content.free_text(rng))),
                ("refund_requested", vc.Bool(rng.random() < 0.3)),
            ),
        )
    if roll < 0.85:
        return invoice(rng)
    if roll < 0.95:
        return vc.List(tuple(_s(content.free_text(rng)) for _ in range(rng.randint(1, 3))))
    # The engine replaces what it cannot trace with an OmittedValue marker class.
    return vc.Omitted("hostOwnedValue", "value owned by the host language was not captured")


def helper_args(rng: random.Random) -> vc.Map:
    return vc.Map(
        (("amount", vc.Int(rng.randint(-1000, 100000))), ("invoice_id", _s(content.invoice_id(rng))))
    )


def helper_output(rng: random.Random) -> vc.Value:
    roll = rng.random()
    if roll < 0.5:
        return vc.Float.of(round(rng.uniform(0, 10000), 2))
    if roll < 0.8:
        return vc.Int(rng.randint(0, 1 << 40))
    if roll < 0.9:
        return vc.Null()
    return vc.Bool(rng.random() < 0.5)


def root_output(rng: random.Random) -> vc.Value:
    return vc.Class(
        "ProcessResult",
        (
            ("invoice_id", _s(content.invoice_id(rng))),
            ("approved", vc.Bool(rng.random() < 0.8)),
            ("score", vc.Float.of(round(rng.uniform(0, 100), 2))),
            ("reply", _s(content.free_text(rng))),
        ),
    )


def error_value(rng: random.Random) -> vc.Class:
    return vc.Class(
        rng.choice(content.ERROR_CLASSES),
        (
            ("message", _s(rng.choice(content.ERROR_MESSAGES))),
            ("code", vc.Int(rng.choice([400, 429, 500, 504]))),
        ),
    )


def large_value(rng: random.Random, min_bytes: int) -> vc.Map:
    return vc.Map(
        (
            ("document", _s(content.long_text(rng, min_bytes))),
            ("invoice", invoice(rng)),
        )
    )


KINDS: dict[str, Callable[[random.Random], vc.Value]] = {
    "root_args": root_args,
    "root_output": root_output,
    "llm_args": llm_args,
    "llm_output": llm_output,
    "helper_args": helper_args,
    "helper_output": helper_output,
    "error": error_value,
}


class ValuePool:
    """Seeded pools of encoded values per kind, plus large values (>= 32 KiB)."""

    def __init__(self, seed: int, size: int, *, large_bytes: int = 40 * 1024, large_count: int = 8) -> None:
        rng = random.Random(f"values/{seed}")
        self.pools: dict[str, list[PooledValue]] = {
            kind: [PooledValue.of(make(rng)) for _ in range(size)] for kind, make in KINDS.items()
        }
        self.large: list[PooledValue] = [
            PooledValue.of(large_value(rng, large_bytes + 1024 * i)) for i in range(large_count)
        ]

    def pick(self, kind: str, rng: random.Random) -> PooledValue:
        pool = self.pools[kind]
        return pool[rng.randrange(len(pool))]

    def pick_large(self, rng: random.Random) -> PooledValue:
        return self.large[rng.randrange(len(self.large))]
