"""Side by side with ccusage, the tool people run on their Claude Code logs otherwise (`bench/imports.py` calls it).

On the same tree: `ccusage daily --json` (Node, reads every file each time it is asked), then our first import
as a process (`manage.py ace_import`, start-up included), then our reports on what was imported (the stats API
by day and the admin's usage dashboard, in-process with django.test.Client: the server is already running).
Targets: the first import takes no longer than one ccusage report; every report after it is at least 100×
faster than ccusage reading the tree again. The token totals of both are compared, and the difference is
explained by applying ccusage's own counting rule to the tree here (`ccusage_rule_totals`).

ccusage is the npm package, pinned (CCUSAGE_VERSION), installed into .ace/ccusage with npm the first time
(or named by ACE_BENCH_CCUSAGE). Without node/npm, or when the install fails, the comparison is skipped with
the reason: the rest of the bench runs as before.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import benchlib

# The last release that runs on Node alone: from 20.x the npm package launches a per-platform native binary
# (an optional dependency the registry may not offer for this platform).
CCUSAGE_VERSION = "18.0.11"
CCUSAGE_DIR = benchlib.PROJECT_DIR / ".ace" / "ccusage"
IMPORT_TARGET = 1.0  # our first import takes at most this many ccusage reports
REPORT_TARGET = 100  # each report after it at least this many times faster than ccusage
TOKENS = (  # (ccusage's name, ours)
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("cacheCreationTokens", "cache_creation_tokens"),
    ("cacheReadTokens", "cache_read_tokens"),
)
WINDOW = {"since": "2000-01-01T00:00:00Z", "until": "2100-01-01T00:00:00Z"}  # every day of the tree


def find_ccusage() -> tuple[list[str] | None, str]:
    """The command that runs ccusage and its version, or None and why it cannot run here."""
    named = os.environ.get("ACE_BENCH_CCUSAGE")
    command = Path(named) if named else CCUSAGE_DIR / "node_modules" / ".bin" / "ccusage"
    if not shutil.which("node"):
        return None, "node is not installed (apt-get install nodejs npm)"
    if not command.exists():
        if named:
            return None, f"ACE_BENCH_CCUSAGE={named} does not exist"
        if not shutil.which("npm"):
            return None, "npm is not installed (apt-get install npm)"
        print(f"Installing ccusage@{CCUSAGE_VERSION} into {CCUSAGE_DIR} with npm…")
        try:
            done = subprocess.run(
                [
                    "npm",
                    "install",
                    "--prefix",
                    str(CCUSAGE_DIR),
                    "--no-audit",
                    "--no-fund",
                    f"ccusage@{CCUSAGE_VERSION}",
                ],
                capture_output=True,
                text=True,
                timeout=600,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return None, f"npm install failed: {error}"
        if done.returncode != 0 or not command.exists():
            return None, f"npm install failed: {(done.stderr or done.stdout).strip().splitlines()[-1:]}"
    try:
        version = subprocess.run([str(command), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"{command} does not run: {error}"
    if version.returncode != 0:
        return None, f"{command} does not run: {(version.stderr or version.stdout).strip()[:200]}"
    return [str(command)], version.stdout.strip()


def ccusage_daily(command: list[str], tree: Path) -> tuple[float, dict]:
    """One `ccusage daily --json` of the tree (offline prices, days in UTC): its wall time and its JSON."""
    env = {**os.environ, "CLAUDE_CONFIG_DIR": str(tree / ".claude"), "NO_COLOR": "1", "TZ": "UTC"}
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "daily", "--json", "--offline", "--timezone", "UTC"],
        capture_output=True,
        text=True,
        env=env,
        timeout=3600,
        check=True,
    )
    return time.perf_counter() - started, json.loads(done.stdout)


def ccusage_rule_totals(files: list[Path], lines: list | None = None) -> Counter:
    """ccusage's counting rule (its data loader, 18.x), applied here: every line with `message.usage`
    (input and output tokens) and a timestamp counts, except a line whose `message.id` and `requestId` pair
    was seen before: the first line of a streamed response counts, with the output tokens it has so far,
    and a response whose lines have no `requestId` counts once per line. `lines`, when given, gets each counted
    line's (model, tokens in Open ACE's names, the 1-hour writes apart), to be priced as ccusage prices a line."""
    seen: set[tuple[str, str]] = set()
    totals: Counter = Counter()
    for path in files:
        with path.open(encoding="utf-8", errors="replace") as handle:
            for text in handle:
                try:
                    data = json.loads(text)
                except ValueError:
                    continue
                message = data.get("message") if isinstance(data, dict) else None
                usage = message.get("usage") if isinstance(message, dict) else None
                if not isinstance(usage, dict) or not isinstance(data.get("timestamp"), str):
                    continue
                if not all(isinstance(usage.get(k), int | float) for k in ("input_tokens", "output_tokens")):
                    continue
                message_id, request_id = message.get("id"), data.get("requestId")
                if message_id is not None and request_id is not None:
                    if (message_id, request_id) in seen:
                        continue
                    seen.add((message_id, request_id))
                totals["inputTokens"] += usage["input_tokens"]
                totals["outputTokens"] += usage["output_tokens"]
                totals["cacheCreationTokens"] += usage.get("cache_creation_input_tokens") or 0
                totals["cacheReadTokens"] += usage.get("cache_read_input_tokens") or 0
                if lines is not None:
                    tokens = Counter()
                    lines.append((str(message.get("model") or ""), tokens))
                    tokens["input_tokens"] += usage["input_tokens"]
                    tokens["output_tokens"] += usage["output_tokens"]
                    tokens["cache_read_tokens"] += usage.get("cache_read_input_tokens") or 0
                    tokens["cache_creation_tokens"] += usage.get("cache_creation_input_tokens") or 0
                    lifetimes = usage.get("cache_creation") if isinstance(usage.get("cache_creation"), dict) else {}
                    tokens["cache_creation_1h_tokens"] += lifetimes.get("ephemeral_1h_input_tokens") or 0
    return totals


def ccusage_pricing(price):
    """Our price as ccusage 18 applies one: every cache write at the 5-minute rate, no long-context tier."""
    return replace(
        price,
        cache_write_1h_usd_per_mtok=price.cache_write_usd_per_mtok,
        long_context_input_usd_per_mtok=None,
        long_context_output_usd_per_mtok=None,
        long_context_cache_read_usd_per_mtok=None,
        long_context_cache_write_usd_per_mtok=None,
        long_context_cache_write_1h_usd_per_mtok=None,
    )


def priced(book, usage, *, cost) -> Decimal:
    """The cost of (model, tokens) pairs, each priced by `cost(price, tokens)` (models without a price add nothing)."""
    total = Decimal(0)
    for model, tokens in usage:
        price = book.price_for(model)
        if price is not None:
            total += cost(price, tokens)
    return total


def flat(price, tokens) -> Decimal:
    """ccusage 18's pricing without its tier: every cache write at the 5-minute rate."""
    return ccusage_pricing(price).cost(tokens)


