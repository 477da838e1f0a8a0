"""The budgets and the webhooks together: API writes that cross a budget's thresholds reach a subscribed URL as
one signed `budget.crossed` delivery per threshold, through the delivery tasks (run by tests/support/burst.py)."""

import json

from tests.support.api import make_client
from tests.webhooks_app.receiver import receiving
from tests.webhooks_app.test_deliveries import fast_retries, subscribe  # noqa: F401 - fast_retries is a fixture
from webhooks_app.services.signing import signature_verify


def test_writes_that_cross_a_budget_are_delivered_once_per_threshold(burst, fast_retries):  # noqa: F811
    api = make_client("acme")
    with receiving() as receiver:
        webhook = subscribe(api, receiver.url, events=["budget.crossed"])
        budget = api.post(
            "/api/v1/budgets/", {"name": "day", "limit": 1000, "period": "day", "thresholds": [50, 100]}, format="json"
        )
        assert budget.status_code == 201, budget.json()
        session = api.post("/api/v1/sessions/", {"user_id": "xiaoming"}, format="json").json()
        call = {"role": "assistant", "content": "ok", "model": "claude-sonnet-4-5", "output_tokens": 0}
        for n, input_tokens in enumerate((400, 200, 300, 200)):  # 400, 600 (crosses 50%), 900, 1100 (crosses 100%)
            answer = api.post(
                f"/api/v1/sessions/{session['id']}/messages/",
                {**call, "request_id": f"call-{n}", "input_tokens": input_tokens},
                format="json",
            )  # fmt: skip
            assert answer.status_code == 201, answer.json()
        burst()
        received = receiver.received
    assert len(received) == 2
    secret = api.get(f"/api/v1/webhooks/{webhook['id']}/").json().get("secret") or webhook["secret"]
    thresholds = []
    for request in received:
        assert request.headers["X-ACE-Event"] == "budget.crossed"
        assert signature_verify(
            secret=secret,
            timestamp=request.headers["X-ACE-Timestamp"],
            body=request.body,
            header=request.headers["X-ACE-Signature"],
        )
        data = json.loads(request.body)["data"]
        assert data["budget_id"] == budget.json()["id"]
        thresholds.append(data["threshold"])
    assert sorted(thresholds) == [50, 100]
