"""The public price lists Open ACE imports (`manage.py ace_prices import`), read into one shape: what each listed
model costs in USD per million tokens of each kind, what the list says that we do not model, and why an entry
cannot be used. Pure reading: no database (services/prices.py decides what to write).

- LiteLLM's `model_prices_and_context_window.json` (what ccusage prices with): `{key: {input_cost_per_token,
  output_cost_per_token, cache_read_input_token_cost, cache_creation_input_token_cost,
  cache_creation_input_token_cost_above_1hr, litellm_provider, mode, ...}}`, USD per token.
- models.dev's `api.json` (`{provider: {id, name, models: {id: {cost: {input, output, cache_read, cache_write}}}}}`,
  USD per million tokens), also its `catalog.json` (`{"models": ..., "providers": <api.json>}`).

Numbers are read as decimals (never floats) and converted exactly; a rate is kept to the six decimals a ModelPrice
holds (a list's `2.9999900000000002e-06` per token is 2.999990 per million).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from sessions_app.models.usage import PRICE_MAX
from sessions_app.pricing import normalize_model

LITELLM = "LiteLLM"
MODELS_DEV = "models.dev"
SOURCES = {
    LITELLM: "https://github.com/BerriAI/litellm/blob/main/model_prices_and_context_window.json",
    MODELS_DEV: "https://models.dev/api.json",
}
MILLION = Decimal(1_000_000)
RATE_PLACES = Decimal("0.000001")  # what ModelPrice's numeric(12, 6) columns hold
# The ModelPrice rates an import sets; `cache_write_1h` may stay None (ModelPrice: 2x input).
# The long-context rates (prompts over 200K tokens) stay None where a list has no such tier.
LONG_CONTEXT_RATES = (
    "long_context_input",
    "long_context_output",
    "long_context_cache_read",
    "long_context_cache_write",
    "long_context_cache_write_1h",
)
RATES = ("input", "output", "cache_read", "cache_write", "cache_write_1h", *LONG_CONTEXT_RATES)

# LiteLLM: the keys we model, by ModelPrice rate (in order of preference), and the modes that are chat-priced.
LITELLM_RATES = {
    "input": ("input_cost_per_token",),
    "output": ("output_cost_per_token",),
    "cache_read": ("cache_read_input_token_cost", "input_cost_per_token_cache_hit"),
    "cache_write": ("cache_creation_input_token_cost",),
    "cache_write_1h": ("cache_creation_input_token_cost_above_1hr",),
    "long_context_input": ("input_cost_per_token_above_200k_tokens",),
    "long_context_output": ("output_cost_per_token_above_200k_tokens",),
    "long_context_cache_read": ("cache_read_input_token_cost_above_200k_tokens",),
    "long_context_cache_write": ("cache_creation_input_token_cost_above_200k_tokens",),
    "long_context_cache_write_1h": ("cache_creation_input_token_cost_above_1hr_above_200k_tokens",),
}
LITELLM_MODELLED = {key for keys in LITELLM_RATES.values() for key in keys}
LITELLM_CHAT_MODES = {"chat", "completion", "responses", None}
# Priced things that are not a cost key's name: tiers by prompt length, regional or speed multipliers.
LITELLM_PRICING_KEYS = {"tiered_pricing", "provider_specific_entry"}
LITELLM_EXAMPLE = "sample_spec"

# models.dev: the cost fields we model, and those we do not (reasoning is priced inside output here).
MODELS_DEV_RATES = {"input": "input", "output": "output", "cache_read": "cache_read", "cache_write": "cache_write"}

# When a list has no cache price, what ccusage assumes (pricing.rs: input x 0.1 for reads, x 1.25 for writes).
DERIVED = {"cache_read": Decimal("0.1"), "cache_write": Decimal("1.25")}

# A list's provider → ModelPrice.provider (the names the shipped prices use); others are kept as listed.
PROVIDER_NAMES = {
    "gemini": "google",
    "vertex_ai-language-models": "google",
    "vertex_ai": "google",
    "dashscope": "alibaba",
    "alibaba-cn": "alibaba",
    "text-completion-openai": "openai",
    "moonshot": "moonshotai",
}
# The providers that publish their own models' prices (in either list's names): their listing of a name wins
# over a reseller's or a cloud's.
FIRST_PARTY = {
    "anthropic",
    "openai",
    "text-completion-openai",
    "gemini",
    "google",
    "vertex_ai-language-models",
    "deepseek",
    "dashscope",
    "alibaba",
    "alibaba-cn",
    "moonshot",
    "moonshotai",
    "moonshotai-cn",
    "xai",
    "mistral",
    "codestral",
    "minimax",
    "minimax-cn",
    "zai",
    "zhipuai",
    "cohere",
    "xiaomi",
}


class PriceListError(ValueError):
    """The file is not a price list we read (not JSON, or neither format): nothing of it is used."""


@dataclass(frozen=True)
class Listing:
    """One model's price as a list gives it."""

    key: str  # as the list names it: LiteLLM's key, models.dev's model id
    provider: str  # the list's provider name (litellm_provider, or models.dev's provider id)
    rates: dict[str, Decimal | None]  # USD per million tokens, by RATES; None: the list does not give it
    rounded: tuple[str, ...] = ()  # rates with more than six decimals, rounded to six
    not_modelled: tuple[str, ...] = ()  # what the list prices that a ModelPrice cannot: "field = value"

    @property
    def name(self) -> str:
        """The model name a ModelPrice of this listing has: as the tools report it (pricing.normalize_model)."""
        return normalize_model(self.key)

    @property
    def first_party(self) -> bool:
        return self.provider in FIRST_PARTY


