import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from platform_kit.wsgi import ChunkedRequestBodies

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aceproject.settings")


def _application():
    django_application = get_wsgi_application()
    from platform_kit.middleware import UPLOAD_PATHS  # its imports need the apps loaded

    return ChunkedRequestBodies(
        django_application,
        limit=settings.ACE_MAX_REQUEST_BYTES,
        large_limit=settings.ACE_MAX_UPLOAD_BYTES,
        large_paths=UPLOAD_PATHS,
    )


application = _application()
