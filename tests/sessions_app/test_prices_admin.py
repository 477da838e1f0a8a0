"""The model prices in the admin: the unpriced models of the usage with their volume and a link that prices them,
dated prices and the 1-hour write rate in the list, and a price list imported from an upload (previewed first)."""

from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from sessions_app.models import ModelPrice
from tests.sessions_app.test_prices_import import LITELLM_FILE, price_rows, use

pytestmark = pytest.mark.django_db
UNPRICED = reverse("admin:sessions_app_modelprice_unpriced")
IMPORT = reverse("admin:sessions_app_modelprice_import")


def test_unpriced_models_are_listed_by_volume_with_a_link_that_prices_them(
    api, other_api, admin_client, django_assert_max_num_queries
):
    use(api, "us.amazon.nova-2-lite-v1:0", "2026-03-01", input_tokens=5000, output_tokens=500)
    use(api, "amazon.nova-2-lite-v1:0", "2026-03-04", input_tokens=1000, output_tokens=100, cache_read_tokens=400)
    use(other_api, "mystery-model-x", "2026-02-10", input_tokens=90000, output_tokens=10000)
    use(api, "mystery-model-x", "2026-03-20", input_tokens=10, output_tokens=0)
    use(api, "claude-sonnet-4-5-20250929", "2026-03-01")  # priced: not listed

    with django_assert_max_num_queries(8):  # the session and user, the prices, one GROUP BY of the roll-ups
        page = admin_client.get(UNPRICED)
    assert page.status_code == 200
    rows = [(m.model, m.tokens, m.requests, str(m.first_day), str(m.last_day)) for m in page.context["models"]]
    assert rows == [
        ("mystery-model-x", 100_010, 2, "2026-02-10", "2026-03-20"),  # both tenants
        ("amazon.nova-2-lite-v1:0", 7_000, 2, "2026-03-01", "2026-03-04"),  # both names the tools used
    ]
    html = page.content.decode()
    add = reverse("admin:sessions_app_modelprice_add")
    assert f'href="{add}?model=mystery-model-x"' in html
    assert "<code>amazon.nova-2-lite-v1:0</code>, <code>us.amazon.nova-2-lite-v1:0</code>" in html
    assert "100,010" in html

    form = admin_client.get(f"{add}?model=amazon.nova-2-lite-v1:0").context["adminform"].form
    assert form.initial["model"] == "amazon.nova-2-lite-v1:0"
    response = admin_client.post(
        f"{add}?model=amazon.nova-2-lite-v1:0",
        {
            "model": "amazon.nova-2-lite-v1:0",
            "match": "exact",
            "provider": "amazon",
            "effective_from": "",
            "input_usd_per_mtok": "0.3",
            "output_usd_per_mtok": "2.5",
            "cache_read_usd_per_mtok": "0.075",
            "cache_write_usd_per_mtok": "0",
            "cache_write_1h_usd_per_mtok": "",
            "source": "",
            "checked_on": "",
            "notes": "",
        },
    )
    assert response.status_code == 302, response.context["adminform"].form.errors
    assert ModelPrice.objects.get(model="amazon.nova-2-lite-v1:0").cache_write_1h_usd_per_mtok == Decimal("0.6")
    assert [m.model for m in admin_client.get(UNPRICED).context["models"]] == ["mystery-model-x"]
    # Priced without a date, the model's past usage is priced too: 5000×0.3 + 500×2.5 = 2750 per million.
    body = api.get("/api/v1/stats/?group_by=model").json()
    nova = next(row for row in body["results"] if row["key"] == "us.amazon.nova-2-lite-v1:0")
    assert (nova["cost_usd"], nova["unpriced_tokens"]) == ("0.002750", 0)


def test_the_price_list_shows_dates_and_the_one_hour_rate(admin_client):
    ModelPrice.objects.create(
        model="acme-large",
        provider="acme",
        effective_from="2026-04-01",
        input_usd_per_mtok=2,
        output_usd_per_mtok=8,
        cache_read_usd_per_mtok=Decimal("0.2"),
        cache_write_usd_per_mtok=Decimal("2.5"),
    )
    changelist = reverse("admin:sessions_app_modelprice_changelist")
    page = admin_client.get(changelist, {"provider": "acme"})
    html = page.content.decode()
    assert [str(row) for row in page.context["cl"].result_list] == ["acme-large from 2026-04-01"]
    assert "Rates in USD per million tokens" in html
    assert '<td class="field-cache_write_1h_price">4.00</td>' in html  # not given: 2x input
    assert '<td class="field-effective_from_display">2026-04-01</td>' in html
    assert [str(row) for row in admin_client.get(changelist, {"q": "acme-lar"}).context["cl"].result_list] == [
        "acme-large from 2026-04-01"
    ]
    assert UNPRICED in html and IMPORT in html


def test_a_price_list_is_previewed_then_imported_from_the_admin(api, admin_client):
    use(api, "us.amazon.nova-2-lite-v1:0", "2026-03-01")
    rows = price_rows()
    upload = SimpleUploadedFile("prices.json", LITELLM_FILE.read_bytes(), content_type="application/json")
    page = admin_client.post(IMPORT, {"file": upload, "scope": "used", "preview": "Preview"})
    assert page.status_code == 200, page.context["form"].errors
    assert "(dry run: nothing written)" in page.content.decode(), page.context["form"].errors
    assert price_rows() == rows
    upload = SimpleUploadedFile("prices.json", LITELLM_FILE.read_bytes(), content_type="application/json")
    page = admin_client.post(IMPORT, {"file": upload, "scope": "used", "effective_from": "", "import": "Import"})
    assert "1 added, 0 changed" in page.content.decode()
    assert ModelPrice.objects.get(model="amazon.nova-2-lite-v1:0").input_usd_per_mtok == Decimal("0.3")
    bad = SimpleUploadedFile("prices.json", b"[]", content_type="application/json")
    page = admin_client.post(IMPORT, {"file": bad, "scope": "used", "import": "Import"})
    assert "not a price list" in page.content.decode() and "Nothing was written" in page.content.decode()
