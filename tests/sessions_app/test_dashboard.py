"""The admin's usage dashboard: staff only, one tenant's figures from the roll-ups (never the messages),
filters, charts from our own static files, and CSV export of every table."""

import csv
import io
from datetime import timedelta
from decimal import Decimal

import pytest
from django.contrib.staticfiles import finders
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from sessions_app.selectors.blocks import floor_hour
from tests.support.api import post_messages
from tests.support.factories import SessionFactory

URL = reverse("admin:sessions_app_usage_dashboard")
WINDOW = "since=2026-03-01&until=2026-03-02"
SONNET = "claude-sonnet-4-5-20250929"


def answer(request_id, model, created_at, input_tokens, output_tokens, **extra):
    return {
        "role": "assistant",
        "content": "…",
        "request_id": request_id,
        "model": model,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "created_at": created_at,
        **extra,
    }


@pytest.fixture
def usage(api, other_api):
    """acme: a Claude Code session in project open-ace (Sonnet 4.5 and an unpriced model) and a Qwen Code
    session in project weather; globex: one session of its own. Top sessions are those started in the window."""
    code = SessionFactory(
        tenant=api.tenant,
        name="重构计费模块",
        tool="claude-code",
        user_id="alice",
        project="open-ace",
        started_at="2026-03-01T09:00:00Z",
    )
    post_messages(
        api,
        code,
        [
            {"role": "user", "content": "q", "created_at": "2026-03-01T09:00:00Z"},
            answer("r1", SONNET, "2026-03-01T09:00:01Z", 1000, 300, cache_read_tokens=5000, cache_creation_tokens=200),
            {"role": "toolResult", "content": "{}", "created_at": "2026-03-01T09:00:02Z"},
            answer("r2", "mystery-model-x", "2026-03-02T08:00:00Z", 100, 20),
        ],
    )
    qwen = SessionFactory(
        tenant=api.tenant,
        name="weather",
        tool="qwen-code",
        user_id="bob",
        project="weather",
        started_at="2026-03-02T10:00:00Z",
    )
    post_messages(
        api,
        qwen,
        [
            {"role": "user", "content": "天气", "created_at": "2026-03-02T10:00:00Z"},
            answer("q1", "qwen3-coder-plus", "2026-03-02T10:00:01Z", 2000, 100),
        ],
    )
    globex = SessionFactory(
        tenant=other_api.tenant,
        name="globex-secret",
        tool="claude-code",
        user_id="carol",
        started_at="2026-03-01T12:00:00Z",
    )
    post_messages(other_api, globex, [answer("g1", SONNET, "2026-03-01T12:00:00Z", 777_777, 1)])
    return code, qwen


def page(client, query=""):
    response = client.get(f"{URL}?{query}")
    assert response.status_code == 200, response.content[:500]
    return response, response.content.decode()


def test_the_dashboard_shows_the_tenants_figures(staff, api, usage):
    code, qwen = usage
    response, html = page(staff, f"tenant={api.tenant.pk}&{WINDOW}")
    totals = response.context["totals"]
    assert (totals["sessions"], totals["conversations"], totals["requests"], totals["messages"]) == (2, 2, 3, 6)
    assert (totals["input_tokens"], totals["output_tokens"], totals["cache_read_tokens"]) == (3100, 420, 5000)
    # Sonnet 4.5: 1000×3 + 300×15 + 5000×0.30 + 200×3.75 = 9750; qwen3-coder-plus: 2000×1 + 100×5 = 2500 (per 1M).
    assert totals["cost_usd"] == Decimal("0.012250")
    assert totals["unpriced_tokens"] == 120
    assert ">6<" in html  # messages
    assert "mystery-model-x" in html and "unpriced" in html
    for text in ("open-ace", "weather", "claude-code", "qwen-code", "alice", "bob", SONNET, "2026-03-02"):
        assert text in html, text
    # Top sessions link to the session and its timeline.
    assert reverse("admin:sessions_app_session_change", args=[code.pk]) in html
    assert reverse("admin:sessions_app_session_timeline", args=[qwen.pk]) in html
    tops = {top["name"]: [row["session"].pk for row in top["rows"]] for top in response.context["tops"]}
    # Claude Code used more tokens once its cache reads count (6,620 against 2,100) and cost more.
    assert tops == {"top_tokens": [code.pk, qwen.pk], "top_cost": [code.pk, qwen.pk]}
    # Charts: Chart.js from our static files, the data as JSON.
    assert "sessions_app/vendor/chart.js/chart.umd.min.js" in html
    assert 'id="ace-chart-data"' in html
    assert response.context["chart"]["days"] == ["2026-03-01", "2026-03-02"]
    # Cost by model: the models (the unpriced one at 0), not the prompts and tool results of no model.
    chart = response.context["chart"]
    assert set(chart["models"]) == {SONNET, "qwen3-coder-plus", "mystery-model-x"}
    assert dict(zip(chart["models"], chart["model_cost"], strict=True))[SONNET] == 0.00975
    assert "globex-secret" not in html


