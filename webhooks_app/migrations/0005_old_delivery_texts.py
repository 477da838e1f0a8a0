"""Delivery logs written before the outbound policy (issue 30) kept up to 4,096 characters of an answer's body and
the raw reason a connection failed ("ConnectionRefusedError: [Errno 111] …", "Timed out after 10 s"), which told an
open port from a closed one. They are brought to what is kept now: 1,024 characters of a body, and one text for
every failure before an answer (the "; gave up after N attempts" that ends a last attempt's error kept)."""

from django.db import migrations

NO_ANSWER = (
    "Could not deliver: no HTTP answer (the receiver could not be reached, refused or reset the connection, or TLS "
    "failed; recorded before this release, the server's log of that time has the detail)."
)
MAX_BODY_KEPT = 1024


def _sql(table: str) -> list[tuple[str, list]]:
    return [
        (
            f"UPDATE {table} SET response_body = left(response_body, %s) WHERE length(response_body) > %s",
            [MAX_BODY_KEPT, MAX_BODY_KEPT],
        ),
        (
            f"UPDATE {table} SET error = %s || coalesce(substring(error from '; gave up after [0-9]+ attempts$'), '') "
            "WHERE response_status IS NULL AND error <> '' AND error !~ '^(Refused|Could not deliver|Not sent)'",
            [NO_ANSWER],
        ),
    ]


class Migration(migrations.Migration):
    dependencies = [("webhooks_app", "0004_fair_turns_and_circuit_breaker")]

    operations = [
        migrations.RunSQL(
            sql=_sql("webhooks_app_webhookattempt") + _sql("webhooks_app_webhookdelivery"), reverse_sql=[]
        )
    ]