@dataclass(frozen=True)
class Unusable:
    key: str
    provider: str
    reason: str


@dataclass
class PriceList:
    format: str
    listings: list[Listing] = field(default_factory=list)
    unusable: list[Unusable] = field(default_factory=list)


def price_list_read(data: bytes | str) -> PriceList:
    """Reads either format (told apart by its shape). Raises PriceListError for anything else."""
    try:
        document = json.loads(data, parse_float=Decimal, parse_constant=Decimal)
    except (ValueError, UnicodeDecodeError) as error:
        raise PriceListError(f"not JSON: {error}") from None
    if not isinstance(document, dict) or not document:
        raise PriceListError("not a price list: expected a JSON object of models (LiteLLM) or providers (models.dev)")
    if isinstance(document.get("providers"), dict) and _is_models_dev(document["providers"]):
        document = document["providers"]  # models.dev's catalog.json
    if _is_models_dev(document):
        return _read_models_dev(document)
    if _is_litellm(document):
        return _read_litellm(document)
    raise PriceListError(
        "not a price list we read: neither LiteLLM's model_prices_and_context_window.json (models with "
        "input_cost_per_token and litellm_provider) nor models.dev's api.json (providers with models and their cost)"
    )


def _is_models_dev(document: dict) -> bool:
    return all(isinstance(entry, dict) and isinstance(entry.get("models"), dict) for entry in document.values())


def _is_litellm(document: dict) -> bool:
    entries = [entry for key, entry in document.items() if key != LITELLM_EXAMPLE]
    return (
        bool(entries)
        and all(isinstance(entry, dict) for entry in entries)
        and any("litellm_provider" in entry or "input_cost_per_token" in entry for entry in entries)
    )


def rates_for_a_new_model(rates: dict[str, Decimal | None]) -> dict[str, Decimal]:
    """Every rate, those a list does not give (None) derived from input: cache reads and writes as ccusage assumes
    (DERIVED), 1-hour writes at 2x input as ModelPrice does."""
    rates = dict(rates)
    for rate, factor in (*DERIVED.items(), ("cache_write_1h", Decimal(2))):
        if rates[rate] is None:
            rates[rate] = (rates["input"] * factor).quantize(RATE_PLACES, rounding=ROUND_HALF_UP)
    return rates


def _read_litellm(document: dict) -> PriceList:
    prices = PriceList(LITELLM)
    for key, entry in document.items():
        provider = str(entry.get("litellm_provider") or "")
        if key == LITELLM_EXAMPLE:
            prices.unusable.append(Unusable(key, provider, "the file's example entry"))
            continue
        mode = entry.get("mode")
        if mode not in LITELLM_CHAT_MODES:
            prices.unusable.append(Unusable(key, provider, f"not a chat model (mode {mode})"))
            continue
        listed = {rate: _first_of(entry, keys) for rate, keys in LITELLM_RATES.items()}
        not_modelled = [
            f"{name} = {_shown(value)}"
            for name, value in sorted(entry.items())
            if name not in LITELLM_MODELLED and ("cost" in name or name in LITELLM_PRICING_KEYS) and _priced(value)
        ]
        tiers = entry.get("tiered_pricing")
        if listed["input"] is None and isinstance(tiers, list):
            # Priced by prompt length only (Qwen on DashScope): the first tier is the list price, as elsewhere.
            first = next((tier for tier in tiers if isinstance(tier, dict) and _starts_at_zero(tier)), None)
            if first is not None:
                for rate, keys in LITELLM_RATES.items():
                    in_tier = _first_of(first, keys)
                    listed[rate] = listed[rate] if in_tier is None else in_tier
        _add(prices, key, provider, listed, per=MILLION, not_modelled=not_modelled)
    return prices


