"""The Django admin for sessions_app: the auditors' daily tool, one module per concern.

Messages, requests and conversations are facts recorded by the API, so their admins are read-only. The
big tables (messages above all) never count or sort their rows in full: `EstimatedCountPaginator` instead
of `COUNT(*)`, ordering by an indexed column, list filters whose choices come from small tables, and
changelist querysets that load only the columns the list shows. Writes go through the services, so the
admin follows the same rules as the API (ending a session, revoking or creating an API key).

Other apps link to these pages through `sessions_app.links` and build their admins from `platform_kit.admin`.
"""

# Importing a module registers its admins (Django's autodiscovery imports this package).
from sessions_app.admin import (  # noqa: F401
    budgets,
    conversations,
    llm_requests,
    messages,
    plans,
    privacy,
    sessions,
    state,
    tenancy,
    turns,
    usage,
)
