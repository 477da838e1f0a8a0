"""Reads of the raw telemetry an OTLP exporter sent (ingest_app.otlp)."""

from __future__ import annotations

from django.db.models import Sum
from django.db.models.fields.json import KeyTextTransform

from ingest_app.models import TelemetryKind, TelemetryRecord
from sessions_app.models import Session

TOKEN_USAGE, COST_USAGE = "claude_code.token.usage", "claude_code.cost.usage"


def session_metered(*, session: Session) -> dict:
    """What Claude Code's metrics say the session used — "metered by Claude Code": {"tokens": {type: n},
    "cost_usd": x}. Never added to the counters (its api_request events carry the same calls); empty when
    the session sent no metrics."""
    points = TelemetryRecord.objects.filter(session=session, kind=TelemetryKind.METRIC)
    tokens = (
        points.filter(name=TOKEN_USAGE)
        .annotate(token_type=KeyTextTransform("type", "attributes"))
        .values("token_type")
        .annotate(total=Sum("value"))
        .order_by("token_type")
    )
    metered: dict = {}
    by_type = {row["token_type"] or "": int(round(row["total"] or 0)) for row in tokens}
    if by_type:
        metered["tokens"] = by_type
    cost = points.filter(name=COST_USAGE).aggregate(total=Sum("value"))["total"]
    if cost is not None:
        metered["cost_usd"] = cost
    return metered
