"""The usage dashboard of the admin: one tenant's totals (or every tenant's, by tenant), trend by day,
breakdowns by tool, model, user, project and machine, and its top sessions, with a CSV export of every table.
The tenant is an explicit choice, remembered in the staff user's session.

It reads only the roll-ups (the daily ones for whole days: every breakdown in one GROUPING SETS scan, each
model's token sums priced with the model price table) and the session rows (top sessions by tokens:
ORDER BY … LIMIT on an index; by cost: their usage by model priced in SQL). The two slowest queries, the
breakdowns and the top sessions by cost, run side by side on two connections. Its plan-windows panel (one
tenant's) reads, for each of the few users active in the last 5 hours, the entries of their current 5-hour block
(selectors/blocks.py) and their week's roll-ups. Served by UsageHourlyAdmin at
/admin/sessions_app/usagehourly/dashboard/.
"""

from __future__ import annotations

import csv
import datetime
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor

from django import forms
from django.core.exceptions import PermissionDenied
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import connection
from django.db.models import Sum
from django.http import HttpResponseBadRequest, StreamingHttpResponse
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.utils.text import slugify

from sessions_app.models import Budget, Tenant, UsageHourly
from sessions_app.models.ledger import ALL_TOKENS
from sessions_app.pricing import PriceBook
from sessions_app.selectors.blocks import BLOCK, floor_hour, usage_blocks
from sessions_app.selectors.budgets import amount, budgets_status
from sessions_app.selectors.usage import (
    USAGE_FIELDS,
    UsageFilter,
    all_tokens,
    cost_reconciliation,
    sessions_by_model,
    top_sessions_by_cost,
    top_sessions_by_tokens,
    usage_breakdowns,
)
from sessions_app.selectors.weekly import current_week
from sessions_app.templatetags.usage_format import thousands, usd

DEFAULT_DAYS = 30
TOP_SESSIONS = 20
RECONCILIATION_ROWS = 30  # the tools' own cost against ours: flagged (day, model) rows first
TABLE_ROWS = 50  # shown per breakdown; the CSV has every row
PLAN_WINDOW_USERS = 10  # the users active in the last 5 hours whose current block and week the panel shows
BREAKDOWNS = {
    "tenant_id": "By tenant",  # every tenant's usage only
    "tool": "By tool",
    "model": "By model",
    "user_id": "By user",
    "project": "By project",
    "machine": "By machine",
    "day": "By day",
}
TOPS = {"top_tokens": "Top sessions by tokens", "top_cost": "Top sessions by cost"}
TOKEN_KINDS = (
    ("input_tokens", "input"),
    ("output_tokens", "output"),
    ("cache_read_tokens", "cache read"),
    ("cache_creation_tokens", "cache write"),
)
# What the dashboard calls total tokens (its cards, tables, charts and CSV files): ccusage's "Total Tokens".
TOTAL_TOKENS_HELP = "input + output + cache read + cache write (as ccusage's Total Tokens)"
# What the page says each kind of token is, on hover.
TOKEN_HELP = {
    "input_tokens": "Tokens the model read that no cache served",
    "output_tokens": "Tokens the model wrote (reasoning included)",
    "cache_read_tokens": "Input tokens served from the prompt cache (cheap, and often 10-20x the input)",
    "cache_creation_tokens": "Input tokens written to the prompt cache (5-minute and 1-hour writes)",
    "cache_creation_1h_tokens": "Of the cache writes, those kept for an hour (priced at 2x input, against 1.25x "
    "for 5 minutes)",
    "all_tokens": TOTAL_TOKENS_HELP,
}
ALL_TENANTS = "all"
REMEMBERED_TENANT = "ace_dashboard_tenant"  # the staff user's session key: the tenant last chosen
MESSAGE_KINDS = (
    ("message_user", "user"),
    ("message_assistant", "assistant"),
    ("message_toolresult", "tool results"),
    ("message_error", "errors"),
    ("message_system", "system"),
)
COST_FIELDS = ("cost_usd", "unpriced_tokens")
SESSION_COLUMNS = ("session_id", "name", "tenant", "tool", "user_id", "project", "machine", "started_at")


