# A real MCP client for the integration tests (tests/suite/mcp.rs): the official MCP Python SDK
# starts `toolwarden mcp` over stdio (or connects to `toolwarden serve` over streamable HTTP),
# runs a plan of steps and prints one JSON document with what the server answered, so the Rust
# tests assert on exactly what a real peer saw.
#
#   client.py PLAN.json
#
# The plan:
#   {"server": {"command": BIN, "args": [...], "env": {...}, "cwd": DIR}
#            | {"url": URL, "token": TOKEN},       streamable HTTP with a bearer token
#    "client": {"name": NAME, "version": VERSION},
#    "steps": [STEP, ...]}
# Steps (each answers one entry of "steps" in the output, in order):
#   {"op": "list"}                            -> {"tools": [Tool as JSON]}
#   {"op": "call", "tool": T, "arguments": {...},
#    "progress": true,                        ask for progress notifications (a progressToken)
#    "signal_on_progress": PATH,              write PATH at the first progress notification
#    "cancel_when": PATH}                     cancel the call once PATH exists
#                                             -> {"result": CallToolResult as JSON} or
#                                                {"cancelled": true}, plus "progress": [messages]
#   {"op": "call_until_success", "tool": T, "arguments": {...}}
#                                             call again (every 0.2 s, at most WAIT_LIMIT s) until
#                                             the result is not an error -> {"result": ...,
#                                             "errors": [the error texts before it]}
#   An argument value {"$from_last": REGEX} is replaced by REGEX's first group in the latest
#   earlier result it matches (its strings, structured content included): a reference a
#   snapshot handed out.
#   {"op": "signal", "path": PATH}            write PATH (the Rust side waits for it)
#   {"op": "wait", "path": PATH}              wait until PATH exists (the Rust side writes it)
#   {"op": "wait_list_changed"}               wait for notifications/tools/list_changed
#                                             -> {"list_changed": true}
# Every wait gives up after WAIT_LIMIT seconds with an error, so a broken server fails the test
# instead of hanging it.
#
# The report also holds every warning the SDK logged ("warnings": a failed session termination
# is one), over HTTP the session id the server gave ("session_id"), and, when the server refused
# the handshake, its error ("initialize_error": {"code", "message"}) instead of the steps.

import contextlib
import json
import logging
import os
import re
import sys

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.shared.exceptions import MCPError
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

WAIT_LIMIT = 30.0
POLL = 0.02


def dump(model):
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def touch(path):
    with open(path, "w", encoding="utf-8") as f:
        f.write("ready\n")


async def wait_for_file(path):
    with anyio.fail_after(WAIT_LIMIT):
        while not os.path.exists(path):
            await anyio.sleep(POLL)


def strings(value):
    """Every string in a JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from strings(v)


def substitute(value, earlier):
    """`value` with each {"$from_last": REGEX} replaced by its first group in the latest of the
    `earlier` results it matches."""
    if isinstance(value, dict):
        if list(value) == ["$from_last"]:
            for result in reversed(earlier):
                found = re.search(value["$from_last"], "\n".join(strings(result)))
                if found:
                    return found.group(1)
            raise ValueError(f"{value['$from_last']!r} is in no earlier result")
        return {k: substitute(v, earlier) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, earlier) for v in value]
    return value


async def call(session, step, earlier=()):
    progress = []
    signal = step.get("signal_on_progress")

    async def on_progress(value, total, message):
        progress.append(message)
        if signal and len(progress) == 1:
            touch(signal)

    callback = on_progress if step.get("progress") else None
    out = {}
    cancel_when = step.get("cancel_when")
    async with anyio.create_task_group() as tg:
        scope = anyio.CancelScope()

        async def run():
            with scope:
                arguments = substitute(step.get("arguments", {}), earlier)
                result = await session.call_tool(
                    step["tool"], arguments, progress_callback=callback
                )
                out["result"] = dump(result)
            if scope.cancelled_caught:
                out["cancelled"] = True
            # The call is over: stop waiting for a reason to cancel it.
            tg.cancel_scope.cancel()

        async def cancel_later():
            await wait_for_file(cancel_when)
            scope.cancel()

        tg.start_soon(run)
        if cancel_when:
            tg.start_soon(cancel_later)
    out["progress"] = progress
    return out


class Warnings(logging.Handler):
    """Keeps what the SDK logs at WARNING and above."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.seen = []

    def emit(self, record):
        self.seen.append(f"{record.name}: {record.getMessage()}")


@contextlib.asynccontextmanager
async def transport(server, report):
    """The plan's server as (read, write) streams: a child over stdio, or a URL over HTTP."""
    if "url" in server:
        headers = {"Authorization": f"Bearer {server['token']}"}

        async def note_session(response):
            if "mcp-session-id" in response.headers:
                report["session_id"] = response.headers["mcp-session-id"]

        async with create_mcp_http_client(headers=headers) as http:
            http.event_hooks["response"].append(note_session)
            async with streamable_http_client(server["url"], http_client=http) as streams:
                yield streams[0], streams[1]
    else:
        params = StdioServerParameters(
            command=server["command"],
            args=server.get("args", []),
            env=server.get("env"),
            cwd=server.get("cwd"),
        )
        async with stdio_client(params) as (read, write):
            yield read, write


async def main(plan):
    server = plan["server"]
    client = plan["client"]
    list_changed = anyio.Event()

    async def on_message(message):
        if isinstance(message, types.ToolListChangedNotification):
            list_changed.set()

    warnings = Warnings()
    logging.getLogger().addHandler(warnings)
    report = {"steps": []}
    async with transport(server, report) as (read, write):
        async with ClientSession(
            read,
            write,
            client_info=types.Implementation(name=client["name"], version=client["version"]),
            message_handler=on_message,
        ) as session:
            try:
                init = await session.initialize()
            except MCPError as e:
                report["initialize_error"] = {"code": e.code, "message": e.message}
                plan["steps"] = []
            else:
                report["initialize"] = dump(init)
            for step in plan["steps"]:
                op = step["op"]
                if op == "list":
                    listed = await session.list_tools()
                    report["steps"].append({"tools": [dump(t) for t in listed.tools]})
                elif op == "call":
                    earlier = [s["result"] for s in report["steps"] if "result" in s]
                    report["steps"].append(await call(session, step, earlier))
                elif op == "call_until_success":
                    errors = []
                    with anyio.fail_after(WAIT_LIMIT):
                        while True:
                            result = await session.call_tool(step["tool"], step.get("arguments", {}))
                            if not result.is_error:
                                break
                            errors.append(" ".join(c.text for c in result.content if hasattr(c, "text")))
                            await anyio.sleep(0.2)
                    report["steps"].append({"result": dump(result), "errors": errors})
                elif op == "signal":
                    touch(step["path"])
                    report["steps"].append({})
                elif op == "wait":
                    await wait_for_file(step["path"])
                    report["steps"].append({})
                elif op == "wait_list_changed":
                    with anyio.fail_after(WAIT_LIMIT):
                        await list_changed.wait()
                    list_changed = anyio.Event()
                    report["steps"].append({"list_changed": True})
                else:
                    raise ValueError(f"unknown step {op!r}")
    # Closed (the SDK sends the session's DELETE as the transport closes).
    report["warnings"] = warnings.seen
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        anyio.run(main, json.load(f))
