# Issue 21's load run: two `toolwarden serve` replicas on one team store (a throwaway PostgreSQL
# cluster of Debian's server), agents on each over MCP (the official Python SDK, streamable HTTP),
# calling `echo`. Halfway through, one replica is killed with SIGKILL. Then:
#   - every reply an agent received must have its audit row (the whole log is exported once);
#   - `toolwarden audit verify` must pass;
#   - the killed replica is started again, and RATE parallel calls of a tool limited to 100 a
#     minute, spread over both replicas, must admit exactly 100.
#
#   - with --watch, someone follows replica a's /api/v1/events throughout (the team's live
#     events): the figures then say how many of replica b's answered calls a's watcher saw end,
#     and the load's figures show what watching costs.
#
#   load_team.py --toolwarden BIN [--calls 10000] [--agents 8] [--rate-calls 1000] [--watch]
#
# Prints one JSON document with the figures (calls/s, p50/p99 in ms, per replica) and the checks;
# exits 1 if a check fails. Used by `scripts/bench team` and, with fewer calls, by the test suite
# (tests/suite/mcp/team.rs).

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import anyio
import mcp_types as types
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from pg_cluster import Cluster  # noqa: E402

CLIENT = types.Implementation(name="load-team", version="1.0")
META_ID = "toolwarden/executionId"
META_STATUS = "toolwarden/status"


class Toolwarden:
    def __init__(self, binary, root, cluster):
        self.binary = binary
        self.root = root
        self.ws = os.path.join(root, "ws")
        os.makedirs(self.ws)
        with open(os.path.join(self.ws, "notes.txt"), "w") as f:
            f.write("hello\n")
        self.config = os.path.join(root, "config.toml")
        with open(self.config, "w") as f:
            f.write(f"""[store]
url = "{cluster.url}"

[policy]
allow = ["echo", "list_directory"]

[[policy.rate_limits]]
tools = ["list_directory"]
per = "tool"
per_minute = 100
""")

    def cmd(self, data, *args):
        return [self.binary, "--config", self.config, "--data-dir", os.path.join(self.root, data),
                "--workspace", self.ws, *args]

    def run(self, data, *args):
        out = subprocess.run(self.cmd(data, *args), capture_output=True, text=True)
        return out.returncode, out.stdout, out.stderr

    def serve(self, data):
        p = subprocess.Popen(self.cmd(data, "serve", "--listen", "127.0.0.1:0"),
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        line = p.stdout.readline()
        url = next((w for w in line.split() if w.startswith("http")), None)
        if url is None:
            p.kill()
            raise SystemExit(f"serve printed no URL: {line!r}")
        if not url.endswith("/mcp"):
            url = url.rstrip("/") + "/mcp"
        return p, url


def pct(samples, q):
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * len(s)))] if s else None


async def agent(url, token, work, out, stop):
    """One agent: a session of its own, calling echo while there is work and its replica lives."""
    headers = {"Authorization": f"Bearer {token}"}
    try:
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(url, http_client=http) as (read, write):
                async with ClientSession(read, write, client_info=CLIENT) as session:
                    await session.initialize()
                    while not stop.is_set():
                        try:
                            n = next(work)
                        except StopIteration:
                            return
                        t = time.perf_counter()
                        with anyio.fail_after(30):
                            r = await session.call_tool("echo", {"n": n})
                        took = time.perf_counter() - t
                        meta = r.meta or {}
                        out["replies"].append((meta.get(META_ID), meta.get(META_STATUS)))
                        out["latency"].append(took)
    except Exception as e:  # the replica was killed under it: its next call fails
        out["errors"].append(type(e).__name__)


async def watch(url, token, seen, ready):
    """Follows a replica's /api/v1/events, noting which calls of other replicas it saw end."""
    base = url.rsplit("/mcp", 1)[0]
    headers = {"Authorization": f"Bearer {token}", "Accept": "text/event-stream"}
    async with create_mcp_http_client(headers=headers) as http:
        async with http.stream("GET", f"{base}/api/v1/events", timeout=None) as r:
            ready.set()
            async for line in r.aiter_lines():
                if not line.startswith("data: "):
                    continue
                e = json.loads(line[6:])
                kind = "remote" if e.get("replica") else "own"
                seen["events"][kind] += 1
                if e.get("replica") and e.get("type") in ("completed", "failed", "denied"):
                    seen["ended"].add(e["execution_id"])
                if e.get("type") == "lost":
                    seen["lost"] += 1


async def load(tw, urls, tokens, calls, agents, kill):
    work = iter(range(calls))
    per = {name: {"replies": [], "latency": [], "errors": []} for name in urls}
    stops = {name: anyio.Event() for name in urls}
    began = time.perf_counter()

    async def killer():
        # Halfway through, the second replica dies without a word.
        while sum(len(p["replies"]) for p in per.values()) < calls // 2:
            await anyio.sleep(0.01)
        kill()
        stops["b"].set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(killer)
        for name, url in urls.items():
            for i in range(agents):
                tg.start_soon(agent, url, tokens[(name, i)], work, per[name], stops[name])
    seconds = time.perf_counter() - began
    return per, seconds