class DashboardFilters(forms.Form):
    tenant = forms.ChoiceField(help_text="remembered until you choose another")
    # Days the window's arithmetic (the day after `until`) can hold: the API's range, 1000 to 9998.
    since = forms.DateField(
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="first day (UTC)",
        validators=[MinValueValidator(datetime.date(1000, 1, 1)), MaxValueValidator(datetime.date(9998, 12, 31))],
    )
    until = forms.DateField(
        widget=forms.DateInput(attrs={"type": "date"}),
        help_text="last day, included",
        validators=[MinValueValidator(datetime.date(1000, 1, 1)), MaxValueValidator(datetime.date(9998, 12, 31))],
    )
    tool = forms.CharField(required=False, widget=forms.TextInput(attrs={"list": "ace-tools", "size": 14}))
    user_id = forms.CharField(
        label="user", required=False, widget=forms.TextInput(attrs={"list": "ace-users", "size": 14})
    )
    project = forms.CharField(required=False, widget=forms.TextInput(attrs={"list": "ace-projects", "size": 18}))
    machine = forms.CharField(required=False, widget=forms.TextInput(attrs={"list": "ace-machines", "size": 14}))

    def __init__(self, data, *, tenants: list[Tenant]):
        super().__init__(data)
        self.tenants = {str(tenant.pk): tenant for tenant in tenants}
        self.fields["tenant"].choices = [
            (ALL_TENANTS, "all tenants"),
            *((pk, tenant.name) for pk, tenant in self.tenants.items()),
        ]

    def clean_tenant(self) -> Tenant | None:
        """The chosen tenant, or None for every tenant's usage."""
        value = self.cleaned_data["tenant"]
        return None if value == ALL_TENANTS else self.tenants[value]

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            self.add_error("until", "Must not be before the first day.")
        return data

    @classmethod
    def from_request(cls, request) -> DashboardFilters:
        """The query's filters, with the defaults for what it leaves out: the last 30 days, and the tenant last
        chosen in this staff user's session, else the only tenant, else every tenant (never one picked for
        the user: with two tenants, the first by name is no answer to "how much did we use")."""
        tenants = list(Tenant.objects.order_by("name"))
        today = timezone.now().date()
        data = request.GET.copy()
        defaults = {"since": today - datetime.timedelta(days=DEFAULT_DAYS - 1), "until": today}
        remembered = request.session.get(REMEMBERED_TENANT)
        if remembered == ALL_TENANTS or any(str(tenant.pk) == remembered for tenant in tenants):
            defaults["tenant"] = remembered
        else:
            defaults["tenant"] = str(tenants[0].pk) if len(tenants) == 1 else ALL_TENANTS
        for name, value in defaults.items():
            if not data.get(name):
                data[name] = str(value)
        return cls(data, tenants=tenants)

    def remember(self, request) -> None:
        """Keep the tenant chosen for the next visit (a reload, the index's link) in the user's session."""
        if request.session.get(REMEMBERED_TENANT) != self.data["tenant"]:
            request.session[REMEMBERED_TENANT] = self.data["tenant"]

    @property
    def tenant_label(self) -> str:
        tenant = self.cleaned_data["tenant"]
        return "all tenants" if tenant is None else tenant.name

    def usage(self) -> UsageFilter:
        data = self.cleaned_data
        day_start = datetime.time.min.replace(tzinfo=datetime.UTC)
        return UsageFilter(
            tenant=data["tenant"],
            since=datetime.datetime.combine(data["since"], day_start),
            until=datetime.datetime.combine(data["until"] + datetime.timedelta(days=1), day_start),
            tool=data.get("tool") or None,
            user_id=data.get("user_id") or None,
            project=data.get("project") or None,
            machine=data.get("machine") or None,
        )

    def query(self, **extra) -> str:
        params = {name: self.data.get(name, "") for name in self.fields}
        params.update(extra)
        return "?" + urlencode({k: v for k, v in params.items() if v not in (None, "")})


