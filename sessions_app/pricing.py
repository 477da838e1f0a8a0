"""Prices and cost: which ModelPrice row prices a model name, and what token sums cost.

Cost is never stored. It is computed when usage is read, from token sums per model (the hourly roll-ups,
or a session's usage by model) times the model's price, so a corrected price is reflected at once
everywhere, past usage included. Cost is linear in tokens, so the cost of a sum of requests is the sum
of their costs: pricing the roll-ups prices every request.

Tokens of a model without a price are never priced as zero silently: they are counted in
`unpriced_tokens`, and the model is listed in `unpriced_models`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from sessions_app.models import ModelPrice, PriceMatch

# The token kinds a price applies to, with the ModelPrice field that prices each.
PRICED_TOKENS = (
    ("input_tokens", "input_usd_per_mtok"),
    ("output_tokens", "output_usd_per_mtok"),
    ("cache_read_tokens", "cache_read_usd_per_mtok"),
    ("cache_creation_tokens", "cache_write_usd_per_mtok"),
)
PRICED_TOKEN_FIELDS = tuple(tokens for tokens, _ in PRICED_TOKENS)
MILLION = Decimal(1_000_000)
MICRO_DOLLAR = Decimal("0.000001")
# Routing prefixes some tools put before the model's own name (Bedrock, Vertex, OpenRouter).
ROUTING_PREFIXES = ("global.", "us.", "eu.", "apac.", "anthropic.")


def normalize_model(name: str) -> str:
    """`anthropic/claude-sonnet-4-5` and `us.anthropic.claude-sonnet-4-5-20250929-v1:0` → `claude-sonnet-4-5…`."""
    name = (name or "").strip().lower()
    name = name.rsplit("/", 1)[-1]
    stripped = True
    while stripped:
        stripped = False
        for prefix in ROUTING_PREFIXES:
            if name.startswith(prefix):
                name, stripped = name[len(prefix) :], True
    return name


def money(value: Decimal) -> Decimal:
    """A cost as it is shown: USD rounded to six decimals (micro-dollars). The API writes it as a string."""
    return value.quantize(MICRO_DOLLAR, rounding=ROUND_HALF_UP)


@dataclass(frozen=True)
class Price:
    price_id: int
    pattern: str
    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    cache_read_usd_per_mtok: Decimal
    cache_write_usd_per_mtok: Decimal

    def cost(self, tokens: Mapping[str, int]) -> Decimal:
        return (
            sum((Decimal(tokens.get(kind) or 0) * getattr(self, rate) for kind, rate in PRICED_TOKENS), Decimal(0))
            / MILLION
        )


class PriceBook:
    """All prices, read once (one query); `price_for` resolves a model name: the exact row, else the longest
    prefix row, else None."""

    def __init__(self, prices: Iterable):
        """`prices`: ModelPrice rows, or rows of the same attributes (`load` reads tuples: a statistics call would
        otherwise spend more CPU building a hundred model instances than in its own query)."""
        self.exact: dict[str, Price] = {}
        self.prefixes: list[tuple[str, Price]] = []
        for row in prices:
            price = Price(
                price_id=row.pk,
                pattern=row.model + ("*" if row.match == PriceMatch.PREFIX else ""),  # as ModelPrice.__str__
                input_usd_per_mtok=row.input_usd_per_mtok,
                output_usd_per_mtok=row.output_usd_per_mtok,
                cache_read_usd_per_mtok=row.cache_read_usd_per_mtok,
                cache_write_usd_per_mtok=row.cache_write_usd_per_mtok,
            )
            if row.match == PriceMatch.PREFIX:
                self.prefixes.append((row.model, price))
            else:
                self.exact[row.model] = price
        self.prefixes.sort(key=lambda item: -len(item[0]))
        self._resolved: dict[str, Price | None] = {}

    @classmethod
    def load(cls) -> PriceBook:
        return cls(
            ModelPrice.objects.values_list(
                "pk",
                "model",
                "match",
                "input_usd_per_mtok",
                "output_usd_per_mtok",
                "cache_read_usd_per_mtok",
                "cache_write_usd_per_mtok",
                named=True,
            )
        )

    def price_for(self, model: str) -> Price | None:
        if model not in self._resolved:
            name = normalize_model(model)
            price = self.exact.get(name)
            if price is None and name:
                price = next((p for prefix, p in self.prefixes if name.startswith(prefix)), None)
            self._resolved[model] = price
        return self._resolved[model]


@dataclass
class Cost:
    """The cost of some usage, accumulated model by model."""

    usd: Decimal = Decimal(0)
    unpriced_tokens: int = 0
    unpriced_models: set[str] = field(default_factory=set)

    def add(self, book: PriceBook, model: str, tokens: Mapping[str, int]) -> None:
        price = book.price_for(model)
        if price is not None:
            self.usd += price.cost(tokens)
            return
        unpriced = sum(int(tokens.get(kind) or 0) for kind in PRICED_TOKEN_FIELDS)
        if unpriced:
            self.unpriced_tokens += unpriced
            self.unpriced_models.add(model)

    def merge(self, other: Cost) -> None:
        self.usd += other.usd
        self.unpriced_tokens += other.unpriced_tokens
        self.unpriced_models |= other.unpriced_models

    def as_fields(self) -> dict:
        """The cost fields of a stats row: `cost_usd` (of the priced tokens) and `unpriced_tokens`."""
        return {"cost_usd": money(self.usd), "unpriced_tokens": self.unpriced_tokens}
