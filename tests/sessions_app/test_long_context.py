"""Long-context tiers priced per request (issue 32): a request whose prompt (input + cache reads + cache writes) is over
200K tokens is priced at its model's long-context rates, whatever else the day used; two requests of 150K on the
same day stay at the standard rates (a per-day sum of 300K must not lift them into the tier)."""

from decimal import Decimal

import pytest

from sessions_app.accounting import long_context
from sessions_app.models import LlmRequest, ModelPrice
from sessions_app.pricing import PriceBook
from sessions_app.selectors.recount import rollup_drift
from sessions_app.selectors.usage import UsageFilter, top_sessions_by_cost
from tests.support.factories import SessionFactory

pytestmark = pytest.mark.django_db
SONNET = "claude-sonnet-4-5-20250929"
GEMINI = "gemini-2.5-pro"


def call(request_id: str, model: str, hour: int, **tokens) -> dict:
    return {"role": "assistant", "content": request_id, "request_id": request_id, "model": model,
            "created_at": f"2026-03-01T{hour:02d}:00:00Z", **tokens}


def test_a_request_is_long_context_when_its_prompt_with_the_cache_is_over_200k_tokens():
    assert long_context(100_000, 10, 100_000, 0, 0) == (None,) * 5  # exactly 200K: the standard tier
    assert long_context(1, 10, 150_000, 50_000, 20_000) == (1, 10, 150_000, 50_000, 20_000)
    assert long_context(None, 5, None, None, None) == (None,) * 5


def test_the_shipped_long_context_rates():
    book = PriceBook.load()
    sonnet, gemini = book.price_for(SONNET), book.price_for(GEMINI)
    assert (sonnet.long_context_input_usd_per_mtok, sonnet.long_context_output_usd_per_mtok) == (6, Decimal("22.5"))
    assert (sonnet.long_context_cache_read_usd_per_mtok, sonnet.long_context_cache_write_usd_per_mtok) == (
        Decimal("0.6"), Decimal("7.5"))
    assert sonnet.long_context_cache_write_1h_usd_per_mtok == 12
    assert (gemini.long_context_input_usd_per_mtok, gemini.long_context_output_usd_per_mtok) == (Decimal("2.5"), 15)
    assert book.price_for("claude-opus-4-5").long_context_input_usd_per_mtok is None  # no tier


def test_long_context_requests_are_priced_at_their_tier_one_by_one(api):
    session = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="alice")
    items = [
        # Two Sonnet 4.5 requests of 150K prompt each (300K that day): standard rates.
        # 10K input × $3 + 140K cache read × $0.30 + 1,000 output × $15 = $0.03 + $0.042 + $0.015 = $0.087 each.
        call("r1", SONNET, 9, input_tokens=10_000, cache_read_tokens=140_000, output_tokens=1_000),
        call("r2", SONNET, 9, input_tokens=10_000, cache_read_tokens=140_000, output_tokens=1_000),
        # One of 250K: 10K input × $6 + 200K cache read × $0.60 + 40K written for an hour × $12 + 2,000 output
        # × $22.50 = $0.06 + $0.12 + $0.48 + $0.045 = $0.705 (at the standard rates it would be $0.03 + $0.06 + $0.24
        # + $0.03 = $0.36).
        call("r3", SONNET, 10, input_tokens=10_000, cache_read_tokens=200_000, cache_creation_tokens=40_000,
             cache_creation_1h_tokens=40_000, output_tokens=2_000),
        # Gemini 2.5 Pro, 300K input: 300K × $2.50 + 1,000 × $15 = $0.75 + $0.015 = $0.765.
        call("r4", GEMINI, 11, input_tokens=300_000, output_tokens=1_000),
    ]
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json")
    assert response.status_code == 201, response.content
    r3 = LlmRequest.objects.get(session=session, request_id="r3")
    assert (r3.long_context_input_tokens, r3.long_context_cache_read_tokens, r3.long_context_cache_creation_1h_tokens) \
        == (10_000, 200_000, 40_000)
    assert LlmRequest.objects.get(session=session, request_id="r1").long_context_input_tokens == 0

    by_model = {row["key"]: row for row in api.get("/api/v1/stats/?group_by=model").json()["results"]}
    assert Decimal(by_model[SONNET]["cost_usd"]) == Decimal("0.087") * 2 + Decimal("0.705")
    assert Decimal(by_model[GEMINI]["cost_usd"]) == Decimal("0.765")
    hours = {row["key"]: row for row in api.get("/api/v1/stats/?group_by=day").json()["results"]}
    assert Decimal(hours["2026-03-01"]["cost_usd"]) == Decimal("0.087") * 2 + Decimal("0.705") + Decimal("0.765")
    stats = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    assert Decimal(stats["cost_usd"]) == Decimal("1.644")
    assert not any(rollup_drift(tenant=api.tenant).values())  # the recount from the messages agrees

    # A model without a tier prices long requests at its standard rates; giving it one reprices them at once.
    ModelPrice.objects.filter(model="gemini-2.5-pro").update(long_context_input_usd_per_mtok=None)
    by_model = {row["key"]: row for row in api.get("/api/v1/stats/?group_by=model").json()["results"]}
    assert Decimal(by_model[GEMINI]["cost_usd"]) == Decimal("0.375") + Decimal("0.015")  # $1.25 input, $15 output


def test_the_top_sessions_by_cost_rank_a_long_context_request_at_its_tier(api):
    """The dashboard's ranking by cost prices a long request at its tier: $0.705 against a standard session's $0.45,
    where the standard rates ($0.36) would put it second; without the tier, second it is."""
    long, standard = (SessionFactory(tenant=api.tenant, tool="claude-code", user_id=u) for u in ("alice", "bob"))
    for session, items in (
        (long, [call("r3", SONNET, 10, input_tokens=10_000, cache_read_tokens=200_000, cache_creation_tokens=40_000,
                     cache_creation_1h_tokens=40_000, output_tokens=2_000)]),
        # 100K input × $3 + 10K output × $15 = $0.30 + $0.15.
        (standard, [call("s1", SONNET, 10, input_tokens=100_000, output_tokens=10_000)]),
    ):
        assert api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json").status_code == 201

    def ranked():
        top = top_sessions_by_cost(usage=UsageFilter(tenant=api.tenant), limit=5)
        return [(entry["session"].pk, entry["cost_usd"]) for entry in top]

    assert ranked() == [(long.pk, Decimal("0.705")), (standard.pk, Decimal("0.45"))]
    ModelPrice.objects.filter(model="claude-sonnet-4-5").update(
        **{f"long_context_{kind}_usd_per_mtok": None for kind in ("input", "output", "cache_read", "cache_write",
                                                                  "cache_write_1h")}
    )
    assert ranked() == [(standard.pk, Decimal("0.45")), (long.pk, Decimal("0.36"))]
