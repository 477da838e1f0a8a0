"""Writes of the strategies app: strategies and their versions, runs, consolidation."""
