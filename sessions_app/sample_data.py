"""Sample sessions a newcomer can click through in the admin; written through the same services as the API."""

from datetime import timedelta

from django.utils import timezone

from sessions_app.models import Tenant
from sessions_app.services.budgets import budget_create
from sessions_app.services.messages import messages_append
from sessions_app.services.sessions import session_create, session_end
from sessions_app.services.state import state_merge
from sessions_app.services.turns import turn_checkpoint, turn_complete, turn_start, turn_system_ready


def _at(base, minutes):
    return base + timedelta(minutes=minutes)


def sample_data_create(*, tenant: Tenant) -> int:
    """Create the sample sessions in `tenant`. Returns how many sessions were made."""
    now = timezone.now().replace(second=0, microsecond=0)

    # 1. The seed's worked example: 4 requests, 6 messages (2 user + 3 assistant + 1 toolResult), 2 conversations.
    t = now - timedelta(days=2, hours=3)
    weather = session_create(
        tenant=tenant,
        name="天气查询 (the seed's counting example)",
        tool="qwen-code",
        user_id="xiaoming",
        app="demo",
        agent_session_id="qwen-demo-0001",
        started_at=t,
    )
    messages_append(
        tenant=tenant,
        session_id=weather.pk,
        items=[
            {"role": "user", "content": "查看天气", "created_at": _at(t, 0)},
            {
                "role": "assistant",
                "content": "让我查一下...",
                "auth_type": "qwen-oauth",
                "model": "qwen3-coder-plus",
                "tool_calls": [{"id": "call_1", "name": "get_weather", "arguments": {"city": "杭州"}}],
                "input_tokens": 812,
                "output_tokens": 36,
                "created_at": _at(t, 0),
            },
            {
                "role": "toolResult",
                "content": '{"city": "杭州", "weather": "晴", "temp_c": 21}',
                "tool_name": "get_weather",
                "auth_type": "qwen-oauth",
                "model": "qwen3-coder-plus",
                "created_at": _at(t, 1),
            },
            {
                "role": "assistant",
                "content": "今天是晴天，气温 21°C。",
                "auth_type": "qwen-oauth",
                "model": "qwen3-coder-plus",
                "input_tokens": 905,
                "output_tokens": 18,
                "finish_reason": "stop",
                "created_at": _at(t, 1),
            },
            {"role": "user", "content": "明天呢？", "created_at": _at(t, 3)},
            {
                "role": "assistant",
                "content": "明天多云转小雨，记得带伞。",
                "auth_type": "qwen-oauth",
                "model": "qwen3-coder-plus",
                "input_tokens": 947,
                "output_tokens": 22,
                "finish_reason": "stop",
                "created_at": _at(t, 3),
            },
        ],
    )
    session_end(tenant=tenant, session_id=weather.pk, ended_at=_at(t, 5))

    # 2. The memory document's travel plan, with state kept across versions.
    t = now - timedelta(days=1, hours=5)
    trip = session_create(
        tenant=tenant,
        name="杭州三日游计划",
        tool="chat",
        user_id="xiaoming",
        app="travel-assistant",
        started_at=t,
        metadata={"channel": "web"},
    )
    messages_append(
        tenant=tenant,
        session_id=trip.pk,
        items=[
            {"role": "user", "content": "帮我规划一下杭州三天的行程。", "created_at": _at(t, 0)},
            {
                "role": "assistant",
                "content": "好的，请问您的预算和偏好是什么？",
                "auth_type": "api-key",
                "model": "qwen-max",
                "input_tokens": 320,
                "output_tokens": 24,
                "elapsed_ms": 900,
                "created_at": _at(t, 0),
            },
            {"role": "user", "content": "预算5000元，喜欢人文历史，不喜欢拥挤的景点。", "created_at": _at(t, 2)},
            {
                "role": "assistant",
                "content": "",
                "auth_type": "api-key",
                "model": "qwen-max",
                "input_tokens": 410,
                "output_tokens": 40,
                "finish_reason": "tool_calls",
                "created_at": _at(t, 2),
                "tool_calls": [
                    {
                        "id": "call_7",
                        "name": "plan_itinerary",
                        "arguments": {"city": "杭州", "days": 3, "budget": 5000, "interests": ["人文历史"]},
                    }
                ],
            },
            {
                "role": "toolResult",
                "content": "Day 1: 西湖、岳王庙; Day 2: 浙江省博物馆、灵隐寺; Day 3: 良渚古城遗址",
                "tool_name": "plan_itinerary",
                "created_at": _at(t, 3),
            },
            {
                "role": "assistant",
                "content": "这是一个以人文历史为主、避开高峰的三日行程：第一天西湖与岳王庙……",
                "auth_type": "api-key",
                "model": "qwen-max",
                "input_tokens": 690,
                "output_tokens": 310,
                "finish_reason": "stop",
                "elapsed_ms": 4200,
                "created_at": _at(t, 3),
            },
        ],
    )
    state_merge(tenant=tenant, session_id=trip.pk, patch={"budget_cny": 5000})
    state_merge(tenant=tenant, session_id=trip.pk, patch={"preferences": ["人文历史"], "avoid": ["拥挤景点"]})
    state_merge(
        tenant=tenant,
        session_id=trip.pk,
        patch={"draft_itinerary": ["西湖", "浙江省博物馆", "良渚古城遗址"], "tool_handle": "plan_itinerary#call_7"},
    )

    # 3. A coding agent: one response split over lines sharing request_id, with growing usage.
    t = now - timedelta(hours=6)
    code = session_create(
        tenant=tenant,
        name="Refactor the auth module",
        tool="claude-code",
        user_id="alice",
        app="backend",
        agent_session_id="7f9c0a2e-claude-demo",
        metadata={"cwd": "/home/alice/backend", "git_branch": "refactor-auth"},
        started_at=t,
    )
    messages_append(
        tenant=tenant,
        session_id=code.pk,
        items=[
            {
                "role": "user",
                "content": "Split auth.py into tokens.py and sessions.py; keep the tests green.",
                "external_id": "u-1",
                "created_at": _at(t, 0),
            },
            {
                "role": "assistant",
                "content": "I'll read auth.py first.",
                "request_id": "req_01",
                "model": "claude-sonnet-4-5",
                "input_tokens": 4,
                "output_tokens": 1,
                "cache_read_tokens": 18000,
                "cache_creation_tokens": 2400,
                "external_id": "a-1a",
                "created_at": _at(t, 0),
            },
            {
                "role": "assistant",
                "content": "",
                "request_id": "req_01",
                "model": "claude-sonnet-4-5",
                "tool_calls": [{"id": "toolu_1", "name": "Read", "arguments": {"file_path": "backend/auth.py"}}],
                "input_tokens": 4,
                "output_tokens": 96,
                "cache_read_tokens": 18000,
                "cache_creation_tokens": 2400,
                "finish_reason": "tool_use",
                "external_id": "a-1b",
                "created_at": _at(t, 0),
            },
            {
                "role": "toolResult",
                "content": "def issue_token(user): ...\ndef check_session(request): ...",
                "tool_name": "Read",
                "external_id": "t-1",
                "created_at": _at(t, 1),
            },
            {
                "role": "assistant",
                "content": "Done: tokens.py and sessions.py created, imports updated, 42 tests pass.",
                "request_id": "req_02",
                "model": "claude-sonnet-4-5",
                "input_tokens": 6,
                "output_tokens": 412,
                "cache_read_tokens": 20400,
                "cache_creation_tokens": 900,
                "finish_reason": "end_turn",
                "external_id": "a-2",
                "created_at": _at(t, 4),
            },
            {"role": "user", "content": "Now run the linter.", "external_id": "u-2", "created_at": _at(t, 6)},
            {
                "role": "error",
                "content": "API Error: 529 overloaded",
                "request_id": "req_03",
                "model": "claude-sonnet-4-5",
                "external_id": "e-1",
                "created_at": _at(t, 6),
            },
            {
                "role": "assistant",
                "content": "ruff reports no issues.",
                "request_id": "req_04",
                "model": "claude-sonnet-4-5",
                "input_tokens": 8,
                "output_tokens": 23,
                "cache_read_tokens": 21300,
                "finish_reason": "end_turn",
                "external_id": "a-3",
                "created_at": _at(t, 7),
            },
        ],
    )
    session_end(tenant=tenant, session_id=code.pk, ended_at=_at(t, 8))

    # 4. A chat bot in Feishu (OpenClaw): conversations carry the Feishu conversation id.
    t = now - timedelta(minutes=40)
    claw = session_create(
        tenant=tenant,
        name="Team assistant in Feishu",
        tool="openclaw",
        user_id="bob",
        app="feishu-bot",
        agent_session_id="openclaw-main-42",
        started_at=t,
    )
    messages_append(
        tenant=tenant,
        session_id=claw.pk,
        items=[
            {
                "role": "user",
                "content": "总结一下今天的站会",
                "feishu_conversation_id": "oc_5ad11d72b830411d72b836c20",
                "created_at": _at(t, 0),
            },
            {
                "role": "assistant",
                "content": "今天站会：1) 登录模块重构完成；2) 周五发布；3) 需要补充回归测试。",
                "auth_type": "api-key",
                "model": "gpt-4.1",
                "input_tokens": 1500,
                "output_tokens": 90,
                "cache_read_tokens": 1024,
                "created_at": _at(t, 1),
            },
        ],
    )

    # 5. A chat product streaming its answers: turns written field by field (../shared/seeds/003).
    t = now - timedelta(minutes=20)
    chat = session_create(
        tenant=tenant, name="南京文化之旅", tool="chat", user_id="xiaoming", app="travel-assistant", started_at=t
    )
    turn = turn_start(
        tenant=tenant, session_id=chat.pk, content="帮我安排南京两天的文化行程", thinking_mode="auto"
    ).turn
    turn_system_ready(
        tenant=tenant,
        turn_id=turn.pk,
        system_prompt=(
            "你是旅行助手。\n[skills] itinerary\n"
            "[memory] 偏好博物馆（来自「杭州三日游计划」）；不喜欢拥挤的景点（来自「周末安排」）"
        ),
    )
    turn_checkpoint(tenant=tenant, turn_id=turn.pk, content="第一天：南京博物院，", thinking="用户偏好博物馆")
    turn_complete(
        tenant=tenant,
        turn_id=turn.pk,
        data={
            "content": "第一天：南京博物院、六朝博物馆；第二天：明孝陵（工作日上午人少）、先锋书店。",
            "thinking": "用户偏好博物馆、避开拥挤：选工作日上午，查询开放时间。",
            "tool_calls": [
                {
                    "id": "call_1",
                    "name": "opening_hours",
                    "arguments": {"places": ["南京博物院", "明孝陵"], "api_key": "sk-demo-not-stored"},
                    "result": {"南京博物院": "9:00-17:00，周一闭馆", "明孝陵": "6:30-18:00"},
                }
            ],
            "model": "qwen-max",
            "max_tokens": 2048,
            "temperature": 0.7,
            "finish_reason": "stop",
            "input_tokens": 2310,
            "output_tokens": 164,
            "elapsed_ms": 5200,
            "requests": 2,
            "skill_names": ["itinerary"],
            "available_tool_names": ["opening_hours", "weather"],
        },
    )
    failed = turn_start(tenant=tenant, session_id=chat.pk, content="再推荐几家餐厅").turn
    turn_checkpoint(tenant=tenant, turn_id=failed.pk, content="可以试试")
    turn_complete(
        tenant=tenant,
        turn_id=failed.pk,
        data={
            "content": "可以试试",
            "model": "qwen-max",
            "finish_reason": "error",
            "error": "upstream timeout after 30 s",
            "input_tokens": 2400,
            "output_tokens": 3,
            "elapsed_ms": 30000,
        },
    )
    turn_start(tenant=tenant, session_id=chat.pk, content="明天天气怎么样？")  # still streaming

    # 6. Budgets (docs/budgets.md): where the tenant and one user stand, on the usage dashboard.
    budget_create(tenant=tenant, actor="sample data", name="Team monthly tokens", limit=5_000_000, period="month")
    budget_create(
        tenant=tenant,
        actor="sample data",
        name="xiaoming's 5-hour coding window",
        scope="user_id",
        scope_value="xiaoming",
        limit=200_000,
        period="rolling",
        window_hours=5,
    )
    return 5
