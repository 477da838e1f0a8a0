#!/usr/bin/env python
"""Evidence recall of /api/v1/recall/ on a conversational memory dataset in the LoCoMo JSON layout.

    .venv/bin/python bench/locomo.py                                   # synthetic data, local model, in-process
    .venv/bin/python bench/locomo.py --embedder hash
    .venv/bin/python bench/locomo.py --dataset /path/to/locomo10.json --embedder local
    .venv/bin/python bench/locomo.py --url http://127.0.0.1:8000 --key ace_...   # a live server

Loading, through the public API only (a tenant API key): one Open ACE session per `session_N` of a sample
(`user_id` = the sample id, `metadata.date_time` = the session's date), its turns appended with one
`POST /api/v1/sessions/{id}/messages/`: speaker_a's turns as role `user`, speaker_b's as role `assistant`
(LoCoMo's two speakers are both people; the roles only keep the two apart, and `metadata.speaker` names
the speaker), `external_id` = the turn's dia_id, `created_at` = the session's date_time (when it parses)
plus 30 s per turn, content = "<speaker>: <text>" (plus "[shares a photo: <caption>]" when the turn has one).

Embedding: `--embed-inline` (default) embeds the loaded messages in this process with
memory_app.embeddings.messages_embed (so no Celery worker is needed); `--no-embed-inline` waits until a worker
has embedded them (polling the message_embedding rows of the loaded ids). Both read the database, so against a
live server run this script with the server's settings (same ACE_DATA_DIR or DATABASE_URL, same embedder).

Questions: each `qa` item with evidence is asked with `POST /api/v1/recall/` (`user_id` = the sample id,
`top_k` = 20, `include_messages` true). Evidence recall@k = the fraction of the item's evidence dia_ids found
among the `source_external_ids` of the top k hits (messages, and the source messages of records), averaged
over items; reported overall and per category. Three modes:

- `hybrid`: the API as it is (BM25 keywords + vectors on one scale, message hits with their neighbours);
- `vector`: the same request with the keyword side switched off, and `keyword`: with the vector side
  switched off. The API has no such switch, so these run in this process with memory_app.selectors.recall's
  `terms_query` (→ None: no keyword lists) or `_vector_scores` (→ []: no vector lists) patched for the
  duration of the call; everything else (filters, fusion, top_k, hit loading) is the product's code. In-process
  they still go through the API view; with `--url` they call memory_app.selectors.recall.recall_search directly.

Evidence ids absent from the conversation (LoCoMo has a few) are left out of the denominator and counted;
items left without evidence are skipped and counted.

Results: a table, and bench/results/locomo-<name>.json (default name: <dataset stem>-<embedder>).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

DEFAULT_DATASET = benchlib.BENCH_DIR / "data" / "synthetic_locomo.json"
KS = (5, 10, 20)
TOP_K = 20
MODES = ("hybrid", "vector", "keyword")
CATEGORY_NAMES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
TENANT = "bench-locomo"
_SESSION_KEY = re.compile(r"^session_(\d+)$")


# -- the dataset -----------------------------------------------------------------------------------------
def load_dataset(path) -> list[dict]:
    data = json.loads(Path(path).read_text())
    if isinstance(data, dict):  # one sample, or {"samples": [...]}
        data = data.get("samples", [data])
    return data


def parse_date_time(text: str | None) -> datetime | None:
    """LoCoMo's "1:56 pm on 8 May, 2023" (and a few close variants), as UTC; None when it does not parse."""
    if not text:
        return None
    cleaned = re.sub(r"\s+", " ", text.strip())
    for fmt in ("%I:%M %p on %d %B, %Y", "%I:%M %p on %d %b, %Y", "%I:%M %p on %B %d, %Y", "%Y-%m-%d %H:%M"):
        try:
            return datetime.strptime(cleaned, fmt).replace(tzinfo=UTC)
        except ValueError:
            continue
    try:
        moment = datetime.fromisoformat(cleaned)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def sessions_of(conversation: dict) -> list[tuple[int, list[dict], str | None]]:
    out = []
    for key, turns in conversation.items():
        match = _SESSION_KEY.match(key)
        if match and isinstance(turns, list) and turns:
            out.append((int(match.group(1)), turns, conversation.get(f"{key}_date_time")))
    return sorted(out, key=lambda item: item[0])


def evidence_ids(raw) -> list[str]:
    """Evidence as a list of dia_ids ("D1:3"); LoCoMo sometimes packs several into one string."""
    out: list[str] = []
    for item in raw or []:
        out += [part.strip() for part in re.split(r"[;,\s]+", str(item)) if part.strip()]
    return list(dict.fromkeys(out))