def _read_models_dev(document: dict) -> PriceList:
    prices = PriceList(MODELS_DEV)
    for provider_id, provider in document.items():
        provider_id = str(provider.get("id") or provider_id)
        for model_id, model in provider["models"].items():
            key = str(model.get("id") or model_id) if isinstance(model, dict) else str(model_id)
            if not isinstance(model, dict):
                prices.unusable.append(Unusable(key, provider_id, "not a model entry"))
                continue
            output_kinds = (model.get("modalities") or {}).get("output") or ["text"]
            embedding = "embedding" in str(model.get("family") or "")
            if embedding or "text" not in output_kinds:
                kind = "embedding" if embedding else "output " + "+".join(output_kinds)
                prices.unusable.append(Unusable(key, provider_id, f"not a chat model ({kind})"))
                continue
            cost = model.get("cost")
            if not isinstance(cost, dict):
                prices.unusable.append(Unusable(key, provider_id, "no price"))
                continue
            listed = {rate: cost.get(name) for rate, name in MODELS_DEV_RATES.items()}
            listed["cache_write_1h"] = None  # models.dev lists one cache-write price (Anthropic's: 5 minutes)
            over = cost.get("context_over_200k") if isinstance(cost.get("context_over_200k"), dict) else {}
            listed.update({f"long_context_{rate}": over.get(name) for rate, name in MODELS_DEV_RATES.items()})
            listed["long_context_cache_write_1h"] = None
            not_modelled = [
                f"{name} = {_shown(value)}"
                for name, value in sorted(cost.items())
                if name not in MODELS_DEV_RATES.values()
                and name != "context_over_200k"
                and not (name == "reasoning" and value == cost.get("output"))  # reasoning is output here
                and _priced(value)
            ]
            _add(prices, key, provider_id, listed, per=Decimal(1), not_modelled=not_modelled)
    return prices


def _add(prices: PriceList, key: str, provider: str, listed: dict, *, per: Decimal, not_modelled: list[str]) -> None:
    """Converts a listing's rates to USD per million tokens, or says why it cannot be used."""
    if listed["input"] is None or listed["output"] is None:
        missing = "input" if listed["input"] is None else "output"
        prices.unusable.append(Unusable(key, provider, f"no per-token {missing} price"))
        return
    rates, rounded = {}, []
    for rate, value in listed.items():
        if value is None:
            rates[rate] = None
            continue
        amount = _number(value)
        if amount is None or not amount.is_finite() or amount < 0 or amount * per >= PRICE_MAX:
            prices.unusable.append(Unusable(key, provider, f"invalid {rate.replace('_', ' ')} price: {value}"))
            return
        exact = amount * per
        rates[rate] = exact.quantize(RATE_PLACES, rounding=ROUND_HALF_UP)
        if rates[rate] != exact:
            rounded.append(rate)
    prices.listings.append(Listing(key, provider, rates, tuple(rounded), tuple(not_modelled)))


def _first_of(entry: dict, keys: tuple[str, ...]):
    return next((entry[key] for key in keys if entry.get(key) is not None), None)


def _number(value) -> Decimal | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, Decimal)):
        return Decimal(value)
    if isinstance(value, str):
        try:
            return Decimal(value.strip())
        except InvalidOperation:
            return None
    return None


def _priced(value) -> bool:
    """A value that prices something: a non-zero number, or a structure holding one."""
    if isinstance(value, dict):
        return any(_priced(item) for item in value.values())
    if isinstance(value, list):
        return any(_priced(item) for item in value)
    number = _number(value)
    return number is not None and number != 0


def _starts_at_zero(tier: dict) -> bool:
    bounds = tier.get("range")
    return isinstance(bounds, list) and bool(bounds) and _number(bounds[0]) == 0


def _shown(value) -> str:
    """A listed value as it reads in the file (compact JSON, decimals as written)."""
    return json.dumps(value, default=str, separators=(",", ":")) if isinstance(value, (dict, list)) else str(value)


def provider_name(listed_provider: str) -> str:
    return PROVIDER_NAMES.get(listed_provider, listed_provider)
