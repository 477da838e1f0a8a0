"""The mixed traffic of bench/load.py, as locust users (run by bench/load.py; not on its own).

Each user is one client of a team's deployment: a chat app streaming answers (turns), an agent pushing its
transcript (message batches), a memory lookup before a prompt (recall and context), a usage report (stats) and
an auditor on the usage dashboard. The mix and the data come from environment variables that bench/load.py sets:

- ACE_LOAD_KEY: a Bearer key of the bench tenant; ACE_LOAD_SESSIONS: comma-separated session ids to write to;
- ACE_LOAD_USERS: the user ids in those sessions; ACE_LOAD_ADMIN: "username:password" of a staff user;
- ACE_LOAD_RATE_PER_USER: tasks per second per locust user (constant throughput).
"""

from __future__ import annotations

import os
import random
import uuid
from datetime import UTC, datetime, timedelta

from locust import HttpUser, constant_throughput, task

KEY = os.environ.get("ACE_LOAD_KEY", "")
SESSIONS = [s for s in os.environ.get("ACE_LOAD_SESSIONS", "").split(",") if s]
USERS = [u for u in os.environ.get("ACE_LOAD_USERS", "").split(",") if u]
ADMIN = os.environ.get("ACE_LOAD_ADMIN", ":")
DASHBOARD = os.environ.get("ACE_LOAD_DASHBOARD", "/admin/")
RATE = float(os.environ.get("ACE_LOAD_RATE_PER_USER", "1"))

QUESTIONS = [
    "What does the user prefer for lunch?",
    "Which database did we choose for the project?",
    "用户喜欢什么样的旅行？",
    "How are the tests run in CI?",
    "上次讨论的部署方案是什么？",
    "What did the user say about Python versions?",
    "Which files were changed when auth was split?",
    "用户的咖啡偏好",
]
LINES = [
    "Let me look at the failing test first.",
    "The migration adds an index on (tenant, created_at).",
    "我明天要去杭州出差，帮我查一下天气。",
    "Run the suite again with -x to stop at the first failure.",
    "这个接口在高并发下需要加锁吗？",
    "The p95 went from 180 ms to 40 ms after the change.",
]
MODELS = ["claude-sonnet-4-5", "qwen3-coder-plus", "gpt-5-codex"]


class TeamClient(HttpUser):
    wait_time = constant_throughput(RATE)

    def on_start(self):
        self.rng = random.Random()
        self.headers = {"Authorization": f"Bearer {KEY}"}
        self.session_id = self.rng.choice(SESSIONS)
        self.user_id = USERS[SESSIONS.index(self.session_id)]
        self.admin_logged_in = False

    # -- a chat app's streamed answer: start, system prompt, two checkpoints, complete ----------------------
    @task(5)
    def turn(self):
        start = self.client.post(
            f"/api/v1/sessions/{self.session_id}/turns/",
            json={"content": self.rng.choice(LINES), "external_id": uuid.uuid4().hex},
            headers=self.headers,
            name="turn: start",
        )
        if start.status_code != 201:
            return
        path = f"/api/v1/turns/{start.json()['turn']}/"
        self.client.post(
            path + "system-ready/",
            json={"system_prompt": "You are helpful."},
            headers=self.headers,
            name="turn: system-ready",
        )
        answer = ""
        for _ in range(2):
            answer += self.rng.choice(LINES) + " "
            self.client.patch(path, json={"content": answer}, headers=self.headers, name="turn: checkpoint")
        self.client.post(
            path + "complete/",
            json={
                "content": answer,
                "model": self.rng.choice(MODELS),
                "finish_reason": "stop",
                "input_tokens": self.rng.randint(200, 4000),
                "output_tokens": self.rng.randint(20, 800),
                "elapsed_ms": self.rng.randint(300, 9000),
            },
            headers=self.headers,
            name="turn: complete",
        )

    # -- an agent pushing a slice of its transcript ----------------------------------------------------------
    @task(4)
    def ingest(self):
        now = datetime.now(UTC)
        batch = []
        for i in range(10):
            role = "user" if i % 2 == 0 else "assistant"
            message = {
                "role": role,
                "content": self.rng.choice(LINES),
                "external_id": uuid.uuid4().hex,
                "created_at": (now + timedelta(milliseconds=i)).isoformat(),
            }
            if role == "assistant":
                message.update(
                    model=self.rng.choice(MODELS),
                    input_tokens=self.rng.randint(100, 9000),
                    output_tokens=self.rng.randint(10, 900),
                    request_id=uuid.uuid4().hex,
                )
            batch.append(message)
        self.client.post(
            f"/api/v1/sessions/{self.session_id}/messages/",
            json=batch,
            headers=self.headers,
            name="ingest: 10 messages",
        )

    # -- memory before a prompt ------------------------------------------------------------------------------
    @task(4)
    def recall(self):
        self.client.post(
            "/api/v1/recall/",
            json={"query": self.rng.choice(QUESTIONS), "user_id": self.user_id, "top_k": 10},
            headers=self.headers,
            name="recall",
        )

    @task(1)
    def session_context(self):
        self.client.get(
            f"/api/v1/sessions/{self.session_id}/context/",
            params={"query": self.rng.choice(QUESTIONS)},
            headers=self.headers,
            name="context",
        )

    # -- usage reports -------------------------------------------------------------------------------------------
    @task(2)
    def stats(self):
        group_by = self.rng.choice(["day", "model", "tool", "user_id"])
        self.client.get(
            "/api/v1/stats/", params={"group_by": group_by}, headers=self.headers, name=f"stats by {group_by}"
        )

    @task(1)
    def session_stats(self):
        self.client.get(f"/api/v1/sessions/{self.session_id}/stats/", headers=self.headers, name="session stats")

    # -- an auditor on the usage dashboard ---------------------------------------------------------------------
    @task(1)
    def dashboard(self):
        if not self.admin_logged_in:
            self.login()
        self.client.get(DASHBOARD, name="admin: usage dashboard")

    def login(self):
        """Log in once per user, outside the figures: a login hashes the password on purpose (PBKDF2, ~0.5 s
        here) and is not the steady traffic being measured."""
        import requests

        username, _, password = ADMIN.partition(":")
        with requests.Session() as browser:
            browser.get(self.host + "/admin/login/")
            response = browser.post(
                self.host + "/admin/login/?next=/admin/",
                data={"username": username, "password": password,
                      "csrfmiddlewaretoken": browser.cookies.get("csrftoken", ""), "next": "/admin/"},
                headers={"Referer": self.host + "/admin/login/"},
            )  # fmt: skip
            if "sessionid" not in browser.cookies:
                raise RuntimeError(f"admin login failed: {response.status_code}")
            self.client.cookies.update(browser.cookies)
        self.admin_logged_in = True
