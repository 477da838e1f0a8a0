"""Any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint (OpenAI, Azure-style proxies, vLLM, Ollama,
LM Studio, text-embeddings-inference, LiteLLM...), with the standard library only.

Settings: ``ACE_EMBEDDER_BASE_URL`` (e.g. ``http://host:port/v1``), ``ACE_EMBEDDER_MODEL``,
``ACE_EMBEDDER_API_KEY`` (sent as ``Authorization: Bearer``), ``ACE_EMBEDDER_DIMENSIONS`` (sent as
``dimensions`` when set, and checked on every response), ``ACE_EMBEDDER_TIMEOUT`` (seconds, per request) and
``ACE_EMBEDDER_BATCH`` (inputs per request).

Failures: connection errors, 5xx and 429 are retried a couple of times with a short backoff, then raise
``EmbedderUnavailable``; a timeout raises it at once (the full timeout was already spent). 401/403/404, other
4xx, a body that is not an embeddings response, and vectors of the wrong length raise ``EmbedderMisconfigured``.
"""

from __future__ import annotations

import base64
import http.client
import json
import math
import struct
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence

from platform_kit import outbound

from .base import Embedder, EmbedderMisconfigured, EmbedderUnavailable, check_texts, key_part, l2_normalise

RETRY_STATUSES = frozenset({408, 429})  # and every 5xx
MAX_RETRY_AFTER = 5.0  # seconds: we honour a server's Retry-After up to this, then give up and let the caller retry


