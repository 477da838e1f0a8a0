from django.apps import AppConfig


class PlatformKitConfig(AppConfig):
    """The admin kit's templates, and the platform's own tables: the server errors' tally, the failed
    authentications per address (auth_throttle)."""

    name = "platform_kit"
    verbose_name = "Platform kit"

    def ready(self):
        from django.contrib.auth.signals import user_login_failed

        from platform_kit.auth_throttle import admin_login_failed

        user_login_failed.connect(admin_login_failed, dispatch_uid="platform_kit.admin_login_failed")
