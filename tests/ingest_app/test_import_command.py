"""`manage.py ace_import` as a user runs it: a real process on the test database, its exit status, what it writes
on stdout and on stderr, the progress line on a terminal (a pseudo-terminal) and none through a pipe, and the help.
"""

import json
import os
import pty
import select
import shutil
import struct
import subprocess
import sys
import termios
import uuid
from fcntl import ioctl
from pathlib import Path

import psycopg
import pytest
from django.db import connection

from ingest_app.management.commands.ace_import import Command
from ingest_app.models import ImportTool
from sessions_app.models import Message, Session
from tests.ingest_app.test_imports import CLAUDE, DATA, GARBAGE, OTHER_TOOL, QWEN, SEED, SUMMARY_LINE
from tests.support.processes import ROOT, process_env

MANAGE = [sys.executable, str(ROOT / "manage.py"), "ace_import"]


def ace_import(*args, env=None) -> subprocess.CompletedProcess:
    """The command through pipes (stdin, stdout and stderr are not terminals), as a script or cron runs it."""
    return subprocess.run(
        [*MANAGE, *map(str, args)], env=env or process_env(), capture_output=True, text=True, timeout=300
    )


def in_terminal(*args, columns: int = 120) -> tuple[int, str, str]:
    """The command with stderr on a pseudo-terminal (`columns` wide) and stdout through a pipe, as a person runs
    `ace_import … > summary.txt`: its exit status, stdout, and what the terminal received."""
    primary, secondary = pty.openpty()
    ioctl(secondary, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    process = subprocess.Popen(
        [*MANAGE, *map(str, args)], env=process_env(), stdout=subprocess.PIPE, stderr=secondary, text=True
    )
    os.close(secondary)
    terminal = b""
    while True:
        ready, _, _ = select.select([primary], [], [], 300)
        if not ready:
            process.kill()
            raise AssertionError("ace_import wrote nothing to its terminal for 300 s")
        try:
            chunk = os.read(primary, 65536)
        except OSError:  # the process closed its terminal: it has ended
            break
        if not chunk:
            break
        terminal += chunk
    os.close(primary)
    stdout = process.stdout.read()
    return process.wait(timeout=60), stdout, terminal.decode("utf-8", "replace")


@pytest.fixture(scope="module")
def big_tree(tmp_path_factory) -> Path:
    """A Claude Code tree of ~9 MB: the fixture session's good lines as 300 sessions of their own (fresh session,
    line and message ids), in 12 project folders. Big enough (over 4 MB) for a progress line from the start."""
    root = tmp_path_factory.mktemp("big") / ".claude" / "projects"
    lines = []
    for text in (DATA / CLAUDE).read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            lines.append(json.loads(text))
        except ValueError:
            continue  # the fixture's deliberately broken lines: this tree is all good
    filler = "lorem ipsum dolor sit amet, consectetur adipiscing elit; " * 300  # ~17 KB of tool output per session
    for number in range(300):
        session = str(uuid.UUID(int=number + 1))
        folder = root / f"-home-dev-project{number % 12}"
        folder.mkdir(parents=True, exist_ok=True)
        renamed = []
        for line in lines:
            line = {**line, "sessionId": session, "uuid": str(uuid.uuid4())}
            message = line.get("message")
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                line["message"] = {**message, "id": f"{message['id']}-{number}"}
            renamed.append(json.dumps(line))
        renamed.append(json.dumps({**lines[0], "sessionId": session, "uuid": str(uuid.uuid4()), "note": filler}))
        (folder / f"{session}.jsonl").write_text("\n".join(renamed) + "\n", encoding="utf-8")
    return root


# -- exit status and the two streams ------------------------------------------------------------------------


def test_refused_files_and_skipped_lines_exit_3_and_are_named_on_stderr_with_the_reason(transactional_db, tmp_path):
    shutil.copytree(DATA, tmp_path / "logs")
    done = ace_import(tmp_path / "logs", "--tenant", "cli")

    assert done.returncode == 3, done.stderr
    summary = SUMMARY_LINE.match(done.stdout.splitlines()[-1])
    assert summary and summary.group("imported", "refused") == ("23", "2")
    errors = done.stderr.splitlines()
    garbage, other = tmp_path / "logs" / GARBAGE, tmp_path / "logs" / OTHER_TOOL
    assert f"{garbage}:0: error: not a recognised agent log: none of the first 6 non-blank lines is a JSON object" in (
        errors
    )
    assert any(line.startswith(f"{other}:0: error: not a recognised agent log: 2 JSON lines") for line in errors)
    assert f"{tmp_path / 'logs' / CLAUDE}:14: error: not valid JSON" in done.stderr  # a skipped line, located
    assert errors[-1] == "CommandError: 2 files refused and 3 lines skipped (listed above); the rest was imported"
    assert "error" not in done.stdout  # stdout holds the summary only: a script can read it as it always did
    assert Message.objects.filter(tenant__name="cli").count() == int(summary.group("messages").replace(",", ""))

    again = ace_import(tmp_path / "logs", "--tenant", "cli")  # the skipped lines are behind; the refused files not
    assert again.returncode == 3 and again.stderr.splitlines()[-1].startswith("CommandError: 2 files refused (")


def test_a_clean_import_exits_0_with_nothing_on_stderr(transactional_db, tmp_path):
    shutil.copy(DATA / SEED, tmp_path / "seed.jsonl")
    done = ace_import(tmp_path / "seed.jsonl", "--tenant", "cli")
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.splitlines() == [
        "Tenant 'cli' created.",
        "imported 1 files (0 unchanged, 0 refused): 1 new sessions, 6 messages, 3 requests, 396 tokens, 0 issues",
    ]
    assert ace_import(tmp_path / "seed.jsonl", "--tenant", "cli").returncode == 0  # unchanged: nothing refused


def test_a_log_of_another_tool_than_asked_is_refused_with_exit_3(transactional_db, tmp_path):
    shutil.copy(DATA / QWEN, tmp_path / "chat.jsonl")
    done = ace_import(tmp_path / "chat.jsonl", "--tenant", "cli", "--tool", "claude-code")
    assert done.returncode == 3
    assert f"{tmp_path / 'chat.jsonl'}:0: error: not a claude-code log: it looks like qwen-code" in done.stderr
    assert not Session.objects.filter(tenant__name="cli").exists()


def test_a_missing_path_exits_1_and_wrong_arguments_exit_2(transactional_db, tmp_path):
    missing = ace_import(tmp_path / "nowhere", "--tenant", "cli")
    assert missing.returncode == 1
    assert missing.stderr.strip() == f"CommandError: {tmp_path / 'nowhere'}: no such file or directory"
    wrong = ace_import(tmp_path, "--tool", "cursor")
    assert wrong.returncode == 2 and "invalid choice: 'cursor'" in wrong.stderr


def test_a_database_never_migrated_exits_1_saying_to_migrate(db):
    name = f"ace_empty_{uuid.uuid4().hex[:8]}"
    params = connection.get_connection_params()
    with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        url = process_env()["DATABASE_URL"].replace(f"/{params['dbname']}", f"/{name}", 1)
        done = ace_import(DATA / SEED, env=process_env(DATABASE_URL=url))
        assert done.returncode == 1, done.stderr
        assert "the database is not set up for Open ACE" in done.stderr
        assert "run `manage.py migrate` first" in done.stderr and "Traceback" not in done.stderr
    finally:
        with psycopg.connect(**{**params, "dbname": "postgres"}, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


# -- progress ------------------------------------------------------------------------------------------------


def test_on_a_terminal_a_progress_line_shows_files_bytes_rate_and_time_left_in_place(transactional_db, big_tree):
    status, stdout, terminal = in_terminal(big_tree, "--tenant", "tty")
    assert status == 0, terminal
    assert SUMMARY_LINE.match(stdout.splitlines()[-1]).group("imported") == "300"
    draws = [part for part in terminal.replace("\r\n", "\n").split("\r") if part.strip()]
    assert len(draws) >= 2, terminal  # drawn, then redrawn over itself (carriage returns, one line)
    final = draws[-1].strip()
    assert final.startswith("Importing 300/300 files 100%|"), final
    assert "MB/" in final and "MB/s]" in final  # bytes read of all, and the rate
    assert any("<" in draw and "files" in draw for draw in draws)  # elapsed<left
    assert terminal.replace("\r\n", "\n").count("\n") <= 1  # in place: never a new line per draw


def test_asked_for_the_progress_line_shows_at_once_and_no_progress_hides_it(transactional_db, tmp_path):
    shutil.copy(DATA / SEED, tmp_path / "seed.jsonl")
    status, _, terminal = in_terminal(tmp_path / "seed.jsonl", "--tenant", "tty", "--progress")
    assert status == 0 and "Importing 1/1 files 100%|" in terminal
    status, _, terminal = in_terminal(tmp_path / "seed.jsonl", "--tenant", "tty2", "--no-progress")
    assert (status, terminal) == (0, "")


def test_through_a_pipe_nothing_but_the_summary(transactional_db, big_tree):
    done = ace_import(big_tree, "--tenant", "piped")
    assert (done.returncode, done.stderr) == (0, "")
    assert len(done.stdout.splitlines()) == 2 and SUMMARY_LINE.match(done.stdout.splitlines()[-1])
    assert "\r" not in done.stdout and "Importing" not in done.stdout


# -- the help ------------------------------------------------------------------------------------------------


def test_the_help_names_the_six_tools_where_they_keep_their_logs_and_the_exit_statuses():
    text = Command().create_parser("manage.py", "ace_import").format_help()
    for tool in ImportTool.labels[1:]:  # all but "auto"
        assert tool in text, tool
    assert len(ImportTool.labels[1:]) == 6
    for where in ("~/.claude/projects", "~/.qwen/projects", "~/.gemini/tmp", "~/.openclaw/agents", "~/.codex/sessions",
                  "~/.local/share/opencode"):  # fmt: skip
        assert where in text, where
    for line in ("  0  every file was imported", "  1  nothing was imported", "  2  wrong arguments",
                 "  3  imported, but some files were refused"):  # fmt: skip
        assert line in text, line
    assert "--progress, --no-progress" in text
