# Issue 18's figures: the governed browser next to Playwright MCP, and what it costs in memory.
# Opens one 16 KiB article page (bench_fetch.py's) from a local HTTP server and takes its
# accessibility snapshot, `browser_navigate` then `browser_snapshot`, through `toolwarden mcp`
# (policy, schema validation, every request through the egress gatekeeper's proxy, a committed
# audit record per call) and through Playwright MCP (@playwright/mcp from npm, pointed at the
# same Debian Chromium with --executable-path), from the same client (the official MCP Python
# SDK) in the same process, in alternating blocks with the order flipped every block. Prints
# the round-trip latency of the pair and of each call.
#
# Then memory, as proportional set size (PSS: shared pages split among the processes that
# share them) of each server and every process under it: started, and with one browser
# session open and idle; then what each extra session (a browser context) adds, measured on
# `toolwarden serve` with --contexts agents, each with a token of its own and so a session of
# its own in the one Chromium, each having opened the page. Then a soak of toolwarden alone: --soak navigations alternating
# between two pages; the processes under it and its PSS before and after (goal: no process
# left behind, at most 10% growth).
# Run by `scripts/bench browser`.
#
#   bench_browser.py --toolwarden BIN --playwright CLI_JS [--chromium PATH] [--pairs N]
#                    [--warmup N] [--block N] [--soak N] [--contexts N]

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import CLIENT, open_session, percentile, server_env, text_of  # noqa: E402
from bench_fetch import page_html, serve  # noqa: E402

CONFIG = """\
[policy]
default = "deny"
allow = ["group:browser"]

[[policy.rules]]
name = "local pages"
tools = ["browser_*"]
allow_domains = ["127.0.0.1"]
"""
HEADING = "Field notes on running tools for agents"


