"""A tenant's upstream providers: created, changed and deleted here (the API, the admin and the commands share
these rules), and looked up for each gateway call (`provider_for_call`, cached a few seconds per process).

The provider's API key is write-only: it is encrypted at rest (gateway_app.secrets) and only its last characters
(`api_key_hint`) are ever shown again.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.db.models.functions import Lower
from django.utils import timezone

from gateway_app import secrets
from gateway_app.models import MAX_URL_LENGTH, PROVIDER_NAME_PATTERN, Provider, ProviderKind
from platform_kit import outbound
from sessions_app.models import Tenant

MAX_PROVIDERS_PER_TENANT = 100
MAX_API_KEY_LENGTH = 4096
MAX_ALLOWED_MODELS = 500
MAX_MODEL_NAME_LENGTH = 255
EDITABLE = ("name", "kind", "base_url", "api_key", "active", "allowed_models")
_NAME = re.compile(PROVIDER_NAME_PATTERN)
API_KEY_PATTERN = r"^[!-~]+$"  # printable ASCII, no spaces: it goes in a header
_API_KEY = re.compile(API_KEY_PATTERN)
API_KEY_RULE = "An API key is printable ASCII without spaces (it is sent in a header): check what was pasted."
NAME_RULE = (
    "1 to 64 letters, digits, '.', '_' or '-', starting with a letter or a digit: it is the provider's part of the "
    "gateway's URL (/gateway/<name>/v1/...)."
)

# How long a process trusts its last read of a provider (`provider_for_call`). The process that changes or deletes
# a provider forgets its reads at once (on commit); every other process sees the change within this time.
CACHE_SECONDS = 5.0
_CACHE_LIMIT = 10_000
_CACHED: dict[tuple[str, str], tuple[float, Provider]] = {}
_CACHED_LOCK = threading.Lock()


# -- validation ---------------------------------------------------------------------------------------------------
def base_url_problems(url, *, kind: str | None = None) -> list[str]:
    """What is wrong with a provider's base URL (empty when nothing is): http(s), a host, no credentials, no
    query, a host the outbound policy allows (platform_kit.outbound, ACE_OUTBOUND_ALLOW)."""
    if not isinstance(url, str) or not url.strip():
        return [
            "Give the base URL the official SDK takes, e.g. https://api.openai.com/v1 or https://api.anthropic.com."
        ]
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        return [f"At most {MAX_URL_LENGTH} characters (it has {len(url)})."]
    if any(c.isspace() for c in url) or any(ord(c) < 32 or ord(c) == 127 for c in url):
        return ["The URL holds spaces or control characters: percent-encode them."]
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        return [f"Not a URL: {error}."]
    if parts.scheme not in ("http", "https"):
        return [f"Use an http:// or https:// URL (not {parts.scheme + '://' if parts.scheme else 'a relative one'})."]
    if not parts.hostname:
        return ["The URL names no host."]
    if parts.username is not None or parts.password is not None:
        return ["Remove the user name and password from the URL: the provider's key goes in api_key."]
    if port == 0:
        return ["Port 0 is not a port."]
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        return ["A base URL has no query or fragment: the gateway appends the API's path to it."]
    if kind == ProviderKind.ANTHROPIC and parts.path.rstrip("/").endswith("/v1"):
        return [
            "An Anthropic base URL ends before /v1, as the Anthropic SDK takes it (https://api.anthropic.com): the "
            "gateway adds /v1/messages."
        ]
    refusal = outbound.url_refusal(url)
    if refusal:
        return [refusal]
    return []


def _api_key_problems(api_key) -> list[str]:
    if not isinstance(api_key, str) or not api_key.strip():
        return ["Give the provider's API key (it is stored encrypted and never shown again)."]
    api_key = api_key.strip()
    if len(api_key) > MAX_API_KEY_LENGTH:
        return [f"At most {MAX_API_KEY_LENGTH} characters (it has {len(api_key)})."]
    if not _API_KEY.fullmatch(api_key):
        return [API_KEY_RULE]
    return []


def _models_cleaned(models) -> tuple[list[str] | None, list[str]]:
    """The allow-list deduplicated in the order given, or the problems with it."""
    if not isinstance(models, list | tuple) or not all(isinstance(model, str) for model in models):
        return None, ["A list of model names (an empty list: any model)."]
    cleaned = list(dict.fromkeys(model.strip() for model in models))
    if "" in cleaned:
        return None, ["A model name is never empty."]
    too_long = [model for model in cleaned if len(model) > MAX_MODEL_NAME_LENGTH]
    if too_long:
        return None, [f"A model name has at most {MAX_MODEL_NAME_LENGTH} characters ({too_long[0][:40]!r}…)."]
    if len(cleaned) > MAX_ALLOWED_MODELS:
        return None, [f"At most {MAX_ALLOWED_MODELS} models (it has {len(cleaned)})."]
    return cleaned, []


def _name_taken(*, tenant_id, name: str, provider_id=None) -> bool:
    same = Provider.objects.alias(lower_name=Lower("name")).filter(tenant_id=tenant_id, lower_name=name.lower())
    return same.exclude(pk=provider_id).exists() if provider_id else same.exists()


def _name_taken_message(name: str) -> str:
    return f"This tenant already has a provider named {name!r} (names are compared ignoring case): choose another."


def provider_validate(*, tenant: Tenant, values: dict, provider: Provider | None = None) -> dict:
    """The values cleaned (name, base URL and key stripped, the allow-list deduplicated), checked as a whole:
    `provider` is the one being changed (None: a new one; then name, kind, base_url and api_key are required).
    A ValidationError names every problem by field. Shared by the API, the admin's form and the services."""
    errors: dict[str, list[str]] = {}
    cleaned = dict(values)
    if provider is None:
        for field in ("name", "kind", "base_url", "api_key"):
            if field not in values:
                errors[field] = ["This field is required."]
    if "name" in values:
        name = values["name"]
        if not isinstance(name, str) or not _NAME.fullmatch(name.strip()):
            errors["name"] = [NAME_RULE]
        else:
            cleaned["name"] = name.strip()
            if _name_taken(tenant_id=tenant.pk, name=cleaned["name"], provider_id=provider.pk if provider else None):
                errors["name"] = [_name_taken_message(cleaned["name"])]
    if "kind" in values and values["kind"] not in ProviderKind.values:
        errors["kind"] = [f"One of: {', '.join(ProviderKind.values)}."]
    if "base_url" in values or ("kind" in values and provider is not None):
        kind = values.get("kind", provider.kind if provider else None)
        url = values.get("base_url", provider.base_url if provider else None)
        problems = base_url_problems(url, kind=kind if kind in ProviderKind.values else None)
        if problems:
            errors["base_url"] = problems
        elif "base_url" in values:
            cleaned["base_url"] = url.strip().rstrip("/")
    if "api_key" in values:
        problems = _api_key_problems(values["api_key"])
        if problems:
            errors["api_key"] = problems
        else:
            cleaned["api_key"] = values["api_key"].strip()
    if "active" in values and not isinstance(values["active"], bool):
        errors["active"] = ["true or false."]
    if "allowed_models" in values:
        models, problems = _models_cleaned(values["allowed_models"])
        if problems:
            errors["allowed_models"] = problems
        else:
            cleaned["allowed_models"] = models
    if errors:
        raise ValidationError(errors)
    return cleaned


