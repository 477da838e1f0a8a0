"""Retention, a cross-app feature in a room of its own: how long each tenant keeps message content and memory
records, the purges that enforce it, and their audit trail."""
