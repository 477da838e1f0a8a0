"""The Model Context Protocol server, a cross-app feature in a room of its own: the memory and sessions tools an
agent calls over MCP (stdio or streamable HTTP)."""
