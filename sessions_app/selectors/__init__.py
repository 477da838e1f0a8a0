"""Reads: `usage` (counters, grouped usage, cost, top sessions), `prices` (the models without a price) and `recount`
(the audits against messages)."""
