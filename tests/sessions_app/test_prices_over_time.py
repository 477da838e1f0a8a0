"""Cost over a window that spans price changes is exact: the stats API (grouped by day, model and user, over whole
days and over hours) and a session's stats equal a brute-force sum over the stored requests, each priced by hand
at the rates in force on its UTC day (Decimal throughout)."""

import io
import json
import random
from collections import defaultdict
from datetime import UTC, date, datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal

import pytest
from django.core.management import call_command

from sessions_app.models import LlmRequest, ModelPrice
from sessions_app.selectors.usage import UsageFilter, top_sessions_by_cost
from tests.sessions_app.test_prices_import import MODELS_DEV_FILE
from tests.support.factories import SessionFactory

pytestmark = pytest.mark.django_db
SONNET = "claude-sonnet-4-5-20250929"
MODELS = ("acme-large-2", "acme-small-1", SONNET, "unpriced-x")
USERS = ("alice", "bob", "chen")
FIRST_DAY = date(2026, 3, 8)


def rates(input_, output, cache_read, cache_write, cache_write_1h):
    return {
        "input": Decimal(input_),
        "output": Decimal(output),
        "cache_read": Decimal(cache_read),
        "cache_write": Decimal(cache_write),
        "cache_write_1h": Decimal(cache_write_1h),
    }


# The oracle's price table, written by hand: each model's rates in USD per million tokens from a UTC day (None:
# always). acme-small-1 is priced by a prefix row (`acme-small`); Sonnet by the shipped prefix row, then by an
# imported price from March 18.
PRICES = {
    "acme-large-2": [
        (None, rates(2, 8, "0.2", "2.5", 4)),
        (date(2026, 3, 15), rates("1.5", 6, "0.15", "1.875", 3)),
    ],
    "acme-small-1": [
        (None, rates("0.5", 1, "0.05", "0.625", 1)),
        (date(2026, 3, 20), rates("0.25", 1, "0.025", "0.3125", "0.5")),
    ],
    SONNET: [
        (None, rates(3, 15, "0.3", "3.75", 6)),
        (date(2026, 3, 18), rates("2.5", "12.5", "0.3", "3.75", 6)),
    ],
}


def rates_on(model, day):
    table = PRICES.get(model)
    if table is None:
        return None
    return [price for since, price in table if since is None or since <= day][-1]


def test_the_top_sessions_by_cost_are_ranked_by_their_cost_across_price_changes(usage_over_a_month):
    """The dashboard's ranking by cost (in SQL, each model's prices joined on the day) is the oracle's: the same ten
    sessions, in the same order, at the same cost."""
    expected, _ = oracle(usage_over_a_month.tenant, lambda request: request.session_id)
    want = sorted(((key, cost) for key, (cost, _) in expected.items()), key=lambda item: -Decimal(item[1]))[:10]
    top = top_sessions_by_cost(usage=UsageFilter(tenant=usage_over_a_month.tenant), limit=10)
    assert [(entry["session"].pk, str(entry["cost_usd"])) for entry in top] == want


def cost_of(request) -> Decimal | None:
    price = rates_on(request.model, request.created_at.astimezone(UTC).date())
    if price is None:
        return None
    five_minute = request.cache_creation_tokens - request.cache_creation_1h_tokens
    return (
        request.input_tokens * price["input"]
        + request.output_tokens * price["output"]
        + request.cache_read_tokens * price["cache_read"]
        + five_minute * price["cache_write"]
        + request.cache_creation_1h_tokens * price["cache_write_1h"]
    ) / Decimal(1_000_000)


def money(value: Decimal) -> str:
    return str(value.quantize(Decimal("0.000001"), rounding=ROUND_HALF_UP))


def all_tokens(request) -> int:
    return request.input_tokens + request.output_tokens + request.cache_read_tokens + request.cache_creation_tokens


def oracle(tenant, key, since=None, until=None, session=None):
    """{group: (cost, unpriced tokens)} and the totals, summed over the stored requests in [since, until)."""
    requests = LlmRequest.objects.filter(tenant=tenant).select_related("session")
    if session is not None:
        requests = requests.filter(session=session)
    groups = defaultdict(lambda: [Decimal(0), 0])
    total = [Decimal(0), 0]
    for request in requests:
        if (since and request.created_at < since) or (until and request.created_at >= until):
            continue
        cost = cost_of(request)
        for bucket in (groups[key(request)], total):
            if cost is None:
                bucket[1] += all_tokens(request)
            else:
                bucket[0] += cost
    return {group: (money(c), u) for group, (c, u) in groups.items()}, (money(total[0]), total[1])


