"""What the admin calls things: acronyms written as acronyms ("API key", "LLM latency (ms)", never "Api key" or
"Llm latency ms"), and counts whose noun agrees with them ("1 conversation", "2 conversations")."""

import re

from django.apps import apps
from django.contrib import admin
from django.contrib.admin.utils import flatten_fieldsets, label_for_field
from django.test import RequestFactory
from django.utils.text import capfirst

from sessions_app.models import Conversation
from tests.support.factories import SessionFactory

ACRONYMS = {"api", "llm", "url", "id", "ttl", "otlp", "mcp", "usd", "ms", "ip", "uuid", "json", "http", "sql"}
OUR_APPS = {"sessions_app", "memory_app", "strategies_app", "webhooks_app"}


def badly_written(label: str) -> list[str]:
    """The acronyms of a label (as the admin shows it, first letter capitalised) not written in capitals."""
    words = re.findall(r"[A-Za-z]+", capfirst(str(label)))
    return [word for word in words if word.lower() in ACRONYMS and word not in (word.upper(), "ms")]


def test_every_field_names_its_acronyms_as_acronyms():
    bad = {}
    for model in apps.get_models():
        if model._meta.app_label not in OUR_APPS:
            continue
        for field in model._meta.get_fields():
            label = getattr(field, "verbose_name", None)
            if label is not None and badly_written(label):
                bad[f"{model._meta.label}.{field.name}"] = str(label)
    assert bad == {}


def test_every_admin_column_and_field_label_names_its_acronyms_as_acronyms(admin_user):
    request = RequestFactory().get("/admin/")
    request.user = admin_user
    bad = {}
    for model, model_admin in admin.site._registry.items():
        if model._meta.app_label not in OUR_APPS:
            continue
        names = [*model_admin.get_list_display(request), *model_admin.get_readonly_fields(request)]
        names += flatten_fieldsets(model_admin.get_fieldsets(request))
        for name in names:
            if not isinstance(name, str) or name == "action_checkbox":
                continue
            label = label_for_field(name, model, model_admin)
            if badly_written(label):
                bad[f"{model._meta.label}.{name}"] = str(label)
    assert bad == {}
    assert str(label_for_field("llm_latency_ms", apps.get_model("strategies_app.StrategyRun"))) == "LLM latency (ms)"
    assert capfirst(label_for_field("api_key", apps.get_model("sessions_app.Session"))) == "API key"


def test_counts_agree_with_their_noun(api, admin_client):
    one = SessionFactory(tenant=api.tenant, user_id="xiaoming")
    posted = api.post(
        f"/api/v1/sessions/{one.pk}/messages/", {"role": "user", "content": "你好"}, format="json"
    )  # fmt: skip
    assert posted.status_code == 201
    page = admin_client.get(f"/admin/sessions_app/session/{one.pk}/change/").content.decode()
    assert ">1 conversation</a>" in page and "(1 message)" in page
    assert "1 conversations" not in page and "1 messages" not in page
    api.post(f"/api/v1/sessions/{one.pk}/messages/", [{"role": "user", "content": "再见"}], format="json")
    page = admin_client.get(f"/admin/sessions_app/session/{one.pk}/change/").content.decode()
    assert ">2 conversations</a>" in page and "(2 messages)" in page
    conversation = Conversation.objects.filter(session=one).order_by("ordinal").first()
    chat = admin_client.get(f"/admin/sessions_app/conversation/{conversation.pk}/chat/")
    assert chat.status_code == 200 and "· 1 message ·" in chat.content.decode()
