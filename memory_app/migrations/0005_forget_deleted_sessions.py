"""Sessions deleted before deletion reached memory (memory_app.services.session_memory_forget): their message
vectors go, records that came only from deleted sessions are invalidated, the others stop citing them."""

from django.db import migrations
from django.db.models import Q
from django.utils import timezone

REASON = "its source session was deleted"
ACTOR = "session-delete"


def forget_deleted_sessions(apps, schema_editor):
    Session = apps.get_model("sessions_app", "Session")
    Record = apps.get_model("memory_app", "Record")
    RecordRevision = apps.get_model("memory_app", "RecordRevision")
    MessageEmbedding = apps.get_model("memory_app", "MessageEmbedding")
    deleted = Session.objects.filter(deleted_at__isnull=False)
    MessageEmbedding.objects.filter(message__session__in=deleted).delete()
    records = Record.objects.filter(valid=True).filter(
        Q(source_sessions__in=deleted) | Q(source_messages__session__in=deleted)
    )
    for record in records.distinct().order_by("pk"):
        now = timezone.now()
        if not record.source_sessions.filter(deleted_at__isnull=True).exists():
            record.valid, record.invalidated_at, record.invalidated_reason = False, now, REASON
            change = "invalidate"
        else:
            record.source_sessions.remove(*record.source_sessions.filter(deleted_at__isnull=False))
            record.source_messages.remove(*record.source_messages.filter(session__deleted_at__isnull=False))
            change = "update"
        record.revision += 1
        record.updated_at = now
        record.save()
        RecordRevision.objects.create(
            record=record,
            revision=record.revision,
            change=change,
            actor=ACTOR,
            reason=REASON,
            type=record.type,
            content=record.content,
            fields=record.fields,
            confidence=record.confidence,
            valid=record.valid,
            valid_from=record.valid_from,
            valid_until=record.valid_until,
            source_session_ids=sorted(str(i) for i in record.source_sessions.values_list("id", flat=True)),
            source_message_ids=sorted(str(i) for i in record.source_messages.values_list("id", flat=True)),
        )


class Migration(migrations.Migration):
    dependencies = [
        ("memory_app", "0004_sign_bits_shortlist"),
        ("sessions_app", "0007_usage_project_prices"),
    ]

    operations = [migrations.RunPython(forget_deleted_sessions, migrations.RunPython.noop)]
