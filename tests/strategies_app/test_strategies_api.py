"""Strategies through the API: built-ins on a new tenant, versions on every change, refusals, tenancy."""

from django_celery_beat.models import PeriodicTask

from strategies_app.models import Strategy, StrategyRun


def test_a_new_tenant_has_the_three_builtin_strategies_enabled(api):
    response = api.get("/api/v1/strategies/")
    assert response.status_code == 200
    page = response.json()
    assert page["next"] is None and page["previous"] is None  # a page, like every other list
    rows = {row["name"]: row for row in page["results"]}
    assert set(rows) == {"user-profile", "task-progress", "facts-experience"}
    assert {row["type"] for row in rows.values()} == {"profile", "task", "fact"}
    assert all(row["enabled"] and row["extractor"] == "auto" and row["version"] == 1 for row in rows.values())
    assert rows["task-progress"]["on_state_keys"] and rows["task-progress"]["on_tool_result"]
    # each has its editable beat schedule
    task = PeriodicTask.objects.get(pk=rows["user-profile"]["periodic_task"])
    assert task.task == "strategies_app.tasks.strategy_scheduled" and task.enabled


def test_every_change_makes_a_version_and_old_versions_stay_readable(api):
    created = api.post(
        "/api/v1/strategies/",
        {"name": "travel", "type": "custom", "prompt": "Remember travel plans.\n{messages}", "extractor": "rules"},
        format="json",
    )
    assert created.status_code == 201, created.content
    strategy = created.json()
    assert strategy["version"] == 1
    url = f"/api/v1/strategies/{strategy['id']}/"
    changed = api.patch(url, {"prompt": "Remember trips and hotels.\n{messages}\n{existing_records}"}, format="json")
    assert changed.status_code == 200 and changed.json()["version"] == 2
    # enabling or disabling is operational: no new version
    assert api.patch(url, {"enabled": False}, format="json").json()["version"] == 2
    versions = api.get(url + "versions/").json()["results"]
    assert [v["version"] for v in versions] == [2, 1]
    assert versions[1]["prompt"] == "Remember travel plans.\n{messages}"
    assert versions[0]["actor"] == "api"


def test_a_prompt_with_unknown_placeholders_is_refused_and_nothing_changes(api):
    strategy = Strategy.objects.get(tenant=api.tenant, name="user-profile")
    response = api.patch(
        f"/api/v1/strategies/{strategy.pk}/", {"prompt": "Hi {user_name}, see {messages}"}, format="json"
    )
    assert response.status_code == 400
    assert "{user_name}" in response.json()["errors"]["prompt"][0]
    stray = api.patch(f"/api/v1/strategies/{strategy.pk}/", {"prompt": 'JSON like {"a": 1}'}, format="json")
    assert stray.status_code == 400
    strategy.refresh_from_db()
    assert strategy.version == 1 and strategy.versions.count() == 1


def test_bad_settings_are_refused_with_what_to_fix(api):
    base = {"name": "x", "type": "fact", "prompt": "{messages}"}
    cases = {
        "message_threshold": 1.5,
        "accumulated_threshold": -1,
        "schedule_minutes": 0,
        "on_state_keys": "stage",
        "type": "opinions",
        "extractor": "gpt",
    }
    for field, value in cases.items():
        response = api.post("/api/v1/strategies/", {**base, field: value}, format="json")
        assert response.status_code == 400, (field, response.content)
        assert field in response.json()["errors"], field
    assert not Strategy.objects.filter(tenant=api.tenant, name="x").exists()
    duplicate = api.post("/api/v1/strategies/", {**base, "name": "user-profile"}, format="json")
    assert duplicate.status_code == 400


def test_schedule_follows_the_strategy(api):
    strategy = Strategy.objects.get(tenant=api.tenant, name="facts-experience")
    url = f"/api/v1/strategies/{strategy.pk}/"
    api.patch(url, {"schedule_minutes": 15}, format="json")
    task = PeriodicTask.objects.get(pk=strategy.periodic_task_id)
    assert task.interval.every == 15 and task.enabled
    api.patch(url, {"enabled": False}, format="json")
    task.refresh_from_db()
    assert not task.enabled


def test_run_endpoint_validates_and_refuses_a_disabled_strategy(api, other_api, session):
    strategy = Strategy.objects.get(tenant=api.tenant, name="user-profile")
    url = f"/api/v1/strategies/{strategy.pk}/run/"
    assert api.post(url, {}, format="json").status_code == 400
    foreign = other_api.post("/api/v1/sessions/", {"user_id": "u"}, format="json").json()["id"]
    assert api.post(url, {"session": foreign}, format="json").status_code == 400
    accepted = api.post(url, {"session": str(session.pk)}, format="json")
    assert accepted.status_code == 202
    run = api.get(f"/api/v1/strategy-runs/{accepted.json()['run']}/").json()
    assert run["status"] == "queued" and run["trigger"] == "manual" and run["strategy_version"] == 1
    api.patch(f"/api/v1/strategies/{strategy.pk}/", {"enabled": False}, format="json")
    assert api.post(url, {"session": str(session.pk)}, format="json").status_code == 409
    assert StrategyRun.objects.filter(strategy=strategy).count() == 1


def test_another_tenants_strategies_and_runs_are_not_found(api, other_api, session):
    strategy = Strategy.objects.get(tenant=api.tenant, name="user-profile")
    run = api.post(f"/api/v1/strategies/{strategy.pk}/run/", {"session": str(session.pk)}, format="json").json()["run"]
    assert other_api.get(f"/api/v1/strategies/{strategy.pk}/").status_code == 404
    assert other_api.patch(f"/api/v1/strategies/{strategy.pk}/", {"enabled": False}, format="json").status_code == 404
    assert other_api.get(f"/api/v1/strategy-runs/{run}/").status_code == 404
    assert other_api.get("/api/v1/strategy-runs/").json()["results"] == []


def test_unknown_and_malformed_ids_are_404_not_500(api):
    for url in (
        "/api/v1/strategies/nope/",
        "/api/v1/strategies/00000000-0000-0000-0000-000000000000/",
        "/api/v1/strategies/nope/versions/",
        "/api/v1/strategy-runs/nope/",
    ):
        assert api.get(url).status_code == 404, url
