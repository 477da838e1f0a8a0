"""The web process (WSGI) does not relay calls: it holds a worker per request, and a stream would hold one for its
whole length. A call sent to it is told where the gateway listens."""

from django.conf import settings
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt


@csrf_exempt
def gateway_elsewhere(request, rest=""):
    host = request.get_host().rsplit(":", 1)[0]
    where = f"http://{host}:{settings.ACE_GATEWAY_PORT}/gateway/{rest}"
    message = (
        f"The LLM gateway is served by the gateway process (port {settings.ACE_GATEWAY_PORT}, ACE_GATEWAY_PORT), "
        f"not by this one: call {where} (docs/gateway.md)."
    )
    return JsonResponse(
        {"error": {"message": message, "type": "invalid_request_error", "code": "wrong_port"}}, status=404
    )
