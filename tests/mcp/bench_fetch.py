# Issue 17's figure: what a governed fetch costs over MCP next to the official fetch server.
# Fetches one 16 KiB article page from a local HTTP server as Markdown through `toolwarden mcp`
# (`http_fetch`: policy, schema validation, the egress gatekeeper, a committed audit record on
# every call) and through mcp-server-fetch from PyPI (its `fetch` tool), from the same client
# (the official MCP Python SDK) in the same process, and prints the round-trip latency of each.
# Run by `scripts/bench fetch` (and `scripts/bench net`).
#
#   bench_fetch.py --toolwarden BIN [--calls N] [--warmup N] [--block N] [--ignore-robots-txt]
#
# The page server is http.server in a thread of this process, on 127.0.0.1 at a random port; it
# also serves an allow-all /robots.txt, because the peer as shipped reads robots.txt before every
# fetch (its own check of each call; --ignore-robots-txt measures it without). Loopback is off
# limits to both servers unless configured: toolwarden gets a policy rule whose allow_domains
# names 127.0.0.1, the peer --allow-private-ips (which switches its address guard off).
#
# Both sessions stay open for the whole run and are called in alternating blocks (the order
# flipped every block), one call in flight at a time, so drift in the machine's load lands on both
# alike. Every answer must be a success holding every numbered paragraph of the page, whole;
# afterwards the audit log must hold one successful record per call made to toolwarden.

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import AsyncExitStack
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
from mcp.client.stdio import StdioServerParameters

# Percentiles and environment as bench.py makes them, so the two figures read alike.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench import Server, open_session, percentile, server_env, text_of  # noqa: E402

PAGE_BYTES = 16 * 1024  # as the criterion bench (crates/tw-runtime/benches/net.rs)
PARAGRAPHS = 32
# Minimal and explicit, so the figure does not move with the built-in policy: only http_fetch,
# and only to the page server (loopback is refused unless a rule names the host).
CONFIG = """\
[policy]
default = "deny"
allow = ["http_fetch"]

[[policy.rules]]
name = "local page"
tools = ["http_fetch"]
allow_domains = ["127.0.0.1"]
"""
ROBOTS = b"User-agent: *\nAllow: /\n"
# Large enough that the peer never cuts the page (it returns 5000 characters unless asked).
PEER_MAX_LENGTH = 200_000
MARKER = re.compile(r"note (\d{3}) of %03d" % PARAGRAPHS)


def page_html():
    # An article as a blog would serve it: navigation and a footer around headings, paragraphs
    # with links and emphasis, and lists. Each paragraph says its number, so an answer that
    # lost, repeated or mixed up a paragraph cannot pass.
    out = ['<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
           "<title>Field notes on running tools for agents</title>\n"
           '<meta name="viewport" content="width=device-width, initial-scale=1">\n</head>\n'
           '<body>\n<header><nav><a href="/">Home</a> | <a href="/archive">Archive</a> | '
           '<a href="/about">About</a></nav></header>\n<main>\n<article>\n'
           "<h1>Field notes on running tools for agents</h1>\n"
           '<p class="byline">By A. Writer, <time datetime="2026-10-01">1 October 2026</time></p>\n']
    for n in range(1, PARAGRAPHS + 1):
        if n % 8 == 1:
            out.append(f"<h2>Part {n // 8 + 1}: what the logs told us</h2>\n")
        out.append(
            f"<p>This is note {n:03d} of {PARAGRAPHS:03d}. An agent asked for a page, the "
            f'runtime checked the <a href="/policy#rule-{n}">policy rule</a> that covers it, '
            "resolved the host itself and connected only to an address it had checked. "
            f"<em>Nothing</em> reached the tool before the decision was written down, and the "
            f"<strong>audit record</strong> of call {n} says which rule let it through and how "
            "many bytes came back, so a person reading it later can tell what happened.</p>\n")
        if n % 8 == 4:
            out.append("<ul>\n" + "".join(
                f'<li>Finding {n}.{k}: see <a href="/findings/{n}-{k}">the details</a></li>\n'
                for k in range(1, 5)) + "</ul>\n")
    out.append('</article>\n</main>\n<footer><p>Comments are closed. '
               '<a href="/feed.xml">Feed</a></p></footer>\n')
    tail = "</body>\n</html>\n"
    page = "".join(out)
    pad = PAGE_BYTES - len(page.encode()) - len(tail) - len("<!--  -->\n")
    assert pad >= 0, "the page outgrew PAGE_BYTES"
    page = (page + f"<!-- {'.' * pad} -->\n" + tail).encode()
    assert len(page) == PAGE_BYTES
    return page


