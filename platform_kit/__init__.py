"""The platform kit: what every app builds on, and nothing app-specific.

Tenant scoping, authentication by API key, the API's error shape, pagination and strict serializer fields
(`platform_kit.api`); the admin's building blocks for big tables (`platform_kit.admin`); database helpers
(`platform_kit.db`); queuing follow-up work that must never fail a committed write (`platform_kit.tasks`); the
middleware, the /healthz probe, the admin's app config, the API docs' groups, and the pages around the admin and
the API (`platform_kit.site`, with the error pages and the overrides of other apps' templates).

The dependency rule: the kit imports no app. `sessions_app`, `memory_app` and `strategies_app` import it.
"""
