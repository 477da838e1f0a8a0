"""Cost: shipped list prices, which price a model name gets, exact cost in the stats API and session stats,
unknown models flagged (never priced as zero), and a corrected price reflected at once."""

import random
from decimal import Decimal

import pytest
from django.urls import reverse

from sessions_app.models import ModelPrice
from sessions_app.pricing import PRICED_TOKEN_FIELDS, PriceBook, normalize_model, rates_per_token
from tests.support.factories import SessionFactory

pytestmark = pytest.mark.django_db
SONNET = "claude-sonnet-4-5-20250929"


@pytest.fixture
def priced(api):
    """One session: a Sonnet 4.5 response in two lines, a Haiku 4.5 response, and a model without a price."""
    session = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="alice", project="open-ace")
    items = [
        {"role": "user", "content": "q", "created_at": "2026-03-01T09:00:00Z"},
        {
            "role": "assistant",
            "content": "a",
            "request_id": "r1",
            "model": SONNET,
            "input_tokens": 1000,
            "output_tokens": 10,
            "cache_read_tokens": 5000,
            "cache_creation_tokens": 200,
            "created_at": "2026-03-01T09:00:01Z",
        },
        {
            "role": "assistant",
            "content": "b",
            "request_id": "r1",
            "model": SONNET,
            "input_tokens": 1000,
            "output_tokens": 300,
            "cache_read_tokens": 5000,
            "cache_creation_tokens": 200,
            "created_at": "2026-03-01T09:00:02Z",
        },
        {
            "role": "assistant",
            "content": "c",
            "request_id": "r2",
            "model": "claude-haiku-4-5",
            "input_tokens": 400,
            "output_tokens": 50,
            "created_at": "2026-03-01T10:00:00Z",
        },
        {
            "role": "assistant",
            "content": "d",
            "request_id": "r3",
            "model": "mystery-model-x",
            "input_tokens": 100,
            "output_tokens": 20,
            "created_at": "2026-03-02T08:00:00Z",
        },
    ]
    assert api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json").status_code == 201
    return session


# Hand-computed with the shipped prices (USD per million tokens):
# Sonnet 4.5 (3 / 15 / 0.30 cache read / 3.75 cache write): 1000×3 + 300×15 + 5000×0.30 + 200×3.75 = 9750 → $0.009750
# Haiku 4.5 (1 / 5): 400×1 + 50×5 = 650 → $0.000650
SONNET_COST = Decimal("0.009750")
HAIKU_COST = Decimal("0.000650")


def stats(api, query):
    response = api.get("/api/v1/stats/" + query)
    assert response.status_code == 200, response.content
    body = response.json()
    return {row["key"]: row for row in body["results"]}, body


def test_shipped_prices_cover_the_common_models():
    book = PriceBook.load()
    for name in (
        SONNET,
        "claude-opus-4-1-20250805",
        "claude-opus-4-5-20251101",
        "claude-haiku-4-5-20251001",
        "claude-3-5-haiku-20241022",
        "claude-3-7-sonnet-20250219",
        "claude-3-opus-20240229",
        "gpt-4o-2024-08-06",
        "gpt-4.1-mini-2025-04-14",
        "gpt-5",
        "gpt-5-mini-2025-08-07",
        "gpt-5-codex",
        "o3-2025-04-16",
        "o4-mini",
        "gemini-2.5-pro",
        "gemini-2.5-flash-lite",
        "gemini-2.0-flash-001",
        "gemini-1.5-pro-002",
        "qwen3-coder-plus-2025-09-23",
        "qwen-max-latest",
        "qwen-plus",
        "qwen-turbo",
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0",
        "anthropic/claude-opus-4-1",
    ):
        assert book.price_for(name) is not None, name
    sonnet = book.price_for(SONNET)
    assert (
        sonnet.input_usd_per_mtok,
        sonnet.output_usd_per_mtok,
        sonnet.cache_read_usd_per_mtok,
        sonnet.cache_write_usd_per_mtok,
    ) == (Decimal(3), Decimal(15), Decimal("0.3"), Decimal("3.75"))
    assert book.price_for("claude-opus-4-5").output_usd_per_mtok == 25
    assert book.price_for("claude-opus-4-20250514").output_usd_per_mtok == 75
    # A newer model than the table knows is unpriced, not priced as its older sibling.
    assert book.price_for("claude-opus-4-9") is None
    assert book.price_for("gpt-5.9") is None
    every = ModelPrice.objects.all()
    assert all(p.source and p.checked_on for p in every)
    assert {p.provider for p in every} >= {"anthropic", "openai", "google", "alibaba"}


def test_an_exact_name_wins_and_then_the_longest_prefix():
    ModelPrice.objects.create(model="acme-", match="prefix", **_rates(1))
    ModelPrice.objects.create(model="acme-large", match="prefix", **_rates(2))
    ModelPrice.objects.create(model="Acme-Large-2", match="exact", **_rates(3))
    book = PriceBook.load()
    assert book.price_for("acme-small").input_usd_per_mtok == 1
    assert book.price_for("acme-large-1").input_usd_per_mtok == 2
    assert book.price_for("ACME-large-2").input_usd_per_mtok == 3  # stored and matched in lower case
    assert book.price_for("acme") is None
    assert normalize_model("openrouter/Acme-Large-2") == "acme-large-2"


def _rates(value):
    return {f"{kind}_usd_per_mtok": Decimal(value) for kind in ("input", "output", "cache_read", "cache_write")}


