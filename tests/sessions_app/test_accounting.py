"""The counting rules are written once (sessions_app.accounting); the counters the message service maintains,
the audits' recount in SQL and the accounting folded over the same messages must all agree."""

import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from sessions_app.accounting import SessionAccount, count_usage, tally_as_dict
from sessions_app.api.serializers import MessageInSerializer
from sessions_app.models import Message, Role, Session, UsageHourly
from sessions_app.schema import MESSAGE_TEXT_LIMITS, ROLES, ROLLUP_FIELDS, STATS_FIELDS
from sessions_app.selectors.recount import ROLLUP_RECOUNT_SQL, rollup_drift, session_recount
from tests.sessions_app.test_counting import WEATHER
from tests.support.factories import SessionFactory

START = datetime(2026, 3, 1, 9, 40, tzinfo=UTC)
MODELS = ["", "claude-sonnet-4-5", "qwen3-coder-plus", "gpt-5"]


def random_messages(rng: random.Random, count: int) -> list[dict]:
    """Messages of every shape the rules tell apart: streamed responses over several lines (in later batches
    too) with growing usage, requests by auth_type alone, tokens on messages that are no request, totals given
    or not, named conversations reused, tool results before any conversation, repeated external ids, models
    on some lines only, and times over several hours."""
    messages, request_ids, names, external_ids = [], [], [], []
    moment = START
    for n in range(count):
        moment += timedelta(minutes=rng.choice([0, 1, 7, 25]))
        role = rng.choices(ROLES, weights=[3, 5, 3, 1, 1])[0]
        message = {"role": role, "content": f"m{n}", "created_at": moment.isoformat()}
        kind = rng.random()
        if kind < 0.35:
            if request_ids and rng.random() < 0.5:
                message["request_id"] = rng.choice(request_ids)
            else:
                request_ids.append(f"req_{n}")
                message["request_id"] = request_ids[-1]
        elif kind < 0.5:
            message["auth_type"] = rng.choice(["oauth", "api-key"])
        for field in ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"):
            if rng.random() < 0.6:
                message[field] = rng.randrange(0, 400)
        if rng.random() < 0.2:
            message["total_tokens"] = rng.randrange(0, 900)
        if rng.random() < 0.6:
            message["model"] = rng.choice(MODELS)
        if rng.random() < 0.25:
            if names and rng.random() < 0.6:
                message["conversation"] = rng.choice(names)
            else:
                names.append(f"chat-{n}")
                message["conversation"] = names[-1]
        if rng.random() < 0.3:
            if external_ids and rng.random() < 0.3:
                message = {**messages[external_ids[-1]]}  # a client retrying a message it sent
            else:
                message["external_id"] = f"ext-{n}"
                external_ids.append(len(messages))
        messages.append(message)
    return messages


def post_in_batches(api, session, messages, rng):
    start = 0
    while start < len(messages):
        size = rng.randrange(1, 40)
        batch = messages[start : start + size]
        response = api.post(f"/api/v1/sessions/{session.pk}/messages/", batch, format="json")
        assert response.status_code in (200, 201), response.json()
        start += size


def recounted_rollups(tenant) -> dict:
    with connection.cursor() as cursor:
        cursor.execute(ROLLUP_RECOUNT_SQL, {"tenant": tenant.pk})
        columns = [c.name for c in cursor.description]
        rows = [dict(zip(columns, values, strict=True)) for values in cursor.fetchall()]
    return {(row["hour"], row["model"]): {f: int(row[f]) for f in ROLLUP_FIELDS} for row in rows}


