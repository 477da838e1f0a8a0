"""The POST of one delivery: a timeout, no redirects followed, the answer read up to a bound, and only to
addresses the outbound policy allows (platform_kit.outbound: checked on the address actually connected to, so a
name that resolves elsewhere on the second lookup, DNS rebinding, gains nothing).

What a tenant reads back must not make this server a probe of networks it can reach: a failure before any
answer is one text whatever happened (refused, reset, timed out, no such name, TLS), so the delivery log cannot
tell an open port from a closed one; the details go to the server's log for its operator. Only an answer from the
receiver itself (an allowed address, no redirect followed) is kept, and of its body only an excerpt."""

from __future__ import annotations

import http.client
import logging
import socket
import ssl
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from platform_kit import outbound

logger = logging.getLogger(__name__)

MAX_BODY_KEPT = 1024  # characters of the answer's body kept on the delivery: enough to read a receiver's error
MAX_HEADERS_KEPT = 50
USER_AGENT = "OpenACE-Webhooks/1"
REFUSED = "Refused"  # the prefix of a policy refusal: the delivery fails at once (retrying changes nothing)
NO_ANSWER = (
    "Could not deliver: no HTTP answer within {timeout:g} s (the receiver could not be reached, refused or reset "
    "the connection, or TLS failed). Check the URL and that the receiver is up; the server's log has the detail."
)
NO_ADDRESS = (
    "Could not deliver: {host} has no address this server may call (the name does not resolve, or only to "
    "private or reserved addresses, which the outbound policy refuses). Check the URL; the server's log has the detail."
)


@dataclass
class Answer:
    status: int | None = None
    headers: dict[str, str] = field(default_factory=dict)
    body: str = ""
    error: str = ""  # no answer: why (the policy refused the address, or no answer came)
    duration_ms: float = 0.0


def post(url: str, *, body: bytes, headers: dict[str, str], timeout: float) -> Answer:
    """POST `body` to `url`; never raises for the network's or the receiver's failures: they are in the Answer."""
    parts = urlsplit(url)
    if parts.scheme == "https":
        connection = outbound.HTTPSConnection(
            parts.hostname, parts.port, timeout=timeout, context=ssl.create_default_context()
        )
    else:
        connection = outbound.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    started = time.perf_counter()
    answer = Answer()
    try:
        connection.request(
            "POST", path, body=body, headers={"User-Agent": USER_AGENT, "Content-Type": "application/json", **headers}
        )
        response = connection.getresponse()
        answer.status = response.status
        answer.headers = dict(list(response.getheaders())[:MAX_HEADERS_KEPT])
        answer.body = response.read(MAX_BODY_KEPT * 4).decode("utf-8", "replace")[:MAX_BODY_KEPT]
    except outbound.OutboundRefused as refused:
        answer.error = _refusal_text(parts.hostname or "", refused)
    except socket.gaierror as error:
        logger.info("webhook POST to %s: the name does not resolve: %s", parts.hostname, error)
        answer.error = NO_ADDRESS.format(host=parts.hostname)
    except (OSError, http.client.HTTPException, ValueError) as error:
        logger.info("webhook POST to %s got no answer: %s: %s", parts.hostname, type(error).__name__, error)
        answer.error = NO_ANSWER.format(timeout=timeout)
    finally:
        connection.close()
        answer.duration_ms = round((time.perf_counter() - started) * 1000, 2)
    return answer


def _refusal_text(host: str, refused: outbound.OutboundRefused) -> str:
    """A refusal as the tenant reads it: why the host as written is refused (what they typed: nothing learnt).
    A name refused for what it resolves to reads as a name that does not resolve, so names cannot be probed."""
    why = outbound.host_refusal(host)
    if why:
        return f"{REFUSED}: {why}."
    logger.warning("webhook POST to %s refused by the outbound policy: %s", host, refused)
    return NO_ADDRESS.format(host=host)
