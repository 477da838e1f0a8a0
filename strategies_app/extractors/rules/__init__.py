"""The built-in ``rules`` extractor: precompiled English and Chinese patterns, no network, no model.

It reads what a user states about themselves (``profile``), the running state of a session's task (``task``)
and what a user asks to be remembered or reports as an event, lesson or procedure (``fact``). Everything is
compiled at import; a message first meets a cheap keyword filter, and only the few that pass are split into
sentences and clauses and run through the rules. ``score()`` is the cheaper still rating the
confidence-threshold trigger runs on every new message. What it recognises, and what it misses:
``docs/rules-extractor.md``.

``text`` holds the helpers the rules share; ``profile``, ``task`` and ``fact`` the rules of each strategy type;
``score`` the scorer; ``extractor`` the ``RulesExtractor`` that runs them.
"""

from .extractor import RulesExtractor
from .score import score

__all__ = ["RulesExtractor", "score"]