def dashboard_view(request, model_admin):
    if not model_admin.has_view_permission(request):
        raise PermissionDenied
    filters = DashboardFilters.from_request(request)
    context = {
        **model_admin.admin_site.each_context(request),
        "title": "Usage dashboard",
        "subtitle": None,
        "opts": model_admin.opts,
        "app_label": model_admin.opts.app_label,
        "filters": filters,
        "token_help": TOKEN_HELP,
    }
    request.current_app = model_admin.admin_site.name
    if not filters.is_valid():
        return TemplateResponse(request, "admin/sessions_app/usage_dashboard.html", context, status=400)
    filters.remember(request)
    usage = filters.usage()
    book = PriceBook.load()
    table = request.GET.get("table", "")
    if request.GET.get("format") == "csv":
        return csv_response(filters, usage, table, book)

    # The two reads of the sessions' usage by model run beside the scan of the roll-ups, each on its connection.
    wait_for_top_cost = _start_on_own_connection(top_sessions_by_cost, usage=usage, limit=TOP_SESSIONS, book=book)
    wait_for_model_sessions = _start_on_own_connection(sessions_by_model, usage=usage)
    breakdowns = [name for name in BREAKDOWNS if name != "tenant_id" or usage.tenant is None]
    grouped = usage_breakdowns(usage=usage, group_bys=breakdowns, book=book)  # one scan of the roll-ups
    _count_sessions_by_model(grouped["model"], wait_for_model_sessions())
    totals = grouped["day"]["totals"]
    totals["all_tokens"] = all_tokens(totals)
    unpriced = sorted(set().union(*(g["unpriced_models"] for g in grouped.values())))
    tenant_names = {pk: tenant.name for pk, tenant in filters.tenants.items()}
    context.update(
        {
            "title": f"Usage dashboard · {filters.tenant_label}",
            "tenant": usage.tenant,
            "tenant_label": filters.tenant_label,
            "since": filters.cleaned_data["since"],
            "until": filters.cleaned_data["until"],
            "totals": totals,
            "token_totals": [
                ("all_tokens", "total tokens", totals["all_tokens"], TOKEN_HELP["all_tokens"]),
                *((field, f"{label} tokens", totals[field], TOKEN_HELP[field]) for field, label in TOKEN_KINDS),
            ],
            "message_totals": [(label, totals[field]) for field, label in MESSAGE_KINDS],
            "unpriced_models": unpriced,
            "breakdowns": [
                _breakdown(filters, name, grouped[name], tenant_names) for name in breakdowns if name != "day"
            ],
            "days": _breakdown(filters, "day", grouped["day"], tenant_names),
            "tops": [
                {
                    "name": name,
                    "title": TOPS[name],
                    "rows": _top_rows(rows, tenant_names),
                    "csv_url": filters.query(format="csv", table=name),
                }
                for name, rows in (
                    ("top_tokens", top_sessions_by_tokens(usage=usage, limit=TOP_SESSIONS, book=book)),
                    ("top_cost", wait_for_top_cost()),
                )
            ],
            "budgets": _budget_panel(usage.tenant),
            "plan_windows": _plan_windows_panel(usage, book),
            # Only where some usage in the window reported a cost (the totals count its requests): a read of none.
            "reconciliation": cost_reconciliation(usage=usage, book=book, limit=RECONCILIATION_ROWS)
            if totals["reported_cost_requests"]
            else [],
            "chart": _chart_data(grouped, filters.cleaned_data["since"], filters.cleaned_data["until"]),
            "choices": {
                "tools": [r["key"] for r in grouped["tool"]["results"] if r["key"]],
                "users": [r["key"] for r in grouped["user_id"]["results"] if r["key"]],
                "projects": [r["key"] for r in grouped["project"]["results"] if r["key"]],
                "machines": [r["key"] for r in grouped["machine"]["results"] if r["key"]],
            },
        }
    )
    return TemplateResponse(request, "admin/sessions_app/usage_dashboard.html", context)


