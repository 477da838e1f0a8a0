"""The `llm` extractor: any OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint.

Settings: ``ACE_LLM_BASE_URL`` (e.g. ``http://host:port/v1``), ``ACE_LLM_MODEL``, ``ACE_LLM_API_KEY`` (sent
as ``Authorization: Bearer``), ``ACE_LLM_TIMEOUT`` (seconds per request) and ``ACE_LLM_ATTEMPTS`` (how many
answers to ask for before malformed output fails the run).

The strategy's prompt is rendered with the new messages and the user's related records, and the model is
asked for JSON matching SCHEMA (``response_format`` json_schema, strict). Every answer is validated against
the schema and against what the model was shown (message seqs, record ids); an invalid answer is sent back
with the error and asked again. Nothing is written until an answer passes, so a failed run writes nothing.
"""

from __future__ import annotations

import functools
import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import UTC, datetime

from platform_kit import outbound
from strategies_app.prompts import prompt_render

from .base import Candidate, Extraction, ExtractionContext, Extractor


class ExtractorError(Exception):
    """The extractor could not produce a valid answer; the run fails (and Celery retries it)."""


class ExtractorUnavailable(ExtractorError):
    """The endpoint is down, timed out, or refused for now (5xx, 429)."""


class ExtractorMisconfigured(ExtractorError):
    """Settings or endpoint are wrong (bad URL, 401/403/404, not a chat-completions response)."""


class ExtractorInvalidOutput(ExtractorError):
    """The model kept answering with JSON that does not match the schema."""


SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["memories"],
    "properties": {
        "memories": {
            "type": "array",
            "maxItems": 50,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": [
                    "content",
                    "about",
                    "value",
                    "exclusive",
                    "confidence",
                    "source_seqs",
                    "fields",
                    "invalidates",
                    "reason",
                ],  # fmt: skip
                "properties": {
                    "content": {"type": "string", "minLength": 1, "maxLength": 2000},
                    "about": {"type": "string", "minLength": 1, "maxLength": 200},
                    "value": {"type": "string", "maxLength": 500},
                    "exclusive": {"type": "boolean"},
                    "confidence": {"type": "number", "minimum": 0, "maximum": 1},
                    "source_seqs": {"type": "array", "items": {"type": "integer"}, "minItems": 1},
                    "fields": {
                        "type": "array",
                        "maxItems": 20,
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["name", "value"],
                            "properties": {
                                "name": {"type": "string", "minLength": 1, "maxLength": 100},
                                "value": {"type": "string", "maxLength": 1000},
                            },
                        },
                    },
                    "invalidates": {"type": "array", "items": {"type": "string"}},
                    "reason": {"type": "string", "maxLength": 500},
                },
            },
        }
    },
}

SYSTEM = (
    "You maintain the long-term memory of an assistant. Read the instructions and messages, and answer with "
    "JSON only, matching this JSON Schema:\n" + json.dumps(SCHEMA) + "\n"
    "`source_seqs` are the [seq] numbers of the messages a memory comes from; `invalidates` holds ids of "
    "existing memories (as shown in [brackets]) that the new messages contradict; `fields` are structured "
    'name/value pairs. Answer {"memories": []} when nothing is worth remembering.\n'
    "Never make a memory of a secret: no password, passphrase, PIN, API key, access token, private key, recovery "
    "code, card number or other credential, not even when the user asks you to remember it, and not in `fields`. "
    "Leave such a statement out entirely (a memory left out is not lost: the messages stay)."
)


@functools.cache
def _answer_validator():
    """The answer schema's validator, made on the first answer: jsonschema is slow to import, and every process
    (a log import, any `manage.py` command) loads this module at start-up through the strategy triggers."""
    import jsonschema

    return jsonschema.Draft202012Validator(SCHEMA)


