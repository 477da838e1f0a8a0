"""Claude Code's OpenTelemetry export → sessions, messages and raw telemetry, through the message service.

What becomes what (docs/otel.md):

- An event with a `session.id` goes to THE session of that Claude Code session in the tenant: tool
  `claude-code`, `agent_session_id` = `session.id` — the row a log import of the same session uses too,
  whichever arrives first (found the way imports find it, made under the same lock).
- `claude_code.user_prompt` → a user message (the prompt when `OTEL_LOG_USER_PROMPTS=1`, else empty with
  `metadata.prompt_length`), opening the round named by `prompt.id` (as the log import names it).
- `claude_code.api_request` → an assistant message that is one request: model, the four token kinds, time,
  `elapsed_ms`, and `metadata` {source: "otel", cost_usd, duration_ms, speed, query_source, …}.
- `claude_code.api_error` that the provider answered (a `status_code`; importers/failures.py) → an `error`
  message that is one request of its model, without tokens (docs/accounting.md "Failed calls"); one without an
  answer (`status_code` "undefined", a connection error) stays raw telemetry.
- Everything else (tool results, tool decisions, unknown events, and events a log import had already stored:
  `pairing`) → a `TelemetryRecord`, never counted.
- Metric points → `TelemetryRecord`s (deltas), shown as "metered by Claude Code", never counted: the events
  carry the same calls, and counting both would count them twice.

Ids are digests of what was sent, so an exporter's retry of a batch stores nothing new.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ingest_app.importers.base import nano_usd, parse_timestamp, usd_of_nano
from ingest_app.importers.claude_code.parser import prompt_round
from ingest_app.importers.failures import http_status, provider_answered, status_in_text
from ingest_app.models import ImportTool, TelemetryKind, TelemetryRecord
from ingest_app.otlp.decode import LogRecord, MetricPoint
from ingest_app.pipeline import pairing
from ingest_app.pipeline.sessions import UNKNOWN_USER, lock_for_creation
from platform_kit.redaction import redact
from sessions_app.models import ApiKey, Message, Session, Tenant
from sessions_app.schema import MAX_TOKENS, MESSAGE_TEXT_LIMITS
from sessions_app.services.ledger import Way
from sessions_app.services.messages import messages_append_to_sessions

TOOL = ImportTool.CLAUDE_CODE.value
PREFIX = "claude_code."
USER_PROMPT, API_REQUEST, API_ERROR = "claude_code.user_prompt", "claude_code.api_request", "claude_code.api_error"
TOKEN_ATTRIBUTES = {
    "input_tokens": "input_tokens",
    "output_tokens": "output_tokens",
    "cache_read_tokens": "cache_read_tokens",
    "cache_creation_tokens": "cache_creation_tokens",
}
# Attributes every event repeats, kept on the raw record but not in each message's metadata.
_COMMON = {
    "event.name", "event.timestamp", "session.id", "user.id", "user.email", "user.account_uuid",
    "organization.id", "terminal.type", "app.version",
}  # fmt: skip
_USER_KEYS = ("user.email", "user.account_uuid", "user.id")  # who a new session belongs to, in this order
_REDACTED_PROMPT = "<REDACTED>"  # what Claude Code sends as the prompt without OTEL_LOG_USER_PROMPTS=1


@dataclass
class Outcome:
    accepted: int = 0
    rejected: int = 0
    reasons: list[str] = field(default_factory=list)
    messages: int = 0  # stored as messages now
    records: int = 0  # stored as raw telemetry now

    def refuse(self, reason: str) -> None:
        self.rejected += 1
        if reason not in self.reasons and len(self.reasons) < 5:
            self.reasons.append(reason)

    @property
    def error_message(self) -> str:
        return "; ".join(self.reasons)


# -- reading one record ---------------------------------------------------------------------------------------
def event_name(record: LogRecord) -> str:
    """`claude_code.<name>`: Claude Code sends `event.name` without the prefix (and the body with it)."""
    name = record.name.strip()
    if not name:
        return ""
    if not name.startswith(PREFIX) and "." not in name and _is_claude_code(record.resource, record.scope):
        return PREFIX + name
    return name


def _is_claude_code(resource: dict, scope: str = "") -> bool:
    return resource.get("service.name") == TOOL or "claude_code" in scope


def _attribute(record_attributes: dict, resource: dict, key: str):
    value = record_attributes.get(key)
    return resource.get(key) if value is None else value


def _text(value, limit: int = 255) -> str:
    if value is None or isinstance(value, dict | list):
        return ""
    return str(value).replace("\x00", "\ufffd")[:limit]


def _count(value) -> int | None:
    """A token count sent as an int, a whole double or a numeric string; ValueError for anything else."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, str):
        value = float(value.strip()) if any(c in value for c in ".eE") else int(value.strip())
    if isinstance(value, float):
        if not math.isfinite(value) or value != int(value):
            raise ValueError
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_TOKENS:
        raise ValueError
    return value


