"""Which extractor a strategy version runs with, from its setting and the environment."""

from __future__ import annotations

from django.conf import settings

from .base import Extractor
from .llm import ExtractorMisconfigured, LLMExtractor

_rules = None


def get_extractor(choice: str) -> Extractor:
    """`rules`, `llm`, or `auto` (the LLM when ACE_LLM_BASE_URL is set, else the rules)."""
    global _rules
    if choice == "llm" or (choice == "auto" and settings.ACE_LLM_BASE_URL):
        if not settings.ACE_LLM_BASE_URL:
            raise ExtractorMisconfigured("This strategy uses the llm extractor, but ACE_LLM_BASE_URL is not set")
        return LLMExtractor(
            base_url=settings.ACE_LLM_BASE_URL,
            model=settings.ACE_LLM_MODEL,
            api_key=settings.ACE_LLM_API_KEY,
            timeout=settings.ACE_LLM_TIMEOUT,
            attempts=settings.ACE_LLM_ATTEMPTS,
        )
    if _rules is None:
        from .rules import RulesExtractor

        _rules = RulesExtractor()
    return _rules