def serve(routes):
    """Starts a page server in a thread for `routes` (path -> (body, content type)); returns it,
    with its request counts by path."""
    hits = {}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive for a client that keeps its connection
        # Headers and body leave in two writes; with Nagle on, the body's last segment waits
        # for the client's delayed ACK of the headers (40 ms) on a kept-alive connection.
        disable_nagle_algorithm = True

        def do_GET(self):
            body, kind = routes.get(self.path, (None, None))
            hits[self.path] = hits.get(self.path, 0) + 1
            if body is None:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    httpd.daemon_threads = True
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, hits


def summary(samples):
    s = sorted(samples)
    return {p: percentile(s, p) / 1e3 for p in (50, 95, 99)} | {"mean": statistics.fmean(s) / 1e3}


def audit_counts(args, config, data):
    out = subprocess.run(
        [args.toolwarden, "--config", config, "--data-dir", data, "audit", "report", "--json"],
        check=True, capture_output=True, text=True).stdout
    rows = json.loads(out)["by_tool"]
    return sum(r["calls"] for r in rows), sum(r["success"] for r in rows)


def check_markdown(label, text):
    """The page came back whole as Markdown: every paragraph once, in order, no HTML left."""
    found = [int(m) for m in MARKER.findall(text)]
    if found != list(range(1, PARAGRAPHS + 1)):
        raise SystemExit(f"{label}: paragraphs {found[:3]}...{found[-3:]} (of {len(found)}), "
                         f"expected 1..{PARAGRAPHS}: {text[:200]!r}")
    if "<p>" in text or "<a href" in text or "**audit record**" not in text:
        raise SystemExit(f"{label}: not Markdown: {text[:200]!r}")
    return text


def toolwarden_content(result):
    # The text block is the JSON output; structuredContent, if sent, is the same object.
    out = json.loads(text_of(result))
    if (out.get("status") != 200 or out.get("truncated")
            or result.structured_content not in (None, out)):
        raise SystemExit(f"toolwarden: unexpected answer {out!r:.300}")
    return check_markdown("toolwarden", out["content"])


def peer_content(url):
    def content(result):
        text = text_of(result)
        # The peer reports a failure it anticipated as an isError result, one it did not as an
        # <error> element in the text (an empty extraction, a cut page).
        prefix = f"Contents of {url}:\n"
        if not text.startswith(prefix) or "<error>" in text:
            raise SystemExit(f"mcp-server-fetch: unexpected answer {text[:300]!r}")
        return check_markdown("mcp-server-fetch", text[len(prefix):])
    return content