def _number(value) -> float | int | None:
    """A number sent as a number or a numeric string (cost, duration), else None."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return value if math.isfinite(value) else None
    try:
        number = float(str(value).strip())
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    return int(number) if number.is_integer() and "." not in str(value) else number


def _time(record: LogRecord) -> datetime:
    stamp = record.attributes.get("event.timestamp")
    moment = parse_timestamp(stamp) if isinstance(stamp, str) else None
    return moment or record.time or timezone.now()


def _digest(*parts) -> str:
    data = json.dumps(parts, sort_keys=True, default=str, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def record_key(record: LogRecord) -> str:
    return _digest("log", record.name, record.time, record.attributes, record.resource, record.body)


@dataclass
class Event:
    """One log record, read: its session, what it becomes, the message item if any."""

    record: LogRecord
    name: str
    time: datetime
    key: str
    session_id: str = ""
    item: dict | None = None  # the message it becomes (user_prompt, api_request, an answered api_error)
    session: Session | None = None
    paired_with: Message | None = None


def read_event(record: LogRecord) -> Event:
    """The event a record is; ValueError (with what to fix) for one that cannot be stored as sent."""
    name = event_name(record)
    key = record_key(record)
    event = Event(record=record, name=name, time=_time(record), key=key)
    attributes = record.attributes
    session_id = attributes.get("session.id")
    if session_id is not None and not isinstance(session_id, str):
        raise ValueError("session.id must be a string")
    if session_id and len(session_id) > 255:
        raise ValueError("session.id is longer than 255 characters")
    event.session_id = session_id or ""
    if not event.session_id or not _is_claude_code(record.resource, record.scope) and not name.startswith(PREFIX):
        return event
    if name == API_REQUEST:
        event.item = _api_request_item(event)
    elif name == USER_PROMPT:
        event.item = _user_prompt_item(event)
    elif name == API_ERROR:
        event.item = _api_error_item(event)
    return event


def _metadata(event: Event, consumed: set[str]) -> dict:
    attributes = event.record.attributes
    metadata = {"source": pairing.SOURCE, "event": event.name, "event_key": event.key}
    for key, value in attributes.items():
        if key not in consumed and key not in _COMMON:
            metadata[key] = value
    for key in ("cost_usd", "duration_ms"):
        if key in metadata:
            number = _number(metadata[key])
            if number is not None:
                metadata[key] = number
    return metadata


def _api_request_item(event: Event) -> dict:
    attributes = event.record.attributes
    try:
        tokens = {field_name: _count(attributes.get(key)) for key, field_name in TOKEN_ATTRIBUTES.items()}
    except (ValueError, OverflowError):
        raise ValueError(f"an api_request's token counts must be whole numbers from 0 to {MAX_TOKENS}") from None
    prompt_id = _text(attributes.get("prompt.id"))
    metadata = _metadata(event, {*TOKEN_ATTRIBUTES, "model", "prompt.id", "request_id"})
    if attributes.get("request_id"):
        metadata["api_request_id"] = _text(attributes["request_id"])
    if prompt_id:
        metadata["prompt_id"] = prompt_id
    duration = _number(attributes.get("duration_ms"))
    item = {
        "role": "assistant",
        "content": "",
        "external_id": f"otel:{event.key}",
        "request_id": f"otel:{event.key}",
        "model": _text(attributes.get("model"), MESSAGE_TEXT_LIMITS["model"]),
        "created_at": event.time,
        "metadata": metadata,
        **{name: value for name, value in tokens.items() if value is not None},
    }
    if isinstance(duration, int) and 0 <= duration <= 2**31 - 1:
        item["elapsed_ms"] = duration
    reported = nano_usd(metadata.get("cost_usd"))  # Claude Code's own estimate of the call's cost
    if reported is not None:
        item["reported_cost_usd"] = usd_of_nano(reported)
    if prompt_id:
        item["conversation"] = prompt_round(prompt_id)
    return item


def _api_error_item(event: Event) -> dict | None:
    """A failed call, as Claude Code reports it once it gave up (`logAPIError`: the last attempt, `attempt` =
    how many were made; the attempts before it are only in the log, as `api_error` lines). Answered by the
    provider, it is an `error` message that is one request of its model, without tokens; else None (raw
    telemetry)."""
    attributes = event.record.attributes
    error = attributes.get("error")
    text = error if isinstance(error, str) else ""
    status = http_status(attributes.get("status_code")) or status_in_text(text)
    if not provider_answered(status, text):
        return None
    prompt_id = _text(attributes.get("prompt.id"))
    metadata = _metadata(event, {"model", "prompt.id", "request_id", "error"})
    metadata.update(kind="api_error", status=status, failed_call=True)
    if attributes.get("request_id"):
        metadata["api_request_id"] = _text(attributes["request_id"])
    if prompt_id:
        metadata["prompt_id"] = prompt_id
    item = {
        "role": "error",
        "content": text.replace("\x00", "\ufffd") or "API error",
        "external_id": f"otel:{event.key}",
        "request_id": f"otel:{event.key}",
        "model": _text(attributes.get("model"), MESSAGE_TEXT_LIMITS["model"]),
        "created_at": event.time,
        "metadata": metadata,
    }
    if prompt_id:
        item["conversation"] = prompt_round(prompt_id)
    return item


def _user_prompt_item(event: Event) -> dict:
    attributes = event.record.attributes
    prompt = attributes.get("prompt")
    text = prompt if isinstance(prompt, str) and prompt != _REDACTED_PROMPT else ""
    prompt_id = _text(attributes.get("prompt.id"))
    metadata = _metadata(event, {"prompt", "prompt.id"})
    length = _number(attributes.get("prompt_length"))
    if length is not None:
        metadata["prompt_length"] = length
    if prompt_id:
        metadata["prompt_id"] = prompt_id
    item = {
        "role": "user",
        "content": text.replace("\x00", "\ufffd"),
        "external_id": f"otel:{event.key}",
        "created_at": event.time,
        "metadata": metadata,
    }
    if prompt_id:
        item["conversation"] = prompt_round(prompt_id)
    return item


# -- sessions -------------------------------------------------------------------------------------------------
def _user_of(attributes: dict, resource: dict) -> str:
    for key in _USER_KEYS:
        value = _attribute(attributes, resource, key)
        if isinstance(value, str) and value.strip():
            return value.strip()[:255]
    return UNKNOWN_USER


def _session_name(session_id: str, started_at: datetime, attributes: dict, resource: dict) -> str:
    """What a session made from telemetry is called, from what the telemetry carries (it names no project or
    working directory): the tool, the terminal it ran in, the start of its id (as Claude Code's `--resume`
    shows it) and when it began, e.g. "Claude Code (vscode) 7c4e1f2a, 2026-03-02 10:00 UTC"."""
    terminal = _attribute(attributes, resource, "terminal.type")
    where = f" ({_text(terminal.strip(), 32)})" if isinstance(terminal, str) and terminal.strip() else ""
    return f"{ImportTool.CLAUDE_CODE.label}{where} {session_id[:8]}, {started_at.astimezone(UTC):%Y-%m-%d %H:%M} UTC"[
        :255
    ]


def _find(tenant: Tenant, ids) -> dict[str, Session]:
    """The tenant's Claude Code session for each id: the one a log import continues (without a machine
    first, then the oldest)."""
    found: dict[str, Session] = {}
    rows = Session.objects.filter(tenant=tenant, tool=TOOL, agent_session_id__in=ids)
    for session in sorted(rows, key=lambda s: (s.machine != "", s.created_at)):
        found.setdefault(session.agent_session_id, session)
    return found


def sessions_for(
    *, tenant: Tenant, wanted: dict[str, tuple[datetime, dict, dict]], api_key: ApiKey | None = None
) -> dict[str, Session]:
    """The sessions of these Claude Code session ids (`wanted`: id → (first time, attributes, resource) of its
    first record), made when missing, locked for the transaction, and marked as having events (so that a
    log import of them looks for pairs). `api_key`, the exporter's key, is the session's key when it has none
    yet: its usage counts in that key's budgets."""
    found = _find(tenant, list(wanted))
    missing = sorted(set(wanted) - set(found))
    if missing:
        lock_for_creation(tenant_id=tenant.pk, keys=[(TOOL, session_id) for session_id in missing])
        found.update(_find(tenant, missing))  # made by an import (or another export) meanwhile?
        new = []
        for session_id in sorted(set(wanted) - set(found)):
            started_at, attributes, resource = wanted[session_id]
            version = _attribute(attributes, resource, "app.version") or resource.get("service.version")
            metadata = {"otel": True, "imported": True}
            if isinstance(version, str) and version:
                metadata["version"] = version[:64]
            new.append(
                Session(
                    tenant=tenant,
                    api_key=api_key,
                    tool=TOOL,
                    name=_session_name(session_id, started_at, attributes, resource),
                    agent_session_id=session_id,
                    user_id=_user_of(attributes, resource),
                    started_at=started_at,
                    metadata=redact(metadata),
                )  # fmt: skip
            )
        Session.objects.bulk_create(new)
        found.update((session.agent_session_id, session) for session in new)
    locked = Session.objects.select_for_update().filter(pk__in=[s.pk for s in found.values()]).order_by("pk")
    by_pk = {session.pk: session for session in locked}
    sessions = {session_id: by_pk[session.pk] for session_id, session in found.items()}
    for session in sessions.values():
        changes = {}
        if not (session.metadata or {}).get(pairing.SOURCE):
            changes["metadata"] = session.metadata = {**(session.metadata or {}), pairing.SOURCE: True}
        if api_key is not None and session.api_key_id is None:  # a session a log import made first
            changes["api_key_id"] = session.api_key_id = api_key.pk
        if changes:
            Session.objects.filter(pk=session.pk).update(**changes, updated_at=timezone.now())
    for session_id, (started_at, _, _) in wanted.items():
        session = sessions.get(session_id)
        if session is not None and started_at < session.started_at and not session.deleted_at:
            session.started_at = started_at
            Session.objects.filter(pk=session.pk).update(started_at=started_at)
    return sessions