def test_outside_a_transaction_the_top_sessions_by_cost_are_read_beside_the_breakdowns(
    transactional_db, staff, api, usage
):
    import importlib
    import threading

    from django.apps import apps
    from django.db.backends.signals import connection_created

    # The transactional tests before this one emptied every table, the shipped prices of migration 0007 too.
    importlib.import_module("sessions_app.migrations.0007_usage_project_prices").load_prices(apps, None)

    opened = []

    def created(sender, connection, **kwargs):
        opened.append(threading.current_thread().name)

    connection_created.connect(created)
    try:
        response, html = page(staff, f"tenant={api.tenant.pk}&{WINDOW}")
    finally:
        connection_created.disconnect(created)
    code, qwen = usage
    assert any(name.startswith("ace-dashboard") for name in opened)  # the second connection, in its thread
    tops = {top["name"]: [row["session"].pk for row in top["rows"]] for top in response.context["tops"]}
    assert tops == {"top_tokens": [code.pk, qwen.pk], "top_cost": [code.pk, qwen.pk]}
    assert response.context["totals"]["cost_usd"] == Decimal("0.012250") and "globex-secret" not in html


def test_it_reads_the_roll_ups_never_the_messages(staff, api, usage):
    with CaptureQueriesContext(connection) as queries:
        page(staff, f"tenant={api.tenant.pk}&{WINDOW}")
    sqls = [q["sql"] for q in queries.captured_queries]
    assert not [sql for sql in sqls if "sessions_app_message" in sql or "sessions_app_llmrequest" in sql]
    assert len(sqls) < 25


def test_filters_narrow_the_figures(staff, api, usage):
    response, html = page(staff, f"tenant={api.tenant.pk}&{WINDOW}&tool=qwen-code")
    totals = response.context["totals"]
    assert (totals["sessions"], totals["requests"], totals["input_tokens"]) == (1, 1, 2000)
    assert totals["cost_usd"] == Decimal("0.002500")
    response, _ = page(staff, f"tenant={api.tenant.pk}&{WINDOW}&project=open-ace&user_id=alice")
    assert response.context["totals"]["requests"] == 2
    response, _ = page(staff, f"tenant={api.tenant.pk}&since=2026-03-02&until=2026-03-02")
    assert (response.context["totals"]["sessions"], response.context["totals"]["messages"]) == (1, 3)
    bad = staff.get(f"{URL}?tenant={api.tenant.pk}&since=2026-03-05&until=2026-03-01")
    assert bad.status_code == 400


def test_each_tenant_sees_only_its_own(staff, other_api, usage):
    response, html = page(staff, f"tenant={other_api.tenant.pk}&{WINDOW}")
    assert response.context["totals"]["input_tokens"] == 777_777
    assert "globex-secret" in html and "open-ace" not in html


def test_csv_export_of_a_grouping(staff, api, usage):
    response = staff.get(f"{URL}?tenant={api.tenant.pk}&{WINDOW}&format=csv&table=model")
    assert response.status_code == 200
    assert response["Content-Type"] == "text/csv; charset=utf-8"
    assert response["Content-Disposition"] == 'attachment; filename="usage-acme-model-2026-03-01-2026-03-02.csv"'
    rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
    by_model = {row["model"]: row for row in rows}
    assert set(by_model) == {SONNET, "mystery-model-x", "qwen3-coder-plus", ""}
    assert (by_model[SONNET]["requests"], by_model[SONNET]["input_tokens"], by_model[SONNET]["cost_usd"]) == (
        "1",
        "1000",
        "0.009750",
    )
    assert by_model["mystery-model-x"]["unpriced_tokens"] == "120"
    assert list(rows[0])[:3] == ["model", "sessions", "requests"]


