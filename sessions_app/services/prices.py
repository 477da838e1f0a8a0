"""Keeping model prices current from a public price list (LiteLLM's or models.dev's, sessions_app/price_lists.py),
without a release and without rewriting the past: a price that changed gets a new row dated from the day it takes
effect, so usage before that day keeps the price it had (pricing.PriceBook prices each day's usage at the price in
force that day). One transaction; running it again with the same list changes nothing."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal

from django.db import connection, transaction

from sessions_app.models import ModelPrice, PriceMatch, UsageDaily
from sessions_app.price_lists import (
    LONG_CONTEXT_RATES,
    RATES,
    SOURCES,
    Listing,
    PriceList,
    Unusable,
    price_list_read,
    provider_name,
    rates_for_a_new_model,
)
from sessions_app.pricing import Price, PriceBook, normalize_model

# ModelPrice's field of each price-list rate.
RATE_FIELDS = {rate: f"{rate}_usd_per_mtok" for rate in RATES}
RATE_LABELS = {
    "input": "input",
    "output": "output",
    "cache_read": "cache read",
    "cache_write": "cache write",
    "cache_write_1h": "1-hour write",
    "long_context_input": "input over 200K",
    "long_context_output": "output over 200K",
    "long_context_cache_read": "cache read over 200K",
    "long_context_cache_write": "cache write over 200K",
    "long_context_cache_write_1h": "1-hour write over 200K",
}


def _usd(value: Decimal | None) -> str:
    return "-" if value is None else f"{value.normalize():f}"


@dataclass(frozen=True)
class PriceChange:
    """A row the import adds or changes: `old` is the price that was in force that day (None: none was)."""

    model: str
    effective_from: date | None
    new: dict[str, Decimal]
    old: dict[str, Decimal] | None
    listing: Listing
    unlisted: tuple[str, ...] = ()  # rates the list does not give (derived for a new model, else kept)
    corrected: bool = False  # a row of that model and day already existed, and was corrected in place

    @property
    def differences(self) -> dict[str, tuple[Decimal | None, Decimal]]:
        """{rate: (old, new)} of the rates that differ (every rate, for a model that had no price)."""
        old = self.old or {}
        return {rate: (old.get(rate), value) for rate, value in self.new.items() if old.get(rate) != value}


@dataclass(frozen=True)
class Ambiguity:
    """A name several listings price differently: which one was taken, and the others' providers."""

    model: str
    taken: Listing
    others: tuple[Listing, ...]


@dataclass
class PriceImport:
    """What an import did (or, with dry_run, would do)."""

    format: str
    effective_from: date
    dry_run: bool
    added: list[PriceChange] = field(default_factory=list)
    changed: list[PriceChange] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    skipped: list[Unusable] = field(default_factory=list)  # listings of the chosen names that cannot be used
    unusable_elsewhere: list[Unusable] = field(default_factory=list)  # the file's other unusable entries
    not_listed: list[str] = field(default_factory=list)  # models of the usage the file does not price
    not_listed_unpriced: list[str] = field(default_factory=list)  # those of them without a price of ours either
    ambiguous: list[Ambiguity] = field(default_factory=list)
    not_modelled: dict[str, list[str]] = field(default_factory=dict)  # list field → models whose listing has it
    rounded: list[str] = field(default_factory=list)  # models with a rate of more than six decimals
    derived: dict[str, list[str]] = field(default_factory=dict)  # rate → added models whose listing lacks it
    doubtful: list[str] = field(default_factory=list)  # listed rates that cannot be right, not taken
    other_listings: int = 0  # usable listings of models outside the import's scope (--all takes them)


