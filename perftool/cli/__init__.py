"""The command line (:mod:`.main`, click) and the MCP server it starts (:mod:`.mcp`): options parsed, the API
called, the result written in the format asked for."""
