#!/usr/bin/env python
"""How long a process of Open ACE takes to start, against what Django itself costs, and what a web process's first
request that needs the embedder costs with and without the warm-up at start.

    .venv/bin/python bench/startup.py                     # 9 runs of each command, then the two gunicorns
    .venv/bin/python bench/startup.py --runs 15 --no-gunicorn

Commands (each started as a new process, from the project folder, ACE_DATA_DIR=.ace/bench unless set):
- floors: `python -c pass`; `import django`; `django.setup()` with bare settings (no app); `django.setup()` with
  the project's third-party apps and none of its own (Django's contrib apps, DRF, django-celery-beat, axes, ...:
  what any project with these libraries pays);
- the project: `manage.py ace_import --help`, `manage.py ace_db status`, `manage.py shell -c pass` and
  `manage.py check` (the only one that loads every URL, view, admin module and the API schema).

The runs are interleaved (one of each command per round), so load from other processes falls on all of them alike.
Reported per command: the median and the minimum of the wall-clock time and of the CPU time (user + system, of the
process and its children), and how many modules it imports (`-X importtime`, one extra run). Every command runs once
unmeasured first, without PYTHONDONTWRITEBYTECODE, so it reads cached bytecode as a deployed process does.

Then, unless `--no-gunicorn`: gunicorn as the Procfile starts it (`--config python:aceproject.gunicorn_conf`, one
worker, ACE_EMBEDDER=local), with ACE_EMBEDDER_PRELOAD=false and with the warm-up, `--gunicorn-rounds` starts of
each, alternated: the medians of the seconds until /healthz answers and of the latency of the first and the second
recall (questions new to the process, so the query-vector cache answers neither). The model's export is made first,
outside the clock. Results: tables, and bench/results/startup.json.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

PROJECT_APPS = {"aceproject", "platform_kit", "sessions_app", "memory_app", "strategies_app", "webhooks_app"}


def floor_settings(folder: Path) -> dict[str, str]:
    """Settings modules for the floors, written to `folder`: bare Django, and the project's third-party apps."""
    sys.path.insert(0, str(benchlib.PROJECT_DIR))
    os.environ.setdefault("ACE_DATA_DIR", str(benchlib.DEFAULT_DATA_DIR))
    from aceproject import settings as project

    # The admin without autodiscovery, as the project runs it: the admin modules it discovers are the apps'.
    apps = [
        "django.contrib.admin.apps.SimpleAdminConfig" if app.startswith("platform_kit.admin.apps") else app
        for app in project.INSTALLED_APPS
    ]
    third_party = [app for app in apps if app.split(".")[0] not in PROJECT_APPS]
    (folder / "bare_settings.py").write_text('SECRET_KEY = "bench"\nINSTALLED_APPS = []\n')
    (folder / "libraries_settings.py").write_text(
        f'SECRET_KEY = "bench"\nINSTALLED_APPS = {third_party!r}\nUSE_TZ = True\n'
        'DATABASES = {"default": {"ENGINE": "django.db.backends.postgresql", "NAME": "bench"}}\n'
    )
    return {"bare": "bare_settings", "libraries": "libraries_settings"}


def commands(folder: Path) -> list[tuple[str, list[str], dict]]:
    modules = floor_settings(folder)
    python = sys.executable
    setup = "import django; django.setup()"
    floor_env = {"PYTHONPATH": str(folder)}
    manage = [python, "manage.py"]
    return [
        ("python -c pass", [python, "-c", "pass"], {}),
        ("import django", [python, "-c", "import django"], {}),
        (
            "floor: django.setup(), no app",
            [python, "-c", setup],
            {**floor_env, "DJANGO_SETTINGS_MODULE": modules["bare"]},
        ),
        (
            "floor: django.setup(), the third-party apps",
            [python, "-c", setup],
            {**floor_env, "DJANGO_SETTINGS_MODULE": modules["libraries"]},
        ),
        ("manage.py ace_import --help", [*manage, "ace_import", "--help"], {}),
        ("manage.py ace_db status", [*manage, "ace_db", "status"], {}),
        ("manage.py shell -c pass", [*manage, "shell", "-c", "pass"], {}),
        ("manage.py check", [*manage, "check"], {}),
    ]


def child_env(extra: dict) -> dict:
    env = {**os.environ, **extra}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a deployed process reads cached bytecode
    env.setdefault("ACE_DATA_DIR", str(benchlib.DEFAULT_DATA_DIR))
    if "DJANGO_SETTINGS_MODULE" not in extra:
        env.pop("DJANGO_SETTINGS_MODULE", None)
    return env