def prices_import(
    *,
    data: bytes | str,
    effective_from: date | None = None,
    providers: tuple[str, ...] = (),
    everything: bool = False,
    only_known: bool = False,
    dry_run: bool = False,
) -> PriceImport:
    """Imports a price list. Which models: those this install has used (the daily roll-ups' model names) and those
    it already prices; `everything`: every model of the list; `only_known`: only models that already have a price.
    `providers`: only listings of these providers (the list's names: `anthropic`, `bedrock`, `openrouter`...).

    A model's price in force on `effective_from` (default today, UTC) is compared with the list's: the same, and
    nothing is written; different, and a row dated `effective_from` is added (or corrected, if one of that day
    exists), so earlier usage keeps its price. A model that never had a price gets an undated row, which prices
    its past usage too. Raises price_lists.PriceListError for a file that is not a price list (nothing written)."""
    prices = price_list_read(data)
    day = effective_from or datetime.now(UTC).date()
    wanted = {provider.lower() for provider in providers}
    report = PriceImport(format=prices.format, effective_from=day, dry_run=dry_run)
    with transaction.atomic():
        with connection.cursor() as cursor:
            # One import at a time: two at once would each plan the same rows (and one fail on the unique key).
            cursor.execute("SELECT pg_advisory_xact_lock(hashtext('ace_prices_import'))")
        book = PriceBook.load()
        targets = _targets(prices, book, day, everything=everything, only_known=only_known)
        by_key = _listings_by_match_key(prices, wanted)
        unusable_keys = {_match_key(normalize_model(item.key)) for item in prices.unusable}
        in_scope = set()
        for name in sorted(targets):
            candidates = by_key.get(_match_key(name), [])
            in_scope.add(_match_key(name))
            if not candidates:
                if targets[name] and _match_key(name) not in unusable_keys:
                    report.not_listed.append(name)
                    if book.price_for(name, day) is None:
                        report.not_listed_unpriced.append(name)
                continue
            taken = _best(candidates, name)
            differing = tuple(c for c in candidates if c is not taken and c.rates != taken.rates)
            if differing:
                report.ambiguous.append(Ambiguity(name, taken, differing))
            _note(report, name, taken)
            _plan(report, book, name, taken, day)
        for unusable in prices.unusable:
            if wanted and unusable.provider.lower() not in wanted:
                continue
            if _match_key(normalize_model(unusable.key)) in in_scope:
                report.skipped.append(unusable)
            else:
                report.unusable_elsewhere.append(unusable)
        report.other_listings = len({key for key in by_key if key not in in_scope})
        if not dry_run:
            _write(report, source=SOURCES[prices.format])
    return report


def _targets(prices: PriceList, book: PriceBook, day: date, *, everything: bool, only_known: bool) -> dict[str, bool]:
    """{model name: whether this install used it} of the models to price."""
    used = {normalize_model(name) for name in UsageDaily.objects.values_list("model", flat=True).distinct()}
    used.discard("")
    priced = set(ModelPrice.objects.filter(match=PriceMatch.EXACT).values_list("model", flat=True))
    names = used | priced
    if everything:
        names |= {listing.name for listing in prices.listings}
    if only_known:
        names = {name for name in names if book.price_for(name, day) is not None}
    return {name: name in used for name in names if name}


def _match_key(name: str) -> str:
    """Names that are one model's, as ccusage matches them: `claude-opus-4.1` is `claude-opus-4-1`, and Vertex's
    `claude-sonnet-4-5@20250929` is `claude-sonnet-4-5-20250929`."""
    return name.replace(".", "-").replace("@", "-")


def _listings_by_match_key(prices: PriceList, providers: set[str]) -> dict[str, list[Listing]]:
    by_key = defaultdict(list)
    for listing in prices.listings:
        if not providers or listing.provider.lower() in providers:
            by_key[_match_key(listing.name)].append(listing)
    return by_key


def _best(candidates: list[Listing], name: str) -> Listing:
    """The listing that prices `name`: the model's own provider's first (Anthropic's Claude, not a reseller's),
    then the one listed under exactly that name, then the shortest key (the least routed)."""
    return min(candidates, key=lambda c: (not c.first_party, c.name != name, c.key.lower() != name, len(c.key), c.key))


