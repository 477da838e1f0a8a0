"""`manage.py ace_prices import`: LiteLLM's and models.dev's price lists (real excerpts in tests/data/prices/), read
exactly, imported for the models this install uses, a changed price dated so that past usage keeps its own, what
changed said, a second run a no-op, a bad file refused with nothing written."""

import io
import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from sessions_app.models import ModelPrice
from sessions_app.price_lists import LITELLM, MODELS_DEV, price_list_read
from sessions_app.pricing import PriceBook
from tests.support.factories import SessionFactory

pytestmark = pytest.mark.django_db
DATA = Path(__file__).resolve().parent.parent / "data" / "prices"
LITELLM_FILE = DATA / "litellm_model_prices.json"
MODELS_DEV_FILE = DATA / "models_dev_api.json"
SONNET = "claude-sonnet-4-5-20250929"


def use(api, model, day, *, user="alice", **tokens):
    """One request of `model` on `day` (a new session each time, so that requests never merge)."""
    session = SessionFactory(tenant=api.tenant, tool="claude-code", user_id=user)
    message = {
        "role": "assistant",
        "content": "answer",
        "request_id": f"{model}-{day}-{user}-{session.pk}",
        "model": model,
        "created_at": f"{day}T12:00:00Z",
        **({"input_tokens": 1000, "output_tokens": 100} | tokens),
    }
    response = api.post(f"/api/v1/sessions/{session.pk}/messages/", [message], format="json")
    assert response.status_code == 201, response.content
    return session


def prices_import(*args) -> str:
    out = io.StringIO()
    call_command("ace_prices", "import", *map(str, args), stdout=out)
    return out.getvalue()


def price_rows():
    """Every price row as it is stored (updated_at included: a no-op must not touch a row)."""
    return list(ModelPrice.objects.order_by("pk").values())


def stats(api, query):
    body = api.get("/api/v1/stats/" + query).json()
    return {row["key"]: row for row in body["results"]}, body


def with_cost(path, tmp_path, provider, model, **cost):
    """A copy of the models.dev excerpt with one model's cost changed (as a later version of the list would be)."""
    document = json.loads(path.read_text())
    document[provider]["models"][model]["cost"].update(cost)
    changed = tmp_path / "api.json"
    changed.write_text(json.dumps(document))
    return changed


