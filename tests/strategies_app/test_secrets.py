"""Extractors never make a memory of a secret, and /context/ never injects one: the built-in facts strategy run
by a real worker over what a user said through the API, the LLM extractor answering with a credential, records
written through the API, and state and older rows seen by the context."""

import json

import pytest

from memory_app.models import Record
from strategies_app.models import RunStatus, Strategy, StrategyRun
from tests.support.factories import SessionFactory
from tests.support.fake_llm import FakeLLM

OPENAI_KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"
GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0" * 2
SECRETS = (OPENAI_KEY, GITHUB_TOKEN, "hunter2", "Tr0ub4dor")


def assert_no_secret(*values):
    text = json.dumps(values, ensure_ascii=False, default=str)
    leaked = [secret for secret in SECRETS if secret in text]
    assert leaked == [], f"{leaked} in {text[:2000]}"


def only(tenant, name, **changes) -> Strategy:
    """One strategy enabled, run by hand: the others disabled, its triggers off."""
    Strategy.objects.filter(tenant=tenant).exclude(name=name).update(enabled=False)
    off = dict(on_tool_result=False, on_state_keys=[], message_threshold=None, accumulated_threshold=None)
    Strategy.objects.filter(tenant=tenant, name=name).update(**{**off, **changes})
    return Strategy.objects.get(tenant=tenant, name=name)


def run_by_hand(api, burst, strategy, session) -> StrategyRun:
    response = api.post(f"/api/v1/strategies/{strategy.pk}/run/", {"session": str(session.pk)}, format="json")
    assert response.status_code in (200, 201, 202), response.content
    run_id = response.json()["run"]
    burst()
    assert StrategyRun.objects.get(pk=run_id).status == RunStatus.SUCCEEDED
    return StrategyRun.objects.get(pk=run_id)


@pytest.fixture
def chat(api):
    return SessionFactory(tenant=api.tenant, user_id="xiaoming", name="travel")


def test_the_facts_strategy_never_remembers_a_key_or_a_password_and_the_context_never_shows_one(api, burst, chat):
    strategy = only(api.tenant, "facts-experience")
    said = [
        f"Remember that my OpenAI API key is {OPENAI_KEY} and my password is hunter2.",
        "Please remember: my bank password is Tr0ub4dor",
        "记住我的密码是hunter2",
        "Remember that I prefer aisle seats on long flights.",
    ]
    posted = api.post(
        f"/api/v1/sessions/{chat.pk}/messages/", [{"role": "user", "content": text} for text in said], format="json"
    )
    assert posted.status_code == 201, posted.content
    run = run_by_hand(api, burst, strategy, chat)
    assert run.messages_processed == 4

    records = list(Record.objects.filter(tenant=api.tenant).values("content", "fields"))
    # the run did remember what it should: the aisle seats, and nothing about the credentials
    assert [r["content"] for r in records] == ["I prefer aisle seats on long flights"]
    assert_no_secret(records, run.decisions)

    # the next session's prompt: state with a password in it, the memory, a question about the key
    state = {"wifi": {"ssid": "home", "password": "hunter2"}, "note": f"key {OPENAI_KEY}"}
    assert api.put(f"/api/v1/sessions/{chat.pk}/state/", state, format="json").status_code == 200
    context = api.get(f"/api/v1/sessions/{chat.pk}/context/", {"query": "OpenAI API key password"}).json()
    assert "aisle seats" in context["prompt"]
    assert '"password": "[REDACTED]"' in context["prompt"]
    recall = api.post(
        "/api/v1/recall/", {"query": "API key password", "user_id": "xiaoming", "include_messages": True}, format="json"
    ).json()
    assert_no_secret(context, recall)


def test_an_llm_answer_holding_a_credential_is_not_written(api, chat, settings):
    strategy = only(api.tenant, "facts-experience", extractor="llm")
    with FakeLLM() as llm:
        settings.ACE_LLM_BASE_URL, settings.ACE_LLM_MODEL = llm.base_url, "fake"
        # What a model might answer: the key spelled out (from a row older than the redaction), the mark of a
        # redacted one, and one memory worth keeping.
        llm.remember = {
            "token": {"content": f"The user's GitHub token is {GITHUB_TOKEN}", "about": "credential:github"},
            "password": {"content": "The user's password is [REDACTED]", "about": "credential:password"},
            "aisle": {"content": "Prefers aisle seats", "about": "preference:seat"},
        }
        posted = api.post(
            f"/api/v1/sessions/{chat.pk}/messages/",
            [
                {"role": "user", "content": f"my github token is {GITHUB_TOKEN}"},
                {"role": "user", "content": "and my password is hunter2"},
                {"role": "user", "content": "I like aisle seats"},
            ],
            format="json",
        )
        assert posted.status_code == 201
        from strategies_app.models import Trigger
        from strategies_app.services.runs import run_execute, run_request

        run = run_execute(run_request(strategy=strategy, trigger=Trigger.MANUAL, session=chat).pk)
    assert run.status == RunStatus.SUCCEEDED and run.candidates == 3 and run.added == 1
    assert list(Record.objects.filter(tenant=api.tenant).values_list("content", flat=True)) == ["Prefers aisle seats"]
    # the model never saw the secrets: the messages it read were stored redacted
    assert_no_secret(llm.requests)
    assert "Never make a memory of a secret" in llm.requests[0]["messages"][0]["content"]


def test_records_written_through_the_api_are_redacted_and_older_rows_are_redacted_in_the_context(api, chat):
    created = api.post(
        "/api/v1/records/",
        {
            "user_id": "xiaoming",
            "type": "fact",
            "content": f"Deploy with OPENAI_API_KEY={OPENAI_KEY}",
            "fields": {"api_key": OPENAI_KEY, "env": "prod"},
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["content"] == "Deploy with OPENAI_API_KEY=[REDACTED]"
    assert created.json()["fields"] == {"api_key": "[REDACTED]", "env": "prod"}
    updated = api.patch(
        f"/api/v1/records/{created.json()['id']}/", {"content": "my password is hunter2"}, format="json"
    )
    assert updated.status_code == 200 and updated.json()["content"] == "my password is [REDACTED]"
    # a row written before a rule existed (here: straight into the table) is redacted on its way to a prompt
    Record.objects.create(tenant=api.tenant, user_id="xiaoming", type="fact", content=f"token {GITHUB_TOKEN}")
    context = api.get(f"/api/v1/sessions/{chat.pk}/context/").json()
    assert "token [REDACTED]" in context["prompt"]
    assert_no_secret(context, list(Record.objects.filter(content__contains="Deploy").values("content", "fields")))