def _count_sessions_by_model(grouped: dict, counts: dict) -> None:
    """The model breakdown's sessions: those that used each model (`counts`, from sessions_by_model), in place
    of the roll-ups' count, which puts every session under the model of its first message (a prompt: none)."""
    for row in grouped["results"]:
        row["sessions"] = counts.get(row["key"], 0)
    # A session with several models counts under each: the column has no total to add up to.
    grouped["totals"]["sessions"] = None


def _budget_panel(tenant: Tenant | None) -> list[dict]:
    """The active budgets (of the tenant, else every tenant's): where each stands in its current period and the
    projection (one query)."""
    budgets = Budget.objects.filter(active=True).select_related("tenant").order_by("tenant__name", "name")
    if tenant is not None:
        budgets = budgets.filter(tenant=tenant)
    budgets = list(budgets)
    statuses = budgets_status(budgets)
    return [
        {
            "budget": budget,
            "tenant": budget.tenant.name if tenant is None else "",
            "status": statuses[budget.pk],
            "used": amount(budget, statuses[budget.pk].used),
            "limit": amount(budget, budget.limit),
            "meter_value": min(statuses[budget.pk].used, budget.limit),
            "url": reverse("admin:sessions_app_budget_change", args=[budget.pk]),
        }
        for budget in budgets
    ]


def _plan_windows_panel(usage: UsageFilter, book: PriceBook) -> dict | None:
    """One tenant's users active in the last 5 hours (the dashboard's tool, user, project and machine filters
    apply), the most tokens first: each one's current 5-hour block and week, against their plan. None for every
    tenant's dashboard: a plan is a tenant's."""
    if usage.tenant is None:
        return None
    now = timezone.now()
    recent = UsageHourly.objects.filter(tenant=usage.tenant, hour__gte=floor_hour(now) - BLOCK).exclude(user_id="")
    for name in ("tool", "user_id", "project", "machine"):
        if getattr(usage, name) is not None:
            recent = recent.filter(**{name: getattr(usage, name)})
    users = (
        recent.values("user_id")
        .annotate(tokens=Sum(ALL_TOKENS))
        .order_by("-tokens", "user_id")
        .values_list("user_id", flat=True)[:PLAN_WINDOW_USERS]
    )
    scope = {"tenant": usage.tenant, "machine": usage.machine, "tool": usage.tool, "project": usage.project}
    rows = []
    for user_id in users:
        blocks = usage_blocks(user_id=user_id, since=now, now=now, book=book, **scope)
        rows.append(
            {
                "user_id": user_id,
                "plan": blocks["plan"],
                "block": blocks["active_block"],
                "week": current_week(user_id=user_id, now=now, book=book, **scope),
            }
        )
    return {"now": now, "rows": rows, "users_max": PLAN_WINDOW_USERS}


def _start_on_own_connection(function, /, **kwargs) -> Callable[[], object]:
    """Start `function(**kwargs)` in another thread, on a database connection of its own, and return the call
    that waits for its result: PostgreSQL works on it on another core while this thread runs the page's other
    queries. Inside a transaction (a test's, say) another connection would not see what it wrote: the call is
    made here, at once."""
    if connection.in_atomic_block:
        result = function(**kwargs)
        return lambda: result

    def run():
        try:
            return function(**kwargs)
        finally:
            connection.close()  # this thread's, opened for the call

    executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ace-dashboard")
    future = executor.submit(run)
    executor.shutdown(wait=False)  # the thread ends after the call
    return future.result


