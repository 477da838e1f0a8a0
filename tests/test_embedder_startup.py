"""No model loading on a request: web processes (gunicorn, started the Procfile's way) and Celery pool processes load
the embedder when they start, and /healthz says so before the first request that needs it.

The process tests run the real commands of the Procfile with ACE_EMBEDDER=local on ONNX Runtime, in a data folder
of their own under the tests' (its database is migrated on the first run), with the tests' model cache (exported
once). The hook they call (memory_app.embedders.warmup.warm_up) is then tested in this process: what it loads, what
it skips, what it logs."""

import json
import logging
import os
import re
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from memory_app.embedders import get_embedder
from memory_app.embedders.warmup import warm_up
from tests.support.processes import stop_process_group
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent
KEY = "local:all-MiniLM-L6-v2:384"

own_data_folder = pytest.mark.skipif(
    bool(settings.DATABASE_URL), reason="a data folder of its own, embedded PostgreSQL"
)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _procfile(name: str) -> str:
    for line in (ROOT / "Procfile").read_text().splitlines():
        if line.startswith(f"{name}:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"no {name} in the Procfile")


@pytest.fixture(scope="module")
def env():
    data_dir = settings.ACE_DATA_DIR / "warmup"
    env = {
        **os.environ,
        "PATH": f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "ACE_DATA_DIR": str(data_dir),
        "ACE_EMBEDDER": "local",
        "ACE_EMBEDDER_RUNTIME": "onnx",
        "ACE_EMBEDDER_CACHE_DIR": str(settings.ACE_DATA_DIR / "models"),
        "WEB_CONCURRENCY": "1",
        "CELERY_EMBED_CONCURRENCY": "1",
        "DEBUG": "false",
        "LOG_LEVEL": "INFO",
    }
    env.pop("CELERY_BROKER_URL", None)  # the embedded broker, in that folder
    env.pop("DJANGO_SETTINGS_MODULE", None)
    manage = ["python", "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=600)
    # The export first, as scripts/up does, so the processes below only load it.
    subprocess.run([*manage, "ace_embeddings", "prepare"], cwd=ROOT, env=env, check=True, timeout=600)
    yield env
    for command in ("ace_broker", "ace_db"):
        subprocess.run([*manage, command, "stop"], cwd=ROOT, env=env, capture_output=True, timeout=120)


def _start(command: str, env: dict, log: Path) -> subprocess.Popen:
    handle = open(log, "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        cwd=ROOT,
        env=env,
        stdout=handle,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def _get(url: str, headers: dict | None = None, body: dict | None = None) -> tuple[int, dict]:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


@own_data_folder
def test_a_web_process_loads_the_embedder_before_its_first_request(env, tmp_path):
    key = (
        subprocess.run(
            ["python", "manage.py", "ace_apikey", "create", "--tenant", "warmup"],
            cwd=ROOT,
            env=env,
            check=True,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    port = _free_port()
    web = _start(_procfile("web").replace("${ACE_PORT:-8000}", str(port)), env, tmp_path / "web.log")
    try:

        def first_answer():  # the first answer the server gives
            assert web.poll() is None, (tmp_path / "web.log").read_text()[-3000:]
            try:
                return _get(f"http://127.0.0.1:{port}/healthz")
            except OSError:
                return None

        answer = wait_for(first_answer, 180)
        assert answer, (tmp_path / "web.log").read_text()[-3000:]
        status, health = answer
        assert status == 200, health
        embedder = health["embedder"]
        assert embedder["loaded"] is True  # loaded before the process accepted its first connection
        assert (embedder["provider"], embedder["runtime"], embedder["key"]) == ("local", "onnx", KEY)
        assert embedder["threads"] == 1  # the Procfile's --env ACE_EMBEDDER_THREADS=1
        assert embedder["load_seconds"] < 60

        started = time.monotonic()
        status, body = _get(
            f"http://127.0.0.1:{port}/api/v1/recall/",
            headers={"Authorization": f"Bearer {key}"},
            body={"query": "what does Caroline paint?", "user_id": "caroline"},
        )
        first_recall = time.monotonic() - started
        assert status == 200, body
        assert first_recall < 5  # no 7-18 s model load on the first request
        _, after = _get(f"http://127.0.0.1:{port}/healthz")
        assert after["embedder"]["loaded_at"] == embedder["loaded_at"]  # the recall loaded nothing
        log = (tmp_path / "web.log").read_text()
        assert re.search(rf"Embedder {KEY} loaded in [\d.]+ s \(web process", log), log[-3000:]
    finally:
        stop_process_group(web, timeout=60)


@own_data_folder
def test_an_embedding_worker_loads_the_embedder_when_its_pool_process_starts(env, tmp_path):
    worker = _start(_procfile("embedder").replace("%h", "warmup-test"), env, tmp_path / "worker.log")
    try:

        def loaded():
            log = (tmp_path / "worker.log").read_text()
            assert worker.poll() is None, log[-3000:]
            return re.search(rf"Embedder {KEY} loaded in [\d.]+ s \(worker process", log)

        assert wait_for(loaded, 180), (tmp_path / "worker.log").read_text()[-3000:]
    finally:
        stop_process_group(worker, timeout=60)


# -- the hook, in this process (after the tests above, which export the model into the same cache) -----------------


@pytest.fixture
def embedders():
    """get_embedder with no embedder built yet; the ones built here are dropped after (the model with them)."""
    get_embedder.cache_clear()
    yield get_embedder
    get_embedder.cache_clear()


def warm_up_lines(caplog, role: str) -> list[str]:
    with caplog.at_level(logging.INFO, logger="aceproject.embedder"):
        warm_up(role)
    return [record.getMessage() for record in caplog.records if record.name == "aceproject.embedder"]


def test_the_warm_up_loads_the_configured_embedder_and_logs_how_long_it_took(settings, embedders, caplog):
    settings.ACE_EMBEDDER, settings.ACE_EMBEDDER_RUNTIME, settings.ACE_EMBEDDER_THREADS = "local", "onnx", 1
    assert not embedders().loaded
    [line] = warm_up_lines(caplog, "web")
    embedder = embedders()
    assert embedder.key == KEY and embedder.loaded and embedder.load_seconds is not None
    assert re.fullmatch(rf"Embedder {KEY} loaded in [\d.]+ s \(web process {os.getpid()}\)", line), line
    assert warm_up_lines(caplog, "web") == [line]  # a second call finds it loaded: nothing more to say


def test_a_web_process_loads_the_chinese_word_segmenter_when_it_starts(settings, caplog):
    from memory_app.selectors.recall import _segmenter

    settings.ACE_EMBEDDER = "hash"
    _segmenter.cache_clear()
    warm_up("worker")
    assert _segmenter.cache_info().currsize == 0  # a worker does not recall
    with caplog.at_level(logging.INFO, logger="memory_app.selectors.recall"):
        warm_up("web")
        warm_up("web")
    assert _segmenter.cache_info().currsize == 1
    lines = [r.getMessage() for r in caplog.records if r.name == "memory_app.selectors.recall"]
    assert len(lines) == 1 and lines[0].startswith("Word segmenter loaded in"), lines


def test_no_warm_up_when_it_is_turned_off_or_there_is_nothing_to_load(settings, embedders, caplog):
    settings.ACE_EMBEDDER, settings.ACE_EMBEDDER_PRELOAD = "local", False
    assert warm_up_lines(caplog, "worker") == []
    assert not embedders().loaded
    settings.ACE_EMBEDDER, settings.ACE_EMBEDDER_PRELOAD = "hash", True
    assert warm_up_lines(caplog, "worker") == []  # the hash embedder has no model


def test_an_embedder_that_cannot_load_is_logged_and_the_process_goes_on(settings, embedders, caplog, tmp_path):
    settings.ACE_EMBEDDER, settings.ACE_EMBEDDER_MODEL = "local", str(tmp_path / "no-such-model")
    [line] = warm_up_lines(caplog, "worker")
    assert line.startswith("The embedder could not be loaded when this worker process started: "), line