# -- logs -----------------------------------------------------------------------------------------------------
def logs_ingest(*, tenant: Tenant, records: list[LogRecord], api_key: ApiKey | None = None) -> Outcome:
    """Store a batch of log records in one transaction: prompts and calls as messages (unless a log import
    stored them first), everything else as raw telemetry. A record that cannot be stored is refused and
    counted in the outcome; the others are stored."""
    outcome = Outcome()
    events: list[Event] = []
    for record in records:
        try:
            events.append(read_event(record))
        except ValueError as error:
            outcome.refuse(str(error))
    with transaction.atomic():
        wanted: dict[str, tuple[datetime, dict, dict]] = {}
        for event in events:
            if event.session_id and (event.item is not None or _is_claude_code(event.record.resource)):
                first = wanted.get(event.session_id)
                if first is None or event.time < first[0]:
                    wanted[event.session_id] = (event.time, event.record.attributes, event.record.resource)
        sessions = sessions_for(tenant=tenant, wanted=wanted, api_key=api_key) if wanted else {}
        kept = []
        for event in events:
            event.session = sessions.get(event.session_id)
            if event.session is not None and event.session.deleted_at is not None:
                outcome.refuse("its session was deleted through the API")
                continue
            kept.append(event)
        _pair_with_log(kept)
        appends: dict = {}
        for event in kept:
            if event.item is not None and event.paired_with is None:
                appends.setdefault(event.session.pk, (event.session, []))[1].append(event.item)
        if appends:
            results = messages_append_to_sessions(appends=list(appends.values()), way=Way.OTLP)
            outcome.messages = sum(result.created for result in results)
        raw = [_raw_record(tenant, event) for event in kept if event.item is None or event.paired_with is not None]
        outcome.records = len(TelemetryRecord.objects.bulk_create(raw, ignore_conflicts=True)) if raw else 0
    outcome.accepted = len(kept)
    return outcome