def test_csv_export_of_every_table(staff, api, usage):
    code, qwen = usage
    base = f"{URL}?tenant={api.tenant.pk}&{WINDOW}&format=csv"
    for table in ("day", "tool", "user_id", "project", "model", "top_tokens", "top_cost"):
        response = staff.get(f"{base}&table={table}")
        assert response.status_code == 200, table
        rows = list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))
        assert rows, table
    top = list(
        csv.DictReader(
            io.StringIO(b"".join(staff.get(f"{base}&table=top_tokens").streaming_content).decode("utf-8-sig"))
        )
    )
    # total_tokens as the page counts them: input + output + cache read + cache write.
    assert (top[0]["session_id"], top[0]["name"], top[0]["total_tokens"]) == (str(code.pk), "重构计费模块", "6620")
    assert (top[0]["tenant"], top[0]["cost_usd"], top[1]["total_tokens"]) == ("acme", "0.009750", "2100")
    assert staff.get(f"{base}&table=nope").status_code == 400


def test_only_staff_with_the_view_permission_see_it(client, django_user_model, api, usage):
    user = django_user_model.objects.create_user("someone", password="x")
    client.force_login(user)
    response = client.get(URL)
    assert response.status_code == 302 and "/login/" in response["Location"]
    user.is_staff = True
    user.save()
    assert client.get(URL).status_code == 403


def test_the_admin_index_links_to_it_and_chart_js_is_vendored(staff, usage):
    assert URL in staff.get(reverse("admin:index")).content.decode()
    for name in ("usagedaily", "usagehourly", "modelprice"):
        assert staff.get(reverse(f"admin:sessions_app_{name}_changelist")).status_code == 200, name
    path = finders.find("sessions_app/vendor/chart.js/chart.umd.min.js")
    assert path and "Chart.js v4.6.1" in open(path, encoding="utf-8").read(200)
    assert finders.find("sessions_app/vendor/chart.js/LICENSE.md")
    for name in ("sessions_app/usage_dashboard.js", "sessions_app/usage_dashboard.css"):
        assert finders.find(name), name


def test_defaults_and_an_empty_window(staff, api, usage):
    response, html = page(staff)
    assert response.context["tenant"] is None  # two tenants: every tenant's usage, said so
    assert response.context["totals"]["messages"] == 0  # the last 30 days: nothing happened
    assert "No usage in this window." in html


def test_with_two_tenants_it_picks_none_for_you(staff, api, other_api, usage):
    """Unchosen, the dashboard shows every tenant's usage and says so: never the first tenant by name."""
    response, html = page(staff, WINDOW)
    assert response.context["tenant"] is None
    assert "<title>Usage dashboard · all tenants" in html and "<h1>Usage dashboard · all tenants</h1>" in html
    totals = response.context["totals"]
    assert (totals["sessions"], totals["input_tokens"]) == (3, 3100 + 777_777)  # acme's and globex's
    by_tenant = {row["label"]: row["all_tokens"] for row in response.context["breakdowns"][0]["rows"]}
    assert by_tenant == {"acme": 3100 + 420 + 5000 + 200, "globex": 777_778}
    assert "globex-secret" in html and "重构计费模块" in html  # top sessions of both, with their tenant
    # The selector lists every tenant, and "all tenants" selected.
    assert '<option value="all" selected>all tenants</option>' in html
    for tenant in (api.tenant, other_api.tenant):
        assert f'<option value="{tenant.pk}">{tenant.name}</option>' in html
    # Its CSV by tenant names each.
    rows = csv_rows(staff, f"{WINDOW}&tenant=all&format=csv&table=tenant_id")
    assert [(row["tenant"], row["total_tokens"]) for row in rows] == [("globex", "777778"), ("acme", "8720")]


