"""Open ACE's MCP server: the tools `remember`, `recall`, `forget`, `context` and `usage`, and a session's state
as resources, for the tenant of one API key. Served over streamable HTTP at /mcp/ (http.py) and over stdio
(`manage.py ace_mcp`); both bind the key's tenant with `tenant_bound`, and every tool calls the services and
selectors the REST API calls (operations.py)."""

from __future__ import annotations

import contextlib
import functools
import json
import logging
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Annotated, Any

from asgiref.sync import sync_to_async
from django.db import close_old_connections, connection
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError, ToolError, UnexpectedToolError
from mcp_types import ToolAnnotations
from pydantic import Field, ValidationError

from mcp_app import operations
from mcp_app.operations import InvalidArguments, NotFound
from memory_app.models import RecordType
from platform_kit.api.fields import NON_FINITE_REFUSED, non_finite_path
from platform_kit.outages import RETRY_AFTER_SECONDS, database_unavailable
from platform_kit.request_ids import request_id, request_id_bound, request_id_new
from sessions_app.models import Tenant
from sessions_app.selectors.usage import GROUP_BY

logger = logging.getLogger(__name__)

_tenant: ContextVar[Tenant | None] = ContextVar("ace_mcp_tenant", default=None)


@contextlib.contextmanager
def tenant_bound(tenant: Tenant) -> Iterator[None]:
    """Every tool and resource called inside acts for `tenant` (the tenant of the caller's API key)."""
    token = _tenant.set(tenant)
    try:
        yield
    finally:
        _tenant.reset(token)


def _run(operation, **arguments):
    # A long-lived stdio server would keep a connection the database has dropped; the web's request cycle does
    # the same at the start of each request. Inside a transaction (a test's) the connection is left alone.
    if not connection.in_atomic_block:
        close_old_connections()
    return operation(**arguments)


async def _call(operation, **arguments) -> Any:
    tenant = _tenant.get()
    if tenant is None:  # a server built but not entered through http.py or ace_mcp
        raise ToolError("No API key: connect with 'Authorization: Bearer <api key>' or ACE_API_KEY.")
    try:
        return await sync_to_async(_run)(operation, tenant=tenant, **arguments)
    except (InvalidArguments, NotFound) as error:
        raise ToolError(str(error)) from None
    except Exception as error:
        reason = database_unavailable(error)
        if reason is None:
            raise
        retry = f"Retry in {RETRY_AFTER_SECONDS} seconds."
        raise ToolError(f"Open ACE cannot answer right now: {reason}. {retry}") from None


def _argument_problems(error: ValidationError) -> str:
    """Pydantic's complaints about a call's arguments, one clause per argument: "user_id is required",
    "top_k: Input should be a valid integer"."""
    problems = []
    for problem in error.errors():
        argument = ".".join(str(part) for part in problem["loc"]) or "arguments"
        if problem["type"] == "missing":
            problems.append(f"{argument} is required")
        elif problem["type"] == "unexpected_keyword_argument":
            problems.append(f"{argument} is not an argument of this tool")
        else:
            problems.append(f"{argument}: {problem['msg']}")
    return "; ".join(problems)


class AceMcpServer(MCPServer):
    """The SDK's server, with tool errors worded for whoever reads them: "recall failed: <what to fix>".

    The SDK answers a failed call with "Error executing tool <name>: ...", pydantic's report for bad arguments,
    and only "Error executing tool <name>" for a crash. Here a bad argument is named with what to do about it;
    an anticipated failure (a bad value, another tenant's id, the database down) keeps its own words; a crash is
    logged with its traceback under the request's id, and the model is told that id and that it may retry."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context=None):
        bound = request_id()
        with request_id_bound(bound or request_id_new()) as call_id:  # stdio calls have no HTTP request
            # MCP's JSON reads NaN and Infinity as numbers; no argument may be one (as the REST API's parser).
            where = non_finite_path(arguments)
            if where is not None:
                raise ToolError(
                    f"{name} failed: {where or 'arguments'}: {NON_FINITE_REFUSED} Fix the arguments and call again."
                )
            try:
                return await super().call_tool(name, arguments, context)
            except UnexpectedToolError as error:
                crash = error.__cause__ or error
                logger.error("MCP tool %s failed unexpectedly [request id %s]", name, call_id, exc_info=crash)
                raise ToolError(
                    f"{name} failed: an unexpected error in Open ACE (request id {call_id}). It is logged under "
                    "that id; try again in a minute, and if it fails again tell the operator the request id."
                ) from None
            except ToolError as error:
                cause = error.__cause__
                if isinstance(cause, ValidationError):
                    raise ToolError(
                        f"{name} failed: {_argument_problems(cause)}. Fix the arguments and call again."
                    ) from cause
                raise ToolError(f"{name} failed: {cause if cause is not None else error}") from cause


async def _read(operation, **arguments) -> str:
    try:
        return json.dumps(await _call(operation, **arguments), ensure_ascii=False)
    except ToolError as error:
        raise ResourceNotFoundError(str(error)) from None


RECORD_TYPES = ", ".join(f"{value} ({label})" for value, label in RecordType.choices)

INSTRUCTIONS = """Open ACE is the user's long-term memory and usage ledger, shared by their chat apps and agents.
- Before answering anything that may depend on the user's past (preferences, facts about them, earlier
  decisions, ongoing tasks), call `recall` with the question and the user's user_id.
