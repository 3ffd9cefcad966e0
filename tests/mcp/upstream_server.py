# A small upstream MCP server for the integration tests (tests/suite/mcp/upstream.rs), written
# with the official MCP Python SDK, that Toolwarden imports as `[upstream.NAME]`:
#
#   upstream_server.py DESCRIPTION_FILE
#
# Its tool `greet` takes its description from DESCRIPTION_FILE when the server starts, so a test
# can change what the server says about the tool between two starts (the rug pull that pinning
# must catch). `crash` ends the process at once, as a server that dies would.

import os
import sys

from mcp.server.mcpserver import MCPServer

with open(sys.argv[1], encoding="utf-8") as f:
    DESCRIPTION = f.read().strip()

server = MCPServer("tw-test-upstream")


@server.tool(description=DESCRIPTION, structured_output=False)
def greet(name: str) -> str:
    return f"hello {name}"


@server.tool(description="Ends the server process at once.", structured_output=False)
def crash() -> str:
    os._exit(3)


if __name__ == "__main__":
    server.run()
