"""One error shape for the whole API: {"detail": "...", "errors": {field: [...]}}."""

import sys

from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from platform_kit.outages import database_unavailable, unavailable_response
from platform_kit.request_ids import request_id


def _flatten(errors, prefix=""):
    """{"items": [{}, {"role": ["bad"]}]} -> {"1.role": ["bad"]}: one path per problem."""
    flat = {}
    if isinstance(errors, dict):
        for key, value in errors.items():
            flat.update(_flatten(value, f"{prefix}.{key}" if prefix else str(key)))
    elif isinstance(errors, list) and errors and all(isinstance(e, str) for e in errors):
        flat[prefix or "non_field_errors"] = [str(e) for e in errors]
    elif isinstance(errors, list):
        for index, value in enumerate(errors):
            if value:
                flat.update(_flatten(value, f"{prefix}.{index}" if prefix else str(index)))
    else:
        flat[prefix or "non_field_errors"] = [str(errors)]
    return flat


def _summary(flat):
    parts = [f"{field}: {' '.join(messages)}" for field, messages in list(flat.items())[:3]]
    more = f" (and {len(flat) - 3} more)" if len(flat) > 3 else ""
    return "Invalid input. " + "; ".join(parts) + more


def validation_detail(errors) -> str:
    """A serializer's errors as the API's one-sentence `detail`: "Invalid input. top_k: Ensure this value …"."""
    return _summary(_flatten(errors))


def exception_handler(exc, context):
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(str(exc) or "Not found.")
    response = drf_exception_handler(exc, context)
    if response is None:
        reason = database_unavailable(exc)
        return None if reason is None else unavailable_response(reason)
    data = response.data
    if isinstance(exc, exceptions.ValidationError):
        flat = _flatten(data)
        response.data = {"detail": _summary(flat), "errors": flat}
    elif isinstance(data, dict) and "detail" in data:
        response.data = {"detail": str(data["detail"]), "errors": data.get("errors", {})}
    else:
        response.data = {"detail": str(data), "errors": {}}
    return response


# Paths that machines call (the API, the OTLP receiver, MCP, the LLM gateway): their errors are JSON. Every other
# path is a page a person reads, and gets the site's error page (platform_kit/templates/404.html, 500.html).
MACHINE_PATHS = ("/api/", "/v1/", "/mcp", "/gateway/")


def json_404(request, exception=None):
    if not request.path.startswith(MACHINE_PATHS):
        from django.views.defaults import page_not_found

        return page_not_found(request, exception)
    return JsonResponse({"detail": "Not found.", "errors": {}}, status=status.HTTP_404_NOT_FOUND)


def json_500(request):
    # Django calls this while handling the exception: one raised outside a view (a middleware's query) by an
    # unreachable database is a 503 too.
    reason = database_unavailable(sys.exception())
    if reason is not None:
        return unavailable_response(reason)
    if not request.path.startswith(MACHINE_PATHS):
        from django.http import HttpResponseServerError
        from django.template import loader

        # the site's 500.html (platform_kit/templates), naming the request id its traceback is logged under
        return HttpResponseServerError(loader.get_template("500.html").render({"request_id": request_id()}))
    return JsonResponse(server_error_body(), status=status.HTTP_500_INTERNAL_SERVER_ERROR)


def server_error_body() -> dict:
    """What a client is told of an unexpected error: not its cause, but the id the server logged it under."""
    bound = request_id()
    if bound is None:
        return {"detail": "Server error.", "errors": {}}
    return {
        "detail": f"Server error (request id {bound}). It is logged under that id; try again, and if it happens "
        "again tell the operator the id.",
        "errors": {},
        "request_id": bound,
    }


class PreconditionFailed(exceptions.APIException):
    status_code = status.HTTP_412_PRECONDITION_FAILED
    default_detail = "The state changed since the version you sent in If-Match."
    default_code = "precondition_failed"


class Conflict(exceptions.APIException):
    status_code = status.HTTP_409_CONFLICT
    default_detail = "Conflict."
    default_code = "conflict"


def error_response(detail, errors=None, status_code=400):
    return Response({"detail": detail, "errors": errors or {}}, status=status_code)