def turn_text(turn: dict) -> str:
    text = str(turn.get("text") or "").strip()
    caption = turn.get("blip_caption")
    if caption:
        text = f"{text} [shares a photo: {caption}]".strip()
    return f"{turn.get('speaker', '?')}: {text}"


# -- the API, in-process or over HTTP --------------------------------------------------------------------
class DjangoApi:
    """The public API through django.test.Client (the whole Django stack in this process)."""

    in_process = True

    def __init__(self, key: str, client=None):
        from django.test import Client

        self.client = client or Client()
        self.headers = {"HTTP_AUTHORIZATION": f"Bearer {key}"}
        self.key = key

    def post(self, path: str, body) -> tuple[int, object]:
        response = self.client.post(path, data=json.dumps(body), content_type="application/json", **self.headers)
        return response.status_code, response.json() if response.content else None


class HttpApi:
    """The public API of a live server (standard library only)."""

    in_process = False

    def __init__(self, url: str, key: str, timeout: float = 120):
        self.url = url.rstrip("/")
        self.key = key
        self.timeout = timeout

    def post(self, path: str, body) -> tuple[int, object]:
        request = urllib.request.Request(
            self.url + path,
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Authorization": f"Bearer {self.key}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
                return response.status, json.loads(raw) if raw else None
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                return error.code, json.loads(raw)
            except ValueError:
                return error.code, raw.decode(errors="replace")


def _expect(status: int, body, what: str, ok=(200, 201)):
    if status not in ok:
        raise RuntimeError(f"{what}: HTTP {status}: {str(body)[:500]}")
    return body


# -- loading ---------------------------------------------------------------------------------------------
def load_sample(api, sample: dict, *, user_id: str, dataset_name: str) -> dict:
    """One session per session_N, its turns as messages. Returns {dia_id: message id} and counts."""
    conversation = sample["conversation"]
    speaker_a = conversation.get("speaker_a")
    message_ids: dict[str, str] = {}
    sessions = 0
    for number, turns, date_text in sessions_of(conversation):
        moment = parse_date_time(date_text)
        body = {
            "user_id": user_id,
            "name": f"{sample['sample_id']} session {number}",
            "tool": "locomo",
            "metadata": {"dataset": dataset_name, "sample_id": str(sample["sample_id"]), "session": number},
        }
        if date_text:
            body["metadata"]["date_time"] = date_text
        if moment is not None:
            body["started_at"] = benchlib.iso(moment)
        session = _expect(*api.post("/api/v1/sessions/", body), f"create session {number} of {sample['sample_id']}")
        sessions += 1
        batch = []
        for i, turn in enumerate(turns):
            item = {
                "role": "user" if turn.get("speaker") == speaker_a else "assistant",
                "content": turn_text(turn),
                "external_id": str(turn["dia_id"]),
                "metadata": {"speaker": turn.get("speaker"), "dia_id": turn["dia_id"]},
            }
            if moment is not None:
                item["created_at"] = benchlib.iso(moment + timedelta(seconds=30 * i))
            batch.append(item)
        stored = _expect(*api.post(f"/api/v1/sessions/{session['id']}/messages/", batch), f"append to session {number}")
        stored = stored if isinstance(stored, list) else [stored]
        for message in stored:
            message_ids[message["external_id"]] = message["id"]
    return {"sessions": sessions, "message_ids": message_ids}


def strategies_run(api, *, user_id: str, dataset_name: str) -> int:
    """Run the tenant's enabled strategies (the built-in ones) over every session of the user, in this process
    (--strategies), as a worker would: a manual run per session and strategy, executed here, then the new
    records embedded. A run reads only what its strategy has not read yet, so a second call adds nothing.
    Returns the user's valid records."""
    from memory_app.embeddings import records_embed
    from memory_app.models import Record
    from sessions_app.models import Session
    from sessions_app.services.apikeys import apikey_authenticate
    from strategies_app.models import Trigger
    from strategies_app.services.runs import run_execute, run_request
    from strategies_app.triggers import enabled_strategies

    tenant = apikey_authenticate(plain_key=api.key).tenant
    strategies = enabled_strategies(tenant.pk)
    for session in Session.objects.filter(tenant=tenant, user_id=user_id, metadata__dataset=dataset_name).order_by(
        "started_at"
    ):
        for strategy in strategies:
            run = run_request(strategy=strategy, trigger=Trigger.MANUAL, session=session, detail="bench/locomo.py")
            run_execute(run.pk)
    records = Record.objects.filter(tenant=tenant, user_id=user_id, valid=True)
    records_embed(record_ids=list(records.values_list("pk", flat=True)))
    return records.count()


OBSERVATION_STRATEGY = "locomo-observation"


def observation_items(sample: dict) -> list[tuple[str, list[str]]]:
    """(text, [dia_id, ...]) of every observation a LoCoMo sample carries: `observation` →
    `session_N_observation` → speaker → [[text, evidence]], evidence one dia_id, a list of them or several
    joined by commas. These are the LoCoMo paper's per-person observations, written by an LLM from each session,
    each citing the turns it came from. A sample without them gives none."""
    items = []
    for _, by_speaker in sorted((sample.get("observation") or {}).items(), key=lambda kv: _session_number(kv[0])):
        for observations in (by_speaker or {}).values():
            for text, evidence in observations:
                cited = evidence if isinstance(evidence, list) else str(evidence).split(",")
                items.append((str(text).strip(), [str(dia_id).strip() for dia_id in cited if str(dia_id).strip()]))
    return items


def _session_number(key: str) -> int:
    digits = "".join(ch for ch in key.split("_")[1] if ch.isdigit()) if "_" in key else ""
    return int(digits) if digits else 0


def observations_load(api, sample: dict, *, user_id: str, message_ids: dict[str, str]) -> dict:
    """The sample's observations (observation_items) as records of the user, each citing the messages of its
    turns, through POST /api/v1/records/ (type "fact", strategy OBSERVATION_STRATEGY): what an LLM strategy that
    cites its turns (the `llm` extractor's source_seqs) would have written. An observation none of whose turns
    was loaded is skipped; with an in-process API, an observation the user has already (same content) is not
    posted again, so --reuse keeps a complete load and finishes one that was interrupted.
    Returns {"records": made now or found, "skipped": uncited}."""
    stored: set[str] = set()
    if api.in_process:
        from memory_app.models import Record

        stored = set(
            Record.objects.filter(
                tenant=_tenant(api), user_id=user_id, strategy=OBSERVATION_STRATEGY, valid=True
            ).values_list("content", flat=True)
        )
    made = skipped = found = 0
    for text, cited in observation_items(sample):
        sources = [message_ids[dia_id] for dia_id in dict.fromkeys(cited) if dia_id in message_ids]
        if not text or not sources:
            skipped += 1
            continue
        if text in stored:
            found += 1
            continue
        body = {
            "user_id": user_id,
            "type": "fact",
            "content": text,
            "strategy": OBSERVATION_STRATEGY,
            "source_message_ids": sources,
        }
        _expect(*api.post("/api/v1/records/", body), f"observation of {sample['sample_id']}")
        made += 1
    return {"records": made + found, "skipped": skipped}


def observations_remove(api, *, user_id: str) -> int:
    """Delete the user's observation records (an in-process run without them after one with them)."""
    if not api.in_process:
        return 0
    from memory_app.models import Record

    deleted, _ = Record.objects.filter(tenant=_tenant(api), user_id=user_id, strategy=OBSERVATION_STRATEGY).delete()
    return deleted


def observations_embed(api, user_ids: list[str]) -> int:
    """Embed the observation records of these users here (in-process; a live server's worker embeds its own)."""
    if not api.in_process:
        return 0
    from memory_app.embeddings import records_embed
    from memory_app.models import Record

    records = Record.objects.filter(
        tenant=_tenant(api), user_id__in=user_ids, strategy=OBSERVATION_STRATEGY, valid=True
    )
    return records_embed(record_ids=list(records.values_list("pk", flat=True)))


def _tenant(api):
    from sessions_app.services.apikeys import apikey_authenticate

    return apikey_authenticate(plain_key=api.key).tenant


def already_loaded(api, sample: dict, *, user_id: str, dataset_name: str) -> dict | None:
    """{dia_id: message id} of an earlier in-process run's copy of the sample, when it is complete (--reuse)."""
    if not api.in_process:
        return None
    from sessions_app.models import Message, Session
    from sessions_app.services.apikeys import apikey_authenticate

    tenant = apikey_authenticate(plain_key=api.key).tenant
    turns = {str(t["dia_id"]) for _, session_turns, _ in sessions_of(sample["conversation"]) for t in session_turns}
    rows = Message.objects.filter(
        tenant=tenant, session__user_id=user_id, session__metadata__dataset=dataset_name
    ).values_list("external_id", "id")
    message_ids = {external: str(pk) for external, pk in rows}
    if set(message_ids) != turns:
        return None
    sessions = Session.objects.filter(tenant=tenant, user_id=user_id, metadata__dataset=dataset_name).count()
    return {"sessions": sessions, "message_ids": message_ids}


def embed_messages(message_ids: list[str], *, inline: bool, timeout: float = 600) -> float:
    """Embed the messages here (inline) or wait until a worker has. Returns the seconds it took."""
    from memory_app.embedders import get_embedder
    from memory_app.embeddings import messages_embed
    from memory_app.models import MessageEmbedding

    embedder = get_embedder()
    start = time.perf_counter()
    if inline:
        done = {
            str(pk)
            for pk in MessageEmbedding.objects.filter(
                message_id__in=message_ids, embedding_key=embedder.key
            ).values_list("message_id", flat=True)
        }
        message_ids = [m for m in message_ids if m not in done]  # (a set built once: 2 minutes for 9,000 ids)
        for i in range(0, len(message_ids), 256):
            messages_embed(message_ids=message_ids[i : i + 256], embedder=embedder)
        return time.perf_counter() - start
    deadline = time.monotonic() + timeout
    while True:
        done = MessageEmbedding.objects.filter(message_id__in=message_ids, embedding_key=embedder.key).count()
        if done >= len(message_ids):
            return time.perf_counter() - start
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {done} of {len(message_ids)} messages embedded after {timeout:.0f} s")
        time.sleep(1)


def index_messages(message_ids: list[str], *, inline: bool, timeout: float = 600) -> int:
    """Give the long messages their keyword search vectors here (inline), as the `indexing` queue's worker
    would after their write, or wait until a worker has (sessions_app.search: a message of more than
    INLINE_CHARS characters is indexed after its commit, and until then keyword search misses it). Returns
    how many were indexed here."""
    from sessions_app.models import Message
    from sessions_app.search import messages_index

    waiting = Message.objects.filter(pk__in=message_ids, search_vector__isnull=True)
    if inline:
        return messages_index(list(waiting.values_list("pk", flat=True)))
    deadline = time.monotonic() + timeout
    while waiting.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{waiting.count()} long messages still without a search vector after {timeout:.0f} s")
        time.sleep(1)
    return 0


# -- asking ----------------------------------------------------------------------------------------------
@contextmanager
def recall_mode(mode: str):
    """Switch one side of memory_app.recall off for the duration (in this process only)."""
    from unittest import mock

    import memory_app.selectors.recall as recall

    if mode == "hybrid":
        yield
    elif mode == "vector":
        with mock.patch.object(recall, "terms_query", lambda terms: None):
            yield
    elif mode == "keyword":
        with mock.patch.object(recall, "_vector_scores", lambda *args, **kwargs: []):
            yield
    else:
        raise ValueError(f"unknown mode {mode!r}")


class Asker:
    """Asks one question in one mode; hybrid through the API, the others through the API in-process or
    through recall_search directly when the API is remote."""

    def __init__(self, api):
        self.api = api
        self._tenant = None
        self.incomplete = 0  # answers through the API that said some of the user's rows were not indexed yet

    def _tenant_of_key(self):
        if self._tenant is None:
            from sessions_app.services.apikeys import apikey_authenticate

            found = apikey_authenticate(plain_key=self.api.key)
            if found is None:
                raise RuntimeError("the API key is not valid in this process's database: use the server's settings")
            self._tenant = found.tenant
        return self._tenant

    def ask(self, mode: str, question: str, user_id: str, *, top_k: int = TOP_K) -> tuple[list[list[str]], bool, float]:
        """The source external ids of each hit, best first; whether the answer was degraded; seconds."""
        body = {"query": question[:4000], "user_id": user_id, "top_k": top_k, "include_messages": True}
        start = time.perf_counter()
        if mode == "hybrid" or self.api.in_process:
            with recall_mode(mode):
                result = _expect(*self.api.post("/api/v1/recall/", body), f"recall {question!r}", ok=(200,))
            elapsed = time.perf_counter() - start
            self.incomplete += result.get("complete") is False
            hits = [
                (hit["source_external_ids"], [c["external_id"] for c in hit.get("context", [])])
                for hit in result["results"]
            ]
            return hits, bool(result["degraded"]), elapsed
        from memory_app.selectors.recall import recall_search

        with recall_mode(mode):
            result = recall_search(tenant=self._tenant_of_key(), **body)
        elapsed = time.perf_counter() - start
        hits = [(hit.source_external_ids, [c["external_id"] for c in hit.context]) for hit in result.results]
        return hits, result.degraded, elapsed


def category_label(qa: dict) -> str:
    """ "2 temporal": the number and its name (the item's own `category_name`, else LoCoMo's)."""
    number = qa.get("category")
    name = qa.get("category_name") or (CATEGORY_NAMES.get(number, "") if isinstance(number, int) else "")
    return f"{number} {name}".strip()


def recall_at(hits: list[tuple[list[str], list[str]]], evidence: list[str], k: int, *, context: bool = True) -> float:
    """The share of the evidence among the top k hits: their sources, and (context=True) the neighbouring turns
    each message hit brings along."""
    found = {ext for own, around in hits[:k] for ext in (own + around if context else own)}
    return sum(1 for e in evidence if e in found) / len(evidence)


def _mean(values) -> float | None:
    values = list(values)
    return round(sum(values) / len(values), 4) if values else None


def summarise(rows: list[dict]) -> dict:
    out = {"questions": len(rows)}
    for k in KS:
        out[f"recall@{k}"] = _mean(r[f"recall@{k}"] for r in rows)
    for k in KS:
        out[f"own@{k}"] = _mean(r[f"own@{k}"] for r in rows)
    return out


# -- loading and listing, shared with bench/memory_eval.py ----------------------------------------------
def load_samples(
    api,
    samples: list[dict],
    *,
    dataset_name: str,
    user_prefix: str = "",
    reuse: bool = False,
    strategies: bool = False,
    observations: bool = False,
    embed_inline: bool = True,
    progress=print,
) -> dict:
    """Load each sample through `api` as user `<user_prefix><sample id>` (or keep an earlier complete copy:
    `reuse`), then embed every loaded message. Returns {"loaded": {sample id: load_sample's dict},
    "sessions", "message_ids" (all of them), "load_seconds", "embed_seconds"}."""
    from memory_app.embedders import get_embedder

    start = time.perf_counter()
    loaded: dict[str, dict] = {}
    sessions = 0
    for sample in samples:
        user_id = f"{user_prefix}{sample['sample_id']}"
        earlier = already_loaded(api, sample, user_id=user_id, dataset_name=dataset_name) if reuse else None
        loaded[str(sample["sample_id"])] = earlier or load_sample(
            api, sample, user_id=user_id, dataset_name=dataset_name
        )
        info = loaded[str(sample["sample_id"])]
        if observations:
            made = observations_load(api, sample, user_id=user_id, message_ids=info["message_ids"])
            info["observations"] = made["records"]
            if made["records"] or made["skipped"]:
                progress(f"  {user_id}: {made['records']} observations as records ({made['skipped']} cite no turn)")
        else:
            observations_remove(api, user_id=user_id)
        if strategies:  # a run reads only what its strategy has not read yet: nothing twice
            records = strategies_run(api, user_id=user_id, dataset_name=dataset_name)
            info["strategy_records"] = records
            progress(f"  {user_id}: {records} valid records after the built-in strategies")
        sessions += loaded[str(sample["sample_id"])]["sessions"]
    load_seconds = time.perf_counter() - start
    all_ids = [mid for info in loaded.values() for mid in info["message_ids"].values()]
    progress(f"  loaded {len(samples)} samples: {sessions} sessions, {len(all_ids)} messages in {load_seconds:.1f} s")
    embed_seconds = embed_messages(all_ids, inline=embed_inline)
    if observations:
        embedded = observations_embed(api, [f"{user_prefix}{sample['sample_id']}" for sample in samples])
        if embedded:
            progress(f"  {embedded} observation records embedded")
    how = "inline" if embed_inline else "by a worker"
    progress(f"  embedded with {get_embedder().key} ({how}) in {embed_seconds:.1f} s")
    indexed = index_messages(all_ids, inline=embed_inline)
    if indexed:
        progress(f"  {indexed} long messages given their keyword search vectors (the indexing queue's work)")
    return {
        "loaded": loaded,
        "sessions": sessions,
        "message_ids": all_ids,
        "load_seconds": round(load_seconds, 2),
        "embed_seconds": round(embed_seconds, 2),
    }


def questions_of(samples: list[dict], loaded: dict[str, dict] | None, *, user_prefix: str = "") -> tuple[list, dict]:
    """The qa items that can be scored, in order: {"sample_id", "qa" (its index), "user_id", "question",
    "evidence", "category"}. With `loaded` (load_samples's), evidence ids absent from the loaded conversation
    are left out (and counted); an item left without evidence, or without a question, is skipped (counted)."""
    questions, total, skipped, unknown_evidence = [], 0, 0, 0
    for sample in samples:
        sample_id = str(sample["sample_id"])
        known = loaded[sample_id]["message_ids"] if loaded is not None else None
        for index, qa in enumerate(sample.get("qa", [])):
            total += 1
            raw = evidence_ids(qa.get("evidence"))
            evidence = [e for e in raw if known is None or e in known]
            unknown_evidence += len(raw) - len(evidence)
            if not evidence or not str(qa.get("question") or "").strip():
                skipped += 1
                continue
            questions.append(
                {
                    "sample_id": sample_id,
                    "qa": index,
                    "user_id": f"{user_prefix}{sample_id}",
                    "question": str(qa["question"]),
                    "evidence": evidence,
                    "category": category_label(qa),
                }
            )
    counts = {
        "qa_total": total,
        "qa_skipped_no_evidence": skipped,
        "evidence_ids_not_in_conversation": unknown_evidence,
    }
    return questions, counts


# -- the whole run ---------------------------------------------------------------------------------------
def run(
    api,
    *,
    dataset=DEFAULT_DATASET,
    modes=MODES,
    embed_inline: bool = True,
    user_prefix: str = "",
    details: bool = False,
    reuse: bool = False,
    strategies: bool = False,
    progress=print,
) -> dict:
    """Load the dataset through `api` (DjangoApi or HttpApi), embed, ask every question in every mode.
    Django must be set up; the embedder is the one the settings choose. Returns the figures as a dict."""
    from memory_app.embedders import get_embedder

    samples = load_dataset(dataset)
    dataset_name = Path(dataset).name
    embedder = get_embedder()
    load = load_samples(
        api,
        samples,
        dataset_name=dataset_name,
        user_prefix=user_prefix,
        reuse=reuse,
        strategies=strategies,
        embed_inline=embed_inline,
        progress=progress,
    )
    questions, counts = questions_of(samples, load["loaded"], user_prefix=user_prefix)

    asker = Asker(api)
    per_mode: dict[str, list[dict]] = {mode: [] for mode in modes}
    latencies: dict[str, list[float]] = {mode: [] for mode in modes}
    degraded: dict[str, int] = dict.fromkeys(modes, 0)
    for question in questions:
        evidence = question["evidence"]
        for mode in modes:
            hits, was_degraded, seconds = asker.ask(mode, question["question"], question["user_id"])
            latencies[mode].append(seconds)
            degraded[mode] += was_degraded
            row = {
                "sample_id": question["sample_id"],
                "qa": question["qa"],
                "category": question["category"],
                **{f"recall@{k}": recall_at(hits, evidence, k) for k in KS},
                **{f"own@{k}": recall_at(hits, evidence, k, context=False) for k in KS},
            }
            if details:
                row |= {"question": question["question"], "evidence": evidence, "top": [h for h in hits[:10]]}
            per_mode[mode].append(row)

    results: dict = {}
    for mode in modes:
        rows = per_mode[mode]
        by_category = defaultdict(list)
        for row in rows:
            by_category[str(row["category"])].append(row)
        results[mode] = {
            "overall": summarise(rows),
            "by_category": {c: summarise(r) for c, r in sorted(by_category.items())},
            "degraded_answers": degraded[mode],
            "latency": benchlib.summary_ms(latencies[mode]),
        }
        if details:
            results[mode]["questions"] = rows
    return {
        "dataset": str(dataset),
        "embedder": embedder.key,
        "embedder_label": embedder.label,
        "api": "in-process django.test.Client" if api.in_process else f"HTTP {api.url}",
        "incomplete_answers": asker.incomplete,
        "embedding": "inline (messages_embed)" if embed_inline else "worker",
        "roles": "speaker_a = user, speaker_b = assistant; metadata.speaker names the speaker",
        "top_k": TOP_K,
        "samples": len(samples),
        "sessions": load["sessions"],
        "messages": len(load["message_ids"]),
        "qa_total": counts["qa_total"],
        "qa_evaluated": len(questions),
        "qa_skipped_no_evidence": counts["qa_skipped_no_evidence"],
        "evidence_ids_not_in_conversation": counts["evidence_ids_not_in_conversation"],
        "load_seconds": load["load_seconds"],
        "embed_seconds": load["embed_seconds"],
        "modes": results,
    }


SWEEP = {
    "VECTOR_WEIGHT": (0.25, 0.5, 0.75, 1.0),
    "NEIGHBOUR_KEYWORD": (0.25, 0.5, 0.75),
    "NEIGHBOUR_VECTOR": (0.0, 0.5, 1.0),
}


def grid_points(grid: dict[str, tuple]) -> list[dict]:
    """Every combination of a grid {constant name: values}, as {name: value} dicts, in the grid's order."""
    import itertools

    return [dict(zip(grid, values, strict=True)) for values in itertools.product(*grid.values())]


@contextmanager
def recall_constants(values: dict):
    """memory_app.selectors.recall's module constants set to `values` for the duration (in this process only),
    for every embedder (none uses weights of its own meanwhile); a name the module does not have is an error,
    not a silent no-op."""
    from unittest import mock

    import memory_app.selectors.recall as recall

    with mock.patch.multiple(recall, **{"EMBEDDER_WEIGHTS": False, **values}):
        yield


class Gathered:
    """Each question's candidates gathered once (memory_app.selectors.recall.gather: the database part of a
    recall, a dataset loaded before), to be scored and picked here as often as wanted, under whatever values
    the recall module's constants have at the time (recall_constants)."""

    def __init__(self, api, questions: list[dict]):
        import memory_app.selectors.recall as recall
        from memory_app.embedders import get_embedder
        from memory_app.models import Record
        from sessions_app.models import Message

        tenant = Asker(api)._tenant_of_key()
        embedder = get_embedder()
        users = {q["user_id"] for q in questions}
        self.external = {
            (str(session_id), seq): ext
            for session_id, seq, ext in Message.objects.filter(tenant=tenant, session__user_id__in=users).values_list(
                "session_id", "seq", "external_id"
            )
        }
        self.cited = {}
        for record in Record.objects.filter(tenant=tenant, user_id__in=users, valid=True).prefetch_related(
            "source_messages"
        ):
            self.cited[str(record.pk)] = [m.external_id for m in record.source_messages.all() if m.external_id]
        self.embedder = embedder
        self.questions = [q["question"][:4000] for q in questions]
        self.candidates = []
        for question, q in zip(self.questions, questions, strict=True):
            self.candidates.append(
                recall.gather(
                    tenant=tenant,
                    query=question,
                    user_id=q["user_id"],
                    vector=recall.query_vector(embedder, recall.vector_text(question, embedder)),
                    embedder=embedder,
                    types=None,
                    session=None,
                    since=None,
                    until=None,
                    include_messages=True,
                    include_records=True,
                )
            )

    def hits(self, index: int, top_k: int = 10) -> list[tuple[list[str], list[str]]]:
        """Question `index`'s top_k hits as (own external ids, context external ids), scored and picked as
        recall_search would with the module's constants as they are now."""
        import dataclasses

        import memory_app.selectors.recall as recall

        candidates, keyword = self.candidates[index]
        fresh = {key: dataclasses.replace(c, matched_by=set(), around=[]) for key, c in candidates.items()}
        hits = []
        weighed = recall.weights(self.questions[index], self.embedder)
        for c in recall._pick(recall._score(fresh, keyword, weighed), top_k):
            if c.place is None:
                hits.append((self.cited.get(c.pk, []), []))
            else:
                hits.append(([self.external.get(c.place, "")], [self.external.get(p, "") for p in c.around]))
        return hits


def sweep(api, dataset, *, user_prefix: str = "") -> list[dict]:
    """recall@10 (and own@10) of every combination of the scoring weights in SWEEP, on a dataset loaded
    before. In this process: each question's candidates are gathered once (Gathered), then scored and picked
    under each combination with the module's constants patched."""
    questions, _ = questions_of(load_dataset(dataset), None, user_prefix=user_prefix)
    gathered = Gathered(api, questions)
    rows = []
    for patches in grid_points(SWEEP):
        found, own = [], []
        with recall_constants(patches):
            for index, question in enumerate(questions):
                hits = gathered.hits(index)
                found.append(recall_at(hits, question["evidence"], 10))
                own.append(recall_at(hits, question["evidence"], 10, context=False))
        rows.append({**patches, "recall@10": _mean(found), "own@10": _mean(own)})
    return sorted(rows, key=lambda row: -row["recall@10"])


def print_report(report: dict) -> None:
    modes = list(report["modes"])
    rows = []
    for mode in modes:
        overall = report["modes"][mode]["overall"]
        latency = report["modes"][mode]["latency"]
        rows.append(
            [
                mode,
                overall["questions"],
                *(f"{overall[f'recall@{k}']:.3f}" for k in KS),
                f"{overall['own@10']:.3f}",
                latency["p50_ms"],
                latency["p95_ms"],
            ]
        )
    benchlib.print_table(
        ["mode", "questions", *(f"recall@{k}" for k in KS), "own@10", "p50 ms", "p95 ms"],
        rows,
        title=f"Evidence recall, {report['dataset']} ({report['embedder']}, {report['api']})",
    )
    categories = sorted({c for mode in modes for c in report["modes"][mode]["by_category"]})
    rows = []
    for category in categories:
        for mode in modes:
            summary = report["modes"][mode]["by_category"].get(category)
            if summary:
                rows.append(
                    [
                        category,
                        mode,
                        summary["questions"],
                        *(f"{summary[f'recall@{k}']:.3f}" for k in KS),
                        f"{summary['own@10']:.3f}",
                    ]
                )
    benchlib.print_table(
        ["category", "mode", "questions", *(f"recall@{k}" for k in KS), "own@10"], rows, title="Per category"
    )
    hybrid = report["modes"].get("hybrid", {}).get("overall", {}).get("recall@10")
    others = {m: report["modes"][m]["overall"]["recall@10"] for m in ("vector", "keyword") if m in report["modes"]}
    if hybrid is not None and others:
        verdict = "beats" if all(hybrid > v for v in others.values()) else "does NOT beat"
        print(f"\nhybrid recall@10 {hybrid:.3f} {verdict} " + ", ".join(f"{m} {v:.3f}" for m, v in others.items()))


def cleanup(tenant) -> None:
    """Delete what earlier runs loaded for the in-process tenant, and what a worker made of it (strategy runs and
    the records they wrote, when a deployment was started on this database since)."""
    from django.db import connection, transaction

    statements = [
        "DELETE FROM strategies_app_runrecord WHERE tenant_id = %s",
        "DELETE FROM strategies_app_watermark WHERE tenant_id = %s",
        "DELETE FROM strategies_app_strategyrun WHERE tenant_id = %s",
        "DELETE FROM memory_app_record_source_messages WHERE tenant_id = %s",
        "DELETE FROM memory_app_record_source_sessions WHERE tenant_id = %s",
        "DELETE FROM memory_app_recordrevision WHERE tenant_id = %s",
        "DELETE FROM portability_app_recordimport WHERE tenant_id = %s",
        "DELETE FROM memory_app_record WHERE tenant_id = %s",
        "DELETE FROM memory_app_messageembedding WHERE tenant_id = %s",
        "DELETE FROM memory_app_sessionembeddingprogress WHERE tenant_id = %s",
        "UPDATE sessions_app_session SET current_conversation_id = NULL WHERE tenant_id = %s",
        "DELETE FROM sessions_app_turn WHERE tenant_id = %s",
        "DELETE FROM sessions_app_sessionmodelusage WHERE tenant_id = %s",
        "DELETE FROM sessions_app_message WHERE tenant_id = %s",
        "DELETE FROM sessions_app_llmrequest WHERE tenant_id = %s",
        "DELETE FROM sessions_app_conversation WHERE tenant_id = %s",
        "DELETE FROM sessions_app_stateversion WHERE tenant_id = %s",
        "DELETE FROM sessions_app_usagehourly WHERE tenant_id = %s",
        "DELETE FROM sessions_app_session WHERE tenant_id = %s",
    ]
    with transaction.atomic(), connection.cursor() as cursor:
        for sql in statements:
            cursor.execute(sql, [tenant.pk])


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET), help="LoCoMo-layout JSON (default: synthetic)")
    parser.add_argument("--embedder", choices=["hash", "local", "openai"], default="local")
    parser.add_argument("--url", default=None, help="a live server's base URL (default: in-process)")
    parser.add_argument("--key", default=None, help="its tenant API key (with --url)")
    parser.add_argument("--embed-inline", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--modes", default=",".join(MODES), help="comma-separated: hybrid,vector,keyword")
    parser.add_argument(
        "--user-prefix", default=None, help="prefix of user ids (default: none in-process, a run id with --url)"
    )
    parser.add_argument("--details", action="store_true", help="per-question rows in the JSON")
    parser.add_argument(
        "--reuse",
        action="store_true",
        help="in-process: keep the rows of earlier runs and reuse a dataset loaded before",
    )
    parser.add_argument(
        "--strategies",
        action="store_true",
        help="in-process: run the built-in strategies over the loaded sessions here, as a worker would",
    )
    parser.add_argument("--sweep", action="store_true", help="in-process: recall@10 over a grid of scoring weights")
    parser.add_argument("--name", default=None, help="results name (default <dataset stem>-<embedder>)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    if args.url and not args.key:
        raise SystemExit("--url needs --key")
    os.environ["ACE_EMBEDDER"] = args.embedder
    benchlib.setup_django()
    from django.conf import settings

    settings.ACE_EMBEDDER = args.embedder
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.url:
        api = HttpApi(args.url, args.key)
        prefix = args.user_prefix if args.user_prefix is not None else f"run{datetime.now(UTC):%Y%m%d%H%M%S}-"
    else:
        from sessions_app.models import Tenant
        from sessions_app.services.apikeys import apikey_create

        created = apikey_create(tenant_name=TENANT, name="bench/locomo.py")
        prefix = args.user_prefix or ""
        try:
            if not args.reuse:
                cleanup(Tenant.objects.get(name=TENANT))
        except Exception as error:  # noqa: BLE001 - e.g. records referencing these messages
            print(f"  (could not delete earlier rows of {TENANT}: {error}; using a fresh user prefix instead)")
            prefix = prefix or f"run{datetime.now(UTC):%Y%m%d%H%M%S}-"
        api = DjangoApi(created.plain_key)
    print(f"LoCoMo-layout evidence recall: {args.dataset}, embedder {args.embedder}, {benchlib.database_description()}")
    report = run(
        api,
        dataset=args.dataset,
        modes=modes,
        embed_inline=args.embed_inline,
        user_prefix=prefix,
        details=args.details,
        reuse=args.reuse,
        strategies=args.strategies,
    )
    print_report(report)
    if args.sweep:
        report["sweep"] = sweep(api, args.dataset, user_prefix=prefix)
        benchlib.print_table(list(report["sweep"][0]), [list(row.values()) for row in report["sweep"]], title="Sweep")
    name = args.name or f"{Path(args.dataset).stem}-{args.embedder}"
    path = benchlib.write_results(f"locomo-{name}", {**report, "machine": benchlib.machine()})
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