def test_litellm_prices_the_models_in_use_and_says_what_it_did(api):
    for model in (
        SONNET,
        "us.amazon.nova-2-lite-v1:0",  # unpriced: Bedrock's regional name of amazon.nova-2-lite-v1:0
        "qwen3.5-plus",  # unpriced; LiteLLM prices it by prompt length only (tiered_pricing)
        "claude-3-haiku-20240307",
        "gpt-4o-mini-transcribe",  # an audio model: not chat-priced
        "mystery-model-x",  # in no list
    ):
        use(api, model, "2026-03-01")
    _, before = stats(api, "?group_by=model")
    assert before["unpriced_models"] == ["mystery-model-x", "qwen3.5-plus", "us.amazon.nova-2-lite-v1:0"]

    output = prices_import(LITELLM_FILE)

    # Never priced: an undated row, so the usage of March is priced too.
    nova = ModelPrice.objects.get(model="amazon.nova-2-lite-v1:0")
    assert nova.effective_from is None and nova.match == "exact"
    assert (nova.input_usd_per_mtok, nova.output_usd_per_mtok, nova.cache_read_usd_per_mtok) == (
        Decimal("0.3"),
        Decimal("2.5"),
        Decimal("0.075"),
    )  # 3e-07, 2.5e-06 and 7.5e-08 per token, exactly
    assert nova.provider == "bedrock_converse" and "LiteLLM" in nova.notes and "litellm" in nova.source
    assert "amazon.nova-2-lite-v1:0: input 0.3, output 2.5, cache read 0.075" in output
    assert "undated: never priced before, so its past usage is priced too" in output
    # Two listings normalise to the name (eu. is a routing prefix): the one listed under the name itself is taken.
    assert (
        "took bedrock_converse's amazon.nova-2-lite-v1:0; also bedrock_converse's eu.amazon.nova-2-lite-v1:0" in output
    )
    # DashScope's Qwen: the first tier (prompts up to 256K) is the list price; the tiers are reported.
    qwen = ModelPrice.objects.get(model="qwen3.5-plus")
    assert (qwen.input_usd_per_mtok, qwen.output_usd_per_mtok, qwen.provider) == (
        Decimal("0.4"),
        Decimal("2.4"),
        "alibaba",
    )
    assert "tiered_pricing" in qwen.notes
    # Anthropic's Sonnet 4.5 is already priced (the shipped prefix row) at LiteLLM's price: nothing to do.
    assert not ModelPrice.objects.filter(model=SONNET).exists()
    # LiteLLM's 1-hour write for Claude 3 Haiku ($6, for an input of $0.25) is not taken; the rest agrees.
    assert not ModelPrice.objects.filter(model="claude-3-haiku-20240307").exists()
    assert "claude-3-haiku-20240307: the list's 1-hour cache write 6 beside input 0.25" in output
    # What the list prices that a model price cannot hold, named per field with its models.
    assert "input_cost_per_token_above_200k_tokens" not in output  # the long-context tier is modelled
    assert "tiered_pricing: 1 model(s): qwen3.5-plus" in output
    assert "gpt-4o-mini-transcribe (openai): not a chat model (mode audio_transcription)" in output
    assert "Not in the list: 1 model(s) of the usage; 1 of them have no price: mystery-model-x." in output
    # The list's other models are left out: a 2,000-model list does not flood the table.
    assert not ModelPrice.objects.filter(
        model__in=["claude-4-sonnet-20250514", "claude-opus-4-1"], match="exact"
    ).exists()
    assert "other model(s) of the list this install has not used (--all imports them)" in output
    assert output.rstrip().endswith("2 added, 0 changed, 2 unchanged, 1 skipped.")
    models, after = stats(api, "?group_by=model")
    assert after["unpriced_models"] == ["mystery-model-x"]
    assert models["us.amazon.nova-2-lite-v1:0"]["cost_usd"] == "0.000550"  # 1000×0.3 + 100×2.5 per million

    rows = price_rows()
    again = prices_import(LITELLM_FILE)
    assert price_rows() == rows
    assert again.rstrip().endswith("0 added, 0 changed, 4 unchanged, 1 skipped.")


def test_a_changed_price_takes_effect_from_its_day_and_past_usage_keeps_its_own(api, tmp_path):
    use(api, SONNET, "2026-03-10")
    use(api, SONNET, "2026-04-20")
    march_cost = Decimal("0.004500")  # 1000×3 + 100×15 at the shipped price
    cheaper = with_cost(MODELS_DEV_FILE, tmp_path, "anthropic", SONNET, input=2.5, output=12.5)

    output = prices_import(cheaper, "--effective-from", "2026-04-01")

    row = ModelPrice.objects.get(model=SONNET)
    assert (row.effective_from.isoformat(), row.input_usd_per_mtok, row.output_usd_per_mtok) == (
        "2026-04-01",
        Decimal("2.5"),
        Decimal("12.5"),
    )
    assert (row.cache_read_usd_per_mtok, row.cache_write_usd_per_mtok) == (Decimal("0.3"), Decimal("3.75"))
    # models.dev gives no 1-hour price: the one in force before is kept (2x the old input), not re-derived.
    assert row.cache_write_1h_usd_per_mtok == Decimal(6)
    assert "Changed 2 (from 2026-04-01; usage before that day keeps its price):" in output
    assert f"{SONNET}: input 3 → 2.5, output 15 → 12.5 (anthropic's {SONNET})" in output
    # deepseek-chat has shipped prices by its exact name, so the list's is compared with the one in force that day
    # (V3.2's, from 2025-09-29): the list's V4 price is taken from the import's day.
    assert "deepseek-chat: input 0.28 → 0.14, output 0.42 → 0.28, cache read 0.028 → 0.0028" in output
    days, _ = stats(api, "?group_by=day")
    assert Decimal(days["2026-03-10"]["cost_usd"]) == march_cost
    assert Decimal(days["2026-04-20"]["cost_usd"]) == Decimal("0.003750")  # 1000×2.5 + 100×12.5

    rows = price_rows()
    assert "0 added, 0 changed" in prices_import(cheaper, "--effective-from", "2026-04-01")
    assert price_rows() == rows
    # The same day again with another price: that day's row is corrected, no second row.
    corrected = with_cost(MODELS_DEV_FILE, tmp_path, "anthropic", SONNET, input=2.4, output=12.5)
    output = prices_import(corrected, "--effective-from", "2026-04-01")
    assert "input 2.5 → 2.4" in output and "corrected the price of that day" in output
    assert ModelPrice.objects.filter(model=SONNET).count() == 1
    days, _ = stats(api, "?group_by=day")
    assert Decimal(days["2026-03-10"]["cost_usd"]) == march_cost


