"""X-ACE-Memory: inject — the user's context, as GET /api/v1/sessions/{id}/context/ builds it (the session's state
and the records most relevant to the new input), cut to a token budget and added to the system prompt."""

from __future__ import annotations

import re

from django.conf import settings

from gateway_app.recording import session_find
from memory_app.selectors.context import session_context
from sessions_app.models import ApiKey, Session

_WIDE = re.compile(r"[\u3000-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
HEADING = "# Memory (Open ACE)"


def tokens_of(text: str) -> int:
    """A tokenizer-free estimate: a CJK character is about a token, other text about four characters a token."""
    wide = len(_WIDE.findall(text))
    return wide + (len(text) - wide + 3) // 4


def memory_block(*, api_key: ApiKey, agent_session_id: str, user_id: str, query: str, budget: int | None = None) -> str:
    """The memory block for this call, at most `budget` tokens (whole lines), or "" when there is nothing."""
    budget = settings.ACE_GATEWAY_MEMORY_TOKENS if budget is None else budget
    session = session_find(tenant_id=api_key.tenant_id, agent_session_id=agent_session_id)
    if session is None:  # its first call: the user's memory, no state yet
        if not query.strip():
            return ""
        session = Session(tenant=api_key.tenant, user_id=user_id)
    context = session_context(session=session, query=query[:4000] or None)
    if not context.prompt:
        return ""
    lines, used = [HEADING], tokens_of(HEADING)
    for line in context.prompt.splitlines():
        cost = tokens_of(line) + 1
        if used + cost > budget:
            break
        lines.append(line)
        used += cost
    return "\n".join(lines) if len(lines) > 1 else ""
