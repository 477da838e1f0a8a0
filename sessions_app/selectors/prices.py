"""Reads about prices: the models of the usage that have no price (what to price next, biggest first)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime

from django.db.models import F, Max, Min, Sum

from sessions_app.models import UsageDaily
from sessions_app.pricing import PriceBook, normalize_model


@dataclass
class UnpricedModel:
    """A model name (as prices name it: pricing.normalize_model) of the usage with no price in force today, its
    volume over all tenants and days, and the names the tools reported it under."""

    model: str
    tokens: int  # input + output + cache read + cache write
    requests: int
    first_day: date
    last_day: date
    reported_as: list[str]


def unpriced_models(*, day: date | None = None, book: PriceBook | None = None) -> list[UnpricedModel]:
    """Every model of the daily roll-ups without a price in force on `day` (UTC; None: today), most tokens first.
    One GROUP BY over the daily roll-ups (a scan: the table's only index leads with the tenant), then the prices
    in memory. Tokens of messages that name no model are not listed (no price can name them)."""
    day = day or datetime.now(UTC).date()
    book = book or PriceBook.load()
    volumes = (
        UsageDaily.objects.order_by()
        .values("model")
        .annotate(
            tokens=Sum(F("input_tokens") + F("output_tokens") + F("cache_read_tokens") + F("cache_creation_tokens")),
            requests_sum=Sum("requests"),
            first_day=Min("day"),
            last_day=Max("day"),
        )
    )
    unpriced: dict[str, UnpricedModel] = {}
    for row in volumes:
        name = normalize_model(row["model"])
        if not name or book.price_for(row["model"], day) is not None:
            continue
        entry = unpriced.get(name)
        if entry is None:
            unpriced[name] = UnpricedModel(
                name, row["tokens"], row["requests_sum"], row["first_day"], row["last_day"], [row["model"]]
            )
            continue
        entry.tokens += row["tokens"]
        entry.requests += row["requests_sum"]
        entry.first_day, entry.last_day = min(entry.first_day, row["first_day"]), max(entry.last_day, row["last_day"])
        entry.reported_as.append(row["model"])
    for entry in unpriced.values():
        entry.reported_as.sort()
    return sorted(unpriced.values(), key=lambda entry: (-entry.tokens, entry.model))
