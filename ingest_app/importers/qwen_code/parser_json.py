"""Older Qwen Code chats: `~/.qwen/tmp/<project hash>/chats/session-<time>-<id>.json`.

Before its JSONL ChatRecords (`qwen_code`), Qwen Code, a fork of Gemini CLI, kept Gemini CLI's
ConversationRecord documents, rewritten whole as the chat grew: the same session fields and MessageRecords,
with `qwen` for the model's records (`type: 'user' | 'qwen'`, `tokens` {input, output, cached, thoughts,
tool, total}, as Qwen Code's own session reader in its VS Code companion reads them). So they are read as
Gemini CLI's JSON form is (`gemini_cli`), under the tool "qwen-code". See docs/accounting.md, "Qwen Code".
"""

from __future__ import annotations

from ingest_app.importers.gemini_cli.parser import GeminiCliParser


class QwenCodeJsonParser(GeminiCliParser):
    tool = "qwen-code"
    model_types = frozenset({"qwen", "gemini"})  # `gemini` in builds from before the rename
