"""Signals other apps subscribe to; sent after the writing transaction commits.

`sessions_app` never imports the memory or strategy apps: they listen here.
"""

from django.dispatch import Signal

# sender=Session class; kwargs: session_id, tenant_id, message_ids (the newly stored ones, in seq order)
messages_appended = Signal()
# sender=Session class; kwargs: session_id, tenant_id, version, previous (dict), data (dict)
state_changed = Signal()
# sender=Session class; kwargs: session_id, tenant_id
session_ended = Signal()
# sender=Turn class; kwargs: turn_id, session_id, tenant_id, status, tool_names (called), message_ids
turn_completed = Signal()
