"""The strategies admin: edits go through the service (a version each), runs are queued by hand and audited."""

import json

from memory_app.models import Record
from sessions_app.services.messages import messages_append
from strategies_app.models import RunStatus, Strategy, StrategyRun, StrategyVersion, Trigger
from strategies_app.services.runs import run_execute, run_request
from tests.support.factories import SessionFactory


def form_data(strategy: Strategy, **changes) -> dict:
    data = {
        "name": strategy.name,
        "description": strategy.description,
        "type": strategy.type,
        "enabled": "on" if strategy.enabled else "",
        "extractor": strategy.extractor,
        "prompt": strategy.prompt,
        "on_tool_result": "on" if strategy.on_tool_result else "",
        "on_state_keys": json.dumps(strategy.on_state_keys),
        "message_threshold": strategy.message_threshold if strategy.message_threshold is not None else "",
        "accumulated_threshold": strategy.accumulated_threshold if strategy.accumulated_threshold is not None else "",
        "schedule_minutes": strategy.schedule_minutes or "",
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
    }
    data.update(changes)
    return {k: v for k, v in data.items() if v != ""}


def test_editing_a_strategy_in_the_admin_makes_a_version(staff, api):
    strategy = Strategy.objects.get(tenant=api.tenant, name="user-profile")
    url = f"/admin/strategies_app/strategy/{strategy.pk}/change/"
    page = staff.get(url)
    assert page.status_code == 200 and "{messages}" in page.content.decode()
    response = staff.post(url, form_data(strategy, prompt="Only preferences.\n{messages}"))
    assert response.status_code == 302, response.content.decode()[:2000]
    strategy.refresh_from_db()
    assert strategy.version == 2 and strategy.prompt == "Only preferences.\n{messages}"
    assert StrategyVersion.objects.get(strategy=strategy, version=2).actor == "admin:auditor"
    # an unknown placeholder is refused with the reason, nothing saved
    refused = staff.post(url, form_data(strategy, prompt="Hello {name}"))
    assert refused.status_code == 200 and "Unknown placeholder" in refused.content.decode()
    strategy.refresh_from_db()
    assert strategy.version == 2


def test_a_run_queued_from_the_admin_is_audited_read_only(staff, api):
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    messages_append(
        tenant=api.tenant, session_id=session.pk, items=[{"role": "user", "content": "I prefer green tea."}]
    )
    strategy = Strategy.objects.get(tenant=api.tenant, name="user-profile")
    StrategyRun.objects.all().delete()  # the message's own threshold trigger
    response = staff.post(f"/admin/strategies_app/strategy/{strategy.pk}/run/", {"session": str(session.pk)})
    assert response.status_code == 302
    run = StrategyRun.objects.get(strategy=strategy)
    assert run.trigger == "manual" and run.trigger_detail == "admin:auditor"
    run_execute(run.pk)  # what the worker does
    page = staff.get(f"/admin/strategies_app/strategyrun/{run.pk}/change/").content.decode()
    assert "ADD" in page and "green tea" in page.lower()
    record = Record.objects.get(tenant=api.tenant, valid=True)
    assert f"/admin/memory_app/record/{record.pk}/change/" in page
    listing = staff.get("/admin/strategies_app/strategyrun/?status=succeeded").content.decode()
    assert "user-profile" in listing
    # read-only: no add, no delete
    assert staff.get("/admin/strategies_app/strategyrun/add/").status_code == 403
    assert StrategyRun.objects.get(pk=run.pk).status == RunStatus.SUCCEEDED


def test_the_session_admin_action_runs_the_enabled_strategies(staff, api):
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    Strategy.objects.filter(tenant=api.tenant, name="facts-experience").update(enabled=False)
    response = staff.post(
        "/admin/sessions_app/session/",
        {"action": "run_strategies_on_sessions", "_selected_action": [str(session.pk)]},
    )
    assert response.status_code == 302
    runs = StrategyRun.objects.filter(session=session, trigger="manual")
    assert sorted(runs.values_list("strategy__name", flat=True)) == ["task-progress", "user-profile"]


def test_adding_a_strategy_in_the_admin(staff, api):
    template = Strategy.objects.get(tenant=api.tenant, name="facts-experience")
    data = form_data(template, name="recipes", type="custom", prompt="Keep recipes.\n{messages}")
    data["tenant"] = str(api.tenant.pk)
    response = staff.post("/admin/strategies_app/strategy/add/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    created = Strategy.objects.get(tenant=api.tenant, name="recipes")
    assert created.version == 1 and created.versions.get().prompt == "Keep recipes.\n{messages}"


def test_runs_are_named_by_their_strategy_and_filtered_by_name_across_tenants(staff, api, other_api):
    for client in (api, other_api):  # two tenants, each with its own built-in strategies
        session = SessionFactory(tenant=client.tenant, name="绿茶", user_id="xiaoming")
        for strategy in Strategy.objects.filter(tenant=client.tenant):
            run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session, detail="test")
    run = StrategyRun.objects.filter(tenant=api.tenant).first()
    page = staff.get(f"/admin/strategies_app/strategyrun/{run.pk}/change/").content.decode()
    title = f"{run.strategy.name} run of {run.queued_at:%Y-%m-%d %H:%M:%S}"
    assert f"<h2>{title}</h2>" in page and f"› {title}" in page.replace("&rsaquo;", "›")
    assert str(run.strategy_id) not in page.split("<h2>")[1].split("</h2>")[0]

    listing = staff.get("/admin/strategies_app/strategyrun/").content.decode()
    filter_links = listing.split("By strategy")[1].split("</ul>")[0]
    for name in ("user-profile", "task-progress", "facts-experience"):
        assert filter_links.count(f">{name}</a>") == 1, name  # once, though both tenants have it
    by_name = staff.get("/admin/strategies_app/strategyrun/?strategy_name=user-profile").context["cl"].result_list
    assert {r.strategy.name for r in by_name} == {"user-profile"}
    assert {r.tenant_id for r in by_name} == {api.tenant.pk, other_api.tenant.pk}
