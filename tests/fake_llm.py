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
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LINE = re.compile(r"^\[(\d+)\] (\w+): (.*)$")
RECORD = re.compile(r"^\[([0-9a-f-]{36})\] \(([^)]*)\) (.*)$")


class FakeLLM:
    def __init__(self):
        self.requests: list[dict] = []
        self.script: list = []
        self.remember: dict[str, dict] = {}
        self.reply = self.default_reply
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

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

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                answer = fake.script.pop(0) if fake.script else fake.reply(body)
                if answer == "timeout":
                    time.sleep(3)
                    answer = {"memories": []}
                if isinstance(answer, int):
                    self.send_response(answer)
                    self.end_headers()
                    self.wfile.write(b'{"error": {"message": "scripted failure"}}')
                    return
                content = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
                payload = {
                    "id": "chatcmpl-fake",
                    "object": "chat.completion",
                    "model": body.get("model"),
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                    ],
                    "usage": {"prompt_tokens": len(json.dumps(body)) // 4, "completion_tokens": len(content) // 4},
                }
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