def run_once(argv: list[str], env: dict) -> float:
    """Wall-clock seconds of one run."""
    started = time.perf_counter()
    process = subprocess.Popen(
        argv, cwd=benchlib.PROJECT_DIR, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, stderr = process.communicate()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited with {process.returncode}: {stderr.decode()[-2000:]}")
    return wall


def measure(runs: int, folder: Path) -> list[dict]:
    import resource

    table = commands(folder)
    for _, argv, extra in table:  # bytecode cached, files in the page cache
        run_once(argv, child_env(extra))
    walls: dict[str, list[float]] = {label: [] for label, _, _ in table}
    cpus: dict[str, list[float]] = {label: [] for label, _, _ in table}
    for _ in range(runs):
        for label, argv, extra in table:
            # The children's rusage grows by exactly this run's: communicate() reaped it.
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            wall = run_once(argv, child_env(extra))
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            walls[label].append(wall)
            cpus[label].append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    results = []
    for label, argv, extra in table:
        done = subprocess.run(
            [argv[0], "-X", "importtime", *argv[1:]],
            cwd=benchlib.PROJECT_DIR,
            env=child_env(extra),
            capture_output=True,
            text=True,
            check=True,
        )
        modules = sum(1 for line in done.stderr.splitlines() if line.startswith("import time:") and "[us]" not in line)
        results.append(
            {
                "command": label,
                "wall_median_s": round(statistics.median(walls[label]), 3),
                "wall_min_s": round(min(walls[label]), 3),
                "cpu_median_s": round(statistics.median(cpus[label]), 3),
                "cpu_min_s": round(min(cpus[label]), 3),
                "modules": modules,
            }
        )
    return results


def _request(port: int, method: str, path: str, body: dict | None = None, key: str = "") -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=headers)
    response = conn.getresponse()
    payload = json.loads(response.read() or b"{}")
    conn.close()
    return response.status, payload


def first_requests(folder: Path, rounds: int) -> list[dict]:
    """A gunicorn worker's first recall (the query embedded by the local model) with and without the warm-up."""
    env = child_env({"ACE_EMBEDDER": "local"})
    manage = [sys.executable, "manage.py"]
    subprocess.run([*manage, "migrate", "--noinput", "-v", "0"], cwd=benchlib.PROJECT_DIR, env=env, check=True)
    subprocess.run([*manage, "ace_embeddings", "prepare"], cwd=benchlib.PROJECT_DIR, env=env, check=True)
    created = subprocess.run(
        [*manage, "ace_apikey", "create", "--tenant", "bench-startup"],
        cwd=benchlib.PROJECT_DIR,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    )
    key = created.stdout.strip().splitlines()[-1]
    samples: dict[bool, list[dict]] = {False: [], True: []}
    for round_ in range(rounds):
        for preload in (False, True):  # alternated, so load from other processes falls on both
            samples[preload].append(one_gunicorn(folder, env, key, preload, round_))
    return [
        {
            "warm_up": preload,
            "rounds": rounds,
            **{
                name: round(statistics.median(sample[name] for sample in runs), 3)
                for name in ("ready_s", "first_recall_ms", "second_recall_ms")
            },
        }
        for preload, runs in samples.items()
    ]


def one_gunicorn(folder: Path, env: dict, key: str, preload: bool, round_: int) -> dict:
    server = benchlib.Gunicorn(
        workers=1,
        log_path=folder / f"gunicorn-preload-{str(preload).lower()}-{round_}.log",
        extra_args=["--config", "python:aceproject.gunicorn_conf"],
        extra_env={**env, "ACE_EMBEDDER_PRELOAD": str(preload).lower(), "ACE_EMBEDDER_THREADS": "1"},
    )
    started = time.perf_counter()
    server.start(timeout=300)
    ready = time.perf_counter() - started
    try:
        latencies = []
        # Questions new to this process (recall caches the vectors of repeated ones).
        for question in (f"what does Caroline paint? ({round_})", f"where did Melanie go camping? ({round_})"):
            sent = time.perf_counter()
            status, body = _request(server.port, "POST", "/api/v1/recall/", {"query": question, "user_id": "c"}, key)
            latencies.append(time.perf_counter() - sent)
            if status != 200:
                raise RuntimeError(f"recall answered {status}: {body}")
    finally:
        server.stop()
    return {"ready_s": ready, "first_recall_ms": latencies[0] * 1000, "second_recall_ms": latencies[1] * 1000}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=9, help="Runs of each command (default: 9)")
    parser.add_argument("--gunicorn-rounds", type=int, default=3, help="gunicorn starts with and without (default: 3)")
    parser.add_argument("--no-gunicorn", action="store_true", help="Only the commands' start-up")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ace-bench-startup-") as name:
        folder = Path(name)
        load_before = os.getloadavg()[0]
        starts = measure(args.runs, folder)
        load_after = os.getloadavg()[0]
        benchlib.print_table(
            ["command", "wall median", "wall min", "CPU median", "CPU min", "modules"],
            [
                [
                    r["command"],
                    f"{r['wall_median_s']:.3f}",
                    f"{r['wall_min_s']:.3f}",
                    f"{r['cpu_median_s']:.3f}",
                    f"{r['cpu_min_s']:.3f}",
                    r["modules"],
                ]
                for r in starts
            ],
            title=f"Start-up, seconds ({args.runs} runs each, load average {load_before:.1f} → {load_after:.1f})",
        )
        requests = [] if args.no_gunicorn else first_requests(folder, args.gunicorn_rounds)
        if requests:
            benchlib.print_table(
                ["embedder warm-up", "ready (s)", "first recall (ms)", "second recall (ms)"],
                [
                    [
                        "on" if r["warm_up"] else "off",
                        f"{r['ready_s']:.2f}",
                        f"{r['first_recall_ms']:.1f}",
                        f"{r['second_recall_ms']:.1f}",
                    ]
                    for r in requests
                ],
                title=(
                    "A gunicorn worker's first requests "
                    f"(ACE_EMBEDDER=local, one worker, median of {args.gunicorn_rounds} starts)"
                ),
            )
    path = benchlib.write_results(
        "startup",
        {
            "machine": benchlib.machine(),
            "code": benchlib.code_version(),
            "runs": args.runs,
            "load_average": [round(load_before, 2), round(load_after, 2)],
            "start_up": starts,
            "first_requests": requests,
        },
    )
    print(f"\n{path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
