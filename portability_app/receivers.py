"""What portability does when the other apps signal: forgetting a user withdraws the tenant's exports that hold
them (sessions_app's `user_forgetting`, sent inside the forgetting transaction)."""

from __future__ import annotations

from portability_app.models import TenantExport
from portability_app.services.exports import tenant_exports_withdraw


def user_forgetting_receiver(sender, *, tenant_id, user_id, **kwargs) -> dict[str, int]:
    """The tenant's export files hold the user too: deleted after the commit, their rows kept as withdrawn. A dry
    run counts them, and its rollback keeps them (the files go only on commit)."""
    withdrawn = tenant_exports_withdraw(tenant_id=tenant_id)
    return {f"{TenantExport._meta.label} (file)": withdrawn} if withdrawn else {}