def _note(report: PriceImport, name: str, listing: Listing) -> None:
    for item in listing.not_modelled:
        report.not_modelled.setdefault(item.split(" = ", 1)[0], []).append(name)
    if listing.rounded:
        report.rounded.append(name)


def _trusted_rates(report: PriceImport, name: str, listing: Listing) -> dict[str, Decimal | None]:
    """The listing's rates, less a 1-hour cache-write rate that cannot be right (outside input..4x input, or below
    the 5-minute rate: LiteLLM lists claude-3-haiku's as $6 for an input of $0.25): that one is treated as not
    listed, and reported."""
    rates = dict(listing.rates)
    write, write_1h, input_ = rates["cache_write"], rates["cache_write_1h"], rates["input"]
    if write_1h is not None and not (input_ <= write_1h <= 4 * input_ and (write is None or write <= write_1h)):
        report.doubtful.append(
            f"{name}: the list's 1-hour cache write {_usd(write_1h)} beside input {_usd(input_)} and 5-minute write "
            f"{_usd(write)} (Anthropic's rule: 2x input) was not taken"
        )
        rates["cache_write_1h"] = None
    return rates


def _rates_of(price: Price) -> dict[str, Decimal]:
    return {rate: getattr(price, fld) for rate, fld in RATE_FIELDS.items()}


def _plan(report: PriceImport, book: PriceBook, name: str, listing: Listing, day: date) -> None:
    listed = _trusted_rates(report, name, listing)
    # A list without a long-context tier says nothing of one: no tier for a new model, ours kept for a known one.
    unlisted = [rate for rate, value in listed.items() if value is None and rate not in LONG_CONTEXT_RATES]
    current = book.price_for(name, day)
    if current is None:
        # Never priced: one undated row, so that its past usage is priced too. Priced before (a dated row that
        # ended, or one still to come): from the day.
        dated = day if book.periods(name) else None
        report.added.append(PriceChange(name, dated, rates_for_a_new_model(listed), None, listing, tuple(unlisted)))
        for rate in unlisted:
            report.derived.setdefault(rate, []).append(name)
        return
    old = _rates_of(current)
    # A rate the list does not give stays as it is (OpenAI's lists have no cache-write price: ours is kept).
    new = {rate: old[rate] if value is None else value for rate, value in listed.items()}
    if old == new:
        report.unchanged.append(name)
        return
    corrected = current.effective_from == day and current.pattern == name
    report.changed.append(PriceChange(name, day, new, old, listing, tuple(unlisted), corrected=corrected))


def _write(report: PriceImport, *, source: str) -> None:
    today = datetime.now(UTC).date()
    for change in (*report.added, *report.changed):
        listing = change.listing
        notes = [f"Imported from {report.format} ({listing.key}, {listing.provider}) on {today:%Y-%m-%d}."]
        if change.unlisted:
            how = "derived from input as ccusage does" if change.old is None else "kept from the price before"
            notes.append(f"Not in the list, {how}: " + ", ".join(RATE_LABELS[rate] for rate in change.unlisted) + ".")
        if listing.not_modelled:
            notes.append("Not modelled: " + "; ".join(listing.not_modelled) + ".")
        values = {
            "provider": provider_name(listing.provider)[:64],
            **{RATE_FIELDS[rate]: value for rate, value in change.new.items()},
            "source": source,
            "checked_on": today,
            "notes": " ".join(notes),
        }
        row = ModelPrice.objects.filter(
            model=change.model, match=PriceMatch.EXACT, effective_from=change.effective_from
        ).first()
        if row is None:
            row = ModelPrice(model=change.model, match=PriceMatch.EXACT, effective_from=change.effective_from)
        for name, value in values.items():
            setattr(row, name, value)
        row.save()


def _names(names, limit: int | None) -> str:
    names = list(names)
    shown = names if limit is None else names[:limit]
    more = f", … and {len(names) - len(shown)} more" if len(shown) < len(names) else ""
    return ", ".join(shown) + more


