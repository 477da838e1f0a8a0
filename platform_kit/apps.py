from django.apps import AppConfig
from django.core import checks


class PlatformKitConfig(AppConfig):
    """The kit's templates (the admin kit's, the site's pages, the error pages and the overrides of other apps'
    templates, which settings.TEMPLATES also lists first) and static files, and the platform's own tables: the
    server errors' tally, the failed authentications per address (auth_throttle)."""

    name = "platform_kit"
    verbose_name = "Platform kit"

    def ready(self):
        from django.contrib.auth.signals import user_login_failed

        from platform_kit.auth_throttle import admin_login_failed

        user_login_failed.connect(admin_login_failed, dispatch_uid="platform_kit.admin_login_failed")
        checks.register(deprecated_outbound_settings)


def deprecated_outbound_settings(app_configs=None, **kwargs):
    from django.conf import settings

    if not getattr(settings, "ACE_WEBHOOKS_ALLOW_PRIVATE", False):
        return []
    return [
        checks.Warning(
            "ACE_WEBHOOKS_ALLOW_PRIVATE is deprecated: it now adds the private and loopback networks "
            "(10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,127.0.0.0/8,fc00::/7,::1) to ACE_OUTBOUND_ALLOW, for every "
            "outbound call.",
            hint="Unset it and list your own receivers' hosts or networks in ACE_OUTBOUND_ALLOW (docs/security.md).",
            id="platform_kit.W001",
        )
    ]
