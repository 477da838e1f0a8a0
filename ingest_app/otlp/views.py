"""`POST /v1/logs` and `POST /v1/metrics`: OTLP/HTTP (https://opentelemetry.io/docs/specs/otlp/#otlphttp).

Thin: authenticate the Bearer key, read the body (`decode`), store it (`claude_code`), answer in the
request's encoding — 200 with an Export*ServiceResponse (`partial_success` when records were refused), 400
for a body that cannot be read, 401 without a valid key, 413 too large, 415 for another content type. Plain
Django views, not DRF: the bodies are protobuf as often as JSON. Not in the OpenAPI schema (an OTLP exporter
is their client; docs/otel.md documents them).
"""

from __future__ import annotations

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from ingest_app.otlp import claude_code, decode
from platform_kit.auth_throttle import api_key_blocked, api_key_failed, client_address
from sessions_app.services.apikeys import apikey_authenticate, apikey_recently_accepted

# google.rpc.Code values for the Status body of an error
_INVALID_ARGUMENT, _UNAUTHENTICATED, _RESOURCE_EXHAUSTED = 3, 16, 8


def _answer(body: bytes, media: str, status: int = 200) -> HttpResponse:
    return HttpResponse(body, status=status, content_type=media)


def _error(status: int, code: int, message: str, media: str) -> HttpResponse:
    response = _answer(decode.status_body(code=code, message=message, media=media), media, status)
    if status == 401:
        response["WWW-Authenticate"] = 'Bearer realm="otlp"'
    return response


def _api_key(request: HttpRequest):
    """The request's active API key, None without one, or the seconds its address must wait (auth_throttle)."""
    header = request.headers.get("Authorization", "").strip()
    # OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20<key>" is the specification's spelling, but Claude Code
    # (2.1) sends the value without decoding it: "Bearer%20<key>" is read as "Bearer <key>".
    if header[:9].lower() == "bearer%20":
        header = "Bearer " + header[9:]
    scheme, _, key = header.partition(" ")
    if scheme.lower() != "bearer" or not key.strip():
        return None
    key, address = key.strip(), client_address(request)
    wait = api_key_blocked(address)
    if wait is not None and not apikey_recently_accepted(plain_key=key):
        return wait
    api_key = apikey_authenticate(plain_key=key)
    return api_key if api_key is not None else api_key_failed(address)


def _receive(request: HttpRequest, decoder, ingest, respond) -> HttpResponse:
    media = decode.media_type(request.content_type or "")
    if media not in decode.CONTENT_TYPES:
        return _error(
            415,
            _INVALID_ARGUMENT,
            f"Content-Type {media or '(none)'!r} is not supported: send application/x-protobuf or application/json "
            "(OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf or http/json; grpc is not served).",
            decode.JSON,
        )
    api_key = _api_key(request)
    if isinstance(api_key, int):
        response = _error(
            429, _RESOURCE_EXHAUSTED, f"Too many unknown API keys from this address: retry in {api_key} s.", media
        )
        response["Retry-After"] = str(api_key)
        return response
    if api_key is None:
        message = "Send an API key: OTEL_EXPORTER_OTLP_HEADERS='Authorization=Bearer%20<api key>'."
        return _error(401, _UNAUTHENTICATED, message, media)
    limit = settings.ACE_MAX_REQUEST_BYTES
    try:
        body = decode.inflate(request.body, encoding=request.headers.get("Content-Encoding", ""), limit=limit)
        records = decoder(body, media)
    except (decode.TooLarge, RequestDataTooBig):
        message = f"The body is larger than {limit} bytes: lower OTEL_BLRP_MAX_EXPORT_BATCH_SIZE or export more often."
        return _error(413, _RESOURCE_EXHAUSTED, message, media)
    except decode.BodyError as error:
        return _error(400, _INVALID_ARGUMENT, str(error), media)
    outcome = ingest(tenant=api_key.tenant, records=records, api_key=api_key)
    return _answer(respond(rejected=outcome.rejected, error_message=outcome.error_message, media=media), media)


def _metrics_ingest(*, tenant, records, api_key):
    return claude_code.metrics_ingest(tenant=tenant, points=records, api_key=api_key)


@csrf_exempt
@require_POST
def logs(request: HttpRequest) -> HttpResponse:
    return _receive(request, decode.decode_logs, claude_code.logs_ingest, decode.logs_response)


@csrf_exempt
@require_POST
def metrics(request: HttpRequest) -> HttpResponse:
    return _receive(request, decode.decode_metrics, _metrics_ingest, decode.metrics_response)
