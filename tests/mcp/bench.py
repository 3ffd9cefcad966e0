# Issue 7's figure: what governance costs over MCP. Reads one 4 KiB file through `toolwarden mcp`
# (policy, schema validation, a committed audit record on every call) and through the reference
# server, @modelcontextprotocol/server-filesystem, from the same client (the official MCP Python
# SDK) in the same process, and prints the round-trip latency of each. Run by `scripts/bench mcp`.
#
#   bench.py --toolwarden BIN [--reference DIST/index.js] [--calls N] [--warmup N] [--block N]
#
# Both sessions stay open for the whole run and are called in alternating blocks (the order
# flipped every block), one call in flight at a time, so drift in the machine's load lands on both
# alike. Every answer must carry the file's content exactly; afterwards the audit log must hold
# one record per call made to toolwarden.

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

FILE = "file.txt"
CLIENT = types.Implementation(name="bench", version="1.0")
# Minimal and explicit, so the figure does not move with the built-in policy: only read_file.
CONFIG = """\
[policy]
default = "deny"
allow = ["read_file"]
"""


def file_text():
    # 4096 bytes of printable text in 64-byte lines; numbered, so a mixed-up answer cannot match.
    lines = [f"line {i:04d} " + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFGHIJKLMNOPQ\n"
             for i in range(64)]
    text = "".join(lines)
    assert len(text.encode()) == 4096
    return text


def default_reference():
    target = os.environ.get("CARGO_TARGET_DIR") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "target")
    return os.path.join(target, "mcp-npm", "node_modules", "@modelcontextprotocol",
                        "server-filesystem", "dist", "index.js")


def server_env(extra=None):
    env = get_default_environment()
    # The helper scripts/bench chose, and RUST_LOG to look inside toolwarden while it runs.
    for key in ("TOOLWARDEN_SANDBOX_HELPER", "RUST_LOG"):
        if key in os.environ:
            env[key] = os.environ[key]
    env.update(extra or {})
    return env


class Server:
    """One open session and the call timed through it (the same call every time)."""

    def __init__(self, label, session, tool, arguments, content_of):
        self.label = label
        self.session = session
        self.tool = tool
        self.arguments = arguments
        self.content_of = content_of
        self.calls = 0
        self.samples = []
        self.first = None

    async def call(self, timed, expected=None):
        """Makes the call once; its content must be `expected` when given, and is always the
        first answer again (nothing in the servers or the policy changes)."""
        start = time.perf_counter_ns()
        result = await self.session.call_tool(self.tool, self.arguments)
        elapsed = time.perf_counter_ns() - start
        self.calls += 1
        if result.is_error:
            raise SystemExit(f"{self.label}: the call failed: {result.content}")
        got = self.content_of(result)
        if expected is not None and got != expected:
            raise SystemExit(f"{self.label}: wrong content ({len(got)} characters, "
                             f"expected {len(expected)})")
        if self.first is None:
            self.first = got
        elif got != self.first:
            raise SystemExit(f"{self.label}: answer {self.calls} differs from the first")
        if timed:
            self.samples.append(elapsed)


def text_of(result):
    return "".join(c.text for c in result.content if isinstance(c, types.TextContent))


def toolwarden_content(result):
    # The text block is the JSON output; structuredContent is the same object.
    out = json.loads(text_of(result))
    if out.get("truncated") or result.structured_content != out:
        raise SystemExit(f"toolwarden: unexpected answer {out!r:.200}")
    return out["content"]


def reference_content(result):
    text = text_of(result)
    if result.structured_content is not None and result.structured_content.get("content") != text:
        raise SystemExit("reference: structuredContent differs from the text")
    return text


async def open_session(stack, label, params, errlog=sys.stderr):
    start = time.perf_counter()
    read, write = await stack.enter_async_context(stdio_client(params, errlog=errlog))
    session = await stack.enter_async_context(
        ClientSession(read, write, client_info=CLIENT))
    await session.initialize()
    tools = [t.name for t in (await session.list_tools()).tools]
    print(f"{label}: started and initialized in {(time.perf_counter() - start) * 1e3:.0f} ms; "
          f"tools: {', '.join(tools)}", flush=True)
    return session, tools


