"""Signals other layers subscribe to; sent after the writing transaction commits.

`memory_app` never imports the layers above it (strategies, webhooks): they listen here.
"""

from django.dispatch import Signal

# sender=the Record model; kwargs: tenant_id, record_id, change ("created", "updated" or "invalidated"),
# revision (the record's revision after the write), actor, reason, record (a JSON-ready dict of the record as
# the write left it: the fields the API shows, its provenance included). Sent once per revision: a merge of a
# restatement and a session's deletion unlinking a record are "updated"; a delete (DELETE /records/{id}/) and
# an invalidation are "invalidated".
record_changed = Signal()

# sender=the RecordTtl model; kwargs: tenant_id. Asked, not announced (by retention_app's checks of a record TTL):
# each receiver returns the names of the tenant's strategies it defines, which a record TTL may name (with the
# names the tenant's records carry).
strategy_names_wanted = Signal()