async def run(args, ws, data, config, url, peer_log):
    ours_params = StdioServerParameters(
        command=args.toolwarden,
        args=["--config", config, "--workspace", ws, "--data-dir", data, "mcp"],
        env=server_env(),
    )
    peer_args = ["-m", "mcp_server_fetch", "--allow-private-ips"]
    if args.ignore_robots_txt:
        peer_args.append("--ignore-robots-txt")
    # The peer runs on this interpreter: setup-mcp installs it in the client's venv.
    peer_params = StdioServerParameters(command=sys.executable, args=peer_args,
                                        env=server_env())

    async with AsyncExitStack() as stack:
        session, tools = await open_session(stack, "toolwarden", ours_params, sys.stderr)
        if "http_fetch" not in tools:
            raise SystemExit("toolwarden does not list http_fetch")
        ours = Server("toolwarden", session, "http_fetch", {"url": url, "as": "markdown"},
                      toolwarden_content)
        # The peer logs two lines for every call (its HTTP requests): kept out of the figures.
        session, tools = await open_session(stack, "mcp-server-fetch", peer_params, peer_log)
        if "fetch" not in tools:
            raise SystemExit("mcp-server-fetch does not list fetch")
        peer = Server("mcp-server-fetch", session, "fetch",
                      {"url": url, "max_length": PEER_MAX_LENGTH}, peer_content(url))

        async def blocks(total, timed):
            for b in range(0, total, args.block):
                pair = (ours, peer) if (b // args.block) % 2 == 0 else (peer, ours)
                n = min(args.block, total - b)
                for server in pair:
                    for _ in range(n):
                        await server.call(timed)

        start = time.perf_counter()
        await blocks(args.warmup, timed=False)
        await blocks(args.calls, timed=True)
        elapsed = time.perf_counter() - start
    # The session is closed: toolwarden has drained and written every record.
    return ours, peer, elapsed


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--toolwarden", required=True)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--block", type=int, default=100)
    ap.add_argument("--ignore-robots-txt", action="store_true",
                    help="run the peer without its robots.txt check (one request a call less)")
    args = ap.parse_args()
    args.toolwarden = os.path.abspath(args.toolwarden)

    page = page_html()
    httpd, hits = serve({"/article.html": (page, "text/html; charset=utf-8"),
                         "/robots.txt": (ROBOTS, "text/plain")})
    url = f"http://127.0.0.1:{httpd.server_address[1]}/article.html"
    with tempfile.TemporaryDirectory(prefix="tw-fetch-bench-") as tmp:
        ws, data = os.path.join(tmp, "ws"), os.path.join(tmp, "data")
        os.makedirs(ws)
        os.makedirs(data)
        config = os.path.join(tmp, "config.toml")
        with open(config, "w", encoding="utf-8") as f:
            f.write(CONFIG)

        with open(os.path.join(tmp, "peer.log"), "w+", encoding="utf-8") as peer_log:
            try:
                ours, peer, elapsed = anyio.run(run, args, ws, data, config, url, peer_log)
            except BaseException:
                peer_log.seek(0)
                tail = peer_log.read()[-4000:]
                print(f"mcp-server-fetch's stderr, the end:\n{tail}", file=sys.stderr)
                raise
        audited, succeeded = audit_counts(args, config, data)
    httpd.shutdown()

    robots = "ignored" if args.ignore_robots_txt else "checked on every call"
    print(f"\n{args.calls} timed calls each after {args.warmup} warm-up calls, in blocks of "
          f"{args.block}; {len(page)}-byte page as Markdown ({len(ours.first)} and "
          f"{len(peer.first)} characters); peer's robots.txt {robots}; "
          f"{elapsed:.1f} s of calls; microseconds per round trip")
    a, b = summary(ours.samples), summary(peer.samples)
    print(f"{'server':<34}{'p50':>9}{'p95':>9}{'p99':>9}{'mean':>9}")
    for label, s in (("toolwarden mcp http_fetch", a), ("mcp-server-fetch fetch", b)):
        print(f"{label:<34}{s[50]:>9.0f}{s[95]:>9.0f}{s[99]:>9.0f}{s['mean']:>9.0f}")
    print(f"ratio toolwarden/mcp-server-fetch: p50 {a[50] / b[50]:.4f}x (goal: <= 0.80x), "
          f"p99 {a[99] / b[99]:.4f}x (goal: <= 0.50x)")
    print(f"page server: {hits.get('/article.html', 0)} page and "
          f"{hits.get('/robots.txt', 0)} robots.txt requests for {ours.calls + peer.calls} calls")
    print(f"toolwarden audit records: {audited} ({succeeded} successes) for {ours.calls} calls")
    if audited != ours.calls or succeeded != ours.calls:
        print("error: not every call was audited as a success", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
