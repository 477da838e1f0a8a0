"""Full-text indexing of long messages moves after the write.

PostgreSQL's `to_tsvector` reads about 5–6 MB of text a second on one core, and agent logs are mostly
tool output: as a generated column, the search vector was ~97 % of the cost of storing an imported
message. The column becomes a plain one that triggers fill on insert (and when the content changes)
for messages of up to INLINE_CHARS characters — chat messages, searchable at once as before — and leaves
NULL for longer ones, and for every message of a bulk import (which sets `ace.defer_search`): the task
`sessions_app.tasks.index_messages` (queued after the commit) and the periodic sweep below fill them.
A partial index finds the ones still waiting.

`ace_tsvector` also skips its two regular-expression passes when the text has no CJK characters or
CJK punctuation (the passes change nothing then; the result is identical): twice as fast on short text.
"""

from django.contrib.postgres.search import SearchVectorField
from django.db import migrations, models

INLINE_CHARS = 2000  # sessions_app.search.INLINE_CHARS
CJK_OR_PUNCT = (
    "[\\u3000-\\u303f\\uff01-\\uff0f\\uff1a-\\uff20\\uff3b-\\uff40\\uff5b-\\uff65"
    "\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uac00-\\ud7af\\uf900-\\ufaff]"
)
FUNCTION_BODY = """
  SELECT to_tsvector('pg_catalog.english'::regconfig,
    CASE WHEN body ~ '{test}' THEN
      regexp_replace(
        -- CJK punctuation becomes a stop word: it takes a position, so a phrase never spans it.
        regexp_replace(body, '[\\u3000-\\u303f\\uff01-\\uff0f\\uff1a-\\uff20\\uff3b-\\uff40\\uff5b-\\uff65]',
                       ' the ', 'g'),
        '([\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uac00-\\ud7af\\uf900-\\ufaff])', ' \\1 ', 'g')
    ELSE body END)
"""
OLD_FUNCTION_BODY = """
  SELECT to_tsvector('pg_catalog.english'::regconfig,
    regexp_replace(
      regexp_replace(body, '[\\u3000-\\u303f\\uff01-\\uff0f\\uff1a-\\uff20\\uff3b-\\uff40\\uff5b-\\uff65]',
                     ' the ', 'g'),
      '([\\u3040-\\u30ff\\u3400-\\u4dbf\\u4e00-\\u9fff\\uac00-\\ud7af\\uf900-\\ufaff])', ' \\1 ', 'g'))
"""


def _function(body: str) -> str:
    return (
        "CREATE OR REPLACE FUNCTION ace_tsvector(body text) RETURNS tsvector "
        f"LANGUAGE sql IMMUTABLE PARALLEL SAFE STRICT AS $${body}$$;"
    )


TRIGGER = f"""
ALTER TABLE sessions_app_message ALTER COLUMN search_vector DROP EXPRESSION;
CREATE FUNCTION ace_message_search_vector() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF length(NEW.content) <= {INLINE_CHARS} THEN
    NEW.search_vector := ace_tsvector(NEW.content);
  ELSE
    NEW.search_vector := NULL;  -- indexed after the commit (sessions_app.tasks.index_messages)
  END IF;
  RETURN NEW;
END $$;
-- The conditions are checked before the function is called (a call costs more than the row's other
-- work): an insert of long text, or during a bulk import, leaves the column NULL for the indexing task.
CREATE TRIGGER message_search_vector_insert BEFORE INSERT ON sessions_app_message FOR EACH ROW
  WHEN (octet_length(NEW.content) <= {INLINE_CHARS * 4}
        AND current_setting('ace.defer_search', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION ace_message_search_vector();
CREATE TRIGGER message_search_vector_update BEFORE UPDATE OF content ON sessions_app_message FOR EACH ROW
  WHEN (OLD.content IS DISTINCT FROM NEW.content)
  EXECUTE FUNCTION ace_message_search_vector();
"""
REVERSE_TRIGGER = """
DROP TRIGGER message_search_vector_insert ON sessions_app_message;
DROP TRIGGER message_search_vector_update ON sessions_app_message;
DROP FUNCTION ace_message_search_vector();
DROP INDEX IF EXISTS message_search;
ALTER TABLE sessions_app_message DROP COLUMN search_vector;
ALTER TABLE sessions_app_message ADD COLUMN search_vector tsvector
  GENERATED ALWAYS AS (ace_tsvector(content)) STORED;
CREATE INDEX message_search ON sessions_app_message USING gin (search_vector);
"""

TASK = "sessions_app.tasks.index_pending_messages"
NAME = "Index long messages for keyword search"


def create_schedule(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
    PeriodicTask.objects.get_or_create(
        name=NAME,
        defaults={
            "task": TASK,
            "interval": every_minute,
            "enabled": True,
            "description": "Messages longer than 2,000 characters are indexed after their write; this catches "
            "up with any a broker outage kept from the queue.",
        },
    )


def remove_schedule(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=NAME, task=TASK).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("sessions_app", "0007_usage_project_prices"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [
        migrations.RunSQL(_function(FUNCTION_BODY.format(test=CJK_OR_PUNCT)), _function(OLD_FUNCTION_BODY)),
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunSQL(TRIGGER, REVERSE_TRIGGER)],
            state_operations=[
                migrations.AlterField(
                    model_name="message",
                    name="search_vector",
                    field=SearchVectorField(editable=False, null=True),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="message",
            index=models.Index(
                condition=models.Q(("search_vector__isnull", True)), fields=["received_at"], name="message_unindexed"
            ),
        ),
        migrations.RunPython(create_schedule, remove_schedule),
    ]