def _breakdown(filters: DashboardFilters, name: str, grouped: dict, tenant_names: dict) -> dict:
    results = _by_all_tokens(grouped["results"]) if name != "day" else grouped["results"]
    rows = []
    for row in results[:TABLE_ROWS] if name != "day" else results:
        # Clicking a tenant, tool, user, project or machine narrows the dashboard to it.
        filterable = name in ("tenant_id", "tool", "user_id", "project", "machine") and row["key"]
        parameter = "tenant" if name == "tenant_id" else name
        filter_url = filters.query(**{parameter: str(row["key"])}) if filterable else ""
        label = tenant_names.get(str(row["key"]), row["key"]) if name == "tenant_id" else row["key"]
        row = {**row, "all_tokens": all_tokens(row), "label": label, "filter_url": filter_url}
        rows.append({**row, "cells": _number_cells(row, by_model=name == "model")})
    return {
        "name": name,
        "heading": "tenant" if name == "tenant_id" else "user" if name == "user_id" else name,
        "title": BREAKDOWNS[name],
        "rows": rows,
        "hidden": max(len(results) - len(rows), 0),
        "csv_url": filters.query(format="csv", table=name),
    }


def _by_all_tokens(results: list[dict]) -> list[dict]:
    """Rows with their total tokens (`all_tokens`), most first."""
    for row in results:
        row["all_tokens"] = all_tokens(row)
    return sorted(results, key=lambda r: (-r["all_tokens"], -r["messages"], str(r["key"] or "")))


_COUNT_CELLS = (
    "sessions",
    "conversations",
    "requests",
    "messages",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_creation_tokens",
    "all_tokens",
)


# A conversation counts under the model of the message that started it, a prompt: by model, no figure to show.
_NO_CONVERSATIONS_BY_MODEL = (
    '<td class="n" title="A conversation starts with a prompt, which has no model: see the other tables">–</td>'
)


def _cache_write_cell(row: dict) -> str:
    """The cache writes, and under them the 1-hour ones where there are any (priced at 2x input, not 1.25x)."""
    one_hour = row.get("cache_creation_1h_tokens") or 0
    if not one_hour:
        return f'<td class="n">{thousands(row["cache_creation_tokens"])}</td>'
    return (
        f'<td class="n">{thousands(row["cache_creation_tokens"])}'
        f'<br><small title="{TOKEN_HELP["cache_creation_1h_tokens"]}">1 h: {thousands(one_hour)}'
        "</small></td>"
    )


def _number_cells(row: dict, *, by_model: bool = False) -> str:
    """A breakdown row's numeric cells as HTML, made here: a page has a few hundred rows of eleven numbers, and
    rendering them cell by cell through the template was most of the page's time. Numbers and our own text
    only: nothing to escape."""
    warn = " ace-warn" if row["unpriced_tokens"] else ""
    return mark_safe(  # noqa: S308 (digits, commas, dots and the constant above)
        "".join(
            _NO_CONVERSATIONS_BY_MODEL
            if by_model and name == "conversations"
            else _cache_write_cell(row)
            if name == "cache_creation_tokens"
            else f'<td class="n">{thousands(row[name])}</td>'
            for name in _COUNT_CELLS
        )
        + f'<td class="n">{usd(row["cost_usd"])}</td><td class="n{warn}">{thousands(row["unpriced_tokens"])}</td>'
    )


def _top_rows(rows: list[dict], tenant_names: dict) -> list[dict]:
    """The top sessions with their admin links (one `reverse` per table, not two per row), tenant and tokens."""
    change = reverse("admin:sessions_app_session_change", args=[_PLACEHOLDER])
    timeline = reverse("admin:sessions_app_session_timeline", args=[_PLACEHOLDER])
    return [
        {
            **row,
            "all_tokens": all_tokens(row),
            "tokens_hint": " · ".join(f"{thousands(row[field])} {label}" for field, label in TOKEN_KINDS),
            "tenant": tenant_names.get(str(row["session"].tenant_id), ""),
            "change_url": change.replace(_PLACEHOLDER, str(row["session"].pk)),
            "timeline_url": timeline.replace(_PLACEHOLDER, str(row["session"].pk)),
        }
        for row in rows
    ]


_PLACEHOLDER = "00000000-0000-0000-0000-000000000000"


