"""Strategy prompts: the built-in ones, and the placeholders a user-written prompt may use."""

from __future__ import annotations

import string

from django.core.exceptions import ValidationError

PLACEHOLDERS = {
    "messages": "the new messages, one per line: [seq] role: text",
    "existing_records": "the user's related memories, one per line: [record id] (about) text",
    "user_id": "the user the memories belong to",
    "session_name": "the session's name",
    "state": "the session's state (JSON)",
    "state_changes": "the state keys whose change triggered the run (JSON), or {}",
    "type": "the strategy's type: profile, task, fact or custom",
    "today": "today's date (UTC), YYYY-MM-DD",
}


def prompt_validate(prompt: str) -> None:
    """Refuse a template that would fail at run time: unknown placeholders, stray braces, format specs."""
    if not prompt or not prompt.strip():
        raise ValidationError({"prompt": ["The prompt cannot be empty."]})
    try:
        parsed = list(string.Formatter().parse(prompt))
    except ValueError as error:
        raise ValidationError(
            {"prompt": [f"The prompt is not a valid template ({error}). Write literal braces as {{{{ and }}}}."]}
        ) from error
    unknown = sorted({name for _, name, _, _ in parsed if name is not None and name not in PLACEHOLDERS})
    if unknown:
        named = ", ".join("{" + n + "}" for n in unknown)
        known = ", ".join("{" + n + "}" for n in PLACEHOLDERS)
        raise ValidationError(
            {"prompt": [f"Unknown placeholder(s): {named}. Known: {known}; write literal braces as {{{{ and }}}}."]}
        )
    odd = sorted({name for _, name, spec, conv in parsed if name is not None and (spec or conv)})
    if odd:
        raise ValidationError({"prompt": [f"Placeholders take no format spec or conversion: {', '.join(odd)}."]})


def prompt_render(prompt: str, values: dict[str, str]) -> str:
    return prompt.format_map({name: values.get(name, "") for name in PLACEHOLDERS})


_COMMON = """
Only keep what will still matter in a later conversation. Do not invent anything the messages do not say.
Write each memory as one short, self-contained statement in the language the user wrote in.
For each memory give `about`: a short stable key for what it is about (e.g. "identity:name",
"preference:lighting", "budget", "relation:daughter"); reuse the key of an existing memory when yours is about
the same thing, set `exclusive` true when a new value replaces the old one (a changed preference, a new
address), and list in `invalidates` the ids of existing memories the new messages contradict.

User: {user_id}. Session: {session_name}. Today: {today}.
Session state: {state}
State changes that triggered this run: {state_changes}

Existing memories of this user:
{existing_records}

New messages:
{messages}
"""

BUILTIN = {
    "profile": {
        "name": "user-profile",
        "description": "Identity, relations, traits and preferences of the user, merged into a profile.",
        "prompt": "Extract the user's profile from the new messages: identity (name, location, job, age), "
        "relations (family, colleagues, pets), traits and habits, and stated preferences, dislikes, budgets "
        "and constraints (allergies, diets, limits).\n" + _COMMON,
        "on_tool_result": False,
        "on_state_keys": [],
        "message_threshold": 0.6,
        "accumulated_threshold": 2.0,
        "schedule_minutes": 60,
    },
    "task": {
        "name": "task-progress",
        "description": "The task of each session, kept as one running, compressed summary: goal, stage, "
        "progress, what is done, what is next, what blocks it.",
        "prompt": 'Summarise the task this session works on as ONE memory (about: "task"): the goal, the '
        "current stage, progress, what is done, what comes next and what blocks it. Merge it with the "
        "existing task memory of this session; keep it compact.\n" + _COMMON,
        "on_tool_result": True,
        "on_state_keys": ["stage", "task_stage", "status", "progress"],
        "message_threshold": None,
        "accumulated_threshold": None,
        "schedule_minutes": 60,
    },
    "fact": {
        "name": "facts-experience",
        "description": "Events, knowledge, procedures and lessons worth remembering, and anything the user "
        "explicitly asks to remember.",
        "prompt": "Extract facts and experience from the new messages: events the user went through, "
        "knowledge, procedures (how something is done) and lessons learned, and anything the user asks you "
        "to remember.\n" + _COMMON,
        "on_tool_result": True,
        "on_state_keys": [],
        "message_threshold": 0.8,
        "accumulated_threshold": 2.5,
        "schedule_minutes": 60,
    },
}