class OpenAIEmbedder(Embedder):
    provider = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str = "",
        dimensions: int | None = None,
        timeout: float = 30.0,
        batch_size: int = 128,
        retries: int = 2,
        backoff: float = 0.5,
    ):
        base_url = (base_url or "").strip()
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise EmbedderMisconfigured(
                f"ACE_EMBEDDER=openai needs ACE_EMBEDDER_BASE_URL, an http(s) URL such as http://host:port/v1; "
                f"got {base_url!r}"
            )
        if not (model or "").strip():
            raise EmbedderMisconfigured("ACE_EMBEDDER=openai needs ACE_EMBEDDER_MODEL, the embedding model's name")
        if int(batch_size) < 1:
            raise EmbedderMisconfigured(f"ACE_EMBEDDER_BATCH must be at least 1, not {batch_size}")
        if not float(timeout) > 0:
            raise EmbedderMisconfigured(f"ACE_EMBEDDER_TIMEOUT must be a positive number of seconds, not {timeout}")
        refusal = outbound.url_refusal(base_url)
        if refusal:
            raise EmbedderMisconfigured(f"ACE_EMBEDDER_BASE_URL {base_url}: {refusal}")
        base = base_url.rstrip("/")
        self.url = base if base.endswith("/embeddings") else base + "/embeddings"
        self.model = model.strip()
        self.api_key = api_key or ""
        self.requested_dimensions = int(dimensions) if dimensions else None
        self.timeout = float(timeout)
        self.batch_size = int(batch_size)
        self.retries = max(0, int(retries))
        self.backoff = max(0.0, float(backoff))
        self._dimensions = self.requested_dimensions
        self._lock = threading.Lock()
        self.label = f"OpenAI-compatible {self.model} at {parts.scheme}://{parts.netloc}"

    # -- the vector space -------------------------------------------------------------------------------------
    @property
    def dimensions(self) -> int:
        """ACE_EMBEDDER_DIMENSIONS, or else the length of the endpoint's vectors (asked once, with a probe)."""
        if self._dimensions is None:
            self.embed(["dimension probe"])
        return self._dimensions  # type: ignore[return-value]

    @property
    def key(self) -> str:
        return f"openai:{key_part(self.model)}:{self.dimensions}"

    def status(self) -> dict:  # without asking the endpoint for its dimension
        key = f"openai:{key_part(self.model)}:{self._dimensions}" if self._dimensions else None
        return {"provider": self.provider, "key": key, "label": self.label, "loaded": True, "load_seconds": None}

    def __repr__(self) -> str:  # without asking the endpoint for its dimension
        return f"<OpenAIEmbedder openai:{key_part(self.model)}:{self._dimensions or '?'} at {self.url}>"

    # -- embedding --------------------------------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        texts = check_texts(texts)
        vectors: list[list[float]] = []
        for start in range(0, len(texts), self.batch_size):
            vectors.extend(self._embed_batch(texts[start : start + self.batch_size]))
        return vectors

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        # Endpoints refuse an empty string as input; a single space embeds "nothing" just as well.
        payload: dict = {"model": self.model, "input": [t if t.strip() else " " for t in texts]}
        if self.requested_dimensions:
            payload["dimensions"] = self.requested_dimensions
        body = self._post(payload)
        return self._parse(body, len(texts))

    def _post(self, payload: dict) -> dict:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "open-ace"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        attempt = 0
        while True:
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            delay = self.backoff * (2**attempt)
            try:
                with outbound.urlopen(request, timeout=self.timeout) as response:
                    raw = response.read()
                break
            except urllib.error.HTTPError as exc:
                status, detail = exc.code, _error_detail(exc)
                if status in (401, 403):
                    raise EmbedderMisconfigured(
                        f"The embeddings endpoint {self.url} refused the credentials ({status}): {detail}. "
                        "Check ACE_EMBEDDER_API_KEY"
                    ) from None
                if status == 404:
                    raise EmbedderMisconfigured(
                        f"The embeddings endpoint {self.url} answered 404: {detail}. Check ACE_EMBEDDER_BASE_URL "
                        f"(it should end in /v1) and ACE_EMBEDDER_MODEL ({self.model!r})"
                    ) from None
                if 300 <= status < 400:
                    raise EmbedderMisconfigured(
                        f"The embeddings endpoint {self.url} redirects ({status}) to {exc.headers.get('Location')!r}; "
                        "redirects are not followed: set ACE_EMBEDDER_BASE_URL to the final URL"
                    ) from None
                if status not in RETRY_STATUSES and status < 500:
                    raise EmbedderMisconfigured(
                        f"The embeddings endpoint {self.url} rejected the request ({status}): {detail}"
                    ) from None
                problem = f"answered {status}: {detail}"
                retry_after = _retry_after(exc)
                if retry_after is not None:
                    delay = min(max(delay, retry_after), MAX_RETRY_AFTER)
            except TimeoutError as exc:
                raise EmbedderUnavailable(
                    f"The embeddings endpoint {self.url} did not answer within {self.timeout:g} s "
                    "(ACE_EMBEDDER_TIMEOUT)"
                ) from exc
            except urllib.error.URLError as exc:
                if outbound.refusal_of(exc):
                    raise EmbedderMisconfigured(
                        f"The embeddings endpoint {self.url} (ACE_EMBEDDER_BASE_URL) is refused: {exc.reason}"
                    ) from None
                if isinstance(exc.reason, TimeoutError):
                    raise EmbedderUnavailable(
                        f"The embeddings endpoint {self.url} did not answer within {self.timeout:g} s "
                        "(ACE_EMBEDDER_TIMEOUT)"
                    ) from exc
                problem = f"could not be reached: {exc.reason}"
            except (http.client.HTTPException, OSError) as exc:  # reset, dropped, garbled status line
                problem = f"failed: {type(exc).__name__}: {exc}"
            if attempt >= self.retries:
                raise EmbedderUnavailable(
                    f"The embeddings endpoint {self.url} {problem} (after {attempt + 1} attempts)"
                )
            attempt += 1
            time.sleep(delay)
        try:
            body = json.loads(raw)
        except ValueError:
            raise EmbedderMisconfigured(
                f"The embeddings endpoint {self.url} answered with something other than JSON "
                f"({raw[:80]!r}); check ACE_EMBEDDER_BASE_URL"
            ) from None
        if not isinstance(body, dict):
            raise EmbedderMisconfigured(f"The embeddings endpoint {self.url} answered with JSON that is not an object")
        return body

    def _parse(self, body: dict, count: int) -> list[list[float]]:
        items = body.get("data")
        if not isinstance(items, list) or len(items) != count:
            got = len(items) if isinstance(items, list) else "no"
            raise EmbedderMisconfigured(
                f"The embeddings endpoint {self.url} returned {got} embeddings for {count} inputs"
            )
        try:
            items = sorted(items, key=lambda item: int(item.get("index", 0)))
            vectors = [_floats(item["embedding"]) for item in items]
        except (AttributeError, KeyError, TypeError, ValueError):
            raise EmbedderMisconfigured(
                f"The embeddings endpoint {self.url} returned data that is not a list of {{index, embedding}}"
            ) from None
        lengths = sorted({len(v) for v in vectors})
        with self._lock:
            expected = self._dimensions
            if expected is None and len(lengths) == 1:
                self._dimensions = expected = lengths[0]
        if lengths != [expected]:
            if self.requested_dimensions:
                where = f"ACE_EMBEDDER_DIMENSIONS={self.requested_dimensions}"
            elif expected is not None:
                where = f"the {expected} dimensions it returned before"
            else:
                where = "one length for all"

            raise EmbedderMisconfigured(
                f"The embeddings endpoint {self.url} returned {'/'.join(map(str, lengths))}-dimensional vectors "
                f"for model {self.model!r}, but {where} was expected: check ACE_EMBEDDER_MODEL and "
                "ACE_EMBEDDER_DIMENSIONS"
            )
        return [l2_normalise(v) for v in vectors]


def _floats(embedding) -> list[float]:
    if isinstance(embedding, str):  # encoding_format=base64: little-endian float32
        raw = base64.b64decode(embedding)
        return list(struct.unpack(f"<{len(raw) // 4}f", raw))
    vector = [float(x) for x in embedding]
    if not all(math.isfinite(x) for x in vector):
        raise ValueError("non-finite value")
    return vector


def _error_detail(exc: urllib.error.HTTPError) -> str:
    try:
        raw = exc.read()[:2000]
    except Exception:
        return exc.reason or ""
    try:
        body = json.loads(raw)
        error = body.get("error", body) if isinstance(body, dict) else body
        if isinstance(error, dict):
            error = error.get("message") or error.get("detail") or error
        return str(error)[:300]
    except ValueError:
        return raw.decode("utf-8", "replace").strip()[:300] or str(exc.reason or "")


def _retry_after(exc: urllib.error.HTTPError) -> float | None:
    try:
        return max(0.0, float(exc.headers.get("Retry-After", "")))
    except (TypeError, ValueError):
        return None
