"""scripts/up supervises: a process killed by the kernel is started again while the others keep serving, and
Ctrl-C stops everything gracefully, the embedded PostgreSQL last.

It runs the real scripts/up (migrate, collectstatic, bootstrap, then supervisord with the Procfile) on a
free port, with a data folder of its own under the tests' (kept between runs: a first run also creates
and migrates its database)."""

import os
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from aceproject.embedded_db import embedded_database_state
from tests.support.waiting import wait_for

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(bool(settings.DATABASE_URL), reason="scripts/up with the embedded PostgreSQL")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            return response.status == 200
    except OSError:
        return False


class Output:
    """The lines scripts/up prints, collected as they come."""

    def __init__(self, stream):
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        for line in stream:
            self.lines.append(line.rstrip("\n"))

    def text(self, since: int = 0) -> str:
        return "\n".join(self.lines[since:])

    def wait_for(self, pattern: str, *, since: int = 0, seconds: float) -> re.Match:
        match = wait_for(lambda: re.search(pattern, self.text(since)), seconds)
        assert match, f"no {pattern!r} in scripts/up's output:\n{self.text()[-4000:]}"
        return match

    def wait_for_end(self, seconds: float = 10):
        """Until the output ends (every process holding it has exited)."""
        self._thread.join(timeout=seconds)


def test_scripts_up_restarts_a_killed_worker_and_ctrl_c_stops_everything_database_last():
    data_dir = settings.ACE_DATA_DIR / "up"
    port, gateway_port = _free_port(), _free_port()
    env = {
        **os.environ,
        "ACE_DATA_DIR": str(data_dir),
        "ACE_PORT": str(port),
        "ACE_GATEWAY_PORT": str(gateway_port),
        "WEB_CONCURRENCY": "1",
        "CELERY_CONCURRENCY": "1",
        "ACE_EMBEDDER": "hash",
        "ACE_ADMIN_PASSWORD": "supervision-test-password",
    }
    env.pop("CELERY_BROKER_URL", None)  # the embedded broker, in that folder
    first_run = not (data_dir / "pg" / "PG_VERSION").exists()
    up = subprocess.Popen(
        [str(ROOT / "scripts" / "up")],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its own process group, as in a terminal: Ctrl-C signals the group
    )
    output = Output(up.stdout)
    try:
        started = time.monotonic()
        for name in ("web", "gateway", "worker", "embedder", "beat"):
            output.wait_for(rf"success: {name} entered RUNNING state", seconds=150 if first_run else 60)
        # supervisord calls a program RUNNING after 3 s; a Celery worker handles SIGTERM (a warm shutdown, exit
        # status 0) only once it has booted, which on a busy machine takes far longer: wait for it to say so.
        for name in ("worker", "embedder", "webhooks"):
            output.wait_for(rf"{name}@\S+ ready\.", seconds=150 if first_run else 60)
        worker_pid = int(output.wait_for(r"spawned: 'worker' with pid (\d+)", seconds=1).group(1))
        web_pid = int(output.wait_for(r"spawned: 'web' with pid (\d+)", seconds=1).group(1))
        assert wait_for(lambda: _healthy(port)), output.text()[-4000:]
        assert wait_for(lambda: _healthy(gateway_port)), output.text()[-4000:]  # the gateway's ASGI process
        print(f"\nscripts/up serving after {time.monotonic() - started:.0f} s (first run: {first_run})")

        # The kernel's OOM killer, say.
        mark = len(output.lines)
        os.kill(worker_pid, signal.SIGKILL)
        output.wait_for(r"exited: worker \(terminated by SIGKILL; not expected\)", since=mark, seconds=15)
        new_pid = int(output.wait_for(r"spawned: 'worker' with pid (\d+)", since=mark, seconds=15).group(1))
        assert new_pid != worker_pid
        output.wait_for(r"success: worker entered RUNNING state", since=mark, seconds=30)
        output.wait_for(r"worker@\S+ ready\.", since=mark, seconds=60)
        assert _healthy(port)  # web kept serving
        assert not any(f"exited: {name}" in output.text(mark) for name in ("web", "embedder", "beat"))
        os.kill(web_pid, 0)  # the same web process

        # Ctrl-C.
        mark = len(output.lines)
        stopping = time.monotonic()
        os.killpg(up.pid, signal.SIGINT)
        up.wait(timeout=90)
        stopped_in = time.monotonic() - stopping
    finally:
        if up.poll() is None:  # the test failed on the way: leave nothing running
            os.killpg(up.pid, signal.SIGKILL)
            up.wait()
            for pid in re.findall(r"spawned: '\w+' with pid (\d+)", output.text()):
                try:
                    os.killpg(int(pid), signal.SIGKILL)  # supervisord gives each program its own group
                except OSError:
                    pass
        for command in ("ace_broker", "ace_db"):
            subprocess.run(
                [str(ROOT / ".venv" / "bin" / "python"), "manage.py", command, "stop"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                check=False,
            )
    output.wait_for_end()  # the reader's last lines
    after = output.text(mark)
    print(f"stopped in {stopped_in:.0f} s")
    for name in ("web", "worker", "embedder", "beat"):
        assert re.search(rf"stopped: {name} \(exit status 0\)", after), after
    assert "SIGKILL" not in after, after
    assert "Traceback" not in after, after
    # The database last: after every process has stopped.
    database = after.index("Stopped the embedded PostgreSQL.")
    assert all(after.index(f"stopped: {name}") < database for name in ("web", "worker", "embedder", "beat"))
    assert after.index("stopped: worker") < after.index("Stopped the embedded broker.") < database
    assert embedded_database_state(data_dir) == "stopped"
    assert stopped_in < 60
