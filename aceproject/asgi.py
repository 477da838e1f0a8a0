"""The ASGI entry point (the Procfile's `gateway` process: `uvicorn aceproject.asgi:application`): the LLM gateway's
routes (gateway_app.asgi) on the event loop, and the Django site beside them for the rest (/healthz, the API)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aceproject.settings")
django_application = get_asgi_application()  # sets Django up before the gateway's modules import models

from starlette.applications import Starlette  # noqa: E402
from starlette.routing import Mount  # noqa: E402

from gateway_app.asgi import lifespan, routes  # noqa: E402

application = Starlette(routes=[*routes, Mount("/", app=django_application)], lifespan=lifespan)
