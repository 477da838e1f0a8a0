from django.conf import settings
from django.http import JsonResponse

from platform_kit.outages import database_unavailable, unavailable_response
from platform_kit.request_ids import HEADER, request_id_bound, request_id_new
from platform_kit.server_errors import server_error_record

# Log uploads (ingest_app.api.imports) have their own, larger limit: ACE_MAX_UPLOAD_BYTES.
UPLOAD_PATHS = ("/api/v1/imports/",)


class RequestIdMiddleware:
    """Every request gets an id (the client's `X-Request-ID` when sensible, else a new one), bound while it is
    served so that log lines and error messages name it (platform_kit.request_ids), and sent back in
    `X-Request-ID`. A server error (5xx, except the 503 of an outage, which is expected and says when to
    retry) is counted for /healthz (platform_kit.server_errors); Django logs its traceback with the id."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        request.request_id = request_id_new(request.headers.get(HEADER))
        with request_id_bound(request.request_id):
            response = self.get_response(request)
            if response.status_code >= 500 and response.status_code != 503:
                server_error_record(request_id=request.request_id, path=request.path, status=response.status_code)
        response[HEADER] = request.request_id
        return response


class RequestSizeLimitMiddleware:
    """Refuse oversized API bodies with a JSON 413 before anything reads them.

    DRF's parsers read the request stream directly, past Django's DATA_UPLOAD_MAX_MEMORY_SIZE check,
    so the limit is enforced here from Content-Length.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        upload = request.path in UPLOAD_PATHS
        limit = settings.ACE_MAX_UPLOAD_BYTES if upload else settings.ACE_MAX_REQUEST_BYTES
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return JsonResponse({"detail": "Content-Length must be an integer.", "errors": {}}, status=400)
        if length > limit:
            advice = (
                "Upload fewer or smaller files." if upload else "Send fewer messages per request or smaller contents."
            )
            return JsonResponse(
                {
                    "detail": f"Request body is {length} bytes; the limit is {limit} bytes. " + advice,
                    "errors": {},
                },
                status=413,
            )
        return self.get_response(request)


class DatabaseUnavailableMiddleware:
    """A view (the admin's, /healthz, any outside the API's exception handler) that fails because the
    database cannot be reached answers 503 with Retry-After, not 500 (platform_kit.outages)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        reason = database_unavailable(exception)
        return None if reason is None else unavailable_response(reason)
