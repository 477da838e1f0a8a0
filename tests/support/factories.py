import factory

from sessions_app.models import Session, Tenant
from sessions_app.services.apikeys import apikey_create


class TenantFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Tenant
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"tenant-{n}")


class SessionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Session

    tenant = factory.SubFactory(TenantFactory)
    name = factory.Sequence(lambda n: f"Session {n}")
    tool = "chat"
    user_id = factory.Sequence(lambda n: f"user-{n}")


def api_key_for(tenant_name: str) -> str:
    return apikey_create(tenant_name=tenant_name).plain_key