# -- writes -------------------------------------------------------------------------------------------------------
def _save(provider: Provider, *, name: str) -> None:
    """Saved, with the name's uniqueness (a race the check before lost) reported as the check reports it."""
    try:
        with transaction.atomic():
            provider.save()
    except IntegrityError as error:
        if "provider_tenant_name" in str(error):
            raise ValidationError({"name": [_name_taken_message(name)]}) from None
        raise


def provider_create(
    *,
    tenant: Tenant,
    name: str,
    kind: str,
    base_url: str,
    api_key: str,
    active: bool = True,
    allowed_models: list[str] | None = None,
) -> Provider:
    """A new provider of `tenant`; its key is encrypted before it is stored."""
    values = provider_validate(
        tenant=tenant,
        values={
            "name": name,
            "kind": kind,
            "base_url": base_url,
            "api_key": api_key,
            "active": active,
            "allowed_models": [] if allowed_models is None else allowed_models,
        },
    )
    with transaction.atomic():
        Tenant.objects.select_for_update().filter(pk=tenant.pk).exists()  # one count at a time per tenant
        if Provider.objects.filter(tenant=tenant).count() >= MAX_PROVIDERS_PER_TENANT:
            raise ValidationError(
                {"name": [f"A tenant has at most {MAX_PROVIDERS_PER_TENANT} providers: delete one you no longer use."]}
            )
        provider = Provider(tenant=tenant, **{field: values[field] for field in EDITABLE if field != "api_key"})
        provider.api_key = values["api_key"]
        _save(provider, name=values["name"])
        transaction.on_commit(providers_forget)
    return provider