@pytest.fixture
def usage_over_a_month(api, tmp_path):
    """Prices that change on March 15, 18 and 20 (one by an imported list), and requests of four models by three
    users from March 8 to 27 with every kind of token, 5-minute and 1-hour cache writes included."""
    ModelPrice.objects.create(model="acme-large-2", **_fields(PRICES["acme-large-2"][0][1]))
    ModelPrice.objects.create(
        model="acme-large-2", effective_from=PRICES["acme-large-2"][1][0], **_fields(PRICES["acme-large-2"][1][1])
    )
    ModelPrice.objects.create(model="acme-small", match="prefix", **_fields(PRICES["acme-small-1"][0][1]))
    ModelPrice.objects.create(
        model="acme-small",
        match="prefix",
        effective_from=PRICES["acme-small-1"][1][0],
        **_fields(PRICES["acme-small-1"][1][1]),
    )
    document = json.loads(MODELS_DEV_FILE.read_text())
    document["anthropic"]["models"][SONNET]["cost"].update(input=2.5, output=12.5)
    (tmp_path / "api.json").write_text(json.dumps(document))
    rng = random.Random(20260318)
    for _ in range(60):
        use_for_session(api, rng)  # posts before the import: a later price never re-prices the rows themselves
    call_command(
        "ace_prices", "import", str(tmp_path / "api.json"), "--effective-from", "2026-03-18", stdout=io.StringIO()
    )
    assert ModelPrice.objects.get(model=SONNET).effective_from == date(2026, 3, 18)
    return api


def use_for_session(api, rng):
    session = SessionFactory(tenant=api.tenant, tool="claude-code", user_id=rng.choice(USERS))
    start = datetime.combine(FIRST_DAY, datetime.min.time(), UTC) + timedelta(hours=rng.randrange(19 * 24))
    items, moment = [], start
    for number in range(rng.randint(3, 12)):
        moment += timedelta(minutes=rng.randint(5, 600))  # a session may cross midnight and a price change
        writes_1h, writes_5m = rng.choice([0, 0, 2048]), rng.randint(0, 4000)
        items.append(
            {
                "role": "assistant",
                "content": f"answer {number}",
                "request_id": f"{session.pk}-{number}",
                "model": rng.choice(MODELS),
                "input_tokens": rng.randint(1, 5000),
                "output_tokens": rng.randint(1, 3000),
                "cache_read_tokens": rng.randint(0, 90000),
                "cache_creation_tokens": writes_5m + writes_1h + rng.choice([0, 0, 300]),  # some of no stated lifetime
                "cache_creation_5m_tokens": writes_5m,
                "cache_creation_1h_tokens": writes_1h,
                "created_at": moment.isoformat().replace("+00:00", "Z"),
            }
        )
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", items, format="json")
    assert response.status_code == 201, response.content


def _fields(price):
    return {f"{rate}_usd_per_mtok": value for rate, value in price.items()}


def stats(api, query):
    response = api.get("/api/v1/stats/" + query)
    assert response.status_code == 200, response.content
    body = response.json()
    rows = {row["key"]: (row["cost_usd"], row["unpriced_tokens"]) for row in body["results"]}
    return rows, (body["totals"]["cost_usd"], body["totals"]["unpriced_tokens"])


KEYS = {
    "day": lambda request: request.created_at.astimezone(UTC).date().isoformat(),
    "model": lambda request: request.model,
    "user_id": lambda request: request.session.user_id,
}


@pytest.mark.parametrize("group_by", ["day", "model", "user_id"])
@pytest.mark.parametrize(
    ("since", "until"),
    [
        (datetime(2026, 3, 10, tzinfo=UTC), datetime(2026, 3, 26, tzinfo=UTC)),  # whole days: the daily roll-ups
        (datetime(2026, 3, 13, 7, tzinfo=UTC), datetime(2026, 3, 21, 17, tzinfo=UTC)),  # hours: the hourly ones
        (None, None),
    ],
)
def test_grouped_cost_equals_a_brute_force_sum_across_price_changes(usage_over_a_month, group_by, since, until):
    api = usage_over_a_month
    query = f"?group_by={group_by}"
    for name, moment in (("since", since), ("until", until)):
        if moment is not None:
            query += f"&{name}={moment.isoformat().replace('+00:00', 'Z')}"
    expected_rows, expected_totals = oracle(api.tenant, KEYS[group_by], since, until)
    rows, totals = stats(api, query)
    assert rows == expected_rows
    assert totals == expected_totals
    assert Decimal(totals[0]) > 0 and totals[1] > 0  # both priced and unpriced usage in the window


def test_the_window_spans_every_price_change(usage_over_a_month):
    days = {request.created_at.astimezone(UTC).date() for request in LlmRequest.objects.all()}
    for model, table in PRICES.items():
        changed = table[1][0]
        used = {r.created_at.astimezone(UTC).date() for r in LlmRequest.objects.filter(model=model)}
        assert min(used) < changed <= max(used), model
    assert min(days) < date(2026, 3, 15) and max(days) > date(2026, 3, 20)


def test_a_sessions_cost_equals_a_brute_force_sum_across_price_changes(usage_over_a_month):
    api = usage_over_a_month
    checked = 0
    for request in LlmRequest.objects.order_by("created_at"):
        session = request.session
        days = set(session.llm_requests.values_list("created_at__date", flat=True))
        if len(days) < 2:
            continue
        _, (cost, unpriced) = oracle(api.tenant, KEYS["day"], session=session)
        body = api.get(f"/api/v1/sessions/{session.pk}/stats/").json()
        assert (body["cost_usd"], body["unpriced_tokens"]) == (cost, unpriced)
        checked += 1
        if checked == 8:
            break
    assert checked == 8
    # The sum of the sessions' costs is the tenant's.
    rows, totals = stats(api, "?group_by=session")
    expected, expected_totals = oracle(api.tenant, lambda request: str(request.session_id))
    assert rows == expected and totals == expected_totals
