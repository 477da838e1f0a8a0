"""Messages as a readable transcript: the session timeline, the conversation chat and a turn's page.

Messages are paged by seq and each is decorated for `chat_message.html` with its turn, its facts and its tool
calls (../shared/seeds/003 for the turn fields).
"""

from __future__ import annotations

import json

from django.db.models import Q
from django.urls import reverse
from django.utils.html import format_html_join

from platform_kit.admin.display import EMPTY, badge, counted, number, pretty_json
from sessions_app.admin.display import ROLE_TONES
from sessions_app.links import chat_url, timeline_url
from sessions_app.models import Conversation, Message, Role, Turn, TurnStatus


def token_summary(obj) -> str:
    parts = [
        (label, getattr(obj, field))
        for label, field in (
            ("in", "input_tokens"),
            ("out", "output_tokens"),
            ("cache read", "cache_read_tokens"),
            ("cache write", "cache_creation_tokens"),
            ("total", "total_tokens"),
        )
    ]
    return " · ".join(f"{label} {number(value)}" for label, value in parts if value) or EMPTY


def seq_param(request, name) -> int | None:
    value = request.GET.get(name)
    if value in (None, ""):
        return None
    try:
        return max(int(value), 0)
    except ValueError:
        return None


def seq_page(rows, request, size: int) -> dict:
    """One page of `rows` (messages of one session or conversation) by seq: `?after_seq=` or `?before_seq=`.

    Keyset paging on an indexed (…, seq): never an OFFSET, never a count of the messages.
    """
    before_seq = seq_param(request, "before_seq")
    after_seq = seq_param(request, "after_seq") or 0
    if before_seq is not None:
        page = list(rows.filter(seq__lt=before_seq).order_by("-seq")[:size])[::-1]
    else:
        page = list(rows.filter(seq__gt=after_seq).order_by("seq")[:size])
    first_seq = page[0].seq if page else None
    last_seq = page[-1].seq if page else None
    has_previous = first_seq is not None and rows.filter(seq__lt=first_seq).exists()
    has_next = last_seq is not None and rows.filter(seq__gt=last_seq).exists()
    return {
        "page": page,
        "page_size": size,
        "first_seq": first_seq,
        "last_seq": last_seq,
        "previous_url": f"?before_seq={first_seq}" if has_previous else None,
        "next_url": f"?after_seq={last_seq}" if has_next else None,
        "first_url": "?" if has_previous or (not page and request.GET) else None,
        "has_next": has_next,
    }


TURN_STATUS_TONES = {
    TurnStatus.STREAMING: "amber",
    TurnStatus.COMPLETED: "green",
    TurnStatus.FAILED: "red",
    TurnStatus.ABANDONED: "slate",
}
TURN_STATUS_LABELS = {
    TurnStatus.STREAMING: "streaming…",
    TurnStatus.COMPLETED: "completed",
    TurnStatus.FAILED: "failed",
    TurnStatus.ABANDONED: "abandoned",
}


# A turn's messages: its question, and its answer (an error once the turn failed or was abandoned).
TURN_ROLES = (Role.USER, Role.ASSISTANT, Role.ERROR)
TURN_FIELDS = ("id", "status", "user_message_id", "assistant_message_id", "started_at", "completed_at")


def turn_status_badge(status: str):
    return badge(TURN_STATUS_LABELS.get(status, status), TURN_STATUS_TONES.get(status, "grey"))


def finish_reason_badge(reason: str):
    if not reason:
        return EMPTY
    return badge(reason, ROLE_TONES[Role.ERROR] if reason == "error" else "grey")


def latency(ms) -> str:
    return EMPTY if ms is None else f"{number(ms)} ms"


def turns_by_message(messages) -> dict:
    """The turns of a page of messages, in one query, by the id of their question and of their answer."""
    ids = [m.pk for m in messages if m.role in TURN_ROLES]
    if not ids:
        return {}
    turns = Turn.objects.filter(Q(user_message_id__in=ids) | Q(assistant_message_id__in=ids)).only(*TURN_FIELDS)
    found = {}
    for turn in turns:
        found[turn.user_message_id] = found[turn.assistant_message_id] = turn
    return found


def from_json_text(value):
    """Tool arguments and results arrive as objects or as JSON strings: a string that parses is its value."""
    if isinstance(value, str) and value.strip()[:1] in ("{", "["):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def pretty_text(value) -> str:
    value = from_json_text(value)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, indent=2, ensure_ascii=False)


def tool_call_blocks(tool_calls) -> list[dict]:
    """[{id, name, arguments, result}] (seed 003's ToolCallDto) as display blocks; OpenAI's nested `function`
    and Anthropic's `input` are read too. Anything else is left to the raw JSON."""
    if not isinstance(tool_calls, list):
        return []
    blocks = []
    for call in tool_calls:
        if not isinstance(call, dict):
            return []
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        if "arguments" in call:
            arguments = call["arguments"]
        else:
            arguments = function.get("arguments", call.get("input"))
        has_result = "result" in call or "output" in call
        blocks.append(
            {
                "id": call.get("id") or "",
                "name": call.get("name") or function.get("name") or "",
                "arguments": pretty_text(arguments),
                "result": pretty_text(call.get("result", call.get("output"))) if has_result else "",
                "has_result": has_result,
            }
        )
    return blocks


def names(value) -> list[str]:
    """Skill and tool names: a JSON list, or (as some clients send them) one comma-separated string."""
    if isinstance(value, str):
        return [name.strip() for name in value.split(",") if name.strip()]
    if isinstance(value, list):
        return [str(name) if not isinstance(name, dict) else str(name.get("name", name)) for name in value]
    return []


def code_list(values):
    return format_html_join(" ", "<code>{}</code>", ((value,) for value in values)) if values else EMPTY


