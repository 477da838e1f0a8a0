"""Cache writes by lifetime (issue 32): 5-minute and 1-hour writes counted apart wherever the source says so, kept
apart in requests, sessions, roll-ups and stats (their sum stays `cache_creation_tokens`), priced apart (1-hour
writes at 2x input, 5-minute at 1.25x, as Anthropic lists them), and re-derived for stored Claude Code responses
by the migration that brought them."""

import json
from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from ingest_app.importers import parse_file
from sessions_app.accounting import cache_writes, count_usage
from sessions_app.models import LlmRequest, Message, Session, SessionModelUsage, UsageDaily, UsageHourly
from sessions_app.pricing import PriceBook
from sessions_app.selectors.recount import rollup_drift
from tests.support.factories import SessionFactory

pytestmark = pytest.mark.django_db
SONNET = "claude-sonnet-4-5-20250929"
LIFETIME_FIELDS = ("cache_creation_tokens", "cache_creation_5m_tokens", "cache_creation_1h_tokens")


def claude_usage(five_minutes: int, one_hour: int, **more) -> dict:
    """A Claude Code response's `usage` as Claude Code 2.x writes it (real shape: `cache_creation` split)."""
    return {
        "input_tokens": 10,
        "cache_creation_input_tokens": five_minutes + one_hour,
        "cache_read_input_tokens": 50_000,
        "cache_creation": {"ephemeral_5m_input_tokens": five_minutes, "ephemeral_1h_input_tokens": one_hour},
        "output_tokens": 300,
        "service_tier": "standard",
        **more,
    }


@pytest.mark.parametrize(
    ("reported", "counted"),
    [
        ((None, None, None), (None, None, None)),
        ((200, None, None), (200, 200, 0)),  # no lifetime said: the API's default, 5 minutes
        ((200, None, 150), (200, 50, 150)),
        ((200, 50, 150), (200, 50, 150)),
        ((None, 50, 150), (200, 50, 150)),  # the lifetimes alone (a usage without the top-level sum)
        ((None, None, 150), (150, 0, 150)),
        ((0, 0, 0), (0, 0, 0)),
    ],
)
def test_a_write_is_counted_by_lifetime_and_the_sum_is_kept(reported, counted):
    assert cache_writes(*reported) == counted


def test_a_one_hour_write_costs_twice_input_and_a_five_minute_write_one_and_a_quarter():
    """Sonnet 4.5: input $3, 5-minute writes $3.75 (1.25x), 1-hour writes $6 (2x) per million tokens
    (https://docs.claude.com/en/docs/about-claude/pricing). 1,000,000 written for 5 minutes and 1,000,000 for an hour:
    $3.75 + $6.00 = $9.75; the same two million priced as 5-minute writes only (the bug this fixes) would be $7.50."""
    price = PriceBook.load().price_for(SONNET)
    assert price.cache_write_usd_per_mtok == Decimal("3.75")
    assert price.cache_write_1h_usd_per_mtok == Decimal("6")
    tokens = {"cache_creation_tokens": 2_000_000, "cache_creation_5m_tokens": 1_000_000,
              "cache_creation_1h_tokens": 1_000_000}
    assert price.cost(tokens) == Decimal("9.75")
    # A row that says only the sum (5-minute column never filled, e.g. a raw insert) is priced the same way.
    assert price.cost({"cache_creation_tokens": 2_000_000, "cache_creation_1h_tokens": 1_000_000}) == Decimal("9.75")