def _raw_record(tenant: Tenant, event: Event) -> TelemetryRecord:
    record = event.record
    attributes = dict(record.attributes)
    if record.body is not None and record.body != event.name:
        attributes["body"] = record.body
    for key, value in (("trace_id", record.trace_id), ("span_id", record.span_id), ("severity", record.severity)):
        if value:
            attributes[key] = value
    return TelemetryRecord(
        tenant=tenant,
        session=event.session,
        message=event.paired_with,
        kind=TelemetryKind.EVENT,
        name=_text(event.name or "(unnamed)"),
        time=event.time,
        key=event.key,
        attributes=redact(attributes),
        resource=redact(record.resource),
    )


def _pair_with_log(events: list[Event]) -> None:
    """Log first, events later: an event whose prompt or call a log import already stored becomes no message
    (its raw record points at the stored one). Under the sessions' locks; four queries for the batch."""
    candidates = [e for e in events if e.item is not None and e.session is not None and e.session.last_seq]
    if not candidates:
        return
    session_ids = {e.session.pk for e in candidates}
    keys = {e.item["external_id"] for e in candidates}
    times = [e.time for e in candidates]
    prompt_ids = [e.item["metadata"]["prompt_id"] for e in candidates if e.item["metadata"].get("prompt_id")]
    window = Q(created_at__gte=min(times) - pairing.WINDOW, created_at__lte=max(times) + pairing.WINDOW)
    stored = Message.objects.filter(session_id__in=session_ids).filter(
        Q(external_id__in=keys)
        | (Q(role__in=("assistant", "error")) & window & ~Q(request_id=""))
        | Q(role="user", metadata__prompt_id__in=prompt_ids)
    )
    stored = list(
        stored.order_by("created_at", "seq").only(
            "id", "session_id", "role", "external_id", "request_id", "model", "created_at", "metadata", "seq",
            "input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens",
        )
    )  # fmt: skip
    repeated = {(m.session_id, m.external_id) for m in stored if m.external_id in keys}
    # An event paired before (its raw record kept) and sent again: a retry, nothing to pair.
    kept_before = set(
        TelemetryRecord.objects.filter(
            tenant_id=candidates[0].session.tenant_id, key__in=[e.key for e in candidates]
        ).values_list("key", flat=True)
    )
    paired = set(
        TelemetryRecord.objects.filter(message_id__in=[m.pk for m in stored]).values_list("message_id", flat=True)
    )
    free: dict = {}
    for message in stored:
        if message.pk not in paired and (message.metadata or {}).get("source") != pairing.SOURCE:
            free.setdefault(message.session_id, []).append(message)
    for event in sorted(candidates, key=lambda e: e.time):
        if (event.session.pk, event.item["external_id"]) in repeated:
            continue  # a retry: the message service returns the stored row
        if event.key in kept_before:
            event.item = None  # a retry of an event paired before: its raw record is stored already
            continue
        messages = free.get(event.session.pk, [])
        if event.item["role"] == "user":
            prompt_id = event.item["metadata"].get("prompt_id")
            match = next(
                (m for m in messages if prompt_id and m.role == "user" and m.metadata.get("prompt_id") == prompt_id),
                None,
            )
        elif event.item["role"] == "error":
            facts = pairing.item_facts(event.item)
            match = next(
                (m for m in messages if m.role == "error" and pairing.same_failure(facts, pairing.message_facts(m))),
                None,
            )
        else:
            facts = pairing.item_facts(event.item)
            match = next(
                (m for m in messages if m.role == "assistant" and pairing.same_call(facts, pairing.message_facts(m))),
                None,
            )
        if match is not None:
            messages.remove(match)
            event.paired_with = match