def chat_message(message: Message, turn: Turn | None = None) -> Message:
    """Decorate a message for chat_message.html. On a user message `thinking` is the system prompt snapshot
    and `tool_names` the tools offered; on an answer they are its reasoning and the tools it called."""
    m = message
    m.is_question = m.role == Role.USER
    m.thinking_label = "system prompt snapshot" if m.is_question else "thinking"
    m.turn = turn
    m.turn_state = turn.status if turn is not None else ""
    if turn is not None:
        m.turn_url = reverse("admin:sessions_app_turn_change", args=[turn.pk])
        m.turn_badge = turn_status_badge(turn.status)
        m.turn_side = "question" if turn.user_message_id == m.pk else "answer"
    facts = []
    if m.is_question:
        if m.thinking_mode:
            facts.append(("thinking mode", m.thinking_mode))
        if m.skill_names:
            facts.append(("skills", code_list(names(m.skill_names))))
        if m.tool_names:
            facts.append(("tools offered", code_list(names(m.tool_names))))
        if m.attachments not in (None, [], {}):
            plain = isinstance(m.attachments, list) and all(isinstance(a, str | int) for a in m.attachments)
            facts.append(("attachments", code_list(m.attachments) if plain else pretty_json(m.attachments)))
    else:
        if m.model:
            facts.append(("model", m.model))
        if m.max_tokens is not None:
            facts.append(("max_tokens", number(m.max_tokens)))
        if m.temperature is not None:
            facts.append(("temperature", f"{m.temperature:g}"))
        if m.total_tokens or m.input_tokens or m.output_tokens:
            facts.append(("tokens", token_summary(m)))
        if m.elapsed_ms is not None:
            facts.append(("latency", latency(m.elapsed_ms)))
        if m.finish_reason:
            facts.append(("finish", finish_reason_badge(m.finish_reason)))
        if m.api_calls is not None:
            facts.append(("API calls", number(m.api_calls)))
        if m.tool_names:
            facts.append(("tools called", code_list(names(m.tool_names))))
        if isinstance(m.metadata, dict) and m.metadata.get("error"):
            facts.append(("error", str(m.metadata["error"])))
    m.facts = facts
    m.tool_call_blocks = tool_call_blocks(m.tool_calls)
    m.tool_calls_json = json.dumps(m.tool_calls, indent=2, ensure_ascii=False) if m.tool_calls is not None else ""
    m.metadata_json = json.dumps(m.metadata, indent=2, ensure_ascii=False) if m.metadata else ""
    m.tokens = token_summary(m) if m.total_tokens or m.input_tokens else ""
    return m


# How far after a tool call its result message is looked for.
RESULT_LOOKAHEAD = 200


def link_tool_results(messages: list[Message]) -> None:
    """Point each tool call without a result of its own to the toolResult message that answers it.

    Clients store a call's result as a later `toolResult` message of the session: matched by the call's id
    when the result names it (`tool_call_id`, or Claude Code's `tool_use_id` in its metadata), otherwise by
    order, to the earliest call still waiting with the same tool name (or any name when the result has none).
    One query, for the page's calls and up to RESULT_LOOKAHEAD messages past them.
    """
    waiting = [(m, block) for m in messages for block in m.tool_call_blocks if not block["has_result"]]
    if not waiting:
        return
    session_id = messages[0].session_id
    on_page = {m.seq for m in messages}
    first, last = waiting[0][0].seq, waiting[-1][0].seq
    results = (
        Message.objects.filter(session_id=session_id, role=Role.TOOL_RESULT, seq__gt=first)
        .filter(seq__lte=last + RESULT_LOOKAHEAD)
        .order_by("seq")
        .only("seq", "tool_name", "metadata")
    )
    open_calls: list[tuple[Message, dict]] = []
    pending = iter(waiting)
    upcoming = next(pending, None)
    for result in results:
        while upcoming is not None and upcoming[0].seq < result.seq:
            open_calls.append(upcoming)
            upcoming = next(pending, None)
        metadata = result.metadata if isinstance(result.metadata, dict) else {}
        call_id = metadata.get("tool_call_id") or metadata.get("tool_use_id")
        match = next((c for c in open_calls if call_id and c[1]["id"] == call_id), None)
        if match is None and not call_id:
            match = next((c for c in open_calls if not result.tool_name or c[1]["name"] == result.tool_name), None)
        if match is None:
            continue
        open_calls.remove(match)
        block = match[1]
        block["result_seq"] = result.seq
        block["result_url"] = (
            f"#seq-{result.seq}" if result.seq in on_page else timeline_url(session_id, at_seq=result.seq)
        )


def chat_messages(messages, turns: dict | None = None) -> list[Message]:
    """A page of messages for the chat templates; their turns are read in one query unless given."""
    turns = turns_by_message(messages) if turns is None else turns
    page = [chat_message(m, turns.get(m.pk)) for m in messages]
    link_tool_results(page)
    return page


def group_by_conversation(messages) -> list[dict]:
    conversations = Conversation.objects.in_bulk({m.conversation_id for m in messages if m.conversation_id})
    groups = []
    for message in messages:
        if not groups or groups[-1]["conversation_pk"] != message.conversation_id:
            groups.append(
                {
                    "conversation_pk": message.conversation_id,
                    "conversation": conversations.get(message.conversation_id),
                    "messages": [],
                }
            )
        groups[-1]["messages"].append(message)
    for group in groups:
        conversation = group["conversation"]
        if conversation is not None:
            group["url"] = reverse("admin:sessions_app_conversation_change", args=[conversation.pk])
            group["chat_url"] = chat_url(conversation.pk)
            group["tokens"] = number(conversation.total_tokens)
            group["message_count"] = counted(conversation.messages, "message")
    return groups
