"""The retention models move here from sessions_app (issue 31) without touching the database: the state gets
them with their tables as they were (sessions_app_retention*), and sessions_app's 0024 drops them from its own
state. 0002 then gives the tables their names here and moves the content types."""

import django.db.models.deletion
import django.utils.timezone
import uuid
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('sessions_app', '0023_ingest_models_move'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name='RetentionPolicy',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False, verbose_name='ID')),
                        ('message_content_days', models.IntegerField(blank=True, help_text='Purge the content of messages older than this many days (1–36500); empty: keep it forever', null=True)),
                        ('roles', models.JSONField(blank=True, default=list, help_text='The roles whose content is purged, e.g. ["toolResult"]; empty: every role')),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('tenant', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='retention_policy', to='sessions_app.tenant')),
                    ],
                    options={
                        'verbose_name': 'retention policy',
                        'verbose_name_plural': 'retention policies',
                        'db_table': 'sessions_app_retentionpolicy',
                    },
                ),
                migrations.CreateModel(
                    name='RetentionEvent',
                    fields=[
                        ('id', models.BigAutoField(primary_key=True, serialize=False, verbose_name='ID')),
                        ('action', models.CharField(choices=[('policy_set', 'retention policy set'), ('ttl_created', 'record TTL created'), ('ttl_updated', 'record TTL changed'), ('ttl_deleted', 'record TTL deleted'), ('record_purged', 'expired record deleted')], max_length=32)),
                        ('actor', models.CharField(help_text='api, admin:<user>, command or schedule', max_length=255)),
                        ('subject_id', models.CharField(blank=True, help_text='The policy, TTL or record concerned', max_length=64, verbose_name='subject ID')),
                        ('before', models.JSONField(blank=True, null=True)),
                        ('after', models.JSONField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                        ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='sessions_app.tenant')),
                    ],
                    options={
                        'db_table': 'sessions_app_retentionevent',
                        'ordering': ['-created_at', '-id'],
                        'indexes': [models.Index(fields=['tenant', '-created_at'], name='retentionevent_tenant_created')],
                    },
                ),
                migrations.CreateModel(
                    name='RetentionRun',
                    fields=[
                        ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False, verbose_name='ID')),
                        ('dry_run', models.BooleanField(help_text='A preview: nothing was changed')),
                        ('trigger', models.CharField(choices=[('schedule', 'daily schedule'), ('command', 'ace_retention'), ('admin', 'admin'), ('api', 'API')], max_length=16)),
                        ('started_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('content_cutoff', models.DateTimeField(blank=True, help_text='Messages created before this time had their content purged', null=True)),
                        ('messages_purged', models.BigIntegerField(default=0)),
                        ('oldest_message_at', models.DateTimeField(blank=True, null=True)),
                        ('newest_message_at', models.DateTimeField(blank=True, null=True)),
                        ('records_expired', models.BigIntegerField(default=0, help_text='Expired records kept (no longer recalled)')),
                        ('records_purged', models.BigIntegerField(default=0, help_text='Expired records deleted')),
                        ('error', models.TextField(blank=True)),
                        ('tenant', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='sessions_app.tenant')),
                    ],
                    options={
                        'db_table': 'sessions_app_retentionrun',
                        'ordering': ['-started_at'],
                        'indexes': [models.Index(fields=['tenant', '-started_at'], name='retentionrun_tenant_started')],
                    },
                ),
            ],
            database_operations=[],
        ),
    ]