- When the user states a lasting preference, a fact about themselves, or a task to keep track of, call
  `remember` with one short self-contained sentence.
- When the user says something remembered is wrong or asks you to forget it, call `forget` with its id
  (recall, context and remember show record ids), then `remember` the correction if there is one.
- At the start of a session (or after resuming one), call `context` for the block to keep in mind.
- For token counts, requests and cost over a period, call `usage`; for how much of a user's plan (their 5-hour
  block, their week) is used, call `usage` with window 'blocks' or 'weekly'.
Resources: ace://sessions/{session_id}/state (the session's state) and .../state/history (its versions)."""

SessionId = Annotated[
    str | None,
    Field(
        description="The id (UUID) of the Open ACE session you are in, if you know it: the record cites it as its "
        "source. Omit it otherwise."
    ),
]
UserId = Annotated[
    str,
    Field(description="Whose memory: the user's id as the chat app or agent records it (e.g. 'xiaoming')."),
]


def build_server() -> MCPServer:
    server = AceMcpServer(
        name="open-ace",
        title="Open ACE",
        description="Long-term memory, session state and usage of an Open ACE tenant",
        instructions=INSTRUCTIONS,
    )

    @server.tool(
        title="Remember",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True),
        description="Store one long-term memory about a user, so that later sessions (in any app) can recall it. "
        "Call it when the user states a lasting preference ('I'm vegetarian'), a fact about themselves "
        "('my daughter is 6'), or a task to keep track of ('renew the passport before June'). Write `content` as "
        "one short sentence that stands on its own, in the user's language, naming the subject ('Prefers window "
        "seats on long flights'), not as a transcript. Saying the same thing again is safe: it merges into the "
        "existing record (created: false) instead of duplicating it. Returns {created, record} with the record's "
        "id (keep it to `forget` it later), type, content, confidence, source_session_ids and valid.",
    )
    async def remember(
        content: Annotated[
            str, Field(description="The memory: one self-contained sentence (at most 20000 characters).")
        ],
        user_id: UserId,
        type: Annotated[
            str,
            Field(description=f"What kind of memory, one of: {RECORD_TYPES}. Preferences and traits are 'profile'."),
        ] = "fact",
        session: SessionId = None,
        source_message_ids: Annotated[
            list[str] | None,
            Field(description="Ids (UUIDs) of the Open ACE messages this memory comes from, if known."),
        ] = None,
        fields: Annotated[
            dict[str, Any] | None,
            Field(description='Optional structured details as a JSON object, e.g. {"airline": "KLM"}.'),
        ] = None,
        confidence: Annotated[
            float | None,
            Field(description="How sure you are, from 0 to 1 (default 1: the user said so plainly)."),
        ] = None,
    ) -> dict[str, Any]:
        return await _call(
            operations.remember,
            content=content,
            user_id=user_id,
            type=type,
            session=session,
            source_message_ids=source_message_ids,
            fields=fields,
            confidence=confidence,
        )

    @server.tool(
        title="Recall",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        description="Search a user's long-term memory: the records remembered about them and, unless "
        "include_messages is false, what was said in their past sessions. Call it before answering a question "
        "that may depend on the user's past — their preferences, facts about them, earlier plans or decisions — "
        "and when the user refers to something from another conversation ('the hotel we picked last time'). "
        "`query` is a question or keywords in natural language; hybrid search (keywords and meaning) ranks the "
        "best first. Returns {results: [{kind: 'record'|'message', id, text, score, session, source_message_ids, "
        "created_at, context}], complete, detail}: use the texts as background, prefer records over messages "
        "when they disagree, and treat complete=false as 'some recent data may be missing'.",
    )
    async def recall(
        query: Annotated[str, Field(description="What to look for: a question or keywords (at most 4000 characters).")],
        user_id: UserId,
        top_k: Annotated[int | None, Field(description="How many results, 1 to 100 (default 10).")] = None,
        types: Annotated[
            list[str] | None,
            Field(description=f"Only records of these types ({', '.join(RecordType.values)}); default all."),
        ] = None,
        session: Annotated[
            str | None, Field(description="Only what comes from this Open ACE session (its UUID).")
        ] = None,
        since: Annotated[
            str | None,
            Field(description="Only what was written at or after this time (ISO 8601, e.g. 2025-06-01T00:00:00Z)."),
        ] = None,
        until: Annotated[str | None, Field(description="Only what was written before this time (ISO 8601).")] = None,
        include_messages: Annotated[
            bool | None,
            Field(description="Search past messages too (default true); false searches remembered records only."),
        ] = None,
    ) -> dict[str, Any]:
        return await _call(
            operations.recall,
            query=query,
            user_id=user_id,
            top_k=top_k,
            types=types,
            session=session,
            since=since,
            until=until,
            include_messages=include_messages,
        )

    @server.tool(
        title="Forget",
        annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=False),
        description="Stop recalling one remembered record, at once. Call it when the user says a memory is wrong "
        "or out of date, or asks you to forget it; to correct it, `remember` the new version afterwards. The "
        "record is not erased: it stays, marked invalid with your reason, for audit. Returns {record} showing "
        "valid: false. A record that is already forgotten, or an id that is not one of this tenant's records, "
        "gives an error saying so.",
    )
    async def forget(
        record_id: Annotated[
            str, Field(description="The record's id (UUID), as recall, context or remember showed it.")
        ],
        reason: Annotated[
            str | None,
            Field(description="Why, in a few words, e.g. 'user moved to Berlin' (kept in the record's history)."),
        ] = None,
    ) -> dict[str, Any]:
        return await _call(operations.forget, record_id=record_id, reason=reason)

    @server.tool(
        title="Session context",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        description="The block to keep in mind when a session starts or resumes: what is remembered about the "
        "session's user that matters now, and where the session stands (its state). Call it at the start of a "
        "session, or when you resume one, and follow the returned `prompt` (Markdown; each memory names its "
        "record id). Returns {prompt, state, state_version, records, query}. Without `query` the memories are "
        "chosen for the session's latest user message.",
    )
    async def context(
        session: Annotated[str, Field(description="The Open ACE session (its UUID).")],
        query: Annotated[
            str | None, Field(description="Choose memories relevant to this text instead of the latest user message.")
        ] = None,
        top_k: Annotated[int | None, Field(description="How many memories, 1 to 50 (default 8).")] = None,
    ) -> dict[str, Any]:
        return await _call(operations.context, session=session, query=query, top_k=top_k)

    @server.tool(
        title="Usage",
        annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True),
        description="Usage statistics of this tenant's sessions over a period: requests to LLM APIs, conversations, "
        "messages by role, input/output/cache tokens and cost in USD, grouped by day, tool, user_id, project, "
        "machine, model or session. Call it when asked how much was used or spent, by whom, with which model or "
        "tool. Returns {results: [{key, requests, conversations, messages, input_tokens, output_tokens, "
        "total_tokens, cost, ...}], totals, since, until, unpriced_models}; the window is rounded to whole UTC "
        "hours and the returned since/until say which was counted. With window='blocks' and a user_id: the user's "
        "5-hour usage blocks (Claude Code's plan windows, as ccusage computes them): {results: [{start_time, "
        "end_time, is_active, all_tokens, cost_usd, burn_rate, projection, plan_usage: {percent, "
        "projected_percent, status, ...}}], active_block, plan}; call it when asked how much of the plan or the "
        "5-hour limit is used or when it resets. With window='weekly': usage per week with the percent of the "
        "plan's weekly limits (group_by user_id or machine).",
    )
    async def usage(
        since: Annotated[
            str | None, Field(description="Start of the period, inclusive (ISO 8601, e.g. 2025-06-01T00:00:00Z).")
        ] = None,
        until: Annotated[str | None, Field(description="End of the period, exclusive (ISO 8601).")] = None,
        group_by: Annotated[str | None, Field(description=f"One of: {', '.join(GROUP_BY)} (default day).")] = None,
        tool: Annotated[
            str | None, Field(description="Only this tool's sessions, e.g. claude-code, qwen-code, chat.")
        ] = None,
        user_id: Annotated[str | None, Field(description="Only this user's sessions.")] = None,
        machine: Annotated[str | None, Field(description="Only sessions on this machine.")] = None,
        model: Annotated[str | None, Field(description="Only requests to this model.")] = None,
        limit: Annotated[int | None, Field(description="At most this many groups, 1 to 1000 (default 100).")] = None,
        window: Annotated[
            str | None,
            Field(
                description="'blocks': the user's 5-hour blocks with the percent of their plan (needs user_id; "
                "default since: 3 days ago); 'weekly': usage per week with the percent of the weekly limits. "
                "Leave it out for usage grouped by group_by."
            ),
        ] = None,
    ) -> dict[str, Any]:
        return await _call(
            operations.usage,
            since=since,
            until=until,
            group_by=group_by,
            tool=tool,
            user_id=user_id,
            machine=machine,
            model=model,
            limit=limit,
            window=window,
        )

    @server.resource(
        "ace://sessions/{session_id}/state",
        name="session-state",
        title="Session state",
        description="The session's structured state: {version, data, updated_at}.",
        mime_type="application/json",
    )
    async def session_state(session_id: str) -> str:
        return await _read(operations.session_state, session_id=session_id)

    @server.resource(
        "ace://sessions/{session_id}/state/history",
        name="session-state-history",
        title="Session state history",
        description="The session's state versions, newest first: {session, results: [{version, data, change, "
        "updated_at}]}.",
        mime_type="application/json",
    )
    async def session_state_history(session_id: str) -> str:
        return await _read(operations.session_state_history, session_id=session_id)

    return server


@functools.cache
def mcp_server() -> MCPServer:
    """The process's server: its tools read the tenant from the context, so every request shares it."""
    return build_server()
