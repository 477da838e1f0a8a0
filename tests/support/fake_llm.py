"""A small fake of an OpenAI-compatible chat-completions endpoint, served on loopback for the tests.

`FakeLLM.reply` decides each answer from the request body: by default it reads the "New messages:" block of
the prompt and remembers every user line that contains one of `FakeLLM.remember` (a substring → memory
spec mapping; a spec's optional "when" must occur in the prompt, to answer one strategy only), the way a
model following the strategy prompt would. Tests can replace `reply` with any
callable, or queue raw answers in `FakeLLM.script` (a string body, a dict body, an int HTTP status, or
"timeout").
"""

from __future__ import annotations

import json
import re
import threading

from tests.support.http import FakeServer, Request

LINE = re.compile(r"^\[(\d+)\] (\w+): (.*)$")
RECORD = re.compile(r"^\[([0-9a-f-]{36})\] \(([^)]*)\) (.*)$")


class FakeLLM(FakeServer):
    def __init__(self):
        self.script: list = []
        self.remember: dict[str, dict] = {}
        self.reply = self.default_reply
        self.closing = threading.Event()
        super().__init__(self.complete)
        self.base_url = f"{self.url}/v1"

    @property
    def requests(self) -> list[dict]:
        """The body of each request received."""
        return [request.json() for request in self.received]

    def default_reply(self, body: dict) -> dict:
        prompt = body["messages"][1]["content"]
        messages = prompt.split("New messages:", 1)[1]
        existing = prompt.split("Existing memories of this user:", 1)[1].split("New messages:", 1)[0]
        records = [RECORD.match(line.strip()) for line in existing.splitlines()]
        records = [m.groups() for m in records if m]
        memories = []
        for line in messages.strip().splitlines():
            match = LINE.match(line.strip())
            if not match or match.group(2) != "user":
                continue
            for needle, spec in self.remember.items():
                if spec.get("when", "") not in prompt:  # e.g. only for the profile strategy's prompt
                    continue
                if needle in match.group(3):
                    about = spec["about"]
                    invalidates = [  # a different value about the same thing is contradicted; the same one is not
                        rid
                        for rid, slot, text in records
                        if slot == about and spec.get("exclusive") and text != spec["content"]
                    ]
                    memories.append(
                        {
                            "content": spec["content"],
                            "about": about,
                            "value": spec.get("value", spec["content"]),
                            "exclusive": spec.get("exclusive", False),
                            "confidence": 0.9,
                            "source_seqs": [int(match.group(1))],
                            "fields": [{"name": "kind", "value": spec.get("kind", "preference")}],
                            "invalidates": invalidates,
                            "reason": f"the user said {needle!r}",
                        }
                    )
        return {"memories": memories}

    def complete(self, request: Request):
        body = request.json()
        answer = self.script.pop(0) if self.script else self.reply(body)
        if answer == "timeout":
            self.closing.wait(3)  # longer than the client waits (its ACE_LLM_TIMEOUT)
            answer = {"memories": []}
        if isinstance(answer, int):
            return answer, {"error": {"message": "scripted failure"}}
        content = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        payload = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "model": body.get("model"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": len(content) // 4},
        }
        return 200, payload

    def close(self):
        self.closing.set()
        super().close()