def tiered_per_kind(price, tokens) -> Decimal:
    """ccusage's tier rule (`tiered_cost`): in one line's usage, each kind's tokens beyond 200,000 at the model's
    long-context rate, the first 200,000 at the standard one, every cache write at the 5-minute rate. Anthropic's
    rule (and ours) prices all of a request's tokens at the tier once its whole prompt is over 200K."""
    total = Decimal(0)
    for kind, rate, above in (
        ("input_tokens", "input_usd_per_mtok", "long_context_input_usd_per_mtok"),
        ("output_tokens", "output_usd_per_mtok", "long_context_output_usd_per_mtok"),
        ("cache_creation_tokens", "cache_write_usd_per_mtok", "long_context_cache_write_usd_per_mtok"),
        ("cache_read_tokens", "cache_read_usd_per_mtok", "long_context_cache_read_usd_per_mtok"),
    ):
        count, base, high = int(tokens.get(kind) or 0), getattr(price, rate), getattr(price, above)
        if high is not None and count > 200_000:
            total += 200_000 * base + (count - 200_000) * high
        else:
            total += count * base
    return total / 1_000_000


def cost_steps(book, ours: Decimal, ours_by_model: dict, lines: list, ccusage_cost) -> list[tuple[str, Decimal]]:
    """From Open ACE's cost to ccusage's, one of ccusage's rules at a time: (what the step applies, the cost)."""
    return [
        ("Open ACE (1-hour writes at 2x input, a long prompt's request at its tier, each response once)", ours),
        ("+ every cache write at the 5-minute rate, no long-context tier",
         priced(book, ours_by_model.items(), cost=flat)),
        ("+ ccusage's counting: a streamed response's first line, a line without requestId each time",
         priced(book, lines, cost=flat)),
        ("+ ccusage's tier rule: each kind's tokens beyond 200K in a line at the higher rate",
         priced(book, lines, cost=tiered_per_kind)),
        ("+ ccusage's own price table (the LiteLLM prices it bundles) = ccusage's figure", Decimal(str(ccusage_cost))),
    ]  # fmt: skip


