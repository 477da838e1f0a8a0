"""Optional query shortcuts give up cleanly when they would be slow."""

from django.db import connection

from platform_kit.db import within_time
from sessions_app.models import Tenant


def sleep_query(seconds):
    def run():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_sleep(%s)", [seconds])
        return "done"

    return run


def test_a_quick_probe_returns_its_result(db):
    assert within_time(sleep_query(0), milliseconds=1000) == "done"


def test_a_slow_probe_is_abandoned_and_the_transaction_goes_on(db):
    assert within_time(sleep_query(2), milliseconds=50) is None
    Tenant.objects.create(name="still-works")  # the savepoint was rolled back, not the whole transaction
    assert Tenant.objects.filter(name="still-works").exists()
    with connection.cursor() as cursor:
        cursor.execute("SHOW statement_timeout")
        assert cursor.fetchone()[0] == "0"  # SET LOCAL ended with the savepoint's transaction scope


def test_a_probe_leaves_the_callers_settings_as_they_were(db):
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = on")
    assert within_time(sleep_query(0), milliseconds=500, planner={"enable_seqscan": "off"}) == "done"
    with connection.cursor() as cursor:
        cursor.execute("SELECT current_setting('statement_timeout'), current_setting('enable_seqscan')")
        assert cursor.fetchone() == ("0", "on")
