"""Start-up: a process that imports logs (or runs any command) does not load the libraries only some requests
need — numpy, jsonschema, the models' embedder, the apps' admin modules, the API schema, the redis client — and
the admin and its system checks still see every ModelAdmin when they are asked for."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LOADED_LATE = [
    "numpy",
    "jsonschema",
    "torch",
    "sentence_transformers",
    "onnxruntime",
    "tokenizers",
    "drf_spectacular.views",
    "sessions_app.admin",
]

PROBE = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aceproject.settings")
import django
django.setup()
from django.core.management import load_command_class
load_command_class("ingest_app", "ace_import")  # what `manage.py ace_import` loads before it runs
from ingest_app.importers import parse_file  # and what an import runs
print(json.dumps(sorted(name for name in %r if name in sys.modules)))
"""


# What `manage.py <command>` has imported when the command is done: manage.py run as a script would run it.
MANAGE_PROBE = """
import json, runpy, sys
sys.argv = ["manage.py", *%r]
try:
    runpy.run_path("manage.py", run_name="__main__")
except SystemExit as exit:
    assert not exit.code, exit.code
print(json.dumps(sorted(sys.modules)))
"""
NOT_FOR_A_COMMAND = [
    *LOADED_LATE,
    "transformers",
    "memory_app.embedders.local",
    "memory_app.embedders.onnx_export",
    "memory_app.admin",
    "strategies_app.admin",
    "webhooks_app.admin",
    "aceproject.urls",
    "drf_spectacular.generators",
    "redis",
    "kombu.transport.redis",
]


def modules_after(*command: str) -> set[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    done = subprocess.run(
        [sys.executable, "-c", MANAGE_PROBE % (list(command),)], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return set(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize(
    "command", [("ace_import", "--help"), ("ace_db", "status"), ("ace_broker", "status"), ("ace_apikey", "--help")]
)
def test_a_command_that_needs_neither_the_embedder_nor_the_admin_imports_neither(command):
    assert sorted(modules_after(*command) & set(NOT_FOR_A_COMMAND)) == []


# What only an import runs: `ace_import --help` (and a mistyped option) starts without them.
NOT_FOR_IMPORT_HELP = [
    "ingest_app.pipeline",
    "sessions_app.services.messages",
    "ingest_app.importers",
    "ingest_app.management.import_progress",
    "tqdm",
]


def test_ace_import_help_loads_neither_the_import_pipeline_nor_the_progress_bar():
    assert sorted(modules_after("ace_import", "--help") & set(NOT_FOR_IMPORT_HELP)) == []


def test_the_probe_sees_what_the_system_checks_load():
    """`check` loads the URLs and the apps' admin modules: the probe above would see them in any command."""
    loaded = modules_after("check")
    assert {"aceproject.urls", "sessions_app.admin", "memory_app.admin", "django.contrib.admin.sites"} <= loaded
    assert not loaded & {"torch", "sentence_transformers", "onnxruntime", "memory_app.embedders.local"}


def test_an_import_process_starts_without_the_libraries_only_some_requests_need():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE % LOADED_LATE], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout.strip().splitlines()[-1]) == []


@pytest.mark.django_db
def test_the_admin_and_its_checks_still_see_every_model_admin(admin_client):
    from django.contrib import admin
    from django.core import checks

    from sessions_app.models import Message

    assert checks.run_checks(tags=[checks.Tags.admin]) == []
    assert admin.site.is_registered(Message)  # discovered for the checks
    assert admin_client.get("/admin/sessions_app/message/").status_code == 200


def test_a_vector_column_reads_and_writes_as_pgvectors(db):
    """memory_app's VectorField defers pgvector (and numpy) to the first vector: what it stores and reads
    back is what pgvector's field gives, and migrations see pgvector's field."""
    from memory_app.models import Record

    field = Record._meta.get_field("embedding")
    assert field.deconstruct()[1] == "pgvector.django.vector.VectorField"
    assert field.get_prep_value([0.5, -1.0, 2.0]) == "[0.5,-1.0,2.0]"
    vector = field.from_db_value("[0.5,-1,2]", None, None)
    assert vector.tolist() == [0.5, -1.0, 2.0] and type(vector).__module__ == "numpy"
    assert field.to_python([1, 2]).tolist() == [1.0, 2.0]