def price_import_lines(report: PriceImport, *, limit: int | None = 20) -> list[str]:
    """What an import did, as lines for a person (the command prints them, the admin shows them). `limit`: at most
    this many names per list (None: all)."""
    cut = (lambda items: items) if limit is None else (lambda items: items[:limit])
    day = f"{report.effective_from:%Y-%m-%d}"
    lines = [
        f"{report.format} price list; prices compared as in force on {day}"
        + (" (dry run: nothing written)" if report.dry_run else "")
        + "."
    ]
    if report.added:
        lines.append(f"Added {len(report.added)}:")
        for change in cut(report.added):
            rates = ", ".join(f"{RATE_LABELS[r]} {_usd(v)}" for r, v in change.new.items())
            when = (
                "undated: never priced before, so its past usage is priced too"
                if change.effective_from is None
                else f"from {change.effective_from:%Y-%m-%d}"
            )
            lines.append(f"  {change.model}: {rates} ({when}; {change.listing.provider}'s {change.listing.key})")
    if report.changed:
        lines.append(f"Changed {len(report.changed)} (from {day}; usage before that day keeps its price):")
        for change in cut(report.changed):
            rates = ", ".join(
                f"{RATE_LABELS[r]} {_usd(old)} → {_usd(new)}" for r, (old, new) in change.differences.items()
            )
            how = (
                "corrected the price of that day"
                if change.corrected
                else f"{change.listing.provider}'s {change.listing.key}"
            )
            lines.append(f"  {change.model}: {rates} ({how})")
    lines.append(f"Unchanged: {len(report.unchanged)}.")
    if report.skipped:
        lines.append(f"Skipped {len(report.skipped)} listing(s) of these models:")
        lines += [f"  {item.key} ({item.provider or 'no provider'}): {item.reason}" for item in cut(report.skipped)]
    if report.not_listed:
        unpriced = report.not_listed_unpriced
        lines.append(
            f"Not in the list: {len(report.not_listed)} model(s) of the usage; "
            + (f"{len(unpriced)} of them have no price: {_names(unpriced, limit)}" if unpriced else "all have a price")
            + ("; the others keep theirs." if unpriced and len(unpriced) < len(report.not_listed) else ".")
        )
    if report.ambiguous:
        lines.append(f"Listed at different prices by several providers ({len(report.ambiguous)}; --provider chooses):")
        for item in cut(report.ambiguous):
            others = ", ".join(sorted({f"{o.provider}'s {o.key}" for o in item.others}))
            lines.append(f"  {item.model}: took {item.taken.provider}'s {item.taken.key}; also {others}")
    if report.not_modelled:
        lines.append("Not modelled (the list prices these; a model price holds flat per-token rates only):")
        for name, models in sorted(report.not_modelled.items()):
            lines.append(f"  {name}: {len(models)} model(s): {_names(models, limit)}")
    if report.derived:
        lines.append(
            "Not in the list, for the added models derived from input (cache read 0.1x and cache write 1.25x, as "
            "ccusage does; 1-hour write 2x); a priced model keeps its own:"
        )
        for rate, models in sorted(report.derived.items()):
            lines.append(f"  {RATE_LABELS[rate]}: {_names(models, limit)}")
    if report.doubtful:
        lines.append("Not taken (a rate unlike the list's other rates of the model; ours stays):")
        lines += [f"  {item}" for item in cut(report.doubtful)]
    if report.rounded:
        lines.append(f"Rounded to six decimals (USD per million tokens): {_names(report.rounded, limit)}")
    elsewhere = len(report.unusable_elsewhere)
    lines.append(
        f"Not imported: {report.other_listings} other model(s) of the list this install has not used (--all imports "
        f"them), {elsewhere} other entr{'y' if elsewhere == 1 else 'ies'} without a chat price."
    )
    lines.append(
        f"{len(report.added)} added, {len(report.changed)} changed, {len(report.unchanged)} unchanged, "
        f"{len(report.skipped)} skipped."
    )
    return lines
