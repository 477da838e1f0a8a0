"""A big import leaves planner statistics that know its rows: until autovacuum analyses the tables, PostgreSQL
plans for them as they were (for an emptied table: no rows at all), and a count over the new messages — the
backlog every recall answer carries — could take minutes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from django.db import connection

from ingest_app.pipeline import import_path
from sessions_app.models import Message

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from imports import generate_tree  # noqa: E402

pytestmark = pytest.mark.django_db


def planned_rows(table: str) -> float:
    with connection.cursor() as cursor:
        cursor.execute("SELECT reltuples FROM pg_class WHERE relname = %s", [table])
        return cursor.fetchone()[0]


def test_an_import_of_thousands_of_messages_analyses_the_tables_it_filled(
    api, tmp_path, django_capture_on_commit_callbacks
):
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE sessions_app_session, sessions_app_message")  # what the planner knew before
    before = planned_rows("sessions_app_message")
    tree = generate_tree(tmp_path, 12, seed=5)  # Claude Code logs as `bench/imports.py` writes them
    with django_capture_on_commit_callbacks(execute=True):
        summary = import_path(tenant=api.tenant, path=tree)
    messages = Message.objects.filter(tenant=api.tenant).count()
    assert summary.messages == messages > 1_200
    assert planned_rows("sessions_app_message") >= before + 0.8 * messages
