"""The seed's scenario end to end through the API, with the built-in strategies and their own triggers:
preferences stated in two sessions are recalled and injected when the user opens a third one; a preference
changed later replaces the old one. Once with the `rules` extractor, once with an LLM (the fake server)."""

from strategies_app.models import RunStatus, StrategyRun
from tests.support.fake_llm import FakeLLM


def settled(burst, tenant) -> None:
    """Run what the writes so far queued (on commit: the runs they asked for, and what those queue): every run has
    finished."""
    burst()
    runs = StrategyRun.objects.filter(tenant=tenant)
    assert runs.exists() and not runs.exclude(status__in=[RunStatus.SUCCEEDED, RunStatus.FAILED]).exists(), list(
        runs.values("trigger", "status", "error")
    )


def new_session(api, name):
    response = api.post("/api/v1/sessions/", {"user_id": "xiaoming", "name": name, "tool": "chat"}, format="json")
    assert response.status_code == 201
    return response.json()["id"]


def say(api, session, *texts):
    body = [{"role": "user", "content": text} for text in texts]
    assert api.post(f"/api/v1/sessions/{session}/messages/", body, format="json").status_code == 201


def context(api, session, query):
    response = api.get(f"/api/v1/sessions/{session}/context/", {"query": query})
    assert response.status_code == 200
    return response.json()


def scenario(api, burst):
    # Session 1: debugging the devices; a preference is stated.
    first = new_session(api, "客厅设备调试")
    say(api, first, "Help me set up the living room lights.", "At night I prefer soft lighting.")
    # Session 2: the network is configured; the task stage changes; the preference is stated again.
    second = new_session(api, "家庭网络配置")
    say(api, second, "我想把家里的网络配置好。", "I prefer soft lighting at night.")
    assert api.put(f"/api/v1/sessions/{second}/state/", {"stage": "网络配置完成"}, format="json").status_code == 200
    settled(burst, api.tenant)
    # Session 3: "adjust the living room lights" — both memories are recalled and injected.
    third = new_session(api, "调整客厅灯光")
    block = context(api, third, "adjust the living room lights")
    texts = [r["text"] for r in block["records"]]
    soft = [r for r in block["records"] if "soft" in r["text"].lower()]
    assert len(soft) == 1, texts  # stated twice, remembered once
    runs = list(StrategyRun.objects.filter(tenant=api.tenant).values("trigger", "session", "decisions", "status"))
    assert len(soft[0]["source_message_ids"]) == 2, runs
    assert any("网络配置完成" in t for t in texts), texts
    assert f"[record:{soft[0]['id']}]" in block["prompt"]
    # Later the preference changes: the old one is replaced.
    say(api, third, "Actually, I now prefer bright lighting.")
    settled(burst, api.tenant)
    fourth = new_session(api, "晚上")
    block = context(api, fourth, "what lighting does he like")
    texts = " | ".join(r["text"].lower() for r in block["records"])
    assert "bright" in texts and "soft" not in texts, texts
    old = api.get(f"/api/v1/records/{soft[0]['id']}/").json()
    assert old["valid"] is False and old["strategy"] == "user-profile"
    history = api.get(f"/api/v1/records/{soft[0]['id']}/history/").json()["results"]
    assert history[0]["change"] == "invalidate"
    return block


def test_the_seed_scenario_with_the_rules_extractor(api, burst):
    scenario(api, burst)
    assert set(StrategyRun.objects.filter(tenant=api.tenant).values_list("extractor", flat=True)) <= {"rules", ""}


def test_the_seed_scenario_with_an_llm(api, burst, settings):
    with FakeLLM() as llm:
        settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL = llm.base_url, "fake-model"
        llm.remember = {
            "soft lighting": {"content": "Prefers soft lighting at night", "about": "preference:lighting",
                              "value": "soft", "exclusive": True, "when": "user's profile"},
            "bright lighting": {"content": "Prefers bright lighting", "about": "preference:lighting",
                                "value": "bright", "exclusive": True, "when": "user's profile"},
            "网络配置": {"content": "家庭网络配置完成", "about": "task", "value": "网络配置完成", "kind": "task",
                     "when": "Summarise the task"},
        }  # fmt: skip
        scenario(api, burst)
        assert llm.requests and all(r["model"] == "fake-model" for r in llm.requests)
    runs = StrategyRun.objects.filter(tenant=api.tenant, status=RunStatus.SUCCEEDED, extractor="llm")
    assert runs.exists() and all(r.input_tokens > 0 for r in runs)