def provider_update(*, tenant: Tenant, provider_id, **changes) -> Provider:
    """Change a provider's name, kind, base_url, api_key (replaced; never read back), active flag or
    allowed_models. Raises Provider.DoesNotExist for another tenant's or an unknown provider."""
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise ValidationError({name: [f"Not editable; one of: {', '.join(EDITABLE)}."] for name in sorted(unknown)})
    with transaction.atomic():
        provider = Provider.objects.select_for_update().get(pk=provider_id, tenant=tenant)
        values = provider_validate(tenant=tenant, values=changes, provider=provider)
        changed = False
        for field, value in values.items():
            if field == "api_key":
                provider.api_key = value
                changed = True
            elif getattr(provider, field) != value:
                setattr(provider, field, value)
                changed = True
        if changed:
            provider.updated_at = timezone.now()
            _save(provider, name=provider.name)
            transaction.on_commit(providers_forget)
    return provider


def provider_delete(*, tenant: Tenant, provider_id) -> None:
    """Delete a provider: its calls are refused (404) at once on this process, within CACHE_SECONDS on the others.
    What was recorded through it stays (the sessions and turns are the ledger's). Raises Provider.DoesNotExist for
    another tenant's or an unknown provider."""
    with transaction.atomic():
        provider = Provider.objects.select_for_update().get(pk=provider_id, tenant=tenant)
        provider.delete()
        transaction.on_commit(providers_forget)


def providers_set_active(*, providers, active: bool) -> int:
    """Activate or deactivate the given providers (a queryset, any tenants: the admin's actions); how many changed."""
    with transaction.atomic():
        changed = providers.exclude(active=active).update(active=active, updated_at=timezone.now())
        transaction.on_commit(providers_forget)
    return changed


@dataclasses.dataclass
class KeyRotation:
    reencrypted: int = 0
    # The providers whose key no configured key decrypts: their keys must be entered again.
    unreadable: list[Provider] = dataclasses.field(default_factory=list)


def provider_keys_reencrypt() -> KeyRotation:
    """Every stored provider key encrypted again with the first key of ACE_SECRETS_KEYS (rotation: docs/gateway.md,
    "Keys at rest"). A key no configured key decrypts is left as it is and named in the result; a key changed
    meanwhile is left to its change (written with the first key already)."""
    rotation = KeyRotation()
    stored = Provider.objects.exclude(api_key_encrypted="").select_related("tenant").order_by("tenant__name", "name")
    for provider in list(stored):
        try:
            token = secrets.reencrypt(provider.api_key_encrypted)
        except secrets.SecretUnreadable:
            rotation.unreadable.append(provider)
            continue
        rotation.reencrypted += Provider.objects.filter(
            pk=provider.pk, api_key_encrypted=provider.api_key_encrypted
        ).update(api_key_encrypted=token)
    providers_forget()
    return rotation


# -- the lookup of every gateway call -----------------------------------------------------------------------------
def providers_forget() -> None:
    """Drop this process's cached provider reads (a provider was changed or deleted)."""
    with _CACHED_LOCK:
        _CACHED.clear()


def provider_cached(tenant_id, name: str) -> Provider | None:
    """provider_for_call's answer while this process trusts it, without a query (an event loop may call it); None
    when it must be read."""
    cached = _CACHED.get((str(tenant_id), name.lower()))
    return cached[1] if cached is not None and cached[0] > time.monotonic() else None


def provider_for_call(tenant_id, name: str) -> Provider | None:
    """The tenant's provider named `name` (ignoring case), inactive ones included (the caller refuses their
    calls), or None. Read at most once every CACHE_SECONDS per process: a change made on this process is seen at
    once, one made on another process within CACHE_SECONDS. An unknown name is not kept, so a new provider works at
    once everywhere. The Provider returned is shared by the calls of this process: read it, never change it."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return None
    key = (str(tenant_id), name.lower())
    cached = _CACHED.get(key)
    if cached is not None and cached[0] > time.monotonic():
        return cached[1]
    provider = Provider.objects.alias(lower_name=Lower("name")).filter(tenant_id=tenant_id, lower_name=key[1]).first()
    if provider is None:
        with _CACHED_LOCK:
            _CACHED.pop(key, None)
        return None
    if CACHE_SECONDS > 0:
        with _CACHED_LOCK:
            if len(_CACHED) >= _CACHE_LIMIT:
                _CACHED.clear()
            _CACHED[key] = (time.monotonic() + CACHE_SECONDS, provider)
    return provider