def _chart_data(grouped: dict, since: datetime.date, until: datetime.date) -> dict:
    """Every day of the window (zeros where nothing happened): tokens by kind and cost; cost by model."""
    by_day = {row["key"]: row for row in grouped["day"]["results"]}
    days = []
    day = since
    while day <= until:
        days.append(day.isoformat())
        day += datetime.timedelta(days=1)
    series = {field: [by_day.get(d, {}).get(field, 0) for d in days] for field, _ in TOKEN_KINDS}
    # The messages of no model (prompts, tool results) cost nothing: a bar of them says nothing.
    models = [row for row in _by_all_tokens(grouped["model"]["results"]) if row["key"] or row["cost_usd"]][:15]
    return {
        "days": days,
        "tokens": [{"label": label, "data": series[field]} for field, label in TOKEN_KINDS],
        "cost": [float(by_day[d]["cost_usd"]) if d in by_day else 0 for d in days],
        # A long model name would push the bars off the chart: cut, whole in the tables.
        "models": [_short(row["key"] or "(no model)", 30) for row in models],
        "model_cost": [float(row["cost_usd"]) for row in models],
    }


def _short(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1] + "…"


# -- CSV --------------------------------------------------------------------------------------------------
class _EchoFile:
    """A file-like object whose write() returns the line, for csv.writer in a streaming response."""

    def write(self, value: str) -> str:
        return value


def _csv_lines(header: list[str], rows: Iterable[list]) -> Iterator[str]:
    writer = csv.writer(_EchoFile())
    yield "\ufeff"  # a byte-order mark: spreadsheet programs then read the UTF-8 (Chinese names) right
    yield writer.writerow(header)
    for row in rows:
        yield writer.writerow(row)


def _csv_counters(row: dict) -> list:
    """A row's counters in USAGE_FIELDS order, total_tokens as the page counts them (input + output + cache read
    + cache write), then its cost."""
    return [
        *(all_tokens(row) if field == "total_tokens" else row[field] for field in USAGE_FIELDS),
        *(row[field] for field in COST_FIELDS),
    ]


def csv_response(filters: DashboardFilters, usage: UsageFilter, table: str, book: PriceBook):
    tenant_names = {pk: tenant.name for pk, tenant in filters.tenants.items()}
    if table in BREAKDOWNS and (table != "tenant_id" or usage.tenant is None):
        grouped = usage_breakdowns(usage=usage, group_bys=[table], book=book)[table]
        if table == "model":
            _count_sessions_by_model(grouped, sessions_by_model(usage=usage))
        results = _by_all_tokens(grouped["results"]) if table != "day" else grouped["results"]
        header = ["tenant" if table == "tenant_id" else table, *USAGE_FIELDS, *COST_FIELDS]
        if table == "tenant_id":
            header.insert(1, "tenant_id")
        rows = (
            [
                *((tenant_names.get(str(row["key"]), ""), str(row["key"])) if table == "tenant_id" else ()),
                *(() if table == "tenant_id" else (row["key"] or "",)),
                *_csv_counters(row),
            ]
            for row in results
        )
    elif table in TOPS:
        select = top_sessions_by_tokens if table == "top_tokens" else top_sessions_by_cost
        entries = select(usage=usage, limit=TOP_SESSIONS, book=book)
        header = [*SESSION_COLUMNS, *USAGE_FIELDS, *COST_FIELDS]
        rows = (
            [
                str(e["session"].pk),
                e["session"].name,
                tenant_names.get(str(e["session"].tenant_id), ""),
                e["session"].tool,
                e["session"].user_id,
                e["session"].project,
                e["session"].machine,
                e["session"].started_at.isoformat(),
                *_csv_counters(e),
            ]
            for e in entries
        )
    else:
        tables = [name for name in [*BREAKDOWNS, *TOPS] if name != "tenant_id" or usage.tenant is None]
        return HttpResponseBadRequest(f"Unknown table {table!r}: use one of {', '.join(tables)}.")
    data = filters.cleaned_data
    tenant = "all-tenants" if usage.tenant is None else slugify(usage.tenant.name) or usage.tenant.pk
    name = f"usage-{tenant}-{table}-{data['since']}-{data['until']}.csv"
    response = StreamingHttpResponse(_csv_lines(header, rows), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
