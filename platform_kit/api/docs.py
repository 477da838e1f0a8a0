"""The API docs pages (Swagger UI, ReDoc) load nothing from another host.

drf-spectacular-sidecar serves both bundles from here, but ReDoc's bundle still shows a logo it fetches from
Redocly's CDN in its sidebar. That load is blocked by our Content-Security-Policy (and would tell a third party
who reads our docs), so ReDoc's bundle is served with that address replaced by an empty inline image.
"""

from functools import lru_cache
from pathlib import Path

import drf_spectacular_sidecar
from django.http import HttpResponse
from django.views.decorators.http import require_GET

REDOC_BUNDLE = (
    Path(drf_spectacular_sidecar.__file__).parent / "static/drf_spectacular_sidecar/redoc/bundles/redoc.standalone.js"
)
CDN_LOGO = b"https://cdn.redoc.ly/redoc/logo-mini.svg"
EMPTY_IMAGE = b"data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' width='1' height='1'/%3E"


@lru_cache(maxsize=1)
def redoc_bundle_bytes() -> bytes:
    return REDOC_BUNDLE.read_bytes().replace(CDN_LOGO, EMPTY_IMAGE)


@require_GET
def redoc_bundle(request):
    response = HttpResponse(redoc_bundle_bytes(), content_type="text/javascript; charset=utf-8")
    response["Cache-Control"] = "public, max-age=86400"
    return response
