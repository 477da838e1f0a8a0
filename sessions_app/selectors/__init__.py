"""Reads: `usage` (counters, grouped usage, cost, top sessions) and `recount` (the audits against messages)."""
