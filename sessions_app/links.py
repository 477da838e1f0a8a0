"""Links into sessions_app's admin pages: a session's timeline and a conversation's chat, optionally at a message.

Other apps' admins link here (memory_app's provenance, strategies_app's runs) without importing the admin.
"""

from __future__ import annotations

from django.urls import reverse
from django.utils.http import urlencode


def timeline_url(session_id, *, at_seq: int | None = None) -> str:
    url = reverse("admin:sessions_app_session_timeline", args=[session_id])
    if at_seq is not None:
        url += f"?{urlencode({'after_seq': max(at_seq - 1, 0)})}#seq-{at_seq}"
    return url


def chat_url(conversation_id, *, at_seq: int | None = None) -> str:
    url = reverse("admin:sessions_app_conversation_chat", args=[conversation_id])
    if at_seq is not None:
        url += f"?{urlencode({'after_seq': max(at_seq - 1, 0)})}#seq-{at_seq}"
    return url
