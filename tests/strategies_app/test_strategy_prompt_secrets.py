"""A tenant's strategy prompt (and description) is their own text, stored, versioned and sent to the extractor's
model with every run: it is redacted on save like a message, through the API and the admin alike."""

from strategies_app.models import Strategy, StrategyVersion

KEY = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"


def test_a_strategy_prompt_is_redacted_when_created_and_changed(api):
    prompt = f"Remember travel plans.\n{{messages}}\nOur CRM key is {KEY}; password: Tr0ub4dor&3xyz"
    created = api.post(
        "/api/v1/strategies/",
        {"name": "travel", "type": "custom", "prompt": prompt, "extractor": "rules", "description": "token=abc12345"},
        format="json",
    )
    assert created.status_code == 201, created.json()
    assert (
        created.json()["prompt"]
        == "Remember travel plans.\n{messages}\nOur CRM key is [REDACTED]; password: [REDACTED]"
    )
    assert created.json()["description"] == "token=[REDACTED]"
    strategy = Strategy.objects.get(pk=created.json()["id"])
    changed = api.patch(
        f"/api/v1/strategies/{strategy.pk}/", {"prompt": "Trips.\n{messages}\n我的密碼是abc123"}, format="json"
    )
    assert changed.status_code == 200 and changed.json()["prompt"] == "Trips.\n{messages}\n我的密碼是[REDACTED]"
    stored = str(list(StrategyVersion.objects.filter(strategy=strategy).values_list("prompt", "description")))
    stored += Strategy.objects.get(pk=strategy.pk).prompt
    assert KEY not in stored and "Tr0ub4dor" not in stored and "abc123" not in stored and "abc12345" not in stored