def first_import(tree: Path, tenant_name: str) -> tuple[float, str]:
    """`manage.py ace_import` of the tree as its own process (start-up included), into a new tenant."""
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "aceproject.settings",
        "CELERY_BROKER_URL": "memory://localhost/",  # queued follow-up work reaches no worker
        "LOG_LEVEL": "WARNING",
    }
    command = [
        sys.executable,
        str(benchlib.PROJECT_DIR / "manage.py"),
        "ace_import",
        str(tree / ".claude" / "projects"),
    ]
    started = time.perf_counter()
    done = subprocess.run(
        [*command, "--tenant", tenant_name], capture_output=True, text=True, env=env, timeout=7200, check=True
    )
    return time.perf_counter() - started, done.stdout.strip().splitlines()[-1]


def timed_get(client, url: str, runs: int) -> tuple[float, object]:
    """The median wall time of `runs` GETs after one warm-up, and the last response."""
    response = client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        response = client.get(url)
        times.append(time.perf_counter() - started)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), response


def compare(*, tree: Path, files: list[Path], size: int, repeats: int, keep: bool, delete_tenant) -> dict:
    """The comparison (printed, and returned for the results file); {"skipped": why} when ccusage cannot run."""
    command, version = find_ccusage()
    if command is None:
        print(f"\nComparison with ccusage skipped: {version}.")
        return {"skipped": version}
    from django.conf import settings
    from django.contrib.auth import get_user_model
    from django.test import Client
    from django.urls import reverse

    from sessions_app.models import Tenant
    from sessions_app.services.apikeys import apikey_create

    ccusage_runs = [ccusage_daily(command, tree) for _ in range(max(1, repeats))]
    ccusage_seconds = min(seconds for seconds, _ in ccusage_runs)
    ccusage_totals = ccusage_runs[-1][1]["totals"]
    counted_lines: list = []
    rule = ccusage_rule_totals(sorted(tree.rglob("*.jsonl")), counted_lines)

    tenant_name = f"bench-vs-ccusage-{datetime.now(UTC):%Y%m%d%H%M%S}"
    import_seconds, import_summary = first_import(tree, tenant_name)
    tenant = Tenant.objects.get(name=tenant_name)
    try:
        again_seconds, again_summary = first_import(tree, tenant_name)
        if "testserver" not in settings.ALLOWED_HOSTS and "*" not in settings.ALLOWED_HOSTS:
            settings.ALLOWED_HOSTS.append("testserver")
        api = Client(HTTP_AUTHORIZATION=f"Bearer {apikey_create(tenant_name=tenant_name, name='bench').plain_key}")
        query = "&".join(f"{k}={v}" for k, v in WINDOW.items())
        stats_seconds, stats = timed_get(api, f"/api/v1/stats/?group_by=day&{query}", runs=10)
        user_model = get_user_model()
        user = user_model.objects.filter(username="bench-admin").first() or user_model.objects.create_superuser(
            "bench-admin", "bench@example.invalid", None
        )
        staff = Client()
        staff.force_login(user)
        dashboard_url = reverse("admin:sessions_app_usage_dashboard")
        days = [row["date"] for row in ccusage_runs[-1][1]["daily"]]  # the dashboard shows these days
        dashboard_query = f"tenant={tenant.pk}&since={min(days)}&until={max(days)}" if days else f"tenant={tenant.pk}"
        dashboard_seconds, _ = timed_get(staff, f"{dashboard_url}?{dashboard_query}", runs=5)
        ours = stats.json()["totals"]
        by_model = api.get(f"/api/v1/stats/?group_by=model&{query}").json()["results"]
        ours_by_model = {row["key"] or "": row for row in by_model}
    finally:
        if not keep:
            delete_tenant(tenant)

    print(f"\nSide by side with ccusage {version} (`ccusage daily --json --offline`), the same tree:")
    rows = [
        ["ccusage daily --json (reads the whole tree)", f"{ccusage_seconds:.2f} s", "1"],
        ["ace_import, first import (a process, start-up included)", f"{import_seconds:.2f} s",
         f"{import_seconds / ccusage_seconds:.2f}"],
        ["ace_import again (nothing new)", f"{again_seconds:.2f} s", f"{again_seconds / ccusage_seconds:.3f}"],
        ["GET /api/v1/stats/?group_by=day (median of 10)", f"{stats_seconds * 1000:.1f} ms",
         f"1/{ccusage_seconds / stats_seconds:,.0f}"],
        ["admin usage dashboard page (median of 5)", f"{dashboard_seconds * 1000:.1f} ms",
         f"1/{ccusage_seconds / dashboard_seconds:,.0f}"],
    ]  # fmt: skip
    benchlib.print_table(["", "time", "× ccusage"], rows)
    print("runs: ccusage " + " / ".join(f"{seconds:.2f}" for seconds, _ in ccusage_runs) + " s")
    import_met = import_seconds <= IMPORT_TARGET * ccusage_seconds
    slowest_report = max(stats_seconds, dashboard_seconds)
    report_met = ccusage_seconds / slowest_report >= REPORT_TARGET
    print(f"first import / ccusage = {import_seconds / ccusage_seconds:.2f} (target ≤ {IMPORT_TARGET:g}: "
          f"{'met' if import_met else 'MISSED'})")  # fmt: skip
    print(f"ccusage / slowest report = {ccusage_seconds / slowest_report:,.0f} (target ≥ {REPORT_TARGET}: "
          f"{'met' if report_met else 'MISSED'})")  # fmt: skip
    print(f"import: {import_summary}\nagain: {again_summary}")

    token_rows, differences = [], {}
    for theirs, mine in TOKENS:
        differences[mine] = ours[mine] - ccusage_totals[theirs]
        token_rows.append(
            [mine, f"{ccusage_totals[theirs]:,}", f"{rule[theirs]:,}", f"{ours[mine]:,}", f"{differences[mine]:+,}"]
        )
    benchlib.print_table(["tokens", "ccusage", "ccusage's rule, here", "Open ACE", "Open ACE − ccusage"], token_rows)
    rule_matches = all(rule[theirs] == ccusage_totals[theirs] for theirs, _ in TOKENS)
    if any(differences.values()):
        print(
            "The difference is ccusage's counting rule"
            + (" (applied here, it gives ccusage's totals exactly)" if rule_matches else " (NOT reproduced here)")
            + ": it counts the first line of a streamed response (output tokens so far, not the final count) "
            "and every line of a response without `requestId`; Open ACE counts each response once, with its "
            "most complete usage (docs/accounting.md)."
        )
    else:
        print("Token totals: equal.")
    print(
        "Requests are not compared: ccusage counts none. Failed calls (`isApiErrorMessage` and `api_error` lines) add "
        "no tokens on either side; Open ACE counts each one the provider answered as a request of the model called, "
        'ccusage leaves their model `<synthetic>` out of its model lists (docs/accounting.md, "Failed calls").'
    )
    from sessions_app.pricing import PriceBook, money

    ccusage_cost = ccusage_totals.get("totalCost") or 0
    steps = cost_steps(PriceBook.load(), Decimal(str(ours["cost_usd"])), ours_by_model, counted_lines, ccusage_cost)
    cost_rows, before = [], None
    for label, value in steps:
        cost_rows.append([label, f"{value:,.4f}", "" if before is None else f"{value - before:+,.4f}"])
        before = value
    benchlib.print_table(["cost (USD)", "total", "this step"], cost_rows)
    print(
        "The first figure is the stats API's cost_usd; each step after it applies one of ccusage's rules to the same "
        "logs with our prices, so each part of the difference is named by a rule (docs/accounting.md, \"Cost\")."
    )
    return {
        "cost_steps": [{"step": label, "usd": str(money(value))} for label, value in steps],
        "ccusage_version": version,
        "tree_bytes": size,
        "tree_files": len(files),
        "ccusage_seconds": round(ccusage_seconds, 2),
        "ccusage_runs_seconds": [round(seconds, 2) for seconds, _ in ccusage_runs],
        "first_import_seconds": round(import_seconds, 2),
        "reimport_seconds": round(again_seconds, 2),
        "stats_by_day_ms": round(stats_seconds * 1000, 1),
        "dashboard_ms": round(dashboard_seconds * 1000, 1),
        "import_to_ccusage": round(import_seconds / ccusage_seconds, 3),
        "ccusage_to_slowest_report": round(ccusage_seconds / slowest_report),
        "import_target_met": import_met,
        "report_target_met": report_met,
        "tokens": {
            mine: {"ccusage": ccusage_totals[theirs], "ccusage_rule_here": rule[theirs], "open_ace": ours[mine]}
            for theirs, mine in TOKENS
        },
        "ccusage_rule_reproduced": rule_matches,
    }
