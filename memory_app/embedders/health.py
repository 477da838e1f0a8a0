"""The embedder on /healthz (platform_kit.health, wired in aceproject/urls.py): which, whether its model is loaded
in this process, how long that took; or, misconfigured, which settings to look at."""

from __future__ import annotations

import re

from django.conf import settings

from memory_app.embedders import get_embedder
from platform_kit.health import down_logged

_SETTING_NAME = re.compile(r"\bACE_[A-Z_]+[A-Z]\b")


def embedder_health() -> dict:
    """The configured embedder as this process has it, never loading it (a health probe must stay fast)."""
    try:
        status = get_embedder().status()
    except Exception as error:  # noqa: BLE001 - misconfigured: say so; recall falls back to keywords
        down_logged("the embedder", error)
        # The settings to look at, by name; the message itself may name a model folder or an endpoint.
        names = sorted(set(_SETTING_NAME.findall(str(error))))
        return {
            "provider": str(settings.ACE_EMBEDDER),
            "loaded": False,
            "error": f"misconfigured: {', '.join(names) or 'ACE_EMBEDDER'} (the server log says how)",
        }
    return status
