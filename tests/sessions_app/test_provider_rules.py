"""Every provider's rule, with a worked example each (issue 32): DeepSeek, Kimi, GLM, MiniMax and Qwen, from the
usage their tools log to the cost the stats API shows, at the shipped prices of the day the usage happened.

DeepSeek, Kimi and GLM answer in OpenAI's shape, the cached part inside `prompt_tokens`; the tools take it out of
input (Qwen Code's converter into Gemini's `cachedContentTokenCount`, OpenCode's `cache.read`), so input is the cache
miss and a cache read the cache hit. Their Anthropic-compatible endpoints (Claude Code) report Anthropic's shape, a
cache write being prompt tokens billed at input. MiniMax prices its cache writes. Each cost below is worked by hand
from the list prices in USD per million tokens (sessions_app migration 0030, docs/accounting.md)."""

from decimal import Decimal

import pytest

from ingest_app.importers.opencode.parser import normalise_tokens
from ingest_app.importers.qwen_code.parser import normalise_usage
from sessions_app.pricing import PriceBook
from tests.support.factories import SessionFactory

pytestmark = pytest.mark.django_db
PRICED = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")


def calls(day: str, model: str, count: int, tokens: dict) -> list[dict]:
    """`count` requests of `model` on `day`, each with `tokens` (Open ACE's token kinds)."""
    fields = {name: tokens[name] for name in PRICED if tokens.get(name) is not None}
    return [
        {"role": "assistant", "content": f"{model} {i}", "request_id": f"{model}-{day}-{i}", "model": model,
         "created_at": f"{day}T{9 + i % 10:02d}:00:00Z", **fields}
        for i in range(count)
    ]


def qwen_code_usage(prompt: int, cached: int, completion: int, reasoning: int = 0) -> dict:
    """An OpenAI-compatible `usage` as Qwen Code logs it (converter.ts: promptTokenCount = prompt_tokens,
    cachedContentTokenCount = prompt_tokens_details.cached_tokens or a top-level cached_tokens, candidatesTokenCount
    = completion_tokens with the reasoning inside, thoughtsTokenCount = reasoning_tokens)."""
    return {"promptTokenCount": prompt, "cachedContentTokenCount": cached, "candidatesTokenCount": completion,
            "thoughtsTokenCount": reasoning, "totalTokenCount": prompt + completion}


def post(api, tool: str, items: list[dict]) -> None:
    session = SessionFactory(tenant=api.tenant, tool=tool, user_id="alice")
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json")
    assert response.status_code == 201, response.content


def cost(api, query: str) -> dict[str, Decimal]:
    return {row["key"]: Decimal(row["cost_usd"]) for row in api.get(f"/api/v1/stats/{query}").json()["results"]}


def test_deepseek_the_cache_hit_is_taken_out_of_the_prompt_and_each_day_has_its_price(api):
    # A DeepSeek response: prompt_tokens 100,000 of which prompt_cache_hit_tokens (= prompt_tokens_details.
    # cached_tokens) 80,000; completion_tokens 5,000 with 3,000 reasoning_tokens inside.
    tokens = normalise_usage(qwen_code_usage(100_000, 80_000, 5_000, reasoning=3_000))
    assert (tokens["input_tokens"], tokens["cache_read_tokens"], tokens["output_tokens"]) == (20_000, 80_000, 5_000)
    # OpenCode logs the same call with input already without the cache and (AI SDK v6) the reasoning apart.
    opencode = normalise_tokens({"input": 20_000, "output": 2_000, "reasoning": 3_000,
                                 "cache": {"read": 80_000, "write": 0}, "total": 105_000})
    assert {name: opencode[name] for name in tokens if name != "cache_creation_tokens"} == tokens

    # Ten such requests a day: 200,000 cache misses, 800,000 cache hits, 50,000 output.
    post(api, "qwen-code", [*calls("2025-08-01", "deepseek-reasoner", 10, tokens),
                            *calls("2025-10-01", "deepseek-reasoner", 10, tokens),
                            *calls("2026-05-01", "deepseek-reasoner", 10, tokens)])
    days = cost(api, "?group_by=day&model=deepseek-reasoner")
    # R1 (undated, until 2025-09-05): 0.2 × $0.55 + 0.8 × $0.14 + 0.05 × $2.19 = $0.11 + $0.112 + $0.1095.
    assert days["2025-08-01"] == Decimal("0.3315")
    # V3.2 (from 2025-09-29): 0.2 × $0.28 + 0.8 × $0.028 + 0.05 × $0.42 = $0.056 + $0.0224 + $0.021. Had the hit
    # stayed in input it would be 1.0 × $0.28 + 0.05 × $0.42 = $0.301: three times as much.
    assert days["2025-10-01"] == Decimal("0.0994")
    # V4 Flash (from 2026-04-24): 0.2 × $0.14 + 0.8 × $0.0028 + 0.05 × $0.28 = $0.028 + $0.00224 + $0.014.
    assert days["2026-05-01"] == Decimal("0.04424")


