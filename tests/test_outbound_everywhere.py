"""One outbound policy for every call this server makes, not only webhooks: budget bots (checked when the budget is
saved and when the alert is sent), the LLM extractor's endpoint and the embedder's (an operator's own local model
server needs ACE_OUTBOUND_ALLOW, and the error says so)."""

import pytest

from memory_app.embedders.base import EmbedderMisconfigured
from memory_app.embedders.openai import OpenAIEmbedder
from sessions_app.models import BudgetCrossing
from sessions_app.services.budget_alerts import budget_alert_send
from strategies_app.extractors.llm import ExtractorMisconfigured, LLMExtractor
from strategies_app.extractors.registry import get_extractor
from tests.sessions_app.test_budget_alerts import FakeBots
from tests.support.factories import SessionFactory
from tests.support.fake_llm import FakeLLM


@pytest.mark.parametrize(
    ("field", "url", "why"),
    [
        ("feishu_url", "http://10.0.0.5:6379/open-apis/bot/v2/hook/t", "10.0.0.5 is a private address"),
        ("feishu_url", "http://169.254.169.254/open-apis/bot/v2/hook/t", "169.254.169.254 is a link-local"),
        ("dingtalk_url", "http://localhost:8000/robot/send?access_token=t", "localhost is a loopback name"),
        ("dingtalk_url", "http://[::ffff:7f00:1]/robot/send?access_token=t", "IPv4-mapped"),
    ],
)
def test_a_budget_bot_on_a_private_address_is_refused_when_saved(api, settings, field, url, why):
    settings.ACE_OUTBOUND_ALLOW = ""
    answer = api.post("/api/v1/budgets/", {"name": "b", "limit": 1000, field: url}, format="json")
    assert answer.status_code == 400, answer.json()
    (message,) = answer.json()["errors"][field]
    assert why in message and "ACE_OUTBOUND_ALLOW" in message
    assert not api.get("/api/v1/budgets/").json()["results"]


def test_a_budget_bot_whose_name_resolves_to_loopback_gets_nothing_and_the_alert_tells_nothing(api, settings, resolver):
    settings.ACE_OUTBOUND_ALLOW = ""
    bots = FakeBots()
    try:
        resolver["open.feishu.example"] = ["127.0.0.1"]
        url = f"http://open.feishu.example:{bots.port}/open-apis/bot/v2/hook/t"
        budget = api.post(
            "/api/v1/budgets/", {"name": "b", "limit": 10, "thresholds": [100], "feishu_url": url}, format="json"
        )
        assert budget.status_code == 201, budget.json()
        session = SessionFactory(tenant=api.tenant, tool="chat", user_id="u")
        api.post(
            f"/api/v1/sessions/{session.pk}/messages/",
            {"role": "assistant", "content": "x", "total_tokens": 10},
            format="json",
        )
        crossing = BudgetCrossing.objects.get(budget_id=budget.json()["id"])
        outcome = budget_alert_send(crossing_id=crossing.pk)["feishu"]
        assert outcome.startswith("failed: no answer") and "127.0.0.1" not in outcome
        assert bots.received == []
    finally:
        bots.close()


def test_the_llm_endpoint_on_loopback_needs_the_operators_allow_list(settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL = "http://127.0.0.1:8001/v1", "qwen"
    with pytest.raises(ExtractorMisconfigured) as raised:
        get_extractor("llm")
    message = str(raised.value)
    assert message.startswith("ACE_LLM_BASE_URL http://127.0.0.1:8001/v1: 127.0.0.1 is a loopback address")
    assert "ACE_OUTBOUND_ALLOW=127.0.0.1" in message
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1"
    assert isinstance(get_extractor("llm"), LLMExtractor)


def test_the_llm_endpoint_is_checked_again_after_dns(settings, resolver):
    settings.ACE_OUTBOUND_ALLOW = ""
    with FakeLLM() as llm:
        resolver["llm.example.com"] = ["127.0.0.1"]
        extractor = LLMExtractor(base_url=llm.base_url.replace("127.0.0.1", "llm.example.com"), model="m")
        with pytest.raises(ExtractorMisconfigured, match="llm.example.com resolves only to refused addresses"):
            extractor._post([{"role": "user", "content": "hi"}])
        assert llm.requests == []


def test_the_embedder_endpoint_on_loopback_needs_the_operators_allow_list(settings, resolver):
    settings.ACE_OUTBOUND_ALLOW = ""
    with pytest.raises(EmbedderMisconfigured, match=r"127\.0\.0\.1 is a loopback address.*ACE_OUTBOUND_ALLOW=127\.0"):
        OpenAIEmbedder(base_url="http://127.0.0.1:8080/v1", model="bge-m3")
    resolver["embed.example.com"] = ["127.0.0.1"]
    embedder = OpenAIEmbedder(base_url="http://embed.example.com:9/v1", model="bge-m3")
    with pytest.raises(EmbedderMisconfigured, match="embed.example.com resolves only to refused addresses"):
        embedder.embed(["hello"])  # refused, not retried as if the endpoint were down