def test_dry_run_changes_nothing_and_says_so(api, tmp_path):
    use(api, SONNET, "2026-03-10")
    use(api, "us.amazon.nova-2-lite-v1:0", "2026-03-10")
    rows = price_rows()
    output = prices_import(with_cost(MODELS_DEV_FILE, tmp_path, "anthropic", SONNET, input=2), "--dry-run")
    assert "(dry run: nothing written)" in output and "input 3 → 2" in output
    output = prices_import(LITELLM_FILE, "--dry-run", "--all")
    assert "amazon.nova-2-lite-v1:0: input 0.3" in output and "claude-4-sonnet-20250514: input 3, output 15" in output
    assert price_rows() == rows


def test_which_models_are_imported(api, tmp_path):
    use(api, "claude-sonnet-4-5", "2026-03-10")
    use(api, "us.amazon.nova-2-lite-v1:0", "2026-03-10")
    rows = price_rows()
    # --only-known: only models that already have a price (the new Nova is not added).
    output = prices_import(LITELLM_FILE, "--only-known")
    assert "0 added" in output and price_rows() == rows
    # --provider: Venice's listing of claude-sonnet-4-5, not Anthropic's.
    output = prices_import(MODELS_DEV_FILE, "--provider", "venice", "--effective-from", "2026-05-01")
    venice = ModelPrice.objects.get(model="claude-sonnet-4-5", match="exact")
    assert (venice.input_usd_per_mtok, venice.provider, str(venice.effective_from)) == (
        Decimal("3.75"),
        "venice",
        "2026-05-01",
    )
    assert "claude-sonnet-4-5: input 3 → 3.75, output 15 → 18.75" in output
    # --all: every chat model of the list, each under the name the tools report (routing prefixes off).
    prices_import(LITELLM_FILE, "--all")
    book = PriceBook.load()
    assert book.price_for("anthropic/claude-4-sonnet").input_usd_per_mtok == Decimal("3.3")  # deepinfra's
    databricks = ModelPrice.objects.get(model="databricks-claude-sonnet-4-5")
    # 2.9999900000000002e-06 per token is 2.99999000000000002 per million: kept to six decimals, and said so.
    assert (databricks.input_usd_per_mtok, databricks.output_usd_per_mtok) == (Decimal("2.99999"), Decimal("15.00002"))
    assert not ModelPrice.objects.filter(model__in=["gpt-image-2", "whisper-1", "cohere-embed-v3-english"]).exists()
    assert not ModelPrice.objects.filter(model="sample_spec").exists()