# -- metrics --------------------------------------------------------------------------------------------------
def series_of(point: MetricPoint) -> str:
    return _digest("series", point.name, point.attributes, point.resource)


def metrics_ingest(*, tenant: Tenant, points: list[MetricPoint], api_key: ApiKey | None = None) -> Outcome:
    """Store a batch of metric points as raw telemetry, a cumulative sum turned into deltas per series (a
    new start time starts the series again). Claude Code's points with a `session.id` find (or make) their
    session. Nothing is counted."""
    outcome = Outcome()
    kept: list[MetricPoint] = []
    for point in points:
        session_id = point.attributes.get("session.id")
        if session_id is not None and (not isinstance(session_id, str) or len(session_id) > 255):
            outcome.refuse("session.id must be a string of up to 255 characters")
            continue
        if point.time is None:
            outcome.refuse("a data point needs its timeUnixNano")
            continue
        if point.value is not None and not math.isfinite(point.value):
            outcome.refuse(f"metric {point.name!r}: its value {point.value} is not a finite number (asDouble)")
            continue
        kept.append(point)
    with transaction.atomic():
        wanted: dict[str, tuple[datetime, dict, dict]] = {}
        for point in kept:
            session_id = point.attributes.get("session.id")
            if session_id and _is_claude_code(point.resource):
                first = wanted.get(session_id)
                moment = point.start_time or point.time
                if first is None or moment < first[0]:
                    wanted[session_id] = (moment, point.attributes, point.resource)
        sessions = sessions_for(tenant=tenant, wanted=wanted, api_key=api_key) if wanted else {}
        series = {id(point): series_of(point) for point in kept}
        last = _last_points(tenant, set(series.values()))
        rows = []
        for point in sorted(kept, key=lambda p: p.time):
            key = series[id(point)]
            value = point.value
            if point.cumulative and value is not None:
                previous = last.get(key)
                if (
                    previous is not None
                    and previous[2] is not None
                    and previous[0] == point.start_time
                    and previous[1] < point.time
                ):
                    value = value - previous[2]
                last[key] = (point.start_time, point.time, point.value)
            session = sessions.get(point.attributes.get("session.id") or "")
            if session is not None and session.deleted_at is not None:
                session = None
            attributes = dict(point.attributes)
            if point.unit:
                attributes["unit"] = point.unit
            if point.data:
                attributes["data"] = point.data
            rows.append(
                TelemetryRecord(
                    tenant=tenant,
                    session=session,
                    kind=TelemetryKind.METRIC,
                    name=_text(point.name or "(unnamed)"),
                    time=point.time,
                    start_time=point.start_time,
                    value=value,
                    sent_value=point.value,
                    series=key,
                    key=_digest("point", key, point.start_time, point.time, point.value, point.data),
                    attributes=redact(attributes),
                    resource=redact(point.resource),
                )  # fmt: skip
            )
        outcome.records = len(TelemetryRecord.objects.bulk_create(rows, ignore_conflicts=True)) if rows else 0
    outcome.accepted = len(kept)
    return outcome


def _last_points(tenant: Tenant, series: set[str]) -> dict[str, tuple]:
    """The latest stored point of each series: (start time, time, value as sent)."""
    if not series:
        return {}
    rows = (
        TelemetryRecord.objects.filter(tenant=tenant, series__in=series)
        .order_by("series", "-time")
        .distinct("series")
        .values_list("series", "start_time", "time", "sent_value")
    )
    return {name: (start, moment, value) for name, start, moment, value in rows}