def folded_rollups(account: SessionAccount) -> dict:
    return {
        key: tally_as_dict(tally)
        for key, tally in account.rollups.items()
        if any(tally)  # rows whose counters are all zero count as absent
    }


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_the_service_the_recount_and_the_accounting_agree(api, seed):
    rng = random.Random(seed)
    session = SessionFactory(tenant=api.tenant, tool="claude-code", user_id="dev")
    messages = random_messages(rng, 160)
    post_in_batches(api, session, messages, rng)

    expected = count_usage(messages)
    stats = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
    assert {field: stats[field] for field in STATS_FIELDS} == {field: expected[field] for field in STATS_FIELDS}
    session.refresh_from_db()
    assert session_recount(session=session) == {field: expected[field] for field in STATS_FIELDS}

    account = SessionAccount()
    for message in messages:
        account.add(message)
    assert recounted_rollups(api.tenant) == folded_rollups(account)
    maintained = {
        (row["hour"], row["model"]): {f: row[f] for f in ROLLUP_FIELDS}
        for row in UsageHourly.objects.filter(tenant=api.tenant).values("hour", "model", *ROLLUP_FIELDS)
        if any(row[f] for f in ROLLUP_FIELDS)
    }
    assert maintained == folded_rollups(account)
    assert rollup_drift(tenant=api.tenant) == {"hourly": [], "daily": [], "session_model": []}


def test_the_fold_counts_what_the_seed_says():
    # The concept document's weather example: 4 requests, 6 messages, 2 conversations.
    counts = count_usage(WEATHER)
    assert (counts["requests"], counts["messages"], counts["conversations"]) == (4, 6, 2)
    assert (counts["message_user"], counts["message_assistant"], counts["message_toolresult"]) == (2, 3, 1)
    assert (counts["input_tokens"], counts["output_tokens"], counts["total_tokens"]) == (360, 36, 396)


def test_a_turns_answer_counts_the_calls_its_client_reported(api, session):
    turn = api.post(f"/api/v1/sessions/{session.pk}/turns/", {"content": "写一首诗"}, format="json").json()["turn"]
    body = {"content": "床前明月光", "model": "qwen3", "finish_reason": "stop", "requests": 3, "elapsed_ms": 900}
    body.update(input_tokens=20, output_tokens=7)
    assert api.post(f"/api/v1/turns/{turn}/complete/", body, format="json").status_code == 200
    session.refresh_from_db()
    recounted = session_recount(session=session)
    assert (recounted["requests"], recounted["input_tokens"], recounted["total_tokens"]) == (3, 20, 27)
    assert recounted == {field: getattr(session, field) for field in STATS_FIELDS}


def test_the_vocabulary_is_the_models_and_the_apis():
    assert tuple(Role.values) == ROLES
    api_fields = MessageInSerializer().fields
    for name, limit in MESSAGE_TEXT_LIMITS.items():
        if name != "conversation":  # a reference, not a column
            assert Message._meta.get_field(name).max_length == limit, name
        if name in api_fields:  # thinking_mode is a chat turn's (TurnStartSerializer)
            assert api_fields[name].max_length == limit, name
    for name in STATS_FIELDS:
        Session._meta.get_field(name)


def test_the_fast_insert_refuses_a_model_it_cannot_write_as_save_would(db):
    from django.core.exceptions import ImproperlyConfigured

    from platform_kit.db import copy_insert, unsaved_instance

    session = unsaved_instance(Session, tenant_id=None, user_id="x")
    with pytest.raises(ImproperlyConfigured, match=r"Session\.updated_at"):
        copy_insert(Session, [session])  # updated_at is auto_now: save() would set it, COPY would not


def test_rollup_keys_are_utc_hours_whatever_the_offset(api, session):
    api.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        [{"role": "user", "content": "x", "created_at": "2026-03-01T17:59:00+08:00"}],
        format="json",
    )
    hours = defaultdict(int)
    for row in UsageHourly.objects.filter(tenant=api.tenant).values("hour", "messages"):
        hours[row["hour"]] += row["messages"]
    assert dict(hours) == {datetime(2026, 3, 1, 9, 0, tzinfo=UTC): 1}
    account = SessionAccount()
    account.add({"role": "user", "content": "x", "created_at": "2026-03-01T17:59:00+08:00"})
    assert list(account.rollups) == [(datetime(2026, 3, 1, 9, 0, tzinfo=UTC), "")]
