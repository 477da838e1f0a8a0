"""Extractors: turn a session's messages into candidate memories (``base`` holds the shared types)."""
