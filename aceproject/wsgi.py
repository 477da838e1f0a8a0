import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application

from platform_kit.wsgi import ChunkedRequestBodies

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aceproject.settings")
application = ChunkedRequestBodies(get_wsgi_application(), limit=settings.ACE_MAX_REQUEST_BYTES)