def test_the_chosen_tenant_is_remembered(staff, api, other_api, usage):
    response, html = page(staff, f"tenant={other_api.tenant.pk}&{WINDOW}")
    assert response.context["tenant"] == other_api.tenant
    # A reload of the dashboard's own address (the index's link, a bookmark) keeps it, and the title says it.
    response, html = page(staff, WINDOW)
    assert response.context["tenant"] == other_api.tenant
    assert "<h1>Usage dashboard · globex</h1>" in html and "<title>Usage dashboard · globex" in html
    assert f'<option value="{other_api.tenant.pk}" selected>globex</option>' in html
    assert response.context["totals"]["input_tokens"] == 777_777
    # Choosing "all tenants" is remembered too; a tenant that no longer exists is not an error.
    page(staff, f"tenant=all&{WINDOW}")
    assert page(staff, WINDOW)[0].context["tenant"] is None
    bad = staff.get(f"{URL}?tenant=00000000-0000-0000-0000-000000000000&{WINDOW}")
    assert bad.status_code == 400 and "Select a valid choice" in bad.content.decode()


def test_with_one_tenant_it_is_the_default(staff, api):
    response, html = page(staff)
    assert response.context["tenant"] == api.tenant and "<h1>Usage dashboard · acme</h1>" in html


def csv_rows(client, query):
    response = client.get(f"{URL}?{query}")
    assert response.status_code == 200, response.content[:300]
    return list(csv.DictReader(io.StringIO(b"".join(response.streaming_content).decode("utf-8-sig"))))


def test_tokens_are_input_output_cache_read_and_cache_write(staff, api, usage):
    """The headline Tokens is every token a model read or wrote, as ccusage counts them, each kind named."""
    response, html = page(staff, f"tenant={api.tenant.pk}&{WINDOW}")
    totals = response.context["totals"]
    kinds = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
    assert [totals[kind] for kind in kinds] == [3100, 420, 5000, 200]
    assert totals["all_tokens"] == 3100 + 420 + 5000 + 200 == 8720
    for kind, shown in (("all_tokens", "8,720"), *zip(kinds, ("3,100", "420", "5,000", "200"), strict=True)):
        assert f'data-total="{kind}">{shown}<' in html, kind
    for label in ("total tokens", "input tokens", "output tokens", "cache read tokens", "cache write tokens"):
        assert f"<span>{label}</span>" in html, label
    assert "input + output + cache read + cache write (as ccusage&#x27;s Total Tokens)" in html  # on hover
    # Every table's total counts the same way: the model breakdown's Sonnet row, the day rows, the CSV.
    by_model = {row["key"]: row for row in response.context["breakdowns"][1]["rows"]}
    assert by_model[SONNET]["all_tokens"] == 1000 + 300 + 5000 + 200
    assert sum(row["all_tokens"] for row in response.context["days"]["rows"]) == 8720
    rows = {row["model"]: row for row in csv_rows(staff, f"tenant={api.tenant.pk}&{WINDOW}&format=csv&table=model")}
    assert rows[SONNET]["total_tokens"] == "6500"


def test_by_model_counts_the_sessions_that_used_each_model(staff, api, usage):
    """A session counts under every model it used; prompts and tool results (no model) hold none of them."""
    code, qwen = usage
    third = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="alice", started_at="2026-03-02T11:00:00Z")
    post_messages(
        api,
        third,
        [
            {"role": "user", "content": "again", "created_at": "2026-03-02T11:00:00Z"},
            answer("t1", SONNET, "2026-03-02T11:00:01Z", 10, 5),
            answer("t2", "qwen3-coder-plus", "2026-03-02T11:00:02Z", 10, 5),
        ],
    )
    response, html = page(staff, f"tenant={api.tenant.pk}&{WINDOW}")
    model_table = next(t for t in response.context["breakdowns"] if t["name"] == "model")
    sessions = {row["key"]: row["sessions"] for row in model_table["rows"]}
    assert sessions == {SONNET: 2, "qwen3-coder-plus": 2, "mystery-model-x": 1, None: 0}
    assert response.context["totals"]["sessions"] == 3
    assert "(no model)" in html and "a session that used several models counts under each" in html
    rows = csv_rows(staff, f"tenant={api.tenant.pk}&{WINDOW}&format=csv&table=model")
    assert {row["model"]: row["sessions"] for row in rows}[SONNET] == "2"
    # Narrowed to a tool, only that tool's sessions.
    response, _ = page(staff, f"tenant={api.tenant.pk}&{WINDOW}&tool=qwen-code")
    model_table = next(t for t in response.context["breakdowns"] if t["name"] == "model")
    assert {row["key"]: row["sessions"] for row in model_table["rows"]}["qwen3-coder-plus"] == 1


