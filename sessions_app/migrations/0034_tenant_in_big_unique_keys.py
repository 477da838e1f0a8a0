# The unique keys of the big tables (messages, LLM requests, conversations) include tenant_id, last (docs/
# scaling.md). Each new index is built CONCURRENTLY while writers go on, then swapped in for the old one in a
# moment's lock (platform_kit.migration_operations.UniqueRebuiltConcurrently), hence a non-atomic migration.

from django.db import migrations, models
from django.db.models import Q

from platform_kit.migration_operations import UniqueRebuiltConcurrently


def _rebuilt(model_name, name, old_fields, condition=None):
    options = {"condition": condition} if condition is not None else {}
    return UniqueRebuiltConcurrently(
        model_name,
        models.UniqueConstraint(fields=old_fields, name=name, **options),
        models.UniqueConstraint(fields=[*old_fields, "tenant"], name=name, **options),
    )


class Migration(migrations.Migration):
    atomic = False
    dependencies = [("sessions_app", "0033_tenant_in_unique_keys")]

    operations = [
        _rebuilt("message", "message_session_seq", ["session", "seq"]),
        _rebuilt("message", "message_session_external_id", ["session", "external_id"], Q(external_id__isnull=False)),
        _rebuilt("llmrequest", "llmrequest_session_request_id", ["session", "request_id"], ~Q(request_id="")),
        _rebuilt("conversation", "conversation_session_ordinal", ["session", "ordinal"]),
    ]
