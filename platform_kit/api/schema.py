"""The OpenAPI schema says every status code an operation answers, with the one error shape (errors.py).

The codes every view shares are added here, from what the operation takes, so that no view has to list them:
- 400 when it reads a query, a header or a body (invalid input: `errors` says which field and why);
- 401 when it needs an API key (every API operation);
- 404 when its path names an object (unknown, deleted, or another tenant's);
- 413 when it takes a body (platform_kit.middleware refuses one over ACE_MAX_REQUEST_BYTES before parsing);
- 503 always, with Retry-After, while the database is unreachable (platform_kit.outages).
A view adds the codes of its own (409, 412, 413…) with `error_responses(...)` in its `extend_schema`.

Request bodies are closed (`additionalProperties: false`): the serializers refuse unknown fields
(fields.RejectUnknownFieldsMixin), so the schema says so.
"""

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.plumbing import get_doc
from drf_spectacular.utils import OpenApiResponse
from rest_framework import permissions, serializers

from platform_kit.api.fields import RejectUnknownFieldsMixin

ERROR_DESCRIPTIONS = {
    400: "Invalid input: `errors` maps each offending field (a dotted path into the body) to its problems.",
    401: "No API key, a malformed Authorization header, or an unknown or revoked key.",
    404: "No such object for this API key's tenant (unknown, deleted, or another tenant's).",
    409: "The object is in a state that does not allow this (closed, disabled, running…).",
    412: "If-Match names a version that is no longer the current one: read again and retry.",
    413: "The body is larger than ACE_MAX_REQUEST_BYTES (an upload: ACE_MAX_UPLOAD_BYTES), refused unread.",
    503: "The database is unreachable (an outage or a restart); nothing was stored. Retry after `Retry-After` seconds.",
}
RETRY_AFTER = {
    "Retry-After": {"description": "Seconds to wait before retrying", "schema": {"type": "integer", "minimum": 1}}
}


class ErrorSerializer(serializers.Serializer):
    """Every error of the API: a sentence, and the problems by field."""

    detail = serializers.CharField(help_text="What went wrong, in one sentence")
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        help_text="Field (dotted path) -> its problems; empty when the error is not about a field",
    )


def error_responses(*codes: int) -> dict[int, OpenApiResponse]:
    """`responses` entries for the error codes particular to a view (the shared ones are added by ApiSchema)."""
    return {code: OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[code]) for code in codes}


class ApiSchema(AutoSchema):
    def get_filter_backends(self):
        # A viewset's filters apply to its list only; its detail actions read their own query parameters.
        action = getattr(self.view, "action", None)
        if action is not None and action != "list":
            return []
        return super().get_filter_backends()

    def _map_serializer(self, serializer, direction, bypass_extensions=False):
        schema = super()._map_serializer(serializer, direction, bypass_extensions)
        if schema.get("description") == get_doc(RejectUnknownFieldsMixin):
            del schema["description"]  # the mixin's docstring, not the serializer's
        if direction == "request" and isinstance(serializer, RejectUnknownFieldsMixin):
            schema["additionalProperties"] = False
        if direction == "request" and hasattr(serializer, "openapi_request_schema"):
            schema = serializer.openapi_request_schema(schema)  # what its validate() adds to the fields' rules
        return schema

    def get_operation(self, path, path_regex, path_prefix, method, registry):
        operation = super().get_operation(path, path_regex, path_prefix, method, registry)
        if operation is None or not path.startswith("/api/v1/"):
            return operation
        responses = operation["responses"]
        for code in self._shared_error_codes(operation):
            if str(code) not in responses:
                responses[str(code)] = self._get_response_for_code(
                    OpenApiResponse(ErrorSerializer, description=ERROR_DESCRIPTIONS[code]), str(code)
                )
                if code == 503:
                    responses[str(code)]["headers"] = RETRY_AFTER
        operation["responses"] = dict(sorted(responses.items()))
        return operation

    def _shared_error_codes(self, operation) -> list[int]:
        codes = []
        parameters = operation.get("parameters", [])
        if operation.get("requestBody") or any(p["in"] in ("query", "header") for p in parameters):
            codes.append(400)
        if any(
            not issubclass(permission, permissions.AllowAny)
            for permission in getattr(self.view, "permission_classes", [])
        ):
            codes.append(401)
        if any(p["in"] == "path" for p in parameters):
            codes.append(404)
        if operation.get("requestBody"):
            codes.append(413)
        codes.append(503)
        return codes
