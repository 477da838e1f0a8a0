"""Stream a chat completion from any OpenAI-compatible endpoint and persist the turn through Open ACE.

Standard library only. See docs/chat-turns.md for what each call stores.

    export ACE_URL=http://127.0.0.1:8000 ACE_API_KEY=ace_...          # Open ACE
    export OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-... OPENAI_MODEL=gpt-4o-mini
    python docs/examples/chat_client.py "帮我查一下杭州明天的天气"      # --session ID to add to a session
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator

FINISH_REASONS = {"stop", "length", "tool_calls"}  # anything else the server says is stored as "stop"


def call(method: str, url: str, key: str, body: dict | None = None, timeout: float = 30) -> dict:
    data = None if body is None else json.dumps(body).encode()
    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    with urllib.request.urlopen(urllib.request.Request(url, data, headers, method=method), timeout=timeout) as resp:
        return json.load(resp)


def stream_chat(base_url: str, api_key: str, model: str, messages: list[dict]) -> Iterator[dict]:
    """The chunks of a streamed chat completion (Server-Sent Events `data:` lines), up to `data: [DONE]`."""
    body = {"model": model, "messages": messages, "stream": True, "stream_options": {"include_usage": True}}
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json", "Accept": "text/event-stream"}
    request = urllib.request.Request(f"{base_url.rstrip('/')}/chat/completions", json.dumps(body).encode(), headers)
    with urllib.request.urlopen(request, timeout=120) as resp:
        for raw in resp:  # one line at a time, as the server sends them
            line = raw.decode("utf-8").strip()
            if not line.startswith("data:"):
                continue  # blank separators, comments (": keep-alive"), `event:` lines
            data = line.removeprefix("data:").strip()
            if data == "[DONE]":
                return
            chunk = json.loads(data)
            if chunk.get("error"):
                raise RuntimeError(f"LLM error: {chunk['error']}")
            yield chunk
    raise ConnectionError("The stream ended before [DONE].")


def chat(args: argparse.Namespace) -> dict:
    """One turn: start → system-ready → checkpoints while streaming → complete. Returns the completed turn."""

    def ace(method: str, path: str, body: dict | None = None) -> dict:
        return call(method, f"{args.ace_url.rstrip('/')}/api/v1/{path}", args.ace_key, body)

    new_session = {"name": args.prompt[:60], "tool": "chat", "user_id": args.user}
    session = args.session or ace("POST", "sessions/", new_session)["id"]
    started = time.monotonic()
    # external_id makes a retried start return the same turn instead of a second one.
    turn = ace("POST", f"sessions/{session}/turns/", {"content": args.prompt, "external_id": uuid.uuid4().hex})
    turn_path = f"turns/{turn['turn']}/"
    ace("POST", f"{turn_path}system-ready/", {"system_prompt": args.system})  # before the first chunk

    content, thinking, usage, model = "", "", {}, args.model
    finish_reason, error = "stop", ""
    chunks, saved, last_save = 0, ("", ""), time.monotonic()
    try:
        messages = [{"role": "system", "content": args.system}, {"role": "user", "content": args.prompt}]
        for chunk in stream_chat(args.base_url, args.api_key, args.model, messages):
            model = chunk.get("model") or model
            usage = chunk.get("usage") or usage  # the last chunk, with include_usage
            for choice in chunk.get("choices") or []:
                delta = choice.get("delta") or {}
                content += delta.get("content") or ""
                thinking += delta.get("reasoning_content") or ""
                print(delta.get("content") or "", end="", flush=True)
                if choice.get("finish_reason"):
                    finish_reason = choice["finish_reason"] if choice["finish_reason"] in FINISH_REASONS else "stop"
            chunks += 1
            due = chunks % args.checkpoint_chunks == 0 or time.monotonic() - last_save >= args.checkpoint_seconds
            if due and (content, thinking) != saved:  # a checkpoint replaces the partial answer: send it whole
                saved, last_save = (content, thinking), time.monotonic()
                try:
                    ace("PATCH", turn_path, {"content": content, "thinking": thinking})
                except OSError as exc:  # best effort: a lost checkpoint must not end the stream
                    print(f"checkpoint failed: {exc}", file=sys.stderr)
    except Exception as exc:  # the stream failed: the turn is still completed, as an error, with what we have
        finish_reason, error = "error", f"{type(exc).__name__}: {exc}"
    print()

    body = {
        "content": content,
        "thinking": thinking,
        "model": model,
        "finish_reason": finish_reason,
        "input_tokens": usage.get("prompt_tokens", 0),
        "output_tokens": usage.get("completion_tokens", 0),
        "elapsed_ms": round((time.monotonic() - started) * 1000),
    }
    if usage.get("total_tokens") is not None:
        body["total_tokens"] = usage["total_tokens"]
    if error:
        body["error"] = error
    for pause in (1, 2):  # completion is idempotent: sending the same body again is a harmless 200
        try:
            return ace("POST", f"{turn_path}complete/", body)
        except urllib.error.HTTPError:
            raise  # the server answered (400, 409...): retrying would not help
        except OSError:  # unreachable, timed out: maybe stored, maybe not; retry
            time.sleep(pause)
    return ace("POST", f"{turn_path}complete/", body)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("prompt", help="The user's message")
    parser.add_argument("--system", default="You are a helpful assistant.", help="System prompt sent to the model")
    parser.add_argument("--ace-url", default=env("ACE_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--ace-key", default=env("ACE_API_KEY"), required=not env("ACE_API_KEY"))
    parser.add_argument("--session", default=env("ACE_SESSION"), help="Open ACE session id (default: a new one)")
    parser.add_argument("--user", default=env("USER", "example"), help="user_id of a new session")
    parser.add_argument("--base-url", default=env("OPENAI_BASE_URL", "https://api.openai.com/v1"))
    parser.add_argument("--api-key", default=env("OPENAI_API_KEY", ""))
    parser.add_argument("--model", default=env("OPENAI_MODEL", "gpt-4o-mini"))
    parser.add_argument("--checkpoint-chunks", type=int, default=20, help="Checkpoint every N chunks…")
    parser.add_argument("--checkpoint-seconds", type=float, default=1.0, help="…or every S seconds")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    turn = chat(parse_args(argv))
    answer = turn["assistant_message"]
    print(f"turn {turn['turn']}: {turn['status']}, {answer['total_tokens']} tokens", file=sys.stderr)
    return 1 if turn["status"] != "completed" else 0


if __name__ == "__main__":
    sys.exit(main())
