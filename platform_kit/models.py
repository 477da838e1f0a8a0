"""The platform's own bookkeeping: the count of server errors, shared by every web process."""

from django.db import models


class ServerErrorTally(models.Model):
    """How many requests were answered with a server error (a 5xx other than the 503 of an outage) since
    `since`, by every process of the installation, and the last one: one row, shown on /healthz
    (platform_kit.server_errors)."""

    id = models.PositiveSmallIntegerField(primary_key=True, default=1, editable=False)
    count = models.BigIntegerField(default=0)
    since = models.DateTimeField(help_text="When counting started")
    last_at = models.DateTimeField(null=True, blank=True)
    last_request_id = models.CharField(max_length=64, blank=True)
    last_path = models.CharField(max_length=500, blank=True)
    last_status = models.PositiveSmallIntegerField(null=True, blank=True)

    class Meta:
        verbose_name = "server error tally"
        constraints = [models.CheckConstraint(condition=models.Q(id=1), name="servererrortally_one_row")]

    def __str__(self):
        return f"{self.count} server errors since {self.since:%Y-%m-%d %H:%M}"