def test_its_queries_do_not_grow_with_sessions_models_or_tenants(staff, api, other_api, usage):
    def count(query):
        with CaptureQueriesContext(connection) as queries:
            page(staff, query)
        return len(queries.captured_queries)

    queries = {query: count(query) for query in (f"tenant={api.tenant.pk}&{WINDOW}", f"tenant=all&{WINDOW}")}
    for i in range(12):
        session = SessionFactory(tenant=(api, other_api)[i % 2].tenant, tool="codex", started_at="2026-03-02T09:00:00Z")
        post_messages((api, other_api)[i % 2], session, [answer(f"m{i}", f"model-{i}", "2026-03-02T09:00:01Z", 10, 5)])
    assert {query: count(query) for query in queries} == queries


def test_the_plan_windows_panel_shows_each_active_users_block_and_week_against_their_plan(staff, api, other_api):
    """Users active in the last 5 hours: their current block (tokens, cost, % of the plan, projection) and week; a
    user idle for longer is not listed, nor another tenant's user; every tenant's dashboard has no panel."""
    now = timezone.now()
    # The plan's week resets days away from now, so the messages below are in its current week whenever this runs.
    resets = (now + timedelta(days=3)).strftime("%A").lower()
    plan = {"preset": "pro", "week_starts_on": resets, "week_start_hour": 0}
    assert api.post("/api/v1/plans/", plan, format="json").status_code == 201
    for tenant_api, user_id, minutes_ago in (
        (api, "alice", 40),
        (api, "alice", 20),
        (api, "idle", 600),
        (other_api, "carol", 30),
    ):
        session = SessionFactory(tenant=tenant_api.tenant, user_id=user_id, tool="claude-code")
        moment = (now - timedelta(minutes=minutes_ago)).isoformat()
        post_messages(tenant_api, session, [answer(f"{user_id}{minutes_ago}", SONNET, moment, 1500, 400)])
    response, html = page(staff, f"tenant={api.tenant.pk}")
    panel = response.context["plan_windows"]
    assert [row["user_id"] for row in panel["rows"]] == ["alice"]
    row = panel["rows"][0]
    assert row["block"]["is_active"] and row["block"]["input_tokens"] == 3000
    assert row["block"]["plan_usage"]["tokens_percent"] == 20.0  # 3,800 of Pro's 19,000 input + output tokens
    assert row["week"]["input_tokens"] == 3000 and row["plan"]["preset"] == "pro"
    assert 'id="ace-plan-windows"' in html and "20.0%" in html and "carol" not in html
    response, html = page(staff, "tenant=all")
    assert response.context["plan_windows"] is None and 'id="ace-plan-windows"' not in html


def test_just_after_the_weekly_reset_the_panel_shows_the_new_week_at_zero(staff, api):
    """A user whose block is still going but whose plan's week reset since their last message: the week shown is the
    new one, at 0 tokens against the plan, not a blank."""
    now = timezone.now()
    reset = floor_hour(now)  # the plan's week began at the start of this hour
    plan = {"preset": "pro", "week_starts_on": reset.strftime("%A").lower(), "week_start_hour": reset.hour}
    assert api.post("/api/v1/plans/", plan, format="json").status_code == 201
    session = SessionFactory(tenant=api.tenant, user_id="alice", tool="claude-code")
    moment = (reset - timedelta(minutes=10)).isoformat()
    post_messages(api, session, [answer("before-reset", SONNET, moment, 1500, 400)])
    response, html = page(staff, f"tenant={api.tenant.pk}")
    row = response.context["plan_windows"]["rows"][0]
    assert row["block"]["is_active"] and row["block"]["input_tokens"] == 1500
    week = row["week"]
    assert week["is_current"] and week["week_start"] == reset and week["input_tokens"] == 0
    assert week["plan_usage"]["tokens"] == 0 and week["plan_usage"]["cost_usd"] == 0
    assert f"<td>{reset:%Y-%m-%d %H:%M}</td>" in html
