"""Recall and context injection: hybrid, filtered, tenant-scoped, degrading to keywords."""

import os
import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from memory_app.embedders import get_embedder
from memory_app.embedders.base import EmbedderUnavailable
from memory_app.embeddings import messages_embed, records_embed
from memory_app.models import Record
from memory_app.query_vectors import query_vectors
from memory_app.selectors import recall as recall_module
from memory_app.services import record_create, record_invalidate
from sessions_app.models import Message
from sessions_app.services.messages import messages_append
from sessions_app.services.state import state_merge
from tests.support.api import make_client
from tests.support.factories import SessionFactory


def remember(tenant, content, *, user_id="xiaoming", type="profile", **kwargs):
    record = record_create(tenant=tenant, user_id=user_id, type=type, content=content, **kwargs).record
    records_embed(record_ids=[record.pk])
    return record


def recall(api, query, **body):
    response = api.post("/api/v1/recall/", {"query": query, "user_id": "xiaoming", **body}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_recall_finds_records_by_meaning_and_by_keyword_with_provenance(api):
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming", name="杭州行")
    message = messages_append(
        tenant=api.tenant,
        session_id=session.pk,
        items=[{"role": "user", "content": "我喜欢博物馆", "external_id": "evt-7"}],
    ).messages[0]
    museum = remember(api.tenant, "偏好博物馆", source_message_ids=[message.pk])
    remember(api.tenant, "不喜欢拥挤的景点")
    remember(api.tenant, "Budget for the trip is 5000 CNY", type="task")

    body = recall(api, "喜欢逛博物馆吗", include_messages=False)
    assert body["degraded"] is False
    top = body["results"][0]
    assert (top["kind"], top["id"], top["text"]) == ("record", str(museum.pk), "偏好博物馆")
    assert top["source_message_ids"] == [str(message.pk)]
    assert top["source_external_ids"] == ["evt-7"]
    assert top["session"] == str(session.pk)
    assert set(top["matched_by"]) == {"keyword", "vector"}
    assert top["score"] > 0

    exact = recall(api, "5000", include_messages=False)["results"]
    assert exact[0]["text"] == "Budget for the trip is 5000 CNY"  # a plain keyword match is never missed


def test_recall_searches_raw_messages_too(api):
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    stored = messages_append(
        tenant=api.tenant,
        session_id=session.pk,
        items=[{"role": "user", "content": "下周去南京，想看明孝陵"}, {"role": "assistant", "content": "好的"}],
    ).messages
    messages_embed(message_ids=[m.pk for m in stored])
    results = recall(api, "南京 明孝陵")["results"]
    assert results[0]["kind"] == "message"
    assert results[0]["id"] == str(stored[0].pk)
    assert results[0]["session"] == str(session.pk)
    assert recall(api, "南京 明孝陵", include_messages=False)["results"] == []


def chat(api, turns, *, user_id="xiaoming"):
    """One session of alternating user/assistant turns, embedded; returns the stored messages."""
    session = SessionFactory(tenant=api.tenant, user_id=user_id)
    items = [
        {"role": ("user", "assistant")[i % 2], "content": text, "external_id": f"t{i}"} for i, text in enumerate(turns)
    ]
    stored = messages_append(tenant=api.tenant, session_id=session.pk, items=items).messages
    messages_embed(message_ids=[m.pk for m in stored])
    return stored


def test_a_rare_word_outweighs_a_common_one(api):
    """BM25 with the user's own statistics: "pizza" is in most of this user's messages, "Lisbon" in one, so
    the Lisbon turn answers "pizza in Lisbon" — not the turns that say pizza twice."""
    turns = [f"We had pizza again on day {n}, pizza is our thing" for n in range(12)]
    turns[7] = "Found a tiny bakery in Lisbon with great pastries, and a pizza place next door"
    stored = chat(api, turns)
    top = recall(api, "pizza in Lisbon", top_k=3)["results"][0]
    assert top["id"] == str(stored[7].pk)
    assert "keyword" in top["matched_by"]


def test_a_message_hit_brings_the_turns_around_it_once(api):
    stored = chat(
        api,
        [
            "What did you do last weekend?",
            "We drove up to Lake Tahoe and hiked the Rubicon trail with the kids.",
            "Sounds lovely! How long was the hike?",
            "About eight miles, the kids were exhausted.",
            "By the way, my sister started a pottery class.",
            "Oh nice, what does she make?",
            "Mostly bowls so far.",
        ],
    )
    results = recall(api, "Where did they hike with the kids?", top_k=2)["results"]
    top = results[0]
    seq = {str(m.pk): n for n, m in enumerate(stored)}
    shown_ids = [r["id"] for r in results] + [c["id"] for r in results for c in r["context"]]
    assert str(stored[1].pk) in shown_ids  # the answer is on screen
    before, after = recall_module.CONTEXT
    for hit in results:
        around = [(c["position"], seq[c["id"]] - seq[hit["id"]], c["external_id"]) for c in hit["context"]]
        assert around == sorted(around, key=lambda entry: entry[1])  # in the conversation's order
        for position, offset, external_id in around:
            assert position == ("before" if offset < 0 else "after") and -before <= offset <= after and offset
            assert external_id == f"t{seq[hit['id']] + offset}"
    assert top["context"], "the best hit brings the turns around it"
    assert len(shown_ids) == len(set(shown_ids))  # a turn is shown once, as a hit or as context
    assert len(shown_ids) <= 3 * len(results)  # and the screen holds at most three turns a hit


def test_records_take_the_top_only_when_they_match_better_than_the_messages(api):
    """One scale for both kinds: unrelated records do not crowd out the turn that answers the question,
    and a record that does answer it ranks first."""
    for content in ["Has a golden retriever named Max", "Works as a nurse", "Plays the violin", "Is vegetarian"]:
        remember(api.tenant, content, type="fact")
    stored = chat(api, ["Any plans for the summer?", "I booked a week in Reykjavik to see the northern lights."])
    results = recall(api, "Where is the summer trip to?", top_k=5)["results"]
    messages = [r for r in results if r["kind"] == "message"]
    assert [r["kind"] for r in results[: len(messages)]] == ["message"] * len(messages)  # both turns, on top
    assert str(stored[1].pk) in [r["id"] for r in messages] + [c["id"] for r in messages for c in r["context"]]
    assert all(r["score"] < messages[-1]["score"] for r in results if r["kind"] == "record")

    record = remember(api.tenant, "Summer trip: a week in Reykjavik for the northern lights", type="task")
    results = recall(api, "Where is the summer trip to?", top_k=5)["results"]
    assert (results[0]["kind"], results[0]["id"]) == ("record", str(record.pk))


def test_filters_types_and_sessions(api):
    trip = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    message = messages_append(tenant=api.tenant, session_id=trip.pk, items=[{"role": "user", "content": "x"}]).messages[
        0
    ]
    remember(api.tenant, "偏好博物馆", source_message_ids=[message.pk])
    remember(api.tenant, "博物馆 task draft", type="task")
    kinds = {r["text"] for r in recall(api, "博物馆", types=["task"], include_messages=False)["results"]}
    assert kinds == {"博物馆 task draft"}
    from_trip = recall(api, "博物馆", session=str(trip.pk), include_messages=False)["results"]
    assert [r["text"] for r in from_trip] == ["偏好博物馆"]


def test_deleted_records_stop_being_recalled_at_once_and_tenants_stay_apart(api, other_api):
    record = remember(api.tenant, "偏好博物馆")
    remember(other_api.tenant, "偏好博物馆 (globex)")
    assert [r["text"] for r in recall(api, "博物馆", include_messages=False)["results"]] == ["偏好博物馆"]
    record_invalidate(tenant=api.tenant, record_id=record.pk)
    assert recall(api, "博物馆", include_messages=False)["results"] == []
    other = other_api.post("/api/v1/recall/", {"query": "博物馆", "user_id": "xiaoming"}, format="json").json()
    assert [r["text"] for r in other["results"]] == ["偏好博物馆 (globex)"]


def test_a_selective_filter_still_fills_top_k_through_the_index(api):
    """Most vectors belong to other users: the HNSW scan must keep going until top_k pass the filter."""
    tenant = api.tenant
    for n in range(300):
        Record.objects.create(tenant=tenant, user_id=f"other-{n % 7}", type="fact", content=f"museum visit note {n}")
    for n in range(12):
        Record.objects.create(tenant=tenant, user_id="xiaoming", type="fact", content=f"museum ticket {n}")
    records_embed(record_ids=list(Record.objects.values_list("pk", flat=True)))
    with connection.cursor() as cursor:  # make the planner use the HNSW index even on this small table
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("SET LOCAL hnsw.ef_search = 10")
    results = recall(api, "museum visit", top_k=10, include_messages=False)["results"]
    assert len(results) == 10
    assert all(r["text"].startswith("museum ticket") for r in results)


CANDIDATES_FOR_HEAVY_USER = 160  # more than the shortlist, which is more than the candidates


def test_a_heavy_user_is_ranked_through_the_sign_bit_shortlist_like_an_exact_scan(api, settings):
    """Above ACE_RECALL_EXACT_UP_TO rows, the nearest by Hamming distance of the sign bits are re-ranked
    exactly: the same best records as computing every exact distance, and never fewer than asked for."""
    places = ["Hangzhou", "Lisbon", "Kyoto", "Chengdu", "Berlin", "Austin", "Lyon", "Xiamen"]
    things = ["museum", "tea house", "night market", "bookshop", "temple", "harbour", "garden", "jazz bar"]
    for n in range(CANDIDATES_FOR_HEAVY_USER):
        Record.objects.create(
            tenant=api.tenant,
            user_id="heavy",
            type="fact",
            content=f"Visited the {things[n % 8]} in {places[(n // 8) % 8]} on trip {n}",
        )
    records_embed(record_ids=list(Record.objects.values_list("pk", flat=True)))
    from memory_app.embedders import get_embedder
    from memory_app.selectors.recall import CANDIDATES, _vector_ids

    embedder = get_embedder()
    vector = embedder.embed(["which tea house did he visit in Kyoto"])[0]

    def nearest(**limits):
        for name, value in limits.items():
            setattr(settings, name, value)
        where, params = "tenant_id = %s AND user_id = %s AND valid", [api.tenant.pk, "heavy"]
        return _vector_ids("memory_app_record", where, params, vector, embedder.dimensions, embedder.key)

    def distances(ids):  # near-ties make ids an unstable comparison; their distances are not
        literal = "[" + ",".join(repr(x) for x in vector) + "]"
        with connection.cursor() as cursor:
            cursor.execute(
                f"SELECT id::text, (embedding::vector({embedder.dimensions})) <=> %s::vector FROM memory_app_record "
                "WHERE id::text = ANY(%s)",
                [literal, ids],
            )
            found = dict(cursor.fetchall())
        return [round(found[i], 6) for i in ids]

    exact = nearest(ACE_RECALL_EXACT_UP_TO=10_000)
    shortlisted = nearest(ACE_RECALL_EXACT_UP_TO=50, ACE_RECALL_SHORTLIST=CANDIDATES + 20)
    assert len(exact) == len(shortlisted) == CANDIDATES  # never fewer than asked for
    assert distances(shortlisted[:10]) == distances(exact[:10])
    assert distances(exact[:10]) != distances(exact[-10:])  # the query does separate near from far

    from memory_app.selectors.recall import recall_search

    def recalled(**limits):  # through the service: the records are counted once, for keywords and vectors
        for name, value in limits.items():
            setattr(settings, name, value)
        with CaptureQueriesContext(connection) as captured:
            hits = recall_search(tenant=api.tenant, query="which tea house did he visit in Kyoto", user_id="heavy")
        statements = [q["sql"] for q in captured.captured_queries]
        return [(h.id, h.score) for h in hits.results], statements

    shortlisted, statements = recalled(ACE_RECALL_EXACT_UP_TO=50, ACE_RECALL_SHORTLIST=CANDIDATES + 20)
    assert any(sql.startswith("WITH shortlist") for sql in statements)
    assert not any(sql.startswith("SELECT count(*) FROM (SELECT 1") for sql in statements)  # no second count
    exact, statements = recalled(ACE_RECALL_EXACT_UP_TO=10_000)
    assert not any(sql.startswith("WITH shortlist") for sql in statements)
    assert [score for _, score in shortlisted] == [score for _, score in exact]


def test_keyword_matches_are_the_same_through_the_gin_index_or_row_by_row(api, monkeypatch):
    """A small user's messages are tested one by one; a big one's matches come from the GIN index first."""
    from memory_app.selectors import recall as recall_module

    chat(api, [f"walked the dog, day {n}" for n in range(30)] + ["Allergic to 芒果 (mango)"])
    chat(api, ["Allergic to mango as well"], user_id="other")

    def keyword_hits():
        hits = recall_module.recall_search(
            tenant=api.tenant, query="mango allergy", user_id="xiaoming", include_records=False
        )
        return [h.text for h in hits.results if "keyword" in h.matched_by]

    row_by_row = keyword_hits()
    monkeypatch.setattr(recall_module, "KEYWORD_SCAN_UP_TO", 5)  # xiaoming counts as a big user now
    through_gin = keyword_hits()
    assert row_by_row == through_gin == ["Allergic to 芒果 (mango)"]


def test_a_users_record_keyword_matches_are_their_own_whatever_their_id(api, other_api):
    """Records' keywords are matched through an index of their words and one "<tenant>/<user>" lexeme: a user
    id with quotes, spaces, backslashes or slashes, or one that begins another's, finds only its own rows."""
    from memory_app.selectors.recall import recall_search

    users = ["ann", "ann/x", "ann x", "o'brien \\ co", "李娜"]
    for user in users:
        record_create(tenant=api.tenant, user_id=user, type="fact", content=f"Visited Lisbon with {user}")
    record_create(tenant=other_api.tenant, user_id="ann", type="fact", content="Visited Lisbon in another tenant")
    for user in users:
        hits = recall_search(tenant=api.tenant, query="Lisbon trip", user_id=user, include_messages=False).results
        assert [h.text for h in hits if "keyword" in h.matched_by] == [f"Visited Lisbon with {user}"]
    assert recall_search(tenant=api.tenant, query="Lisbon", user_id="an", include_messages=False).results == []


def test_a_recall_reads_and_never_builds_an_index_the_write_that_stores_a_vector_does(api, settings):
    """An embedder's space gets its HNSW indexes from the first write that stores a vector in it, not from a
    recall (a read), even the first of a process."""
    from memory_app.embedders import get_embedder
    from memory_app.embeddings import _indexed

    settings.ACE_EMBEDDER_DIMENSIONS = 48  # a space no other test writes in: none of its indexes exist yet
    embedder = get_embedder()
    _indexed.discard((embedder.key, embedder.dimensions))

    def hnsw_indexes() -> set[str]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE '%%hnsw%%'")
            return {row[0] for row in cursor.fetchall()}

    before = hnsw_indexes()
    recall(api, "Which museum did I like?")
    assert hnsw_indexes() == before
    record_create(tenant=api.tenant, user_id="xiaoming", type="profile", content="偏好博物馆")
    assert len(hnsw_indexes() - before) == 2  # the records' and the messages' index of the new space
    assert [r["text"] for r in recall(api, "博物馆", include_messages=False)["results"]] == ["偏好博物馆"]


def test_an_embedder_that_is_down_degrades_to_keywords(api, settings):
    remember(api.tenant, "偏好博物馆")
    settings.ACE_EMBEDDER = "openai"
    settings.ACE_EMBEDDER_BASE_URL = "http://127.0.0.1:9/v1"
    settings.ACE_EMBEDDER_MODEL = "text-embedding-3-small"
    settings.ACE_EMBEDDER_TIMEOUT = 2
    body = recall(api, "博物馆", include_messages=False)
    assert body["degraded"] is True
    assert "keyword" in body["detail"]
    assert [r["text"] for r in body["results"]] == ["偏好博物馆"]


def test_the_question_is_embedded_while_its_keywords_are_matched(api, monkeypatch):
    """The question's vector is computed beside the keyword side's statements, not before them: an embedder
    that can only finish once the messages' keyword search has run still answers, with both kinds of match
    (were the two in line, it would wait for a search that waits for it, and the recall would be degraded)."""
    stored = chat(api, ["下周去南京，想看明孝陵", "好的，明孝陵秋天很美"])
    embedder = get_embedder()
    keywords_matched = threading.Event()
    embed = type(embedder).embed

    def embed_after_the_keywords(self, texts):
        if not keywords_matched.wait(timeout=10):
            raise EmbedderUnavailable("the keyword search did not run while the question was embedded")
        return embed(self, texts)

    def spy(execute, sql, params, many, context):
        result = execute(sql, params, many, context)
        if "sessions_app_message" in sql and "@@" in sql:
            keywords_matched.set()
        return result

    monkeypatch.setattr(type(embedder), "embed", embed_after_the_keywords)
    query_vectors.clear()
    with connection.execute_wrapper(spy):
        body = recall(api, "明孝陵 秋天")
    assert body["degraded"] is False, body["detail"]
    assert body["results"][0]["id"] == str(stored[1].pk)
    assert body["results"][0]["matched_by"] == ["keyword", "vector"]


@pytest.mark.parametrize(
    "body,field",
    [
        ({"query": ""}, "query"),
        ({"query": "   "}, "query"),
        ({"query": "x" * 4001}, "query"),
        ({"top_k": 0}, "top_k"),
        ({"top_k": 101}, "top_k"),
        ({"types": ["opinion"]}, "types.0"),
        ({"user_id": None}, "user_id"),
        ({"session": "nope"}, "session"),
    ],
)
def test_bad_recall_queries(api, body, field):
    response = api.post("/api/v1/recall/", {"query": "博物馆", "user_id": "xiaoming", **body}, format="json")
    assert response.status_code == 400
    assert field in response.json()["errors"], response.json()


def test_context_injection_names_every_record(api):
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming", name="南京文化之旅")
    museum = remember(api.tenant, "偏好博物馆")
    crowds = remember(api.tenant, "不喜欢拥挤的景点")
    state_merge(tenant=api.tenant, session_id=session.pk, patch={"budget_cny": 3000})
    messages_append(
        tenant=api.tenant, session_id=session.pk, items=[{"role": "user", "content": "推荐南京的博物馆，别太拥挤"}]
    )

    body = api.get(f"/api/v1/sessions/{session.pk}/context/").json()
    assert body["query"] == "推荐南京的博物馆，别太拥挤"  # the latest question, by default
    assert body["state"] == {"budget_cny": 3000}
    assert {r["id"] for r in body["records"]} == {str(museum.pk), str(crowds.pk)}
    assert f"[record:{museum.pk}] (profile) 偏好博物馆" in body["prompt"]
    assert f"[record:{crowds.pk}]" in body["prompt"]
    assert "budget_cny: 3000" in body["prompt"]

    focused = api.get(f"/api/v1/sessions/{session.pk}/context/", {"query": "博物馆", "top_k": 1}).json()
    assert [r["id"] for r in focused["records"]] == [str(museum.pk)]


def test_context_of_another_tenants_session_is_404(api, other_api):
    session = SessionFactory(tenant=api.tenant)
    assert other_api.get(f"/api/v1/sessions/{session.pk}/context/").status_code == 404


def test_a_worker_embeds_records_and_messages_after_commit(burst):
    api = make_client("embedding-worker")
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    record = api.post(
        "/api/v1/records/", {"user_id": "xiaoming", "type": "profile", "content": "偏好博物馆"}, format="json"
    ).json()
    message = api.post(
        f"/api/v1/sessions/{session.pk}/messages/", {"role": "user", "content": "我喜欢博物馆"}, format="json"
    ).json()
    burst()
    assert Record.objects.filter(pk=record["id"]).exclude(embedding_key="").exists()
    from memory_app.models import MessageEmbedding

    assert MessageEmbedding.objects.filter(message_id=message["id"]).exists()
    # An edit re-embeds the new content.
    api.patch(f"/api/v1/records/{record['id']}/", {"content": "偏好历史博物馆"}, format="json")
    burst()
    assert Record.objects.filter(pk=record["id"]).exclude(embedding_key="").exists()


def test_the_worker_embeds_the_conversation_not_the_tool_output(burst, settings):
    from memory_app.embedders import get_embedder
    from memory_app.models import MessageEmbedding
    from memory_app.selectors.records import pending_messages

    api = make_client("embedding-roles")
    session = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    items = [
        {"role": "user", "content": "读一下 settings.py"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "t1", "name": "Read", "arguments": {}}]},
        {"role": "toolResult", "tool_name": "Read", "content": "\n".join(f"{n}→DEBUG = {n}" for n in range(400))},
        {"role": "system", "content": "Conversation compacted"},
        {"role": "error", "content": "API error 529"},
        {"role": "assistant", "content": "DEBUG 在第 1 行。"},
    ]
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json")
    assert response.status_code == 201, response.content
    ids = {item["role"] + str(n): item["id"] for n, item in enumerate(response.json())}
    # One task embeds the whole append: once the conversation's vectors are there, it has run.
    burst()
    assert MessageEmbedding.objects.filter(message_id=ids["assistant5"]).exists()
    embedded = set(MessageEmbedding.objects.filter(session=session).values_list("message_id", flat=True))
    assert {str(pk) for pk in embedded} == {ids["user0"], ids["assistant5"]}  # the empty assistant has no text
    assert pending_messages(embedder=get_embedder(), limit=100) == []  # nor does the sweep come back for them

    settings.ACE_EMBED_MESSAGE_ROLES = ["user", "assistant", "toolResult"]
    assert [str(pk) for pk in pending_messages(embedder=get_embedder(), limit=100)] == [ids["toolResult2"]]
    assert messages_embed(message_ids=ids.values()) == 3