class LLMExtractor(Extractor):
    name = "llm"
    calls_model = True

    def __init__(self, *, base_url: str, model: str, api_key: str = "", timeout: float = 60.0, attempts: int = 2):
        parts = urllib.parse.urlsplit((base_url or "").strip())
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ExtractorMisconfigured(
                "The llm extractor needs ACE_LLM_BASE_URL, an http(s) URL such as http://host:port/v1; "
                f"got {base_url!r}"
            )
        if not (model or "").strip():
            raise ExtractorMisconfigured("The llm extractor needs ACE_LLM_MODEL, the chat model's name")
        refusal = outbound.url_refusal(base_url)
        if refusal:
            raise ExtractorMisconfigured(f"ACE_LLM_BASE_URL {base_url.strip()}: {refusal}")
        base = base_url.strip().rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model.strip()
        self.api_key = api_key or ""
        self.timeout = float(timeout)
        self.attempts = max(1, int(attempts))
        self.label = f"{self.model} at {parts.scheme}://{parts.netloc}"

    # -- one call ---------------------------------------------------------------------------------------------
    def extract(self, context: ExtractionContext) -> Extraction:
        messages, existing, strategy_type = context.messages, context.existing, context.strategy_type
        rendered = prompt_render(
            context.prompt,
            {
                "messages": "\n".join(f"[{m.seq}] {m.role}: {m.content}" for m in messages),
                "existing_records": "\n".join(
                    f"[{r['id']}] ({(r.get('fields') or {}).get('slot', '')}) {r['content']}" for r in existing
                )
                or "(none)",
                "user_id": context.user_id,
                "session_name": context.session_name,
                "state": json.dumps(context.state or {}, ensure_ascii=False),
                "state_changes": json.dumps(context.state_changes or {}, ensure_ascii=False),
                "type": strategy_type,
                "today": datetime.now(UTC).date().isoformat(),
            },
        )
        conversation = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": rendered}]
        by_seq = {m.seq: m.id for m in messages}
        known_records = {str(r["id"]) for r in existing}
        input_tokens = output_tokens = 0
        started = time.perf_counter()
        problem = ""
        for _attempt in range(self.attempts):
            body = self._post(conversation)
            usage = body.get("usage") or {}
            input_tokens += int(usage.get("prompt_tokens") or 0)
            output_tokens += int(usage.get("completion_tokens") or 0)
            try:
                content = body["choices"][0]["message"]["content"]
            except (KeyError, IndexError, TypeError) as error:
                raise ExtractorMisconfigured(
                    f"{self.label} did not answer like a chat-completions endpoint (no choices[0].message.content)"
                ) from error
            try:
                candidates = self._candidates(content, strategy_type, by_seq, known_records, context.session_id)
            except ExtractorInvalidOutput as error:
                problem = str(error)
                conversation += [
                    {"role": "assistant", "content": str(content)[:4000]},
                    {
                        "role": "user",
                        "content": f"That answer is invalid: {problem}. "
                        "Answer again with JSON matching the schema only.",
                    },
                ]
                continue
            return Extraction(
                candidates=candidates,
                input_tokens=input_tokens,
                output_tokens=output_tokens,
                latency_ms=(time.perf_counter() - started) * 1000,
                detail=self.label,
            )
        raise ExtractorInvalidOutput(
            f"{self.label} answered with invalid JSON {self.attempts} time(s); last problem: {problem}"
            f" (tokens spent: {input_tokens} in, {output_tokens} out)"
        )

    def _candidates(
        self, content, strategy_type: str, by_seq: dict[int, str], known_records: set[str], session_id: str
    ) -> list[Candidate]:
        try:
            answer = json.loads(content) if isinstance(content, str) else content
        except ValueError as error:
            raise ExtractorInvalidOutput(f"not JSON ({error})") from error
        errors = sorted(_answer_validator().iter_errors(answer), key=lambda e: list(e.absolute_path))
        if errors:
            where = "/".join(str(p) for p in errors[0].absolute_path) or "(root)"
            raise ExtractorInvalidOutput(f"at {where}: {errors[0].message}")
        out = []
        for i, memory in enumerate(answer["memories"]):
            if not math.isfinite(memory["confidence"]):  # NaN passes the schema's 0-1 range: no comparison holds
                raise ExtractorInvalidOutput(f"at memories/{i}/confidence: {memory['confidence']} is not a number")
            unknown_seqs = [s for s in memory["source_seqs"] if s not in by_seq]
            if unknown_seqs:
                raise ExtractorInvalidOutput(f"memories/{i}/source_seqs: {unknown_seqs} are not seqs of the messages")
            unknown_ids = [r for r in memory["invalidates"] if r not in known_records]
            if unknown_ids:
                raise ExtractorInvalidOutput(
                    f"memories/{i}/invalidates: {unknown_ids} are not ids of existing memories"
                )
            about = memory["about"].strip().lower()
            if strategy_type == "task":
                about = f"task:{session_id}"  # one running summary per session, whatever the model called it
            fields = {f["name"]: f["value"] for f in memory["fields"]}
            fields.update({"invalidates": memory["invalidates"]} if memory["invalidates"] else {})
            out.append(
                Candidate(
                    type=strategy_type,
                    content=memory["content"].strip(),
                    slot=about,
                    value=memory["value"].strip().lower(),
                    exclusive=bool(memory["exclusive"]),
                    fields=fields,
                    confidence=float(memory["confidence"]),
                    source_message_ids=[by_seq[s] for s in dict.fromkeys(memory["source_seqs"])],
                    reason=memory["reason"][:500] or "llm",
                )
            )
        return out

    # -- HTTP -------------------------------------------------------------------------------------------------
    def _post(self, conversation: list[dict]) -> dict:
        payload = {
            "model": self.model,
            "messages": conversation,
            "temperature": 0,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "memories", "strict": True, "schema": SCHEMA},
            },
        }
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(payload).encode(), headers=headers, method="POST")
        try:
            with outbound.urlopen(request, timeout=self.timeout) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read()[:300].decode("utf-8", "replace")
            if 300 <= error.code < 400:
                raise ExtractorMisconfigured(
                    f"{self.label} redirects (HTTP {error.code}) to {error.headers.get('Location')!r}; redirects are "
                    "not followed: set ACE_LLM_BASE_URL to the final URL"
                ) from error
            if error.code in (408, 429) or error.code >= 500:
                raise ExtractorUnavailable(f"{self.label} answered HTTP {error.code}: {detail}") from error
            raise ExtractorMisconfigured(f"{self.label} refused the request (HTTP {error.code}): {detail}") from error
        except TimeoutError as error:
            raise ExtractorUnavailable(f"{self.label} did not answer within {self.timeout:g} s") from error
        except (urllib.error.URLError, ConnectionError, OSError) as error:
            refused = outbound.refusal_of(error)
            if refused:
                raise ExtractorMisconfigured(f"ACE_LLM_BASE_URL {self.url} is refused: {refused}") from error
            reason = getattr(error, "reason", error)
            if isinstance(reason, TimeoutError):
                raise ExtractorUnavailable(f"{self.label} did not answer within {self.timeout:g} s") from error
            raise ExtractorUnavailable(f"{self.label} is unreachable: {reason}") from error
        try:
            return json.loads(raw)
        except ValueError as error:
            raise ExtractorMisconfigured(f"{self.label} answered with something that is not JSON") from error
