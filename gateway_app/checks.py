from django.core import checks
from django.core.exceptions import ImproperlyConfigured


def secrets_keys(app_configs=None, **kwargs):
    """ACE_SECRETS_KEYS holds keys Fernet takes: said when the server starts, not at the first provider saved."""
    from gateway_app import secrets

    try:
        secrets.box()
    except ImproperlyConfigured as error:
        return [
            checks.Error(
                str(error),
                hint='Comma-separated keys, the first encrypts: docs/gateway.md, "Keys at rest".',
                id="gateway_app.E001",
            )
        ]
    return []
