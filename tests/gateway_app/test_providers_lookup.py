"""provider_for_call, the lookup of every gateway call: by name ignoring case, inactive providers included, another
tenant's never; read once per CACHE_SECONDS per process, a change made here seen at once, one made elsewhere
within CACHE_SECONDS."""

import pytest

from gateway_app.models import Provider
from gateway_app.services import providers
from gateway_app.services.providers import (
    provider_create,
    provider_delete,
    provider_for_call,
    provider_update,
    providers_forget,
)
from tests.support.factories import TenantFactory


@pytest.fixture(autouse=True)
def _nothing_cached():
    providers_forget()
    yield
    providers_forget()


@pytest.fixture
def clock(monkeypatch):
    """The cache's clock, moved by hand."""

    class Clock:
        now = 1000.0

        def monotonic(self):
            return self.now

    clock = Clock()
    monkeypatch.setattr(providers, "time", clock)
    return clock


def new_provider(tenant, **values):
    return provider_create(
        tenant=tenant,
        **{"name": "qwen", "kind": "openai", "base_url": "https://dashscope.aliyuncs.com/compatible-mode/v1",
           "api_key": "sk-dashscope-123456789", **values},
    )  # fmt: skip


def test_found_by_name_ignoring_case_inactive_included_other_tenants_never(db, django_assert_num_queries):
    tenant, other = TenantFactory(), TenantFactory()
    provider = new_provider(tenant, allowed_models=["qwen-max"])
    new_provider(other, name="deepseek", base_url="https://api.deepseek.com/v1")
    for name in ("qwen", "QWEN", "Qwen"):
        found = provider_for_call(tenant.pk, name)
        assert found is not None and found.pk == provider.pk, name
    assert found.api_key == "sk-dashscope-123456789" and found.allows_model("qwen-max")
    assert not found.allows_model("qwen-plus")
    assert provider_for_call(str(tenant.pk), "qwen").pk == provider.pk  # the id as a string, as a URL gives it
    assert provider_for_call(tenant.pk, "deepseek") is None  # another tenant's
    assert provider_for_call(other.pk, "qwen") is None
    with django_assert_num_queries(0):  # not a name: no query
        assert provider_for_call(tenant.pk, "../qwen") is None
        assert provider_for_call(tenant.pk, "qwen\n") is None
        assert provider_for_call(tenant.pk, "") is None
        assert provider_for_call(tenant.pk, None) is None

    Provider.objects.filter(pk=provider.pk).update(active=False)
    providers_forget()
    assert provider_for_call(tenant.pk, "qwen").active is False  # found: the relay refuses its calls itself


def test_read_once_per_cache_time_and_a_change_elsewhere_seen_within_it(db, clock, django_assert_num_queries):
    tenant = TenantFactory()
    provider = new_provider(tenant)
    with django_assert_num_queries(1):
        for _ in range(5):
            assert provider_for_call(tenant.pk, "qwen").active is True

    # Another process deactivates it (no service of this process runs): this one keeps its read for a while.
    Provider.objects.filter(pk=provider.pk).update(active=False)
    clock.now += providers.CACHE_SECONDS - 0.1
    assert provider_for_call(tenant.pk, "qwen").active is True
    clock.now += 0.2
    assert provider_for_call(tenant.pk, "qwen").active is False

    # ...and deletes it: gone within the cache time.
    Provider.objects.filter(pk=provider.pk).delete()
    assert provider_for_call(tenant.pk, "qwen") is not None
    clock.now += providers.CACHE_SECONDS + 0.1
    assert provider_for_call(tenant.pk, "qwen") is None


def test_an_unknown_name_is_not_kept_so_a_new_provider_works_at_once(db, clock, django_assert_num_queries):
    tenant = TenantFactory()
    assert provider_for_call(tenant.pk, "qwen") is None
    Provider.objects.create(tenant=tenant, name="qwen", kind="openai", base_url="https://example.com/v1")  # elsewhere
    assert provider_for_call(tenant.pk, "qwen") is not None


def test_a_change_through_the_services_is_seen_at_once_on_this_process(db, clock, django_capture_on_commit_callbacks):
    tenant = TenantFactory()
    with django_capture_on_commit_callbacks(execute=True):
        provider = new_provider(tenant)
    assert provider_for_call(tenant.pk, "qwen").api_key == "sk-dashscope-123456789"

    with django_capture_on_commit_callbacks(execute=True):
        provider_update(tenant=tenant, provider_id=provider.pk, api_key="sk-rotated-abcdefgh", active=False)
    found = provider_for_call(tenant.pk, "qwen")
    assert found.api_key == "sk-rotated-abcdefgh" and found.active is False

    with django_capture_on_commit_callbacks(execute=True):
        provider_update(tenant=tenant, provider_id=provider.pk, name="qwen-intl")
    assert provider_for_call(tenant.pk, "qwen") is None
    assert provider_for_call(tenant.pk, "qwen-intl").pk == provider.pk

    with django_capture_on_commit_callbacks(execute=True):
        provider_delete(tenant=tenant, provider_id=provider.pk)
    assert provider_for_call(tenant.pk, "qwen-intl") is None


def test_a_change_that_is_rolled_back_leaves_the_cache_alone(db, django_capture_on_commit_callbacks):
    tenant = TenantFactory()
    provider = new_provider(tenant)
    assert provider_for_call(tenant.pk, "qwen") is not None
    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        with pytest.raises(Exception, match="base_url"):
            provider_update(tenant=tenant, provider_id=provider.pk, base_url="ftp://nowhere")
    assert callbacks == []
    assert providers._CACHED  # the read of the unchanged provider is kept


def test_services_refuse_another_tenants_provider(db):
    tenant, other = TenantFactory(), TenantFactory()
    theirs = new_provider(other)
    with pytest.raises(Provider.DoesNotExist):
        provider_update(tenant=tenant, provider_id=theirs.pk, active=False)
    with pytest.raises(Provider.DoesNotExist):
        provider_delete(tenant=tenant, provider_id=theirs.pk)
    assert Provider.objects.get(pk=theirs.pk).active is True