def test_the_lifetimes_are_kept_apart_in_requests_sessions_roll_ups_and_stats(api):
    session = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="alice")
    items = [
        {"role": "user", "content": "q", "created_at": "2026-03-01T09:00:00Z"},
        # One response in two lines (the second repeats the usage, output grown): one request.
        *(
            {
                "role": "assistant",
                "content": text,
                "request_id": "r1",
                "model": SONNET,
                "input_tokens": 10,
                "output_tokens": output,
                "cache_creation_tokens": 3000,
                "cache_creation_1h_tokens": 2000,
                "created_at": f"2026-03-01T09:00:0{n}Z",
            }
            for n, (text, output) in enumerate((("a", 5), ("b", 300)), 1)
        ),
        # A client that reports only the sum: 5-minute writes.
        {"role": "assistant", "content": "c", "request_id": "r2", "model": SONNET, "input_tokens": 10,
         "output_tokens": 20, "cache_creation_tokens": 400, "created_at": "2026-03-01T09:05:00Z"},
        # Only the lifetimes: their sum.
        {"role": "assistant", "content": "d", "request_id": "r3", "model": SONNET, "input_tokens": 10,
         "output_tokens": 20, "cache_creation_5m_tokens": 100, "cache_creation_1h_tokens": 50,
         "created_at": "2026-03-01T09:06:00Z"},
    ]
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json")
    assert response.status_code == 201, response.content
    expected = {"cache_creation_tokens": 3550, "cache_creation_5m_tokens": 1500, "cache_creation_1h_tokens": 2050}
    assert count_usage(items) | expected == count_usage(items)  # the accounting's oracle agrees

    stats = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    assert {field: stats[field] for field in LIFETIME_FIELDS} == expected
    assert list(LlmRequest.objects.filter(session=session).order_by("request_id").values_list(*LIFETIME_FIELDS)) == [
        (3000, 1000, 2000),
        (400, 400, 0),
        (150, 100, 50),
    ]
    for rows in (UsageHourly.objects, UsageDaily.objects, SessionModelUsage.objects):
        sums = rows.filter(tenant=api.tenant, model=SONNET).values_list(*LIFETIME_FIELDS)
        assert [tuple(row) for row in sums] == [tuple(expected.values())]
    grouped = api.get("/api/v1/stats/?group_by=model").json()
    assert {field: grouped["totals"][field] for field in LIFETIME_FIELDS} == expected
    # Priced apart: 30 input ($3), 340 output ($15), 1500 5-minute writes ($3.75), 2050 1-hour writes ($6).
    cost = (30 * Decimal(3) + 340 * Decimal(15) + 1500 * Decimal("3.75") + 2050 * Decimal(6)) / 1_000_000
    assert Decimal(grouped["totals"]["cost_usd"]) == cost.quantize(Decimal("0.000001"))
    assert Decimal(stats["cost_usd"]) == cost.quantize(Decimal("0.000001"))
    assert not any(rollup_drift(tenant=api.tenant).values())  # the recount from the messages agrees


def test_lifetimes_adding_up_to_more_than_the_writes_are_refused(api, session):
    item = {"role": "assistant", "content": "x", "cache_creation_tokens": 100, "cache_creation_5m_tokens": 80,
            "cache_creation_1h_tokens": 40}
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", item, format="json")
    assert response.status_code == 400
    assert "cache_creation_5m_tokens + cache_creation_1h_tokens (120)" in response.content.decode(), response.content
    assert not Message.objects.filter(session=session).exists()


def test_claude_codes_usage_split_is_read(tmp_path):
    record = {
        "type": "assistant",
        "sessionId": "s1",
        "uuid": "u1",
        "timestamp": "2026-03-01T09:00:00.000Z",
        "requestId": "req_1",
        "message": {
            "id": "msg_1",
            "role": "assistant",
            "model": SONNET,
            "content": [{"type": "text", "text": "hi"}],
            "stop_reason": "end_turn",
            "usage": claude_usage(1200, 31874),
        },
    }
    line = json.dumps(record) + "\n"
    path = tmp_path / "s1.jsonl"
    path.write_text(line)
    parsed = parse_file(path, tool="claude-code", flush=True)
    (message,) = [m for m in parsed.messages if m.role == "assistant"]
    assert (message.cache_creation_tokens, message.cache_creation_5m_tokens, message.cache_creation_1h_tokens) == (
        33074,
        1200,
        31874,
    )


@pytest.mark.django_db(transaction=True)
def test_the_migration_re_derives_claude_code_one_hour_writes_from_the_stored_usage(api):
    """Populated before the lifetimes existed (migrated back to 0025), then migrated: the 1-hour writes come back from
    the usage each stored Claude Code response keeps, into every counter, as the live path counts them."""
    session = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="alice")
    items = [
        {"role": "user", "content": "q", "created_at": "2026-03-01T09:00:00Z"},
        {"role": "assistant", "content": "a", "request_id": "r1", "model": SONNET, "input_tokens": 10,
         "output_tokens": 300, "cache_creation_tokens": 33074, "cache_creation_1h_tokens": 31874,
         "metadata": {"usage": claude_usage(1200, 31874)}, "created_at": "2026-03-01T09:00:01Z"},
        {"role": "assistant", "content": "b", "request_id": "r2", "model": SONNET, "input_tokens": 10,
         "output_tokens": 30, "cache_creation_tokens": 500, "created_at": "2026-03-01T10:00:01Z"},
    ]
    assert api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json").status_code == 201

    def counters():
        return (
            Session.objects.filter(pk=session.pk).values_list(*LIFETIME_FIELDS).get(),
            sorted(LlmRequest.objects.filter(session=session).values_list("request_id", *LIFETIME_FIELDS)),
            sorted(UsageHourly.objects.filter(tenant=api.tenant).values_list("hour", "model", *LIFETIME_FIELDS)),
            sorted(UsageDaily.objects.filter(tenant=api.tenant).values_list("day", "model", *LIFETIME_FIELDS)),
            sorted(SessionModelUsage.objects.filter(session=session).values_list("model", *LIFETIME_FIELDS)),
            api.get(f"/api/v1/sessions/{session.pk}/stats/").json()["cost_usd"],
        )

    live = counters()
    assert live[0] == (33574, 1700, 31874)
    executor = MigrationExecutor(connection)
    executor.migrate([("sessions_app", "0025_export_model_move")])
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert counters() == live
