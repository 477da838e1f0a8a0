# Plan windows (issue 32, part 6): the usage plans (a tenant's, and one user's overriding it), and the index that
# finds the messages that are usage outside any LLM request, which a user's 5-hour blocks read with the requests.

import uuid

import django.db.models.deletion
import django.utils.timezone
from django.contrib.postgres.operations import AddIndexConcurrently
from django.db import migrations, models


class Migration(migrations.Migration):
    # The index is built without locking out appends: the message table is the largest one.
    atomic = False

    dependencies = [
        ("sessions_app", "0026_cache_write_lifetimes_dated_prices"),
    ]

    operations = [
        migrations.CreateModel(
            name="UsagePlan",
            fields=[
                ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False, verbose_name="ID")),
                ("user_id", models.CharField(blank=True, help_text="Empty: the tenant's plan, for every user without their own", max_length=255, verbose_name="user ID")),
                ("preset", models.CharField(choices=[("pro", "Claude Pro"), ("max5", "Claude Max 5×"), ("max20", "Claude Max 20×"), ("custom", "custom limits")], default="custom", help_text="Where the figures started from; the figures below are what counts", max_length=8)),
                ("token_limit", models.BigIntegerField(blank=True, help_text="Tokens per 5-hour block", null=True)),
                ("token_counting", models.CharField(choices=[("input_output", "input + output (as Claude-Code-Usage-Monitor, whose figures the presets are)"), ("all", "input + output + cache read + cache write (as ccusage's --token-limit)")], default="input_output", help_text="Which tokens count against the token limits", max_length=16)),
                ("cost_limit", models.DecimalField(blank=True, decimal_places=6, help_text="API-equivalent USD per 5-hour block", max_digits=16, null=True)),
                ("message_limit", models.BigIntegerField(blank=True, help_text="Messages (API responses: the block's requests) per 5-hour block", null=True)),
                ("weekly_token_limit", models.BigIntegerField(blank=True, help_text="Tokens per week", null=True)),
                ("weekly_cost_limit", models.DecimalField(blank=True, decimal_places=6, help_text="API-equivalent USD per week", max_digits=16, null=True)),
                ("weekly_message_limit", models.BigIntegerField(blank=True, help_text="Requests per week", null=True)),
                ("week_starts_on", models.CharField(choices=[("monday", "Monday"), ("tuesday", "Tuesday"), ("wednesday", "Wednesday"), ("thursday", "Thursday"), ("friday", "Friday"), ("saturday", "Saturday"), ("sunday", "Sunday")], default="sunday", help_text="The weekday the week resets (UTC)", max_length=9)),
                ("week_start_hour", models.PositiveSmallIntegerField(default=0, help_text="The UTC hour it resets, 0–23")),
                ("notes", models.TextField(blank=True, max_length=2000)),
                ("created_at", models.DateTimeField(default=django.utils.timezone.now, editable=False)),
                ("updated_at", models.DateTimeField(auto_now=True)),
                ("tenant", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="usage_plans", to="sessions_app.tenant")),
            ],
            options={
                "verbose_name": "usage plan",
                "ordering": ["tenant", "user_id"],
                "constraints": [
                    models.UniqueConstraint(fields=("tenant", "user_id"), name="usage_plan_tenant_user"),
                    models.CheckConstraint(condition=models.Q(("week_start_hour__lte", 23)), name="usage_plan_week_start_hour"),
                ],
            },
        ),
        AddIndexConcurrently(
            model_name="message",
            index=models.Index(
                condition=models.Q(
                    ("llm_request__isnull", True),
                    models.Q(
                        ("input_tokens__gt", 0),
                        ("output_tokens__gt", 0),
                        ("cache_read_tokens__gt", 0),
                        ("cache_creation_tokens__gt", 0),
                        ("api_calls__gt", 0),
                        _connector="OR",
                    ),
                ),
                fields=["session", "created_at"],
                name="message_unrequested_usage",
            ),
        ),
    ]
