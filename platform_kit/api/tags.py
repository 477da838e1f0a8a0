"""The API docs' groups: every operation under the tag of its area (Sessions, Messages, …), each tag described.

drf-spectacular tags an operation with the first segment of its path after the common prefix, which for this API
is "v1" for all of them. `tag_operations` (a postprocessing hook) tags each by its path instead, from `AREAS`:
the first pattern that matches the path after `/api/v1/` wins. A new endpoint belongs in one of them
(tests/test_api_schema.py fails on an operation left as "v1")."""

import re

# (tag, description, patterns of the path after /api/v1/), in the order the docs show them.
AREAS = (
    ("Sessions", "A tool-level session (a chat window, one run of a coding agent): create, find, change, end.",
     (r"sessions/$", r"sessions/\{id\}/$", r"sessions/\{id\}/end/$")),
    ("Messages", "The atomic interactions of a session, appended in batches (idempotent by `external_id`), and "
     "the audit search across sessions.", (r"sessions/\{id\}/messages/", r"messages/")),
    ("Conversations", "One round each, from a user's message to the AI's final answer, with its totals.",
     (r"sessions/\{id\}/conversations/", r"conversations/")),
    ("Turns", "The streaming persistence of a chat app's turn: start, checkpoint, complete.",
     (r"sessions/\{id\}/turns/", r"turns/")),
    ("State", "A session's versioned key-value snapshot (`If-Match` for safe concurrent writes) and its history.",
     (r"sessions/\{id\}/state/",)),
    ("Statistics", "Requests, conversations, messages and tokens of a session, or grouped across sessions.",
     (r"sessions/\{id\}/stats/", r"stats/")),
    ("Records", "Long-term memories distilled from messages, with their revisions.",
     (r"records/\{id\}/", r"records/$")),
    ("Recall", "Hybrid (vector and keyword) search of records and messages, a session's context block to inject, "
     "and how far the memory's indexing has got.", (r"recall/", r"sessions/\{id\}/context/", r"memory/")),
    ("Strategies", "Versioned rule sets that turn messages into records, and their runs.",
     (r"strategies/", r"strategy-runs/")),
    ("Budgets", "Limits on tokens or cost per period, with alert thresholds and hard limits.", (r"budgets/",)),
    ("Plan windows", "Coding-agent plans (Pro, Max 5×, Max 20×, custom): a user's 5-hour blocks as ccusage computes "
     "them and their weeks, with burn rate, projection and the percent of the plan used.", (r"plans/", r"usage/")),
    ("Webhooks", "Signed HTTP callbacks on events, their deliveries and redeliveries.",
     (r"webhooks/", r"webhook-deliveries/")),
    ("Imports", "Coding agents' log files uploaded and imported, and the files stored.", (r"imports/",)),
    ("Portability", "A tenant's data exported whole, and records exported and imported as JSON.",
     (r"exports/", r"records/export/", r"records/import/")),
    ("Users", "Erasing everything held about one user_id.", (r"users/",)),
    ("Retention", "How long messages, telemetry and records are kept, previewed and applied.",
     (r"retention/", r"record-ttls/")),
    ("LLM gateway", "Upstream LLM providers the gateway forwards calls to.", (r"providers/",)),
)  # fmt: skip
TAGS = [{"name": name, "description": description} for name, description, _ in AREAS]
PREFIX = "/api/v1/"
_PATTERNS = [(re.compile(pattern), name) for name, _, patterns in AREAS for pattern in patterns]


def tag_of(path: str) -> str | None:
    rest = path.removeprefix(PREFIX)
    matches = [(match.end(), name) for pattern, name in _PATTERNS if (match := pattern.match(rest))]
    return max(matches)[1] if matches else None  # the longest match: records/export/ is not records/


def tag_operations(result, generator, request, public):
    """drf-spectacular postprocessing hook: each operation tagged by its area; the areas without an operation in
    this schema (an app left out) are not listed."""
    used = set()
    for path, operations in result.get("paths", {}).items():
        tag = tag_of(path) if path.startswith(PREFIX) else None
        for operation in operations.values():
            if isinstance(operation, dict) and "tags" in operation:
                if tag is not None:
                    operation["tags"] = [tag]
                used.update(operation["tags"])
    result["tags"] = [tag for tag in result.get("tags", []) if tag["name"] in used]
    return result
