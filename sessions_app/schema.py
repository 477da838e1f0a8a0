"""The message ledger's vocabulary, written once: the roles and what each is counted as, the token kinds, the
counters, and the fields a client may set on a message.

Plain Python, no Django: the settings and the log parsers read it before (or without) the models. The models,
the serializers, the importers, the accounting and the COPY path all take these names from here.
"""

# Each role of a message and the counter that counts it (../shared/CONTRACT.md "Statistics"; `system` is ours).
ROLE_COUNTERS = {
    "user": "message_user",
    "assistant": "message_assistant",
    "toolResult": "message_toolresult",
    "error": "message_error",
    "system": "message_system",
}
ROLES = tuple(ROLE_COUNTERS)

# The kinds of tokens a message reports and a request keeps the largest value of. Cache writes are counted by
# the lifetime of what they wrote too: `cache_creation_tokens` is always the sum of the 5-minute and the 1-hour
# writes (a write whose lifetime the source does not say is a 5-minute one, the API's default; accounting.py).
CACHE_WRITE_FIELDS = ("cache_creation_5m_tokens", "cache_creation_1h_tokens")
TOKEN_FIELDS = (
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    *CACHE_WRITE_FIELDS,
    "total_tokens",
)
# What a message's source reported the call cost (Claude Code's OTLP `cost_usd`, OpenClaw's `usage.cost.total`,
# OpenCode's `cost`, a client's `reported_cost_usd`), kept beside the cost Open ACE computes: in nano-dollars
# (exact integers, so the counters and roll-ups add them as they add tokens), and how many requests reported one
# (a comparison with the computed cost is like for like only where every request did). A request keeps the largest
# of each, as it does of tokens.
REPORTED_COST_FIELDS = ("reported_cost_nano_usd", "reported_cost_requests")
NANO_PER_USD = 10**9
MAX_REPORTED_COST_NANO_USD = 10**6 * NANO_PER_USD  # a million dollars for one call: more is no cost
# Long-context tiers are priced per request: a request whose prompt (input + cache reads + cache writes) is over
# this many tokens is a long-context request, and all its tokens are counted again in these fields, so that a price
# with a long-context tier (Anthropic's Sonnet 4 and 4.5 with the 1M context, Gemini 2.5 and 3 Pro: "prompts over
# 200K tokens") prices them at its higher rates, whatever else the day or session used (pricing.COST_TERMS).
LONG_CONTEXT_TOKENS = 200_000
LONG_CONTEXT_FIELDS = (
    "long_context_input_tokens",
    "long_context_output_tokens",
    "long_context_cache_read_tokens",
    "long_context_cache_creation_tokens",
    "long_context_cache_creation_1h_tokens",
)
# Every measure a message reports and a request keeps the largest value of: its tokens, those of a long-context
# request again, and its reported cost.
MEASURE_FIELDS = (*TOKEN_FIELDS, *LONG_CONTEXT_FIELDS, *REPORTED_COST_FIELDS)
# The most tokens one message or call can report: a thousand times the largest context window of any model.
# Bounded so that no sum of them (a session's, a day's, a tenant's, in bigint columns) can overflow: it would
# take nine billion messages at the bound.
MAX_TOKENS = 10**9
INT32_MAX = 2**31 - 1  # integer columns (a turn's max_tokens and api_calls, a record's strategy_version)

# What sessions, conversations and the roll-ups count, in their column order.
COUNTER_FIELDS = ("requests", "messages", *ROLE_COUNTERS.values(), *MEASURE_FIELDS)
# Sessions count their conversations too; a roll-up row also counts the sessions that started in it.
SESSION_COUNTER_FIELDS = (*COUNTER_FIELDS, "conversations")
ROLLUP_FIELDS = (*SESSION_COUNTER_FIELDS, "sessions")
# A session's counters in the contract's order (the stats API).
STATS_FIELDS = ("requests", "conversations", "messages", *ROLE_COUNTERS.values(), *TOKEN_FIELDS)

# The longest value each text field of a message holds (the model's max_length; the API refuses longer,
# the importers cut to it). `conversation` is a reference, not a column: our id or the client's own.
MESSAGE_TEXT_LIMITS = {
    "external_id": 255,
    "conversation": 255,
    "auth_type": 64,
    "request_id": 255,
    "model": 255,
    "tool_name": 255,
    "finish_reason": 32,
    "feishu_conversation_id": 255,
    "thinking_mode": 32,
}

# The fields of a message that its writer sets (the API's body, an importer's item, a chat turn's start);
# everything else on the row — seq, conversation, request, received_at — the message service works out.
MESSAGE_INPUT_FIELDS = (
    "role",
    "content",
    "thinking",
    "tool_calls",
    "tool_name",
    "auth_type",
    "request_id",
    "model",
    "finish_reason",
    *MEASURE_FIELDS,
    "elapsed_ms",
    "external_id",
    "feishu_conversation_id",
    "metadata",
    "attachments",
    "thinking_mode",
)
# What a chat turn's completion adds to its two messages (../shared/seeds/003).
MESSAGE_TURN_FIELDS = ("skill_names", "tool_names", "max_tokens", "temperature", "api_calls")

# The machine a session ran on (an upload's label from `ace_push`, else the importing host's name): a host
# name's characters, so that it is also a safe folder name for the uploads kept per machine. The push script
# (scripts/ace-push.py, standard library only) keeps a copy of these two rules; a test compares them.
MACHINE_MAX_LENGTH = 100
MACHINE_PATTERN = r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}"