def tree(pid):
    """`pid` and every process under it."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="utf-8") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def pss_kib(pids):
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/smaps_rollup", encoding="utf-8") as f:
                for line in f:
                    if line.startswith("Pss:"):
                        total += int(line.split()[1])
        except OSError:
            pass
    return total


def server_pid(name):
    """The newest process whose command line holds `name` and whose parent is this process."""
    me = os.getpid()
    found = []
    for p in tree(me)[1:]:
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if name in cmd:
            found.append(p)
    if not found:
        raise SystemExit(f"no process running {name}")
    return min(found)


async def contexts(args, config, ws, data, url):
    """PSS of `toolwarden serve` and every process under it with one browser session open,
    then with `args.contexts` (one per agent); returns (PSS with one, PSS with all) in KiB."""
    base = [args.toolwarden, "--config", config, "--workspace", ws, "--data-dir", data]
    tokens = [subprocess.run(base + ["serve", "issue", f"agent-{i}"], check=True,
                             capture_output=True, text=True).stdout.strip()
              for i in range(args.contexts)]
    serve = subprocess.Popen(base + ["serve", "--listen", "127.0.0.1:0"], env=server_env(),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        endpoint = serve.stdout.readline().strip()
        if not endpoint.startswith("http://"):
            raise SystemExit(f"toolwarden serve printed {endpoint!r}, not its URL")
        measured = []
        async with AsyncExitStack() as stack:
            for i, token in enumerate(tokens):
                http = await stack.enter_async_context(
                    create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}))
                read, write, *_ = await stack.enter_async_context(
                    streamable_http_client(endpoint, http_client=http))
                session = await stack.enter_async_context(
                    ClientSession(read, write, client_info=CLIENT))
                await session.initialize()
                r = await session.call_tool("browser_navigate", {"url": url})
                if r.is_error:
                    raise SystemExit(f"agent-{i}: browser_navigate failed: {text_of(r)}")
                if i in (0, len(tokens) - 1):
                    await anyio.sleep(2)
                    measured.append(pss_kib(tree(serve.pid)))
        return measured[0], measured[-1]
    finally:
        serve.terminate()
        serve.wait(timeout=30)


def ms(ns):
    return ns / 1e6


class Browser:
    """One MCP session and the navigate + snapshot pair timed through it."""

    def __init__(self, label, session, url, snapshot_of):
        self.label, self.session, self.url, self.snapshot_of = label, session, url, snapshot_of
        self.pairs, self.navigate, self.snapshot = [], [], []

    async def call(self, tool, arguments):
        start = time.perf_counter_ns()
        result = await self.session.call_tool(tool, arguments)
        took = time.perf_counter_ns() - start
        if result.is_error:
            raise SystemExit(f"{self.label}: {tool} failed: {text_of(result)[:500]}")
        return result, took

    async def pair(self, timed, url=None):
        _, nav = await self.call("browser_navigate", {"url": url or self.url})
        result, snap = await self.call("browser_snapshot", {})
        text = self.snapshot_of(result)
        if HEADING not in text:
            raise SystemExit(f"{self.label}: the snapshot lacks the page's heading: {text[:300]!r}")
        if timed:
            self.pairs.append(nav + snap)
            self.navigate.append(nav)
            self.snapshot.append(snap)
        return text


def toolwarden_snapshot(result):
    return json.loads(text_of(result))["snapshot"]


def playwright_snapshot(result):
    return text_of(result)


def summary(samples):
    s = sorted(samples)
    return {p: ms(percentile(s, p)) for p in (50, 95, 99)} | {"mean": ms(statistics.fmean(s))}


async def run(args, ws, data, config, url, other, scratch):
    ours_params = StdioServerParameters(
        command=args.toolwarden,
        args=["--config", config, "--workspace", ws, "--data-dir", data, "mcp"],
        env=server_env(),
    )
    # Its snapshots and console logs go to files it names: kept out of the working tree.
    peer_args = [args.playwright, "--headless", "--isolated",
                 "--executable-path", args.chromium, "--output-dir", scratch]
    if os.geteuid() == 0:
        # As root Chromium's sandbox cannot start; toolwarden turns it off as root too.
        peer_args.append("--no-sandbox")
    peer_params = StdioServerParameters(command=args.node, args=peer_args, env=server_env(),
                                        cwd=scratch)
    memory = {}
    async with AsyncExitStack() as stack:
        session, tools = await open_session(stack, "toolwarden", ours_params)
        for t in ("browser_navigate", "browser_snapshot"):
            if t not in tools:
                raise SystemExit(f"toolwarden does not list {t}")
        ours = Browser("toolwarden", session, url, toolwarden_snapshot)
        session, tools = await open_session(stack, "playwright-mcp", peer_params)
        peer = Browser("playwright-mcp", session, url, playwright_snapshot)
        ours_pid, peer_pid = server_pid(args.toolwarden), server_pid(args.playwright)
        memory["started"] = (pss_kib(tree(ours_pid)), pss_kib(tree(peer_pid)))

        first = (await ours.pair(False), await peer.pair(False))
        await anyio.sleep(2)
        memory["session"] = (pss_kib(tree(ours_pid)), pss_kib(tree(peer_pid)))

        async def blocks(total, timed):
            for b in range(0, total, args.block):
                order = (ours, peer) if (b // args.block) % 2 == 0 else (peer, ours)
                n = min(args.block, total - b)
                for browser in order:
                    for _ in range(n):
                        await browser.pair(timed)

        start = time.perf_counter()
        await blocks(args.warmup, timed=False)
        await blocks(args.pairs, timed=True)
        elapsed = time.perf_counter() - start

        soak = None
        if args.soak:
            settle = 50
            for i in range(settle):
                await ours.pair(False, url if i % 2 else other)
            before = tree(ours_pid)
            pss_before = pss_kib(before)
            for i in range(args.soak):
                await ours.call("browser_navigate", {"url": url if i % 2 else other})
            await ours.pair(False)
            await anyio.sleep(2)
            after = tree(ours_pid)
            soak = (len(before), pss_before, len(after), pss_kib(after))
        await ours.call("browser_close", {})
    return ours, peer, first, memory, soak, elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--toolwarden", required=True)
    ap.add_argument("--playwright", required=True, help="@playwright/mcp's cli.js")
    ap.add_argument("--node", default="node")
    ap.add_argument("--chromium", default="/usr/bin/chromium")
    ap.add_argument("--pairs", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--block", type=int, default=25)
    ap.add_argument("--soak", type=int, default=500)
    ap.add_argument("--contexts", type=int, default=5,
                    help="sessions opened on `toolwarden serve` for the per-context figure "
                         "(0: not measured)")
    args = ap.parse_args()
    args.toolwarden = os.path.abspath(args.toolwarden)

    page = page_html()
    other = page.replace(b"<h1>", b"<h1>Other: ", 1)
    html = "text/html; charset=utf-8"
    httpd, hits = serve({"/article.html": (page, html), "/other.html": (other, html)})
    base = f"http://127.0.0.1:{httpd.server_address[1]}"
    url = f"{base}/article.html"
    with tempfile.TemporaryDirectory(prefix="tw-browser-bench-") as tmp:
        ws, data = os.path.join(tmp, "ws"), os.path.join(tmp, "data")
        os.makedirs(ws)
        os.makedirs(data)
        os.makedirs(os.path.join(tmp, "peer"))
        config = os.path.join(tmp, "config.toml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(CONFIG)
        ours, peer, first, memory, soak, elapsed = anyio.run(
            run, args, ws, data, config, url, f"{base}/other.html", os.path.join(tmp, "peer"))
        extra = None
        if args.contexts > 1:
            served = os.path.join(tmp, "served")
            os.makedirs(served)
            extra = anyio.run(contexts, args, config, ws, served, url)
        audited = subprocess.run(
            [args.toolwarden, "--config", config, "--data-dir", data, "audit", "report", "--json"],
            check=True, capture_output=True, text=True).stdout
        audited = sum(r["calls"] for r in json.loads(audited)["by_tool"])
    httpd.shutdown()

    print(f"\n{args.pairs} timed navigate + snapshot pairs each after {args.warmup} warm-up "
          f"pairs, in blocks of {args.block}; {len(page)}-byte page; snapshots of "
          f"{len(first[0])} and {len(first[1])} characters; {elapsed:.1f} s; milliseconds")
    print(f"{'server':<40}{'p50':>9}{'p95':>9}{'p99':>9}{'mean':>9}")
    for label, samples in (("toolwarden navigate + snapshot", ours.pairs),
                           ("playwright-mcp navigate + snapshot", peer.pairs),
                           ("toolwarden navigate", ours.navigate),
                           ("playwright-mcp navigate", peer.navigate),
                           ("toolwarden snapshot", ours.snapshot),
                           ("playwright-mcp snapshot", peer.snapshot)):
        s = summary(samples)
        print(f"{label:<40}{s[50]:>9.1f}{s[95]:>9.1f}{s[99]:>9.1f}{s['mean']:>9.1f}")
    a, b = summary(ours.pairs), summary(peer.pairs)
    print(f"ratio toolwarden/playwright-mcp: p50 {a[50] / b[50]:.3f}x (goal: <= 0.80x), "
          f"p99 {a[99] / b[99]:.3f}x")
    (ts, ps), (tw, pw) = memory["started"], memory["session"]
    print(f"memory (PSS, MiB): started: toolwarden {ts / 1024:.1f}, playwright-mcp "
          f"{ps / 1024:.1f}; with one idle session: toolwarden {tw / 1024:.1f} "
          f"(+{(tw - ts) / 1024:.1f}), playwright-mcp {pw / 1024:.1f} (+{(pw - ps) / 1024:.1f})")
    if extra:
        one, all_ = extra
        print(f"memory (PSS, MiB) of toolwarden serve: one session {one / 1024:.1f}, "
              f"{args.contexts} sessions {all_ / 1024:.1f}: "
              f"+{(all_ - one) / 1024 / (args.contexts - 1):.1f} per extra session (context)")
    failed = False
    if soak:
        n0, m0, n1, m1 = soak
        growth = (m1 - m0) / m0 * 100
        print(f"soak: {args.soak} navigations; processes under toolwarden {n0} -> {n1}; "
              f"PSS {m0 / 1024:.1f} -> {m1 / 1024:.1f} MiB ({growth:+.1f}%; goal: <= +10%)")
        failed |= n1 > n0
    print(f"page server: {sum(hits.values())} requests; toolwarden audit records: {audited}")
    if failed:
        print("error: the soak left processes behind", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
