"""Prices and cost: which ModelPrice row prices a model name, and what token sums cost.

Cost is never stored. It is computed when usage is read, from token sums per model and day (the roll-ups,
or a session's usage by model and day) times the model's price in force that day, so a corrected price is
reflected at once everywhere, past usage included, and a new price applies from the day it took effect. Cost
is linear in tokens, so the cost of a sum of requests is the sum of their costs: pricing the roll-ups prices
every request.

Tokens of a model without a price are never priced as zero silently: they are counted in
`unpriced_tokens`, and the model is listed in `unpriced_models`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import ROUND_HALF_UP, Decimal

from sessions_app.models import ModelPrice, PriceMatch
from sessions_app.schema import LONG_CONTEXT_FIELDS, NANO_PER_USD, REPORTED_COST_FIELDS

# Each term: (the tokens it counts, the tokens it takes away from them, the ModelPrice rate, the rate it falls back
# to when that one is empty). A cache write is priced by its lifetime: the 1-hour writes at the 1-hour rate, the rest
# of `cache_creation_tokens` (5-minute writes, and writes whose lifetime was not reported: the API's default
# lifetime) at the 5-minute rate. A long-context request's tokens (its prompt over 200K: schema.LONG_CONTEXT_FIELDS)
# are taken out of the standard terms and priced at the price's long-context rates, where it has them.
COST_TERMS = (
    (("input_tokens",), ("long_context_input_tokens",), "input_usd_per_mtok", None),
    (("output_tokens",), ("long_context_output_tokens",), "output_usd_per_mtok", None),
    (("cache_read_tokens",), ("long_context_cache_read_tokens",), "cache_read_usd_per_mtok", None),
    (
        ("cache_creation_tokens", "long_context_cache_creation_1h_tokens"),
        ("cache_creation_1h_tokens", "long_context_cache_creation_tokens"),
        "cache_write_usd_per_mtok",
        None,
    ),
    (("cache_creation_1h_tokens",), ("long_context_cache_creation_1h_tokens",), "cache_write_1h_usd_per_mtok", None),
    (("long_context_input_tokens",), (), "long_context_input_usd_per_mtok", "input_usd_per_mtok"),
    (("long_context_output_tokens",), (), "long_context_output_usd_per_mtok", "output_usd_per_mtok"),
    (("long_context_cache_read_tokens",), (), "long_context_cache_read_usd_per_mtok", "cache_read_usd_per_mtok"),
    (
        ("long_context_cache_creation_tokens",),
        ("long_context_cache_creation_1h_tokens",),
        "long_context_cache_write_usd_per_mtok",
        "cache_write_usd_per_mtok",
    ),
    (
        ("long_context_cache_creation_1h_tokens",),
        (),
        "long_context_cache_write_1h_usd_per_mtok",
        "cache_write_1h_usd_per_mtok",
    ),
)
PRICE_RATES = tuple(rate for _, _, rate, _ in COST_TERMS)
# What a cost is computed from (what a usage row must carry to be priced).
PRICED_TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "cache_creation_1h_tokens",
    *LONG_CONTEXT_FIELDS,
)
# Every token once: input, output, cache reads and cache writes (of either lifetime).
ALL_TOKEN_FIELDS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
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


def cost_sql(usage: str, price: str) -> str:
    """The COST_TERMS as SQL: the cost in USD per million tokens of the usage row aliased `usage` at the rates of
    the price row aliased `price` (a ModelPrice row: an empty long-context rate falls back to its standard one)."""
    terms = []
    for plus, minus, rate, fallback in COST_TERMS:
        amount = " + ".join(f"{usage}.{name}" for name in plus) + "".join(f" - {usage}.{name}" for name in minus)
        rate_sql = f"COALESCE({price}.{rate}, {price}.{fallback})" if fallback else f"{price}.{rate}"
        terms.append(f"({amount}) * {rate_sql}")
    return " + ".join(terms)


@dataclass(frozen=True)
class Price:
    price_id: int
    pattern: str
    input_usd_per_mtok: Decimal
    output_usd_per_mtok: Decimal
    cache_read_usd_per_mtok: Decimal
    cache_write_usd_per_mtok: Decimal
    cache_write_1h_usd_per_mtok: Decimal
    long_context_input_usd_per_mtok: Decimal | None = None
    long_context_output_usd_per_mtok: Decimal | None = None
    long_context_cache_read_usd_per_mtok: Decimal | None = None
    long_context_cache_write_usd_per_mtok: Decimal | None = None
    long_context_cache_write_1h_usd_per_mtok: Decimal | None = None
    effective_from: date | None = None

    def cost(self, tokens: Mapping[str, int]) -> Decimal:
        get = tokens.get
        if not any(get(name) for name in LONG_CONTEXT_FIELDS):
            # The usual row (no long-context request in it): COST_TERMS with the long-context terms at zero, written
            # out, as the grouped statistics price thousands of rows per call.
            written, one_hour = int(get("cache_creation_tokens") or 0), int(get("cache_creation_1h_tokens") or 0)
            return (
                int(get("input_tokens") or 0) * self.input_usd_per_mtok
                + int(get("output_tokens") or 0) * self.output_usd_per_mtok
                + int(get("cache_read_tokens") or 0) * self.cache_read_usd_per_mtok
                + (written - one_hour) * self.cache_write_usd_per_mtok
                + one_hour * self.cache_write_1h_usd_per_mtok
            ) / MILLION
        total = Decimal(0)
        for plus, minus, rate, fallback in COST_TERMS:
            amount = sum(int(tokens.get(name) or 0) for name in plus)
            amount -= sum(int(tokens.get(name) or 0) for name in minus)
            if amount:
                value = getattr(self, rate)
                total += Decimal(amount) * (value if value is not None else getattr(self, fallback))
        return total / MILLION


def effective_rates(price: Price) -> tuple[Decimal, ...]:
    """The price's rates in PRICE_RATES order, each empty long-context rate replaced by the rate it falls back to."""
    return tuple(
        getattr(price, rate) if getattr(price, rate) is not None else getattr(price, fallback)
        for _, _, rate, fallback in COST_TERMS
    )