def test_the_embedded_roles_setting_is_read_forgivingly_and_a_wrong_role_stops_the_start(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "ACE_EMBED_MESSAGE_ROLES": "user,tool", "ACE_DATA_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'aceproject.settings'; "
         "django.setup()"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode != 0
    assert "ACE_EMBED_MESSAGE_ROLES='user,tool'" in done.stderr and "toolResult" in done.stderr
    env["ACE_EMBED_MESSAGE_ROLES"] = " user, toolResult ,"  # spaces and a trailing comma are fine
    done = subprocess.run(
        [sys.executable, "-c", "import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'aceproject.settings'; "
         "django.setup(); from django.conf import settings; print(settings.ACE_EMBED_MESSAGE_ROLES)"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['user', 'toolResult']"

    from aceproject import settings as project_settings
    from sessions_app.models import Role

    assert project_settings.ROLES == tuple(Role.values)  # what the settings check against (no models there)


def test_the_embedding_sweep_is_scheduled(db):
    from django_celery_beat.models import PeriodicTask

    assert PeriodicTask.objects.get(task="memory_app.tasks.embed_pending").enabled


def test_reembedding_after_an_embedder_change(api, settings, capsys):
    from django.core.management import call_command

    record = remember(api.tenant, "偏好博物馆")
    assert Record.objects.get(pk=record.pk).embedding_key == "hash-v1:384"
    settings.ACE_EMBEDDER_DIMENSIONS = 256  # another vector space
    call_command("ace_embeddings", "status")
    assert "0 of 1 valid records" in capsys.readouterr().out
    # Until re-embedded, recall uses keywords for it and never compares vectors of two spaces.
    assert recall(api, "博物馆", include_messages=False)["results"][0]["matched_by"] == ["keyword"]
    call_command("ace_embeddings", "reembed", "--now")
    assert Record.objects.get(pk=record.pk).embedding_key == "hash-v1:256"
    assert set(recall(api, "博物馆", include_messages=False)["results"][0]["matched_by"]) == {"keyword", "vector"}


def test_writes_never_fail_when_the_embedder_is_down_and_are_embedded_later(api, settings):
    settings.ACE_EMBEDDER = "openai"
    settings.ACE_EMBEDDER_BASE_URL = "http://127.0.0.1:9/v1"
    settings.ACE_EMBEDDER_MODEL = "text-embedding-3-small"
    settings.ACE_EMBEDDER_DIMENSIONS = 384
    settings.ACE_EMBEDDER_TIMEOUT = 2
    response = api.post(
        "/api/v1/records/", {"user_id": "xiaoming", "type": "profile", "content": "偏好博物馆"}, format="json"
    )
    assert response.status_code == 201
    record = Record.objects.get(pk=response.json()["id"])
    assert record.embedding_key == ""  # stored, not yet embedded
    # Recall still finds it, by keyword, and says it is degraded.
    body = recall(api, "博物馆", include_messages=False)
    assert body["degraded"] is True and body["results"][0]["id"] == str(record.pk)
    # The embedder is back: the sweep's work embeds it.
    settings.ACE_EMBEDDER = "hash"
    settings.ACE_EMBEDDER_DIMENSIONS = None
    from memory_app.embedders import get_embedder
    from memory_app.selectors.records import pending_records

    assert pending_records(embedder=get_embedder(), limit=100) == [record.pk]
    records_embed(record_ids=[record.pk])
    assert Record.objects.get(pk=record.pk).embedding_key == "hash-v1:384"


def test_a_forked_process_embeds_questions_with_threads_of_its_own():
    """gunicorn and Celery fork their workers: a worker forked after the parent embedded a question gets a pool
    of its own (a copy of the parent's would take the work and never run it)."""
    assert recall_module._embedding_threads().submit(lambda: "parent").result(timeout=5) == "parent"
    pid = os.fork()
    if pid == 0:  # the child: exit 0 only if its pool runs the work
        try:
            done = recall_module._embedding_threads().submit(lambda: "child").result(timeout=5) == "child"
        except BaseException:
            done = False
        os._exit(0 if done else 1)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_long_questions_words_are_picked_out_by_postgresql_with_the_same_positions(api):
    """For a question of more than PICK_ABOVE_LEXEMES words, PostgreSQL picks their positions out of each long
    matching turn's vector instead of their being searched for in its whole text: the same positions and the
    same length, so the same BM25 score. A short question's, and a short turn's, are searched for as before."""
    words = " ".join(f"w{n}x" for n in range(200))  # short enough to be written with its vector
    turn, short = chat(api, [f"Lisbon trams. {words} More trams in Lisbon, lisbon! Pastries, fado.", "Lisbon fado"])
    question = "Lisbon trams pastries fado tiles miradouros azulejos custard bakery river bridge castle hills sunset"

    def pool(question):
        lexemes = sorted({lexeme for term in recall_module.query_terms(question) for lexeme in term})
        messages = Message.objects.filter(pk__in=[turn.pk, short.pk])
        rows = recall_module._keyword_pool(messages, newest="created_at", lexemes=lexemes)
        return lexemes, {pk: (text, picked) for pk, text, picked in rows}

    lexemes, rows = pool(question)
    text, picked = rows[str(turn.pk)]
    assert len(lexemes) > recall_module.PICK_ABOVE_LEXEMES and picked is not None
    positions, length = recall_module.doc_terms(text, lexemes, picked)
    assert (positions, length) == recall_module.doc_terms(text, lexemes)
    assert len(positions["lisbon"]) == 3 and len(positions["tram"]) == 2 and "azulejo" not in positions
    assert length > len(words.split())  # every word of the turn, stop words left out
    assert rows[str(short.pk)][1] is None
    assert pool("Lisbon trams")[1][str(turn.pk)][1] is None


def test_a_user_without_records_is_not_searched_for_records(api):
    """A user no strategy has read yet has no records: one count says so, and neither the records' keyword
    search nor their vector search runs."""
    chat(api, ["下周去南京，想看明孝陵", "好的，明孝陵秋天很美"])
    with CaptureQueriesContext(connection) as queries:
        assert recall(api, "明孝陵")["results"]
    record_reads = [
        q["sql"]
        for q in queries.captured_queries
        if 'memory_app_record"' in q["sql"] or "memory_app_record " in q["sql"]
    ]
    assert not [sql for sql in record_reads if "@@" in sql or "<=>" in sql], record_reads
