"""The tools' own cost, reconciled (issue 32, part 4): where a source reports what a call cost (Claude Code's OTLP
`cost_usd`, OpenClaw's `usage.cost.total`, OpenCode's `cost`, a client's `reported_cost_usd`), it is kept as reported
beside the cost Open ACE computes, both are shown, and where every request of a model's usage reported one the
difference is given, flagged over 1%."""

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.urls import reverse

from ingest_app.importers import parse_file
from ingest_app.importers.base import nano_usd
from sessions_app.accounting import SessionAccount
from sessions_app.models import LlmRequest, Session, SessionModelUsage, UsageDaily, UsageHourly
from sessions_app.selectors.recount import rollup_drift
from tests.support.agent_logs import DATA
from tests.support.factories import SessionFactory

pytestmark = pytest.mark.django_db
SONNET = "claude-sonnet-4-5-20250929"
REPORTED = ("reported_cost_nano_usd", "reported_cost_requests")


def call(request_id: str, model: str, reported: str | None, **tokens) -> dict:
    item = {"role": "assistant", "content": request_id, "request_id": request_id, "model": model,
            "created_at": "2026-03-01T09:00:00Z", **tokens}
    if reported is not None:
        item["reported_cost_usd"] = reported
    return item


@pytest.mark.parametrize(
    ("value", "nano"),
    [(0.1, 100_000_000), ("0.0042", 4_200_000), (1e-10, 0), (3, 3_000_000_000), (-1, None), ("x", None),
     (float("nan"), None), (True, None), (None, None), (2e6, None)],
)
def test_a_reported_cost_is_read_exactly_in_nano_dollars(value, nano):
    assert nano_usd(value) == nano


def test_the_reported_cost_is_kept_beside_ours_and_the_difference_flagged_over_one_percent(api):
    session = SessionFactory(tenant=api.tenant, tool="opencode", user_id="alice")
    # Sonnet 4.5 ($3 input, $15 output): 1000 input + 100 output = $0.0045 each. Both calls reported a cost, one of
    # them 10% high: $0.0045 + $0.00495 = $0.00945 reported against $0.009 computed: +$0.00045, +5%: flagged.
    # Haiku 4.5 ($1 / $5): 1000 + 100 = $0.0015, reported exactly: no difference. A third model's call reported
    # nothing: its cost is not compared.
    items = [
        {"role": "user", "content": "q", "created_at": "2026-03-01T09:00:00Z"},
        call("r1", SONNET, "0.0045", input_tokens=1000, output_tokens=100),
        call("r2", SONNET, "0.00495", input_tokens=1000, output_tokens=100),
        call("r3", "claude-haiku-4-5", "0.0015", input_tokens=1000, output_tokens=100),
        call("r4", "claude-opus-4-5", None, input_tokens=1000, output_tokens=100),
    ]
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json")
    assert response.status_code == 201, response.content
    account = SessionAccount()
    for item in items:
        account.add(item)
    assert (account.measures()["reported_cost_requests"], account.measures()["reported_cost_nano_usd"]) == (
        3, 10_950_000)
    assert "reported_cost_requests" not in account.counters()  # what the stats API lists

    by_model = {row["key"]: row for row in api.get("/api/v1/stats/?group_by=model").json()["results"]}
    sonnet = by_model[SONNET]
    assert (sonnet["cost_usd"], sonnet["reported_cost_usd"], sonnet["reported_cost_requests"]) == (
        "0.009000", "0.009450", 2)
    assert (sonnet["cost_difference_usd"], sonnet["cost_difference_percent"], sonnet["cost_flagged"]) == (
        "0.000450", 5.0, True)
    haiku = by_model["claude-haiku-4-5"]
    assert (haiku["cost_difference_usd"], haiku["cost_flagged"]) == ("0.000000", False)
    opus = by_model["claude-opus-4-5"]
    assert (opus["reported_cost_usd"], opus["cost_difference_usd"], opus["cost_flagged"]) == (None, None, False)

    stats = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    assert (stats["reported_cost_usd"], stats["reported_cost_requests"]) == ("0.010950", 3)
    # Compared where every request reported: Sonnet and Haiku, $0.0105 computed, $0.01095 reported.
    assert (stats["cost_difference_usd"], stats["cost_flagged"]) == ("0.000450", True)
    message = api.get(f"/api/v1/messages/?session={session.pk}").json()["results"][2]
    assert message["reported_cost_usd"] == "0.004950000"
    assert "reported_cost_nano_usd" not in message
    assert not any(rollup_drift(tenant=api.tenant).values())  # the recount from the messages agrees