def rates_per_token(price: Price) -> dict[str, Decimal]:
    """COST_TERMS folded into one rate per token kind of PRICED_TOKEN_FIELDS: {kind: USD per million tokens}, so that
    the cost is sum(tokens[kind] * rate) over the kinds. The same linear function, term for term (a long-context
    token's rate is its tier's rate less the standard rate it is also counted at); a price without a long-context
    tier has 0 for every long-context kind, and a cost ranked in SQL can leave out the kinds no price charges."""
    rates = dict.fromkeys(PRICED_TOKEN_FIELDS, Decimal(0))
    for (plus, minus, _, _), rate in zip(COST_TERMS, effective_rates(price), strict=True):
        for name in plus:
            rates[name] += rate
        for name in minus:
            rates[name] -= rate
    return rates


_PRICE_COLUMNS = ("pk", "model", "match", *PRICE_RATES, "effective_from")


class PriceBook:
    """All prices, read once (one query). `price_for(model, day)` resolves a model name on a UTC day: among the
    prices in force that day (taken effect on or before it, or undated), the exact name wins over prefixes and
    the longest prefix over shorter ones; of one name's dated prices, the latest in force."""

    def __init__(self, prices: Iterable):
        """`prices`: ModelPrice rows, or rows of the same attributes (`load` reads tuples: a statistics call would
        otherwise spend more CPU building a hundred model instances than in its own query)."""
        exact: dict[str, list[Price]] = {}
        prefixes: dict[str, list[Price]] = {}
        for row in prices:
            price = Price(
                price_id=row.pk,
                pattern=row.model + ("*" if row.match == PriceMatch.PREFIX else ""),  # as ModelPrice.__str__
                **{rate: getattr(row, rate) for rate in PRICE_RATES},
                effective_from=row.effective_from,
            )
            (prefixes if row.match == PriceMatch.PREFIX else exact).setdefault(row.model, []).append(price)
        for dated in (*exact.values(), *prefixes.values()):
            dated.sort(key=_since)
        self.exact = exact
        self.prefixes = sorted(prefixes.items(), key=lambda item: -len(item[0]))
        self._candidates: dict[str, list[list[Price]]] = {}
        self._resolved: dict[tuple[str, date], Price | None] = {}

    @classmethod
    def load(cls) -> PriceBook:
        return cls(ModelPrice.objects.values_list(*_PRICE_COLUMNS, named=True))

    def _candidates_for(self, model: str) -> list[list[Price]]:
        """The price lists that may price `model`, best first: its exact name's, then its prefixes', longest first."""
        candidates = self._candidates.get(model)
        if candidates is None:
            name = normalize_model(model)
            candidates = [self.exact[name]] if name in self.exact else []
            if name:
                candidates += [dated for prefix, dated in self.prefixes if name.startswith(prefix)]
            self._candidates[model] = candidates
        return candidates

    def price_for(self, model: str, day: date | None = None) -> Price | None:
        """The price of `model` in force on `day` (UTC; None: today)."""
        day = day or datetime.now(UTC).date()
        key = (model, day)
        if key not in self._resolved:
            self._resolved[key] = next(
                (price for dated in self._candidates_for(model) if (price := _in_force(dated, day)) is not None), None
            )
        return self._resolved[key]

    def epochs_sql(self, day: str) -> tuple[str, list]:
        """SQL (and its parameters) of the price epoch of a usage row whose UTC day is the SQL `day`: the latest day
        on which any price took effect, on or before it (NULL before the first). Every model's price is the same
        all through an epoch, so usage summed per (model, epoch) is priced exactly by `price_for(model, epoch)`;
        with no dated price, one epoch (NULL) for all."""
        changes = sorted({p.effective_from for dated in self._all() for p in dated} - {None}, reverse=True)
        if not changes:
            return "NULL::date", []
        cases = " ".join(f"WHEN {day} >= %s THEN %s::date" for _ in changes)
        return f"(CASE {cases} END)", [value for change in changes for value in (change, change)]

    def _all(self) -> list[list[Price]]:
        return [*self.exact.values(), *(dated for _, dated in self.prefixes)]

    def periods(self, model: str) -> list[tuple[date | None, date | None, Price]]:
        """[(from, until, price)]: the prices of `model` over time, each in force from its day (None: always)
        until the next one's (None: still in force). What SQL that prices many rows joins on."""
        changes = sorted({p.effective_from for dated in self._candidates_for(model) for p in dated} - {None})
        starts = [None, *changes]
        periods = []
        for index, start in enumerate(starts):
            price = self.price_for(model, start or date.min)
            until = starts[index + 1] if index + 1 < len(starts) else None
            if price is None:
                continue
            if periods and periods[-1][2] == price:
                periods[-1] = (periods[-1][0], until, price)  # the same price on both sides of another's change
            else:
                periods.append((start, until, price))
        return periods


