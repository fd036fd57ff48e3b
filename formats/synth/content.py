"""Realistic text and numbers for synthetic values (pure, seeded by the caller's RNG).

The pools are small on purpose: the query benchmarks need repeated words (substring
search over common words), a few rare ones, and text in several scripts (Japanese,
Cyrillic, emoji) because n-gram indexes behave differently on them.
"""

from __future__ import annotations

import random

CUSTOMER_FIRST = [
    "Ada",
    "Grace",
    "Linus",
    "Margaret",
    "Ken",
    "Barbara",
    "Dennis",
    "Frances",
    "Yukihiro",
    "Guido",
    "Haruki",
    "Sakura",
    "Dmitri",
    "Olga",
    "Ivan",
    "Anya",
    "Mateo",
    "Lucía",
    "Amara",
    "Kwame",
]
CUSTOMER_LAST = [
    "Lovelace",
    "Hopper",
    "Torvalds",
    "Hamilton",
    "Thompson",
    "Liskov",
    "Ritchie",
    "Allen",
    "Matsumoto",
    "Rossum",
    "Tanaka",
    "Suzuki",
    "Ivanov",
    "Petrova",
    "Smirnov",
    "García",
    "Okafor",
    "Mensah",
]
TIERS = ["free", "pro", "team", "enterprise"]
TIER_WEIGHTS = [50, 30, 15, 5]
CURRENCIES = ["USD", "EUR", "JPY", "GBP"]
PRODUCTS = [
    ("SKU-100", "Widget"),
    ("SKU-101", "Gadget"),
    ("SKU-205", "Sprocket"),
    ("SKU-310", "Flux capacitor"),
    ("SKU-404", "Missing part"),
    ("SKU-512", "Cache line"),
    ("SKU-777", "Lucky charm"),
]
SENTIMENTS = ["positive", "neutral", "negative"]
MODELS = ["gpt-4o-mini", "claude-3-5-sonnet", "gemini-1.5-flash", "llama-3.1-70b"]

ENGLISH = [
    "Please issue a refund for the duplicate charge on my last invoice.",
    "The shipment arrived two days late and the box was damaged.",
    "Can you upgrade our team plan before the end of the quarter?",
    "I was charged twice; please refund one of the payments.",
    "Thanks for the quick support, everything works now.",
    "Our invoice lists the wrong billing address.",
    "Extract the line items and totals from this receipt.",
    "Summarise the customer's complaint in one sentence.",
]
JAPANESE = [
    "請求書の金額が間違っています。返金をお願いします。",
    "配送が遅れました。至急確認してください。",
    "サポートの迅速な対応に感謝します。",
    "来月からプランをアップグレードしたいです。",
]
CYRILLIC = [
    "Пожалуйста, верните деньги за двойное списание.",
    "Счёт пришёл с неправильным адресом.",
    "Спасибо за быструю помощь!",
    "Доставка задержалась на три дня.",
]
EMOJI = ["🙂", "🚀", "📦", "💳", "🔥", "✅", "😡", "🎉"]
RARE_WORDS = ["quixotic", "zephyr", "kumquat", "syzygy"]

ERROR_MESSAGES = [
    "LLM response did not match the expected schema: missing field 'total'",
    "Rate limited by provider (429); retries exhausted",
    "Request timed out after 30000 ms",
    "Invalid invoice id: expected INV-<digits>",
    "Context length exceeded: 131072 tokens",
]
ERROR_CLASSES = ["baml.errors.ParseError", "baml.errors.ClientHttpError", "baml.errors.TimeoutError"]


def invoice_id(rng: random.Random) -> str:
    # A narrow id space so exact-match queries such as INV-1042 find many rows.
    return f"INV-{rng.randint(1000, 9999)}"


def customer_name(rng: random.Random) -> str:
    return f"{rng.choice(CUSTOMER_FIRST)} {rng.choice(CUSTOMER_LAST)}"


def tier(rng: random.Random) -> str:
    return rng.choices(TIERS, TIER_WEIGHTS)[0]


def free_text(rng: random.Random) -> str:
    """A sentence, mostly English, sometimes Japanese or Cyrillic, with the odd emoji or rare word."""
    roll = rng.random()
    if roll < 0.15:
        text = rng.choice(JAPANESE)
    elif roll < 0.30:
        text = rng.choice(CYRILLIC)
    else:
        text = rng.choice(ENGLISH)
    if rng.random() < 0.2:
        text = f"{text} {rng.choice(EMOJI)}"
    if rng.random() < 0.02:
        text = f"{text} ({rng.choice(RARE_WORDS)})"
    return text


def long_text(rng: random.Random, min_bytes: int) -> str:
    """Free text of at least ``min_bytes`` UTF-8 bytes (a transcript, a document)."""
    parts: list[str] = []
    size = 0
    while size < min_bytes:
        sentence = free_text(rng)
        parts.append(sentence)
        size += len(sentence.encode()) + 1
    return " ".join(parts)
