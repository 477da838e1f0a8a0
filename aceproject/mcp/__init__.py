"""The MCP server (Model Context Protocol): Open ACE's memory and usage as tools for models and agents."""