def test_kimi_a_top_level_cached_tokens_is_the_cache_hit(api):
    # Kimi K2 0905: prompt_tokens 120,000 with a top-level cached_tokens 100,000; completion_tokens 4,000.
    tokens = normalise_usage(qwen_code_usage(120_000, 100_000, 4_000))
    assert (tokens["input_tokens"], tokens["cache_read_tokens"], tokens["output_tokens"]) == (20_000, 100_000, 4_000)
    post(api, "qwen-code", calls("2026-03-02", "kimi-k2-0905-preview", 10, tokens))
    # 0.2M cache misses × $0.60 + 1.0M cache hits × $0.15 + 0.04M output × $2.50 = $0.12 + $0.15 + $0.10.
    assert cost(api, "?group_by=model")["kimi-k2-0905-preview"] == Decimal("0.37")


def test_glm_through_claude_code_cache_writes_are_prompt_tokens_at_the_input_price(api):
    # Z.ai's Anthropic-compatible endpoint (Claude Code on GLM): input without the cache, reads and writes apart.
    tokens = dict(zip(PRICED, (5_000, 3_000, 95_000, 2_000), strict=True))  # input, output, cache read, cache write
    post(api, "claude-code", calls("2026-03-02", "glm-4.6", 10, tokens))
    # 0.05M input × $0.60 + 0.95M reads × $0.11 + 0.02M writes × $0.60 (no write charge: input) + 0.03M × $2.20
    # = $0.03 + $0.1045 + $0.012 + $0.066.
    assert cost(api, "?group_by=model")["glm-4.6"] == Decimal("0.2125")


def test_minimax_prices_its_cache_writes_and_m1_long_prompts_at_its_tier(api):
    tokens = dict(zip(PRICED, (4_000, 2_000, 60_000, 6_000), strict=True))  # input, output, cache read, cache write
    post(api, "claude-code", [
        *calls("2026-03-02", "MiniMax-M2", 10, tokens),
        # MiniMax-M1, one request of 250,000 input tokens: over 200K, so all of it at the long-context rates.
        {"role": "assistant", "content": "m1", "request_id": "m1", "model": "MiniMax-M1",
         "created_at": "2026-03-02T12:00:00Z", "input_tokens": 250_000, "output_tokens": 1_000},
    ])
    by_model = cost(api, "?group_by=model")
    # 0.04M input × $0.30 + 0.6M reads × $0.03 + 0.06M writes × $0.375 + 0.02M output × $1.20
    # = $0.012 + $0.018 + $0.0225 + $0.024.
    assert by_model["MiniMax-M2"] == Decimal("0.0765")
    # 0.25M × $1.30 + 0.001M × $2.20 = $0.325 + $0.0022 (at the standard $0.40 input it would be $0.1022).
    assert by_model["MiniMax-M1"] == Decimal("0.3272")


def test_qwen_through_qwen_code_is_priced_at_its_first_band(api):
    # qwen3-coder-plus on DashScope: prompt 100,000 with 60,000 implicit cache hits, 2,000 output.
    tokens = normalise_usage(qwen_code_usage(100_000, 60_000, 2_000))
    post(api, "qwen-code", calls("2026-03-02", "qwen3-coder-plus", 10, tokens))
    # 0.4M × $1 + 0.6M × $0.20 + 0.02M × $5 = $0.40 + $0.12 + $0.10. A 100K prompt is in DashScope's 32K-128K band
    # ($1.80 / $9): billed about $0.72 + $0.22 + $0.18, which the one 200K tier here cannot price.
    assert cost(api, "?group_by=model")["qwen3-coder-plus"] == Decimal("0.62")


@pytest.mark.parametrize(
    ("reported", "priced_as"),
    [
        ("deepseek/deepseek-chat", "deepseek-chat"),  # OpenCode's and OpenRouter's provider/model ids
        ("deepseek-v4-flash", "deepseek-v4-flash*"),
        ("moonshotai/kimi-k2", "kimi-k2"),
        ("kimi-k2-thinking-turbo", "kimi-k2-thinking-turbo"),
        ("z-ai/glm-4.6", "glm-4.6"),
        ("glm-4.5-air", "glm-4.5-air"),  # not glm-4.5's price
        ("MiniMax-M2.7-highspeed", "minimax-m2.7-highspeed*"),  # the longest prefix, not minimax-m2.7's
        ("minimax/minimax-m2.7", "minimax-m2.7*"),
        ("qwen3.6-plus-2026-04-02", "qwen3.6-plus*"),
        ("deepseek-chat-v3.1", None),  # OpenRouter's own listing, not DeepSeek's deepseek-chat
        ("kimi-k2.5-free", None),  # OpenCode Zen's free variant
    ],
)
def test_how_the_tools_model_names_find_their_price(reported, priced_as):
    price = PriceBook.load().price_for(reported)
    assert (price.pattern if price else None) == priced_as