def test_both_formats_are_read_exactly():
    litellm = price_list_read(LITELLM_FILE.read_bytes())
    assert litellm.format == LITELLM
    by_key = {listing.key: listing for listing in litellm.listings}
    sonnet = by_key["claude-sonnet-4-5"]
    assert sonnet.rates == {
        "input": Decimal(3),
        "output": Decimal(15),
        "cache_read": Decimal("0.3"),
        "cache_write": Decimal("3.75"),
        "cache_write_1h": Decimal(6),
        # Prompts over 200K tokens (the 1M context): the shipped long-context rates agree.
        "long_context_input": Decimal(6),
        "long_context_output": Decimal("22.5"),
        "long_context_cache_read": Decimal("0.6"),
        "long_context_cache_write": Decimal("7.5"),
        "long_context_cache_write_1h": Decimal(12),
    }
    assert all(isinstance(value, Decimal) for value in sonnet.rates.values())
    assert not any("above_200k" in item for item in sonnet.not_modelled)
    unusable = {item.key: item.reason for item in litellm.unusable}
    assert unusable == {
        "sample_spec": "the file's example entry",
        "1024-x-1024/dall-e-2": "not a chat model (mode image_generation)",
        "azure/whisper-1": "not a chat model (mode audio_transcription)",
        "azure_ai/Cohere-embed-v3-english": "not a chat model (mode embedding)",
        "gpt-4o-mini-realtime-preview": "not a chat model (mode realtime)",
        "gpt-4o-mini-transcribe": "not a chat model (mode audio_transcription)",
        "gpt-image-2": "not a chat model (mode image_generation)",
    }
    models_dev = price_list_read(MODELS_DEV_FILE.read_bytes())
    assert models_dev.format == MODELS_DEV
    listings = {(listing.provider, listing.key): listing for listing in models_dev.listings}
    gemini = listings[("google", "gemini-2.5-pro")]
    assert (gemini.rates["input"], gemini.rates["cache_read"], gemini.rates["cache_write"]) == (
        Decimal("1.25"),
        Decimal("0.125"),
        None,  # not listed: a priced model keeps its own, a new one gets 1.25x input
    )
    assert (gemini.rates["long_context_input"], gemini.rates["long_context_output"]) == (Decimal("2.5"), Decimal(15))
    assert gemini.rates["long_context_cache_read"] == Decimal("0.25")
    assert not any(item.startswith("context_over_200k") for item in gemini.not_modelled)
    assert [(item.key, item.reason) for item in models_dev.unusable] == [
        ("text-embedding-3-small", "not a chat model (embedding)")
    ]
    # models.dev's catalog.json holds api.json under "providers".
    catalog = json.dumps({"models": {}, "providers": json.loads(MODELS_DEV_FILE.read_text())})
    assert len(price_list_read(catalog).listings) == len(models_dev.listings)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"{not json", "not JSON"),
        (b"[1, 2]", "not a price list"),
        (b'{"gpt-x": "cheap"}', "not a price list we read"),
        (b"\xff\xfe", "not JSON"),
    ],
)
def test_a_bad_file_is_refused_with_status_2_and_nothing_written(api, tmp_path, content, message):
    use(api, "us.amazon.nova-2-lite-v1:0", "2026-03-10")
    rows = price_rows()
    bad = tmp_path / "prices.json"
    bad.write_bytes(content)
    with pytest.raises(CommandError) as refused:
        prices_import(bad)
    assert refused.value.returncode == 2
    assert message in str(refused.value) and "Nothing was written" in str(refused.value)
    with pytest.raises(CommandError) as missing:
        prices_import(tmp_path / "absent.json")
    assert missing.value.returncode == 2 and "Cannot read" in str(missing.value)
    assert price_rows() == rows


def test_an_impossible_price_skips_its_model_only(api, tmp_path):
    use(api, "us.amazon.nova-2-lite-v1:0", "2026-03-10")
    use(api, "qwen3.5-plus", "2026-03-10")
    document = json.loads(LITELLM_FILE.read_text())
    document["amazon.nova-2-lite-v1:0"]["input_cost_per_token"] = -3e-07
    document["eu.amazon.nova-2-lite-v1:0"]["output_cost_per_token"] = "NaN"
    changed = tmp_path / "prices.json"
    changed.write_text(json.dumps(document))
    output = prices_import(changed)
    assert "amazon.nova-2-lite-v1:0 (bedrock_converse): invalid input price: -3E-7" in output
    assert "eu.amazon.nova-2-lite-v1:0 (bedrock_converse): invalid output price: NaN" in output
    assert not ModelPrice.objects.filter(model="amazon.nova-2-lite-v1:0").exists()
    assert ModelPrice.objects.filter(model="qwen3.5-plus").exists()


def test_the_import_date_is_todays_by_default(api, tmp_path):
    use(api, SONNET, "2026-03-10")
    prices_import(with_cost(MODELS_DEV_FILE, tmp_path, "anthropic", SONNET, output=14))
    assert ModelPrice.objects.get(model=SONNET).effective_from == datetime.now(UTC).date()