def _since(price: Price) -> date:
    return price.effective_from or date.min


def _in_force(dated: list[Price], day: date) -> Price | None:
    """The latest of one name's prices (sorted by effective_from) that has taken effect on `day`."""
    in_force = None
    for price in dated:
        if _since(price) > day:
            break
        in_force = price
    return in_force


# A reported cost that differs from the computed one by more than this share of it is flagged.
RECONCILE_TOLERANCE = Decimal("0.01")
# What a usage row carries besides its tokens for the tools' own cost to be compared with ours.
RECONCILE_FIELDS = ("requests", *REPORTED_COST_FIELDS)


@dataclass
class Cost:
    """The cost of some usage, accumulated model by model (and day by day, for prices that changed); and the cost
    its sources reported, compared with ours where every request of a model's usage reported one (like for like)."""

    usd: Decimal = Decimal(0)
    unpriced_tokens: int = 0
    unpriced_models: set[str] = field(default_factory=set)
    reported_nano_usd: int = 0
    reported_requests: int = 0
    compared_usd: Decimal = Decimal(0)  # our cost of the usage whose every request reported a cost
    compared_reported_nano_usd: int = 0  # what those requests reported

    def add(self, book: PriceBook, model: str, tokens: Mapping[str, int], day: date | None = None) -> None:
        price = book.price_for(model, day)
        reported = int(tokens.get("reported_cost_nano_usd") or 0)
        reported_requests = int(tokens.get("reported_cost_requests") or 0)
        self.reported_nano_usd += reported
        self.reported_requests += reported_requests
        if price is not None:
            cost = price.cost(tokens)
            self.usd += cost
            if reported_requests and reported_requests == int(tokens.get("requests") or 0):
                self.compared_usd += cost
                self.compared_reported_nano_usd += reported
            return
        unpriced = sum(int(tokens.get(kind) or 0) for kind in ALL_TOKEN_FIELDS)
        if unpriced:
            self.unpriced_tokens += unpriced
            self.unpriced_models.add(model)

    def merge(self, other: Cost) -> None:
        self.usd += other.usd
        self.unpriced_tokens += other.unpriced_tokens
        self.unpriced_models |= other.unpriced_models
        self.reported_nano_usd += other.reported_nano_usd
        self.reported_requests += other.reported_requests
        self.compared_usd += other.compared_usd
        self.compared_reported_nano_usd += other.compared_reported_nano_usd

    def reconciliation(self) -> dict:
        """The tools' own cost beside ours: `reported_cost_usd` (all they reported), `reported_cost_requests`, and
        where every request of a model's usage reported one, the difference (reported − computed) in USD and percent
        of ours, `cost_flagged` when it is over 1%. None where nothing can be compared."""
        reported = money(Decimal(self.reported_nano_usd) / NANO_PER_USD) if self.reported_requests else None
        fields = {
            "reported_cost_usd": reported,
            "reported_cost_requests": self.reported_requests,
            "cost_difference_usd": None,
            "cost_difference_percent": None,
            "cost_flagged": False,
        }
        if not self.compared_reported_nano_usd and not self.compared_usd:
            return fields
        difference = Decimal(self.compared_reported_nano_usd) / NANO_PER_USD - self.compared_usd
        fields["cost_difference_usd"] = money(difference)
        if self.compared_usd:
            percent = difference * 100 / self.compared_usd
            fields["cost_difference_percent"] = float(percent.quantize(Decimal("0.01")))
            fields["cost_flagged"] = abs(difference) > self.compared_usd * RECONCILE_TOLERANCE
        else:
            fields["cost_flagged"] = difference != 0
        return fields

    def as_fields(self) -> dict:
        """The cost fields of a stats row: `cost_usd` (of the priced tokens), `unpriced_tokens`, and the reported cost
        reconciled (`reconciliation`)."""
        return {"cost_usd": money(self.usd), "unpriced_tokens": self.unpriced_tokens, **self.reconciliation()}