def percentile(sorted_ns, p):
    # Nearest rank: a figure some call actually took.
    k = max(0, min(len(sorted_ns) - 1, -(-len(sorted_ns) * p // 100) - 1))
    return sorted_ns[k]


def summary(samples):
    s = sorted(samples)
    return {
        "p50": percentile(s, 50) / 1e3,
        "p90": percentile(s, 90) / 1e3,
        "p99": percentile(s, 99) / 1e3,
        "mean": statistics.fmean(s) / 1e3,
    }


def audit_count(args, config, data):
    out = subprocess.run(
        [args.toolwarden, "--config", config, "--data-dir", data, "audit", "report", "--json"],
        check=True, capture_output=True, text=True).stdout
    return sum(row["calls"] for row in json.loads(out)["by_tool"])


async def run(args, ws, data, config, expected):
    ours_params = StdioServerParameters(
        command=args.toolwarden,
        args=["--config", config, "--workspace", ws, "--data-dir", data, "mcp"],
        env=server_env(),
    )
    ref_params = StdioServerParameters(
        command=args.node, args=[args.reference, ws], env=server_env())
    path = os.path.join(ws, FILE)

    async with AsyncExitStack() as stack:
        session, tools = await open_session(stack, "toolwarden", ours_params)
        if "read_file" not in tools:
            raise SystemExit("toolwarden does not list read_file")
        ours = Server("toolwarden", session, "read_file", {"path": FILE}, toolwarden_content)
        session, tools = await open_session(stack, "server-filesystem", ref_params)
        # read_file is the deprecated alias of read_text_file in current releases.
        tool = "read_text_file" if "read_text_file" in tools else "read_file"
        ref = Server(f"server-filesystem {tool}", session, tool, {"path": path},
                     reference_content)

        async def blocks(total, timed):
            for b in range(0, total, args.block):
                pair = (ours, ref) if (b // args.block) % 2 == 0 else (ref, ours)
                n = min(args.block, total - b)
                for server in pair:
                    for _ in range(n):
                        await server.call(timed, expected)

        start = time.perf_counter()
        await blocks(args.warmup, timed=False)
        await blocks(args.calls, timed=True)
        elapsed = time.perf_counter() - start
    # The session is closed: toolwarden has drained and written every record.
    return ours, ref, elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--toolwarden", required=True)
    ap.add_argument("--node", default=shutil.which("node") or "node")
    ap.add_argument("--reference", default=default_reference())
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=200)
    ap.add_argument("--block", type=int, default=100)
    args = ap.parse_args()
    args.toolwarden = os.path.abspath(args.toolwarden)
    if not os.path.exists(args.reference):
        raise SystemExit(f"{args.reference} is missing: run scripts/setup-mcp")

    expected = file_text()
    with tempfile.TemporaryDirectory(prefix="tw-mcp-bench-") as tmp:
        # The reference server resolves its roots; give both the same real path.
        tmp = os.path.realpath(tmp)
        ws, data = os.path.join(tmp, "ws"), os.path.join(tmp, "data")
        os.makedirs(ws)
        os.makedirs(data)
        with open(os.path.join(ws, FILE), "w", encoding="utf-8", newline="") as f:
            f.write(expected)
        config = os.path.join(tmp, "config.toml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(CONFIG)

        ours, ref, elapsed = anyio.run(run, args, ws, data, config, expected)
        audited = audit_count(args, config, data)

    print(f"\n{args.calls} timed calls each after {args.warmup} warm-up calls, in blocks of "
          f"{args.block}, 4096-byte file; {elapsed:.1f} s of calls; microseconds per round trip")
    a, b = summary(ours.samples), summary(ref.samples)
    print(f"{'server':<34}{'p50':>9}{'p90':>9}{'p99':>9}{'mean':>9}")
    for label, s in (("toolwarden mcp read_file", a), (ref.label, b)):
        print(f"{label:<34}{s['p50']:>9.0f}{s['p90']:>9.0f}{s['p99']:>9.0f}{s['mean']:>9.0f}")
    print(f"mcp summary: 4 KiB read over MCP, toolwarden mcp vs {ref.label}: "
          f"p50 {a['p50']:.0f} vs {b['p50']:.0f} us = {a['p50'] / b['p50']:.2f}x (goal <= 0.8x), "
          f"p99 {a['p99']:.0f} vs {b['p99']:.0f} us = {a['p99'] / b['p99']:.2f}x (goal <= 0.5x)")
    print(f"toolwarden audit records: {audited} for {ours.calls} calls")
    if audited != ours.calls:
        print("error: not every call was audited", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
