from django.apps import AppConfig


class PlatformKitConfig(AppConfig):
    """Installed for its templates (the admin kit's); it has no models."""

    name = "platform_kit"
    verbose_name = "Platform kit"
