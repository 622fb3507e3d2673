"""The `mcp` target: an MCP server's tools, driven by a model as a tool-calling agent would."""
