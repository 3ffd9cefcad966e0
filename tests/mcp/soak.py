# Issue 15's soak: does `toolwarden serve` free the MCP sessions it no longer has? The official MCP
# Python SDK opens short sessions over streamable HTTP (initialize, tools/list, close, which sends
# the session's DELETE), a few at a time, and the resident memory of the server process is read
# from /proc after a warm-up and again at the end. Run by tests/suite/mcp/http.rs, which fails if
# memory grew more than it allows; also usable by hand against a running serve.
#
#   soak.py --url URL --token TOKEN --pid PID --sessions N --warmup N [--lanes N]
#
# Prints one JSON document: the figures (RSS in KiB at the start, after the warm-up and at the
# end; seconds and sessions per second for the measured sessions) and every warning the SDK
# logged (a failed session termination is one), so the Rust side asserts on both. A session that
# fails ends the run with an error: a soak that silently skips sessions measures nothing.

import argparse
import json
import logging
import time

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

CLIENT = types.Implementation(name="soak", version="1.0")
SESSION_LIMIT = 30.0


class Warnings(logging.Handler):
    """Keeps what the SDK logs at WARNING and above."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.seen = []

    def emit(self, record):
        self.seen.append(f"{record.name}: {record.getMessage()}")


def rss_kib(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError(f"no VmRSS for pid {pid}")


async def one_session(url, http):
    with anyio.fail_after(SESSION_LIMIT):
        async with streamable_http_client(url, http_client=http) as (read, write):
            async with ClientSession(read, write, client_info=CLIENT) as session:
                await session.initialize()
                listed = await session.list_tools()
                if not listed.tools:
                    raise RuntimeError("the session listed no tools")


async def sessions(url, token, count, lanes):
    """`count` sessions, at most `lanes` open at once, each lane on its own HTTP client."""
    left = iter(range(count))

    async def lane():
        headers = {"Authorization": f"Bearer {token}"}
        async with create_mcp_http_client(headers=headers) as http:
            for _ in left:
                await one_session(url, http)

    async with anyio.create_task_group() as tg:
        for _ in range(lanes):
            tg.start_soon(lane)


async def main(args):
    warnings = Warnings()
    logging.getLogger().addHandler(warnings)
    start = rss_kib(args.pid)
    await sessions(args.url, args.token, args.warmup, args.lanes)
    # Let anything the server frees in the background settle before the first reading.
    await anyio.sleep(1.0)
    warm = rss_kib(args.pid)
    began = time.monotonic()
    await sessions(args.url, args.token, args.sessions, args.lanes)
    seconds = time.monotonic() - began
    await anyio.sleep(1.0)
    end = rss_kib(args.pid)
    print(json.dumps({
        "sessions": args.sessions,
        "warmup": args.warmup,
        "lanes": args.lanes,
        "rss_kib": {"start": start, "warm": warm, "end": end},
        "seconds": round(seconds, 2),
        "sessions_per_s": round(args.sessions / seconds, 1),
        "warnings": warnings.seen,
    }, indent=2))


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--url", required=True)
    p.add_argument("--token", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--sessions", type=int, default=2000)
    p.add_argument("--warmup", type=int, default=200)
    p.add_argument("--lanes", type=int, default=4)
    anyio.run(main, p.parse_args())