def test_a_chat_turns_reported_cost_covers_its_calls(api, session):
    turn = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"content": "hi"}, format="json")
    assert turn.status_code == 201, turn.content
    done = api.post(
        f"/api/v1/turns/{turn.json()['turn']}/complete/",
        {"content": "hello", "model": SONNET, "finish_reason": "stop", "input_tokens": 1000, "output_tokens": 100,
         "elapsed_ms": 900, "requests": 2, "reported_cost_usd": "0.0045"},
        format="json",
    )
    assert done.status_code == 200, done.content
    stats = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    assert (stats["requests"], stats["reported_cost_requests"], stats["reported_cost_usd"]) == (2, 2, "0.004500")
    assert (stats["cost_difference_usd"], stats["cost_flagged"]) == ("0.000000", False)


def test_a_negative_or_huge_reported_cost_is_refused(api, session):
    for value in ("-0.01", "1000001"):
        response = api.post(f"/api/v1/sessions/{session.pk}/messages/", call("r", SONNET, value), format="json")
        assert response.status_code == 400, response.content
        assert "reported_cost_usd" in response.content.decode()


def test_openclaws_cost_is_read():
    """OpenClaw's `usage.cost.total` (USD) on its calls, exactly: 0.0042 → 4,200,000 nano-dollars."""
    (path,) = DATA.glob("openclaw/.openclaw/agents/main/sessions/0f3a9c27-*.jsonl")
    openclaw = parse_file(path)
    reported = [m.reported_cost_nano_usd for m in openclaw.messages if m.reported_cost_nano_usd is not None]
    assert 4_200_000 in reported, reported


@pytest.mark.django_db(transaction=True)
def test_the_migration_re_derives_the_reported_cost_from_the_stored_metadata(api):
    """Populated before reported costs were counted (migrated back to 0027), then migrated: the cost each stored
    message's metadata kept comes back into every counter, as the live path counts it."""
    session = SessionFactory(tenant=api.tenant, tool="opencode", user_id="alice")
    items = [
        {**call("r1", SONNET, "0.0045", input_tokens=1000, output_tokens=100), "metadata": {"cost": 0.0045}},
        {**call("r2", SONNET, "0.001", input_tokens=100, output_tokens=10),
         "metadata": {"cost_usd": 0.001, "source": "otel"}, "created_at": "2026-03-01T10:00:00Z"},
        {**call("r3", "kimi-k2", "0.0021", input_tokens=100, output_tokens=10),
         "metadata": {"usage": {"cost": {"total": 0.0021}}}},
        call("r4", SONNET, None, input_tokens=100, output_tokens=10),
    ]
    assert api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json").status_code == 201

    def counters():
        return (
            Session.objects.filter(pk=session.pk).values_list(*REPORTED).get(),
            sorted(LlmRequest.objects.filter(session=session).values_list("request_id", *REPORTED)),
            sorted(UsageHourly.objects.filter(tenant=api.tenant).values_list("hour", "model", *REPORTED)),
            sorted(UsageDaily.objects.filter(tenant=api.tenant).values_list("day", "model", *REPORTED)),
            sorted(SessionModelUsage.objects.filter(session=session).values_list("model", *REPORTED)),
        )

    live = counters()
    assert live[0] == (7_600_000, 3)
    executor = MigrationExecutor(connection)
    executor.migrate([("sessions_app", "0027_usage_plans")])
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
    assert counters() == live
    assert Decimal(api.get(f"/api/v1/sessions/{session.pk}/stats/").json()["reported_cost_usd"]) == Decimal("0.0076")


def test_the_dashboard_shows_the_tools_own_cost_with_the_differences_over_one_percent_flagged(staff, api):
    session = SessionFactory(tenant=api.tenant, tool="opencode", user_id="alice")
    items = [
        call("r1", SONNET, "0.00495", input_tokens=1000, output_tokens=100),  # ours $0.0045: +10%
        call("r2", "claude-haiku-4-5", "0.0015", input_tokens=1000, output_tokens=100),  # ours $0.0015: equal
    ]
    assert api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json").status_code == 201
    response = staff.get(
        reverse("admin:sessions_app_usage_dashboard") + f"?tenant={api.tenant.pk}&since=2026-03-01&until=2026-03-02"
    )
    assert response.status_code == 200
    html = response.content.decode()
    panel = html[html.index('id="ace-reported-cost"') :]
    panel = panel[: panel.index("</section>")]
    rows = panel.split("<tr")[2:]
    assert 'class="ace-flagged"' in rows[0] and SONNET in rows[0] and "10.0%" in rows[0]  # flagged first
    assert "claude-haiku-4-5" in rows[1] and "ace-flagged" not in rows[1] and "0.0%" in rows[1]