def test_one_rate_per_token_kind_prices_as_the_cost_terms_do():
    """rates_per_token (what the ranking by cost multiplies each kind of token by) is COST_TERMS folded: the same cost
    to the last digit, for every shipped price (tiers or none) and mixes of every kind, long-context ones included."""
    rng = random.Random(32)
    book = PriceBook.load()
    prices = {price for dated in (*book.exact.values(), *(dated for _, dated in book.prefixes)) for price in dated}
    assert any(price.long_context_input_usd_per_mtok for price in prices)  # tiers among them
    for price in prices:
        rates = rates_per_token(price)
        for _ in range(20):
            long_context = rng.random() < 0.5
            tokens = {kind: rng.randint(0, 400_000) for kind in PRICED_TOKEN_FIELDS}
            tokens["cache_creation_1h_tokens"] = rng.randint(0, tokens["cache_creation_tokens"])
            for kind in ("input", "output", "cache_read", "cache_creation"):
                tokens[f"long_context_{kind}_tokens"] = rng.randint(0, tokens[f"{kind}_tokens"]) if long_context else 0
            tokens["long_context_cache_creation_1h_tokens"] = min(
                tokens["cache_creation_1h_tokens"],
                rng.randint(0, tokens["long_context_cache_creation_tokens"]),
            )
            folded = sum(tokens[kind] * rates[kind] for kind in PRICED_TOKEN_FIELDS) / 1_000_000
            assert folded == price.cost(tokens), (price.pattern, tokens)
        if price.long_context_input_usd_per_mtok is None:
            assert not any(rates[kind] for kind in PRICED_TOKEN_FIELDS if kind.startswith("long_context_"))


def test_cost_is_exact_and_unknown_models_are_flagged_not_zero(api, priced):
    rows, body = stats(api, "?group_by=model")
    assert Decimal(rows[SONNET]["cost_usd"]) == SONNET_COST
    assert rows[SONNET]["cost_usd"] == "0.009750"
    assert Decimal(rows["claude-haiku-4-5"]["cost_usd"]) == HAIKU_COST
    assert rows[SONNET]["unpriced_tokens"] == 0
    unknown = rows["mystery-model-x"]
    assert (unknown["cost_usd"], unknown["unpriced_tokens"]) == ("0.000000", 120)
    assert body["unpriced_models"] == ["mystery-model-x"]
    assert Decimal(body["totals"]["cost_usd"]) == SONNET_COST + HAIKU_COST
    assert body["totals"]["unpriced_tokens"] == 120
    days, body = stats(api, "?group_by=day")
    assert Decimal(days["2026-03-01"]["cost_usd"]) == SONNET_COST + HAIKU_COST
    assert (days["2026-03-02"]["cost_usd"], days["2026-03-02"]["unpriced_tokens"]) == ("0.000000", 120)


def test_session_stats_and_session_grouping_show_the_cost(api, priced):
    body = api.get(f"/api/v1/sessions/{priced.pk}/stats/").json()
    assert Decimal(body["cost_usd"]) == SONNET_COST + HAIKU_COST
    assert (body["unpriced_tokens"], body["unpriced_models"]) == (120, ["mystery-model-x"])
    assert body["requests"] == 3
    rows, body = stats(api, "?group_by=session")
    assert Decimal(rows[str(priced.pk)]["cost_usd"]) == SONNET_COST + HAIKU_COST
    assert Decimal(body["totals"]["cost_usd"]) == SONNET_COST + HAIKU_COST
    assert body["unpriced_models"] == ["mystery-model-x"]


def test_correcting_a_price_changes_the_cost_at_once(api, priced):
    haiku = ModelPrice.objects.get(model="claude-haiku-4-5", match="prefix")
    haiku.input_usd_per_mtok = Decimal(2)  # 400×2 + 50×5 = 1050 → $0.001050
    haiku.save()
    rows, body = stats(api, "?group_by=model")
    assert rows["claude-haiku-4-5"]["cost_usd"] == "0.001050"
    # Pricing the unknown model prices its past usage too: 100×10 + 20×20 = 1400 → $0.001400.
    ModelPrice.objects.create(
        model="mystery-model-x",
        input_usd_per_mtok=10,
        output_usd_per_mtok=20,
        cache_read_usd_per_mtok=1,
        cache_write_usd_per_mtok=10,
    )
    rows, body = stats(api, "?group_by=project")
    assert rows["open-ace"]["cost_usd"] == str(SONNET_COST + Decimal("0.001050") + Decimal("0.001400"))
    assert (body["unpriced_models"], body["totals"]["unpriced_tokens"]) == ([], 0)


def test_prices_are_edited_in_the_admin(api, priced, admin_client):
    haiku = ModelPrice.objects.get(model="claude-haiku-4-5", match="prefix")
    assert admin_client.get(reverse("admin:sessions_app_modelprice_changelist")).status_code == 200
    url = reverse("admin:sessions_app_modelprice_change", args=[haiku.pk])
    page = admin_client.get(url)
    assert page.status_code == 200
    form = page.context["adminform"].form
    data = {name: form[name].value() or "" for name in form.fields}
    data.update(output_usd_per_mtok="10", notes="corrected in a test")
    response = admin_client.post(url, data)
    assert response.status_code == 302, response.context["adminform"].form.errors if response.context else response
    rows, _ = stats(api, "?group_by=model")
    assert rows["claude-haiku-4-5"]["cost_usd"] == "0.000900"  # 400×1 + 50×10
    # The LLM request's page shows its cost at the corrected price.
    request = priced.llm_requests.get(request_id="r2")
    page = admin_client.get(reverse("admin:sessions_app_llmrequest_change", args=[request.pk]))
    assert "USD 0.000900" in page.content.decode()


def test_a_negative_price_is_refused():
    from django.db import IntegrityError, transaction

    with pytest.raises(IntegrityError), transaction.atomic():
        ModelPrice.objects.create(model="bad", **{**_rates(1), "output_usd_per_mtok": Decimal(-1)})
