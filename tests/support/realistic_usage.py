"""Usage as a real team leaves it, for the tests that look at pages: two tenants, 16 months of sessions, long
project paths and session names (English and Chinese), long user ids and machine names, a dozen models with
cache reads in the millions, and telemetry of those sessions. Written through the same services as the API.
"""

from __future__ import annotations

import uuid
from datetime import timedelta

from django.utils import timezone

from ingest_app.models import TelemetryRecord
from sessions_app.models import Tenant
from sessions_app.services.apikeys import tenant_get_or_create
from sessions_app.services.messages import messages_append
from sessions_app.services.sessions import session_create, session_end

SECOND_TENANT = "上海研发中心 · payments-platform-and-settlement-engineering"
MONTHS = 16
PROJECTS = (
    "/home/zhang.wei/work/company-monorepo/services/payments-gateway/internal/reconciliation/settlement-batch-processor",
    "/home/li.na/projects/数据平台/实时计算/flink-jobs/user-behaviour-aggregation-pipeline-v2/src/main/scala/jobs/daily",
    "/Users/wang.fang/Documents/客户端/ios-app/Modules/Checkout/Sources/CheckoutFeature/PaymentSheet/ViewModels",
    "/srv/build/agents/ci-runner-07/workspace/company-monorepo-release-2026.11/tools/migration-assistant",
)
USERS = ("zhang.wei@company-monorepo.example.com", "李娜", "wang.fang.contractor@partner-agency.example.org", "ci-bot")
MACHINES = (
    "zhang-wei-macbook-pro-m3-max.corp.company-monorepo.internal",
    "li-na-thinkpad-x1-carbon-gen12.shanghai.office.example.com",
    "ci-runner-07.build-cluster-b.eu-central-1.compute.internal",
)
NAMES = (
    "重构支付网关的对账模块并补充单元测试：处理跨时区结算批次的边界情况与重复回调的幂等性",
    "Investigate flaky integration tests in payments-gateway settlement batch processor after the Go 1.23 upgrade",
    "为 Flink 作业增加按用户行为聚合的滑动窗口，并修复 checkpoint 超时导致的数据重复问题",
    "Migrate the iOS checkout PaymentSheet view models to the new Observation framework and async/await APIs",
    "Write the release notes for 2026.11 from the merged pull requests, grouped by service and customer impact",
    "排查线上 P1 告警：结算服务在月末高峰期间数据库连接池耗尽",
)
TOOLS = ("claude-code", "qwen-code", "codex", "gemini-cli", "opencode", "openclaw")
# (model, input, output, cache read, cache write) of one request: cache reads dwarf the rest, as in real logs.
MODELS = (
    ("claude-sonnet-4-5-20250929", 4_210, 1_830, 186_400, 12_300),
    ("claude-opus-4-1-20250805", 3_050, 2_410, 241_700, 18_900),
    ("claude-3-5-haiku-20241022", 1_200, 380, 42_000, 3_100),
    ("qwen3-coder-plus", 9_800, 1_150, 120_500, 0),
    ("qwen3-max-preview", 6_400, 900, 80_200, 0),
    ("gpt-5-codex", 7_700, 2_900, 155_000, 0),
    ("gpt-4.1-mini", 2_100, 640, 18_000, 0),
    ("gemini-2.5-pro", 11_300, 1_700, 96_000, 0),
    ("deepseek-v3.1", 5_500, 1_100, 64_000, 0),
    ("kimi-k2-turbo-preview", 4_800, 1_250, 0, 0),
    ("glm-4.6", 3_900, 870, 22_000, 0),
    ("internal-finetune-payments-assistant-2026-07-checkpoint-4800", 2_600, 410, 0, 0),
)


def realistic_usage_create(*, tenant: Tenant) -> Tenant:
    """Sessions of `tenant` and of a second tenant over the last 16 months. Returns the second tenant."""
    other = tenant_get_or_create(name=SECOND_TENANT)
    now = timezone.now().replace(minute=0, second=0, microsecond=0)
    count = 0
    for month in range(MONTHS):
        for owner in (tenant, other):
            for i in range(2):
                started = now - timedelta(days=30 * month + 3 * i + (owner is other), hours=5 * i + 1)
                _session(owner, count, started, ended=month > 0)
                count += 1
    return other


def _session(tenant: Tenant, n: int, started, *, ended: bool) -> None:
    name = NAMES[n % len(NAMES)]
    if n % 5 == 4:
        name = f"{name} — {PROJECTS[n % len(PROJECTS)]}"[:255]
    session = session_create(
        tenant=tenant,
        name=name,
        tool=TOOLS[n % len(TOOLS)],
        user_id=USERS[n % len(USERS)],
        app="company-monorepo-developer-productivity-agent-fleet",
        project=PROJECTS[(n + n // 2) % len(PROJECTS)],
        machine=MACHINES[n % len(MACHINES)],
        agent_session_id=str(uuid.uuid4()),
        started_at=started,
    )
    items = []
    for turn in range(3):
        at = started + timedelta(minutes=7 * turn)
        items.append({"role": "user", "content": f"{name}：第 {turn + 1} 步", "created_at": at})
        for call in range(2):
            model, input_tokens, output_tokens, cache_read, cache_write = MODELS[(n + turn * 2 + call) % len(MODELS)]
            scale = 1 + (n % 7) + turn
            items.append(
                {
                    "role": "assistant",
                    "content": "Running the settlement batch processor's tests with -race and -count=3 …",
                    "request_id": f"req_{n:04d}_{turn}_{call}_{uuid.uuid4().hex[:12]}",
                    "model": model,
                    "tool_calls": [{"id": f"toolu_{n}_{turn}_{call}", "name": "Bash", "arguments": {"cmd": "go test"}}],
                    "input_tokens": input_tokens * scale,
                    "output_tokens": output_tokens * scale,
                    "cache_read_tokens": cache_read * scale,
                    "cache_creation_tokens": cache_write * scale,
                    "created_at": at + timedelta(seconds=20 * call + 1),
                }
            )
            items.append(
                {
                    "role": "toolResult",
                    "content": "ok  \tcompany-monorepo/services/payments-gateway/internal/reconciliation\t41.237s",
                    "tool_name": "Bash",
                    "created_at": at + timedelta(seconds=20 * call + 9),
                }
            )
    messages_append(tenant=tenant, session_id=session.pk, items=items)
    if ended:
        session_end(tenant=tenant, session_id=session.pk, ended_at=started + timedelta(minutes=25))
    if n % 4 == 0:
        _telemetry(tenant, session, started)


def _telemetry(tenant: Tenant, session, started) -> None:
    """What Claude Code's OpenTelemetry exporter sends beside the messages: tool results and decisions, errors."""
    events = (
        ("claude_code.tool_result", {"tool_name": "mcp__company-monorepo-jira__search_issues", "success": "true"}),
        ("claude_code.tool_decision", {"tool_name": "Bash", "decision": "accept", "source": "config"}),
        ("claude_code.api_error", {"model": "claude-sonnet-4-5-20250929", "status_code": "529", "error": "Overloaded"}),
    )
    TelemetryRecord.objects.bulk_create(
        TelemetryRecord(
            tenant=tenant,
            session=session,
            kind="event",
            name=name,
            time=started + timedelta(minutes=i),
            key=uuid.uuid4().hex,
            attributes={**attributes, "session.id": str(session.pk)},
            resource={"service.name": "claude-code", "host.name": session.machine},
        )
        for i, (name, attributes) in enumerate(events)
    )
