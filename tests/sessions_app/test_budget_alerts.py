"""Budget alerts with a real Celery worker: email, a Feishu bot and a DingTalk robot (fake ones on loopback that
check the signatures), once per crossing, and the budget_crossed signal the webhooks listen to."""

import base64
import hashlib
import hmac
import time
from urllib.parse import parse_qs, unquote_plus, urlsplit

import pytest
from django.core import mail

from sessions_app.models import BudgetCrossing
from sessions_app.signals import budget_crossed
from tests.support.api import make_client
from tests.support.factories import SessionFactory
from tests.support.http import FakeServer, Request

FEISHU_SECRET = "feishu-secret"
DINGTALK_SECRET = "SECdingtalk"


class FakeBots(FakeServer):
    """Feishu and DingTalk as their servers answer, recording what arrived and whether its signature was right."""

    def __init__(self):
        self.alerts: list[dict] = []
        super().__init__(self.answer_bot)

    def answer_bot(self, request: Request):
        body = request.json()
        parts = urlsplit(request.path)
        if parts.path.startswith("/open-apis/bot/v2/hook/"):
            key = f"{body['timestamp']}\n{FEISHU_SECRET}".encode()
            expected = base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()
            signed = body["sign"] == expected
            self.alerts.append({"bot": "feishu", "body": body, "signed": signed})
            return 200, {"code": 0, "msg": "success"} if signed else {"code": 19021, "msg": "sign match fail"}
        query = parse_qs(parts.query)
        timestamp, sign = query["timestamp"][0], query["sign"][0]
        digest = hmac.new(DINGTALK_SECRET.encode(), f"{timestamp}\n{DINGTALK_SECRET}".encode(), hashlib.sha256)
        signed = unquote_plus(parts.query.split("sign=")[1]) == base64.b64encode(digest.digest()).decode()
        fresh = abs(int(timestamp) / 1000 - time.time()) < 3600
        self.alerts.append({"bot": "dingtalk", "body": body, "signed": signed and fresh, "sign": sign})
        return 200, {"errcode": 0, "errmsg": "ok"}

    def of(self, bot):
        return [r for r in self.alerts if r["bot"] == bot]


@pytest.fixture
def bots():
    with FakeBots() as fake:
        yield fake


def test_each_crossing_alerts_once_by_email_feishu_dingtalk_and_the_signal(burst, bots):
    api = make_client("acme")
    session = SessionFactory(tenant=api.tenant, tool="chat", user_id="xiaoming")
    signalled = []

    def listen(sender, **kwargs):
        signalled.append(kwargs)

    budget_crossed.connect(listen)
    try:
        budget = api.post(
            "/api/v1/budgets/",
            {
                "name": "team month",
                "limit": 1000,
                "emails": ["ops@example.com"],
                "feishu_url": f"{bots.url}/open-apis/bot/v2/hook/token-1",
                "feishu_secret": FEISHU_SECRET,
                "dingtalk_url": f"{bots.url}/robot/send?access_token=token-2",
                "dingtalk_secret": DINGTALK_SECRET,
            },
            format="json",
        ).json()
        url = f"/api/v1/sessions/{session.pk}/messages/"
        for tokens in (799, 1, 100, 100, 500):
            response = api.post(url, {"role": "assistant", "content": "…", "total_tokens": tokens}, format="json")
            assert response.status_code == 201
            if tokens == 1:  # the write that reached 80 % alerts; the first did not
                assert [s["threshold"] for s in signalled] == [80]
        burst()
        assert burst.queued() == []  # nothing more will arrive
        assert len(bots.of("feishu")) == 2 and len(bots.of("dingtalk")) == 2 and len(mail.outbox) == 2
        assert len(bots.received) == 4 and len(mail.outbox) == 2
    finally:
        budget_crossed.disconnect(listen)

    assert [s["threshold"] for s in signalled] == [80, 100]
    first = signalled[0]
    assert (str(first["budget_id"]), str(first["tenant_id"])) == (budget["id"], str(api.tenant.pk))
    assert (first["payload"]["used"], first["payload"]["limit"], first["payload"]["percent"]) == (800, 1000, 80.0)
    assert first["payload"]["budget"]["name"] == "team month"
    assert all(r["signed"] for r in bots.alerts)
    feishu_texts = [r["body"]["content"]["text"] for r in bots.of("feishu")]
    assert sorted("crossed 80%" in t for t in feishu_texts) == [False, True]
    assert all(r["body"]["msg_type"] == "text" for r in bots.of("feishu"))
    assert all(
        r["body"]["msgtype"] == "text" and "team month" in r["body"]["text"]["content"] for r in bots.of("dingtalk")
    )
    assert sorted(m.subject for m in mail.outbox) == [
        "[Open ACE] Budget team month: 100% used",
        "[Open ACE] Budget team month: 80% used",
    ]
    assert mail.outbox[0].to == ["ops@example.com"] and "of 1000 tokens used" in mail.outbox[0].body
    assert all(
        c.alerts == {"email": "sent", "feishu": "sent", "dingtalk": "sent"}
        for c in BudgetCrossing.objects.filter(budget_id=budget["id"])
    )


