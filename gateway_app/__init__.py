"""The LLM gateway (../shared/CONTRACT.md "LLM gateway", docs/gateway.md): OpenAI- and Anthropic-compatible
endpoints in the call path. Each call is authenticated with the client's Open ACE key, checked against the
tenant's hard budgets and the key's rate limits, forwarded with the provider's own key, relayed as it streams,
and recorded as a chat turn through the ledger's services (sessions_app.services.turns)."""
