"""The admin's app config: the apps' `admin.py` modules loaded when they are needed, not at every start."""

from django.contrib.admin.apps import SimpleAdminConfig
from django.contrib.admin.checks import check_admin_app, check_dependencies
from django.core import checks


class AdminConfig(SimpleAdminConfig):
    """The admin, with the apps' `admin.py` modules loaded by the URLs (aceproject/urls.py discovers them before
    it routes to the admin) and by the system checks. A log import, a worker or any other command shows no admin
    page, and starts faster without them."""

    def ready(self):
        checks.register(check_dependencies, checks.Tags.admin)
        checks.register(_discover_then_check_admin_app, checks.Tags.admin)


def _discover_then_check_admin_app(app_configs, **kwargs):
    """Django's checks of the registered ModelAdmins, on all of them: discovered first, whichever order the
    checks run in."""
    from django.contrib.admin import autodiscover

    autodiscover()
    return check_admin_app(app_configs, **kwargs)