def test_a_bot_that_refuses_is_recorded_and_tried_again_by_the_sweep(burst, bots):
    from sessions_app.tasks import send_pending_budget_alerts

    api = make_client("acme")
    session = SessionFactory(tenant=api.tenant, tool="chat", user_id="xiaoming")
    budget = api.post(
        "/api/v1/budgets/",
        {
            "name": "wrong secret",
            "limit": 10,
            "thresholds": [100],
            "feishu_url": f"{bots.url}/open-apis/bot/v2/hook/t",
            "feishu_secret": "not-the-bot's",
        },
        format="json",
    ).json()
    api.post(
        f"/api/v1/sessions/{session.pk}/messages/",
        {"role": "assistant", "content": "x", "total_tokens": 10},
        format="json",
    )
    crossing = BudgetCrossing.objects.get(budget_id=budget["id"])
    burst()
    assert BudgetCrossing.objects.get(pk=crossing.pk).alerts == {"feishu": "failed: sign match fail"}
    # The secret is corrected; the sweep sends what did not go out, once.
    api.patch(f"/api/v1/budgets/{budget['id']}/", {"feishu_secret": FEISHU_SECRET}, format="json")
    assert send_pending_budget_alerts() == 1
    burst()
    assert BudgetCrossing.objects.get(pk=crossing.pk).alerts == {"feishu": "sent"}
    assert [r["signed"] for r in bots.of("feishu")] == [False, True]
    assert send_pending_budget_alerts() == 0


def test_a_budget_saved_over_its_thresholds_alerts_at_once_and_once(burst):
    api = make_client("acme")
    session = SessionFactory(tenant=api.tenant, tool="chat", user_id="xiaoming")
    url = f"/api/v1/sessions/{session.pk}/messages/"

    def spend(tokens):
        response = api.post(url, {"role": "assistant", "content": "…", "total_tokens": tokens}, format="json")
        assert response.status_code == 201

    signalled = []

    def listen(sender, **kwargs):
        signalled.append(kwargs)

    spend(900)
    budget_crossed.connect(listen)
    try:
        calm = api.post("/api/v1/budgets/", {"name": "roomy", "limit": 10_000}, format="json")
        assert calm.status_code == 201 and calm.json()["crossings"] == []
        created = api.post(
            "/api/v1/budgets/",
            {"name": "late", "limit": 1000, "thresholds": [50, 80, 100], "emails": ["ops@example.com"]},
            format="json",
        )
        assert created.status_code == 201
        budget = created.json()
        assert [c["threshold"] for c in budget["crossings"]] == [50, 80]  # the answer says so at once
        assert sorted(s["threshold"] for s in signalled) == [50, 80]
        burst()
        assert len(mail.outbox) == 2
        assert all("already over this threshold when the budget was created" in m.body for m in mail.outbox)
        # Writes while over, and a change that moves no threshold, alert nobody again.
        spend(50)
        api.patch(f"/api/v1/budgets/{budget['id']}/", {"name": "late, renamed"}, format="json")
        api.patch(f"/api/v1/budgets/{budget['id']}/", {"limit": 1200}, format="json")
        assert len(signalled) == 2
        # A lower limit the period is already over crosses 100 % at once.
        lowered = api.patch(f"/api/v1/budgets/{budget['id']}/", {"limit": 950}, format="json").json()
        assert [c["threshold"] for c in lowered["crossings"]] == [50, 80, 100]
        spend(10)
        burst()
        assert burst.queued() == []  # nothing more will arrive
        assert len(mail.outbox) == 3
    finally:
        budget_crossed.disconnect(listen)
    assert [s["threshold"] for s in signalled] == [50, 80, 100]
    assert [s["payload"]["cause"] for s in signalled] == ["budget_created", "budget_created", "budget_changed"]
    assert len(mail.outbox) == 3 and "when the budget was changed" in mail.outbox[-1].body
    assert "[Open ACE] Budget late: 50% used" in [m.subject for m in mail.outbox]
