"""The models of sessions_app, one module per concern: tenancy, the message ledger, usage, budgets, plans."""

from sessions_app.models.budgets import (
    Budget,
    BudgetChange,
    BudgetChangeAction,
    BudgetCrossing,
    BudgetPeriod,
    BudgetScope,
    BudgetUnit,
    BudgetUsage,
)
from sessions_app.models.ledger import (
    CjkSearchVector,
    Conversation,
    LlmRequest,
    Message,
    Role,
    Session,
    StateVersion,
    Turn,
    TurnStatus,
    UsageCounters,
)
from sessions_app.models.plans import PlanPreset, TokenCounting, UsagePlan, Weekday
from sessions_app.models.privacy import ForgetAudit
from sessions_app.models.tenancy import ApiKey, Tenant
from sessions_app.models.usage import ModelPrice, PriceMatch, SessionModelUsage, UsageDaily, UsageHourly, UsageRollup

__all__ = [
    "Budget",
    "BudgetChange",
    "BudgetChangeAction",
    "BudgetCrossing",
    "BudgetPeriod",
    "BudgetScope",
    "BudgetUnit",
    "BudgetUsage",
    "ApiKey",
    "CjkSearchVector",
    "ForgetAudit",
    "Conversation",
    "LlmRequest",
    "Message",
    "ModelPrice",
    "PlanPreset",
    "PriceMatch",
    "Role",
    "Session",
    "SessionModelUsage",
    "StateVersion",
    "Tenant",
    "TokenCounting",
    "Turn",
    "TurnStatus",
    "UsageCounters",
    "UsageDaily",
    "UsageHourly",
    "UsagePlan",
    "UsageRollup",
    "Weekday",
]
