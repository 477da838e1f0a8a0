"""Usage roll-ups (hourly, daily, per session and model) and the model prices costs are computed from."""

from decimal import Decimal

from django.db import models
from django.db.models import Q

from sessions_app.models.ledger import Session, UsageCounters
from sessions_app.models.tenancy import Tenant
from sessions_app.schema import MACHINE_MAX_LENGTH

PRICE_MAX = 10**6  # USD per million tokens: what numeric(12, 6) holds


class UsageRollup(UsageCounters):
    """The dimensions and counters every usage roll-up shares; each adds its time bucket."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    tool = models.CharField(max_length=64, blank=True)
    user_id = models.CharField("user ID", max_length=255, blank=True)
    project = models.CharField(max_length=255, blank=True)
    # A database default too: raw inserts of roll-up rows (bench/dashboard.py) that name no machine get none.
    machine = models.CharField(max_length=MACHINE_MAX_LENGTH, blank=True, default="", db_default="")
    model = models.CharField(max_length=255, blank=True)
    conversations = models.BigIntegerField(default=0)
    sessions = models.BigIntegerField(default=0)

    class Meta:
        abstract = True

    def _dimensions(self) -> str:
        return f"{self.tool or '-'} {self.user_id or '-'} {self.model or '-'}"


class UsageHourly(UsageRollup):
    """Counters per tenant, UTC hour, tool, user, project, machine and model: what grouped statistics and the
    dashboard read. A message counts in the hour it was created; a conversation in the hour of the
    message that started it; a session once, in the hour (and under the model) of its first message."""

    hour = models.DateTimeField()

    class Meta:
        verbose_name = "hourly usage"
        verbose_name_plural = "hourly usage"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "hour", "tool", "user_id", "project", "machine", "model"], name="usage_hourly_key"
            )
        ]

    def __str__(self):
        return f"{self.hour:%Y-%m-%d %H}:00 {self._dimensions()}"


class UsageDaily(UsageRollup):
    """The hourly roll-ups summed per UTC day, maintained with them: what the dashboard and whole-day
    statistics read (a quarter of the rows or fewer, so a 90-day window sums quickly)."""

    day = models.DateField()

    class Meta:
        verbose_name = "daily usage"
        verbose_name_plural = "daily usage"
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "day", "tool", "user_id", "project", "machine", "model"], name="usage_daily_key"
            )
        ]

    def __str__(self):
        return f"{self.day:%Y-%m-%d} {self._dimensions()}"


class SessionModelUsage(models.Model):
    """A session's requests and tokens per model and UTC day, kept beside the hourly roll-ups: what a session's
    cost is computed from (a price applies per model, as it was on the day), without reading its requests."""

    id = models.BigAutoField("ID", primary_key=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="+", db_index=False)
    session = models.ForeignKey(Session, on_delete=models.CASCADE, related_name="model_usage", db_index=False)
    model = models.CharField(max_length=255, blank=True)
    day = models.DateField(help_text="The UTC day the usage happened (a price applies as it was that day)")
    requests = models.BigIntegerField(default=0)
    input_tokens = models.BigIntegerField(default=0)
    output_tokens = models.BigIntegerField(default=0)
    cache_read_tokens = models.BigIntegerField(default=0)
    cache_creation_tokens = models.BigIntegerField(default=0)
    cache_creation_5m_tokens = models.BigIntegerField("5-minute cache writes", default=0)
    cache_creation_1h_tokens = models.BigIntegerField("1-hour cache writes", default=0)
    total_tokens = models.BigIntegerField(default=0)
    long_context_input_tokens = models.BigIntegerField(default=0)
    long_context_output_tokens = models.BigIntegerField(default=0)
    long_context_cache_read_tokens = models.BigIntegerField(default=0)
    long_context_cache_creation_tokens = models.BigIntegerField(default=0)
    long_context_cache_creation_1h_tokens = models.BigIntegerField(default=0)
    reported_cost_nano_usd = models.BigIntegerField("reported cost (nano-USD)", default=0)
    reported_cost_requests = models.BigIntegerField(default=0)

    class Meta:
        verbose_name = "session usage by model"
        verbose_name_plural = "session usage by model"
        constraints = [
            models.UniqueConstraint(fields=["session", "model", "day", "tenant"], name="session_model_day_usage_key")
        ]
        # The models a tenant used, to price them: an index-only scan, not a read of the table.
        indexes = [models.Index(fields=["tenant", "model"], name="session_model_usage_tenant")]

    def __str__(self):
        return f"{self.model or '-'}: {self.total_tokens:,} tokens"


class PriceMatch(models.TextChoices):
    EXACT = "exact", "exact name"
    PREFIX = "prefix", "names starting with it"


class ModelPrice(models.Model):
    """List price of a model in USD per million tokens of each kind. Costs are computed from token sums
    when they are read, so correcting a price here changes every cost shown, past usage included."""

    id = models.BigAutoField("ID", primary_key=True)
    model = models.CharField(
        max_length=255,
        help_text="A model name as the tools report it (lower case), or the beginning of such names (see match).",
    )
    match = models.CharField(
        max_length=8,
        choices=PriceMatch.choices,
        default=PriceMatch.EXACT,
        help_text="An exact name wins over prefixes; among prefixes the longest wins.",
    )
    provider = models.CharField(max_length=64, blank=True, help_text="anthropic, openai, google, alibaba…")
    input_usd_per_mtok = models.DecimalField(
        "input", max_digits=12, decimal_places=6, help_text="USD per million input tokens (not read from a cache)"
    )
    output_usd_per_mtok = models.DecimalField("output", max_digits=12, decimal_places=6)
    cache_read_usd_per_mtok = models.DecimalField("cache read", max_digits=12, decimal_places=6)
    cache_write_usd_per_mtok = models.DecimalField(
        "cache write (5 minutes)",
        max_digits=12,
        decimal_places=6,
        help_text="USD per million tokens written to a 5-minute cache (and writes whose lifetime is not reported)",
    )
    cache_write_1h_usd_per_mtok = models.DecimalField(
        "cache write (1 hour)",
        max_digits=12,
        decimal_places=6,
        blank=True,
        help_text="USD per million tokens written to a 1-hour cache; empty: 2x input, as Anthropic prices them",
    )
    long_context_input_usd_per_mtok = models.DecimalField(
        "long-context input",
        max_digits=12,
        decimal_places=6,
        null=True,
        blank=True,
        help_text="For requests whose prompt is over 200K tokens (Sonnet 4/4.5 with the 1M context, Gemini 2.5/3 Pro); "
        "empty: no long-context tier, the rate above applies. The same for the four below.",
    )
    long_context_output_usd_per_mtok = models.DecimalField(
        "long-context output", max_digits=12, decimal_places=6, null=True, blank=True
    )
    long_context_cache_read_usd_per_mtok = models.DecimalField(
        "long-context cache read", max_digits=12, decimal_places=6, null=True, blank=True
    )
    long_context_cache_write_usd_per_mtok = models.DecimalField(
        "long-context cache write (5 minutes)", max_digits=12, decimal_places=6, null=True, blank=True
    )
    long_context_cache_write_1h_usd_per_mtok = models.DecimalField(
        "long-context cache write (1 hour)", max_digits=12, decimal_places=6, null=True, blank=True
    )
    effective_from = models.DateField(
        null=True,
        blank=True,
        help_text="The UTC day this price took effect; empty: since always. Usage is priced at the price in force on "
        "the day it happened.",
    )
    source = models.URLField(max_length=500, blank=True, help_text="Where the price was published")
    checked_on = models.DateField(null=True, blank=True, help_text="When the price was last compared with the source")
    notes = models.TextField(blank=True, help_text="Tiers not modelled, uncertainty, aliases")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["provider", "model", "match", models.F("effective_from").asc(nulls_first=True)]
        verbose_name = "model price"
        constraints = [
            models.UniqueConstraint(
                fields=["model", "match", "effective_from"], name="model_price_key", nulls_distinct=False
            ),
            models.CheckConstraint(
                condition=Q(input_usd_per_mtok__gte=0)
                & Q(output_usd_per_mtok__gte=0)
                & Q(cache_read_usd_per_mtok__gte=0)
                & Q(cache_write_usd_per_mtok__gte=0)
                & Q(cache_write_1h_usd_per_mtok__gte=0),
                name="model_price_not_negative",
            ),
            # A numeric column holds NaN too (never Infinity: it has a precision), and NaN is above every bound.
            models.CheckConstraint(
                condition=Q(input_usd_per_mtok__lt=PRICE_MAX)
                & Q(output_usd_per_mtok__lt=PRICE_MAX)
                & Q(cache_read_usd_per_mtok__lt=PRICE_MAX)
                & Q(cache_write_usd_per_mtok__lt=PRICE_MAX)
                & Q(cache_write_1h_usd_per_mtok__lt=PRICE_MAX),
                name="model_price_finite",
            ),
            # The long-context rates: none, or each as bounded as the others (a NULL passes a CHECK; NaN does not).
            models.CheckConstraint(
                condition=Q(long_context_input_usd_per_mtok__gte=0)
                & Q(long_context_input_usd_per_mtok__lt=PRICE_MAX)
                & Q(long_context_output_usd_per_mtok__gte=0)
                & Q(long_context_output_usd_per_mtok__lt=PRICE_MAX)
                & Q(long_context_cache_read_usd_per_mtok__gte=0)
                & Q(long_context_cache_read_usd_per_mtok__lt=PRICE_MAX)
                & Q(long_context_cache_write_usd_per_mtok__gte=0)
                & Q(long_context_cache_write_usd_per_mtok__lt=PRICE_MAX)
                & Q(long_context_cache_write_1h_usd_per_mtok__gte=0)
                & Q(long_context_cache_write_1h_usd_per_mtok__lt=PRICE_MAX),
                name="model_price_long_context_bounds",
            ),
        ]

    def __str__(self):
        name = self.model + ("*" if self.match == PriceMatch.PREFIX else "")
        return f"{name} from {self.effective_from:%Y-%m-%d}" if self.effective_from else name

    def save(self, *args, **kwargs):
        self.model = self.model.strip().lower()
        if self.cache_write_1h_usd_per_mtok is None and self.input_usd_per_mtok is not None:
            self.cache_write_1h_usd_per_mtok = Decimal(self.input_usd_per_mtok) * 2
        super().save(*args, **kwargs)