async def rate_phase(urls, tokens, total):
    """`total` calls of list_directory at once, half through each replica, 50 sessions each."""
    admitted, limited, other = 0, 0, []
    lanes = 50
    left = {name: iter(range(total // 2)) for name in urls}

    async def lane(name, token):
        nonlocal admitted, limited
        headers = {"Authorization": f"Bearer {token}"}
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(urls[name], http_client=http) as (read, write):
                async with ClientSession(read, write, client_info=CLIENT) as session:
                    await session.initialize()
                    for _ in left[name]:
                        r = await session.call_tool("list_directory", {"path": "."})
                        status = (r.meta or {}).get(META_STATUS)
                        if status == "success":
                            admitted += 1
                        elif status == "rate_limited" or "rate" in str(r.content):
                            limited += 1
                        else:
                            other.append(status)

    async with anyio.create_task_group() as tg:
        for name in urls:
            for i in range(lanes):
                tg.start_soon(lane, name, tokens[(name, i % len([k for k in tokens if k[0] == name]))])
    return admitted, limited, other


async def main(args):
    root = tempfile.mkdtemp(prefix="toolwarden-load-")
    if os.geteuid() == 0:
        os.chmod(root, 0o755)
    cluster = Cluster(os.path.join(root, "pg"))
    tw = Toolwarden(args.toolwarden, root, cluster)
    replicas = {}
    try:
        tokens = {}
        for name in ("a", "b"):
            for i in range(args.agents):
                code, out, err = tw.run("admin", "serve", "issue", f"agent-{name}{i}")
                if code != 0:
                    raise SystemExit(f"serve issue failed: {err}")
                tokens[(name, i)] = out.strip().splitlines()[-1].split()[-1]
        urls = {}
        for name in ("a", "b"):
            replicas[name], urls[name] = tw.serve(f"replica-{name}")

        def kill():
            replicas["b"].send_signal(signal.SIGKILL)

        seen = {"events": {"own": 0, "remote": 0}, "ended": set(), "lost": 0}
        async with anyio.create_task_group() as watching:
            if args.watch:
                code, out, err = tw.run("replica-a", "serve", "token")
                ready = anyio.Event()
                watching.start_soon(watch, urls["a"], out.strip().splitlines()[-1], seen, ready)
                with anyio.fail_after(10):
                    await ready.wait()
            per, seconds = await load(tw, urls, tokens, args.calls, args.agents, kill)
            # What is on its way to the watcher arrives.
            await anyio.sleep(1)
            watching.cancel_scope.cancel()
        replicas["b"].wait()
        replies = [r for p in per.values() for r in p["replies"]]
        latency = [x for p in per.values() for x in p["latency"]]
        code, exported, err = tw.run("admin", "audit", "export", "--format", "jsonl")
        if code != 0:
            raise SystemExit(f"audit export failed: {err}")
        recorded = {json.loads(line)["execution_id"] for line in exported.splitlines() if line}
        missing = [i for i, _ in replies if i not in recorded]
        vcode, vout, verr = tw.run("admin", "audit", "verify")
        # The killed replica comes back (its chain is free to adopt) for the rate phase.
        replicas["b"], urls["b"] = tw.serve("replica-b")
        admitted, limited, other = await rate_phase(urls, tokens, args.rate_calls)
        figures = {
            "calls": args.calls,
            "agents_per_replica": args.agents,
            "replies": len(replies),
            "seconds": round(seconds, 2),
            "calls_per_s": round(len(replies) / seconds, 1),
            "p50_ms": round(pct(latency, 0.50) * 1000, 2),
            "p99_ms": round(pct(latency, 0.99) * 1000, 2),
            "per_replica": {
                name: {
                    "replies": len(p["replies"]),
                    "p50_ms": round((pct(p["latency"], 0.5) or 0) * 1000, 2),
                    "agents_cut_off": len(p["errors"]),
                }
                for name, p in per.items()
            },
            "not_success": sum(1 for _, s in replies if s != "success"),
            "replies_without_audit_row": len(missing),
            "audit_rows": len(recorded),
            "audit_verify_exit": vcode,
            "audit_verify": vout.strip().splitlines()[-1] if vout.strip() else verr.strip(),
            "rate_limit": {"calls": args.rate_calls, "per_minute": 100, "admitted": admitted,
                           "limited": limited, "other": other[:5]},
        }
        ok = (not missing and vcode == 0 and admitted == 100 and not other
              and figures["not_success"] == 0)
        if args.watch:
            b_ids = {i for i, _ in per["b"]["replies"]}
            shown = len(b_ids & seen["ended"])
            figures["watched"] = {
                "events_of_a": seen["events"]["own"],
                "events_of_b": seen["events"]["remote"],
                "b_replies": len(b_ids),
                "b_replies_seen_ending_on_a": shown,
                "lost": seen["lost"],
            }
            # Not a check: live events are not the record (the audit log is), and those of the
            # last calls b answered may die with it.
        figures["ok"] = ok
        print(json.dumps(figures, indent=2))
        return 0 if ok else 1
    finally:
        for p in replicas.values():
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--toolwarden", required=True)
    p.add_argument("--calls", type=int, default=10000)
    p.add_argument("--agents", type=int, default=8)
    p.add_argument("--rate-calls", type=int, default=1000)
    p.add_argument("--watch", action="store_true")
    sys.exit(anyio.run(main, p.parse_args()))
