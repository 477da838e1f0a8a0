from django.apps import AppConfig


class PlatformKitConfig(AppConfig):
    """The admin kit's templates, and the one table of the platform's own: the server errors' tally."""

    name = "platform_kit"
    verbose_name = "Platform kit"
