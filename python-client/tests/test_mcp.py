"""`envscaler mcp` driven by the official Python MCP client (`mcp` from PyPI) as an outside client.

Each server is the built CLI (`node dist/cli/main.js mcp …`) in its own process; the trainer's side
is the server's /control routes over plain HTTP. Nothing is mocked.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp", reason="the MCP tests need the `mcp` package (python-client[test])")
from mcp import Client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402
from mcp.shared.exceptions import MCPError  # noqa: E402

from helpers import BUNDLED_ENVS, REPO, wait_for  # noqa: E402

CLI = REPO / "dist" / "cli" / "main.js"
CONTROL_TOKEN = "control-secret-for-tests"


def scenarios(env: str) -> dict[str, dict[str, Any]]:
    with open(BUNDLED_ENVS / env / "scenarios.json", encoding="utf-8") as f:
        return {s["id"]: s for s in json.load(f)}


def manifest(env: str) -> dict[str, Any]:
    with open(BUNDLED_ENVS / env / "manifest.json", encoding="utf-8") as f:
        return json.load(f)


LIBRARY_1 = scenarios("library")["library-1"]


class McpServer:
    def __init__(self, process: subprocess.Popen[bytes], info: dict[str, Any], log: Path) -> None:
        self.process = process
        self.info = info
        self.log = log

    @property
    def url(self) -> str:
        return self.info["mcp"]

    def control(self, method: str, path: str, body: Any = None, token: str | None = CONTROL_TOKEN) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.info["control"] + path, data=data, method=method)
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def stats(self) -> dict[str, Any]:
        status, body = self.control("GET", "/stats")
        assert status == 200, body
        return body


@contextmanager
def start_mcp(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> Iterator[McpServer]:
    """The built CLI serving MCP on a free port; its URLs come from the connection file."""
    conn = tmp_path / f"mcp-{time.monotonic_ns()}.json"
    log = tmp_path / f"{conn.stem}.log"
    cmd = ["node", str(CLI), "mcp", "--envs", str(BUNDLED_ENVS), "--port", "0", "--connection-file", str(conn), "--control-token", CONTROL_TOKEN, *args]
    if "--record-dir" not in args:
        cmd.append("--no-record")
    with open(log, "wb") as out:
        process = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})
    try:
        wait_for(lambda: conn.exists() or process.poll() is not None, 60, what="the MCP server to start")
        if process.poll() is not None:
            raise AssertionError(f"envscaler mcp exited with {process.returncode}:\n{log.read_text()}")
        info = wait_for(lambda: _read_json(conn), 10, what="the connection file")
        yield McpServer(process, info, log)
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


@asynccontextmanager
async def session(url: str, headers: dict[str, str] | None = None, **kw: Any):
    """One MCP session with the official client (its default mode: probe, then initialize)."""
    async with create_mcp_http_client(headers=headers or {}) as http, Client(streamable_http_client(url, http_client=http), **kw) as client:
        yield client


def refusal(exc: BaseException) -> tuple[str | None, str]:
    """The typed code and message of the MCPError inside what the client raised (it wraps them in task groups)."""
    stack = [exc]
    while stack:
        e = stack.pop()
        if isinstance(e, MCPError):
            data = e.error.data if isinstance(e.error.data, dict) else {}
            return data.get("code"), e.error.message
        stack.extend(getattr(e, "exceptions", ()))
    return None, repr(exc)


def text(result: Any) -> str:
    assert result.content and result.content[0].type == "text", result
    return result.content[0].text


def on(scenario: str, seed: int = 7, rollout: str | None = None) -> dict[str, str]:
    h = {"X-EnvScaler-Scenario": scenario, "X-EnvScaler-Seed": str(seed)}
    if rollout:
        h["X-EnvScaler-Rollout"] = rollout
    return h


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, built_bridge: None) -> Iterator[McpServer]:
    with start_mcp(tmp_path_factory.mktemp("mcp")) as s:
        yield s


def test_tools_are_the_envs_tools_with_their_schemas(server: McpServer) -> None:
    async def main() -> None:
        async with session(server.url, on("library-1")) as c:
            tools = (await c.list_tools()).tools
            expected = {t["function"]["name"]: t["function"] for t in manifest("library")["tools"]}
            assert [t.name for t in tools] == list(expected)
            for t in tools:
                assert t.input_schema == expected[t.name]["parameters"]
                assert t.description == expected[t.name]["description"]
            # the task reaches the client three ways: instructions, a resource and a prompt
            assert LIBRARY_1["task"] in (c.instructions or "")
            res = await c.read_resource("envscaler://task")
            assert LIBRARY_1["task"] in res.contents[0].text
            prompt = await c.get_prompt("task")
            assert LIBRARY_1["task"] in prompt.messages[0].content.text

    asyncio.run(main())


def test_reference_solution_scores_1_via_the_control_routes(server: McpServer) -> None:
    async def main() -> None:
        async with session(server.url, on("library-1", rollout="ref-1")) as c:
            for a in LIBRARY_1["reference_actions"]:
                r = await c.call_tool(a["name"], a["arguments"])
                assert not r.is_error, text(r)
                assert json.loads(text(r))["success"] is True
            status, running = server.control("GET", "/sessions/ref-1/reward")
            assert status == 409 and running["error"]["code"] == "episode_running"
            status, score = server.control("POST", "/sessions/ref-1/finish")
            assert status == 200, score
            assert score["reward"] == 1.0 and score["scenario_id"] == "library-1" and score["seed"] == 7
            checks = score["reward_info"]["checks"]
            assert checks and all(ch["passed"] for ch in checks), checks
            assert score["steps"] == len(LIBRARY_1["reference_actions"])
            # the score stays readable, and the agent's next call hears the episode is over
            assert server.control("GET", "/sessions/ref-1/reward") == (200, score)
            after = await c.call_tool("get_book", {"book_id": "B001"})
            assert after.is_error and json.loads(text(after))["error"]["type"] == "episode_done"

    asyncio.run(main())


def test_doing_nothing_scores_below_1(server: McpServer) -> None:
    async def main() -> None:
        async with session(server.url, on("library-1", rollout="idle-agent")):
            status, score = server.control("POST", "/sessions/idle-agent/finish")
            assert status == 200 and score["reward"] < 1.0 and score["end_reason"] == "client"

    asyncio.run(main())


def test_invalid_calls_are_tool_errors_and_the_episode_goes_on(server: McpServer) -> None:
    async def main() -> None:
        async with session(server.url, on("library-1")) as c:
            unknown = await c.call_tool("launch_rockets", {"count": 3})
            assert unknown.is_error
            assert json.loads(text(unknown))["error"]["type"] == "unknown_tool"
            bad = await c.call_tool("get_book", {"book_id": 12345})
            assert bad.is_error
            assert json.loads(text(bad))["error"]["type"] == "invalid_arguments"
            ok = await c.call_tool("get_book", {"book_id": "B001"})
            assert not ok.is_error and json.loads(text(ok))["success"] is True

    asyncio.run(main())


def test_two_sessions_on_one_scenario_are_isolated(server: McpServer) -> None:
    async def main() -> None:
        async with session(server.url, on("library-1", rollout="iso-a")) as a, session(server.url, on("library-1", rollout="iso-b")) as b:
            before_b = server.control("GET", "/sessions/iso-b/state")[1]
            r = await a.call_tool("return_book", {"loan_id": "L0009"})
            assert not r.is_error, text(r)
            after_a = server.control("GET", "/sessions/iso-a/state")[1]
            after_b = server.control("GET", "/sessions/iso-b/state")[1]
            assert after_a["state"]["loans"]["L0009"]["status"] == "returned"
            assert after_b["state"]["loans"]["L0009"]["status"] == "active"
            assert after_b["state_hash"] == before_b["state_hash"] != after_a["state_hash"]
            again = await b.call_tool("return_book", {"loan_id": "L0009"})
            assert json.loads(text(again))["success"] is True  # B's copy was never returned

    asyncio.run(main())


def test_closing_a_session_mid_episode_frees_its_sandbox(server: McpServer) -> None:
    async def main() -> None:
        base = server.stats()["runtime"]["episodes"]
        async with session(server.url, on("library-1", rollout="closer")) as c:
            await c.call_tool("get_book", {"book_id": "B001"})
            assert server.stats()["runtime"]["episodes"] == base + 1
        # leaving the client sends DELETE: the episode ends and its sandbox is freed
        wait_for(lambda: server.stats()["runtime"]["episodes"] == base, 10, what="the episode to be freed")
        status, gone = server.control("GET", "/sessions/closer")
        assert status == 404 and gone["error"]["code"] == "session_closed"
        # the control route closes a session the same way
        async with session(server.url, on("library-1", rollout="closed-by-trainer")) as c:
            assert server.stats()["runtime"]["episodes"] == base + 1
            assert server.control("DELETE", "/sessions/closed-by-trainer")[0] == 200
            assert server.stats()["runtime"]["episodes"] == base
            # the agent's next request hears why: a protocol error (its session is gone), not a tool error
            with pytest.raises(MCPError) as late:
                await c.call_tool("get_book", {"book_id": "B001"})
            assert late.value.error.data["code"] == "session_closed", late.value.error
            assert "closed by the trainer" in late.value.error.message

    asyncio.run(main())


def test_start_episode_tool_when_no_scenario_is_given(server: McpServer) -> None:
    seen: list[str] = []

    async def record(message: Any) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method:
            seen.append(method)

    async def main() -> None:
        async with session(server.url, message_handler=record) as c:
            tools = (await c.list_tools()).tools
            assert [t.name for t in tools] == ["start_episode"]
            early = await c.call_tool("get_book", {"book_id": "B001"})
            assert early.is_error and json.loads(text(early))["error"]["type"] == "no_episode"
            wrong = await c.call_tool("start_episode", {"scenario_id": "no-such-scenario"})
            assert wrong.is_error and json.loads(text(wrong))["error"]["type"] == "unknown_scenario"
            started = await c.call_tool("start_episode", {"scenario_id": "library-1", "seed": 1})
            assert not started.is_error and LIBRARY_1["task"] in text(started)
            for _ in range(50):
                if "notifications/tools/list_changed" in seen:
                    break
                await asyncio.sleep(0.1)
            assert "notifications/tools/list_changed" in seen, seen
            names = [t.name for t in (await c.list_tools(cache_mode="refresh") if _has_cache_mode(c) else await c.list_tools()).tools]
            assert names == [t["function"]["name"] for t in manifest("library")["tools"]]

    asyncio.run(main())


def _has_cache_mode(c: Any) -> bool:
    import inspect

    return "cache_mode" in inspect.signature(c.list_tools).parameters


def test_conversation_scenarios_get_a_message_user_tool(server: McpServer) -> None:
    async def main() -> None:
        async with session(server.url, on("bank-1", rollout="talk")) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            assert "message_user" in names
            # no simulated user is attached to this server: the message is recorded, not answered
            r = await c.call_tool("message_user", {"message": "Could you give me your date of birth?"})
            assert not r.is_error and "no simulated user" in text(r)
            tagged = await c.call_tool("message_user", {"message": '<tool_call>{"name": "x"}</tool_call>'})
            assert tagged.is_error
            status, state = server.control("GET", "/sessions/talk/inputs")
            assert status == 200 and state["inputs"]["actions"][0]["content"].startswith("Could you")

    asyncio.run(main())


def test_unknown_scenario_header_and_bad_requests_are_typed(server: McpServer) -> None:
    def post(headers: dict[str, str], body: Any) -> tuple[int, dict[str, Any]]:
        req = urllib.request.Request(server.url, data=json.dumps(body).encode(), method="POST")
        for k, v in {"Content-Type": "application/json", "Accept": "application/json, text/event-stream", **headers}.items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    status, body = post({"X-EnvScaler-Scenario": "nope-1"}, init)
    assert status == 400 and body["error"]["data"]["code"] == "unknown_scenario"
    status, body = post({"X-EnvScaler-Scenario": "library-1", "X-EnvScaler-Seed": "abc"}, init)
    assert status == 400 and body["error"]["data"]["code"] == "bad_request"
    status, body = post({"Origin": "http://evil.example"}, init)
    assert status == 403 and body["error"]["data"]["code"] == "forbidden_origin"
    status, body = post({"Host": "rebound.evil.example"}, init)
    assert status == 403 and body["error"]["data"]["code"] == "forbidden_host"
    status, body = post({"Mcp-Session-Id": "never-issued"}, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    assert status == 404 and body["error"]["data"]["code"] == "unknown_session"
    # the control routes want their own token
    assert server.control("GET", "/stats", token=None)[0] == 401
    assert server.control("GET", "/stats", token="wrong")[1]["error"]["code"] == "unauthorized"
    status, body = server.control("POST", "/sessions/nobody/snapshot")
    assert status == 404 and body["error"]["code"] == "unknown_session"


def test_one_session_over_the_limit_is_refused_with_a_typed_error(tmp_path: Path, built_bridge: None) -> None:
    with start_mcp(tmp_path, "--max-sessions", "2") as s:

        async def main() -> None:
            async with session(s.url, on("library-1")), session(s.url, on("library-1")):
                with pytest.raises(Exception) as refused:
                    async with session(s.url, on("library-1")):
                        pass
                assert refusal(refused.value)[0] == "too_many_sessions", refused.value
                assert s.stats()["runtime"]["episodes"] == 2  # the refused one never got a sandbox
            wait_for(lambda: s.stats()["sessions"] == 0, 10, what="both sessions to close")
            async with session(s.url, on("library-1")) as c:  # capacity is back
                assert not (await c.call_tool("get_book", {"book_id": "B001"})).is_error

        asyncio.run(main())


def test_idle_sessions_are_reaped_and_their_sandboxes_freed(tmp_path: Path, built_bridge: None) -> None:
    with start_mcp(tmp_path, "--idle-timeout", "1") as s:

        async def main() -> None:
            async with session(s.url, on("library-1", rollout="sleepy")) as c:
                await c.call_tool("get_book", {"book_id": "B001"})
                wait_for(lambda: s.stats()["reaped"] >= 1, 15, what="the idle reaper")
                status, body = s.control("GET", "/sessions/sleepy")
                assert status == 404 and body["error"]["code"] == "session_closed"
                assert "idle reaper" in body["error"]["message"]
                assert s.stats()["runtime"]["episodes"] == 0
                with pytest.raises(MCPError) as late:
                    await c.call_tool("get_book", {"book_id": "B001"})
                assert late.value.error.data["code"] == "session_closed"

        asyncio.run(main())


def test_non_loopback_bind_requires_the_token(tmp_path: Path, built_bridge: None) -> None:
    # 0.0.0.0 is not loopback, so the server must refuse to start without a token; with one, the
    # traffic below still goes over 127.0.0.1 only
    refused = subprocess.run(
        ["node", str(CLI), "mcp", "--envs", str(BUNDLED_ENVS), "--host", "0.0.0.0", "--port", "0", "--no-record"],
        capture_output=True,
        timeout=60,
        check=False,
        env={k: v for k, v in os.environ.items() if k != "ENVSCALER_MCP_TOKEN"},
    )
    assert refused.returncode == 1
    assert b"without a bearer token" in refused.stderr

    with start_mcp(tmp_path, "--host", "0.0.0.0", env={"ENVSCALER_MCP_TOKEN": "agent-token"}) as s:
        url = s.url.replace("0.0.0.0", "127.0.0.1")

        async def connect(headers: dict[str, str]) -> int:
            async with session(url, {**on("library-1"), **headers}) as c:
                return len((await c.list_tools()).tools)

        for headers in ({}, {"Authorization": "Bearer wrong-token"}):
            with pytest.raises(Exception) as no:
                asyncio.run(connect(headers))
            assert refusal(no.value)[0] == "unauthorized", refusal(no.value)
        assert s.stats()["refused"] >= 2 and s.stats()["sessions"] == 0
        assert asyncio.run(connect({"Authorization": "Bearer agent-token"})) == len(manifest("library")["tools"])


def test_episodes_are_recorded_and_replay(tmp_path: Path, built_bridge: None) -> None:
    record = tmp_path / "traj"
    with start_mcp(tmp_path, "--record-dir", str(record)) as s:

        async def main() -> None:
            async with session(s.url, on("library-1", rollout="rec")) as c:
                for a in LIBRARY_1["reference_actions"]:
                    await c.call_tool(a["name"], a["arguments"])
                assert s.control("POST", "/sessions/rec/finish")[1]["reward"] == 1.0

        asyncio.run(main())
    files = list(record.glob("mcp-*.jsonl"))
    assert len(files) == 1
    out = subprocess.run(["node", str(CLI), "replay", str(files[0]), "--envs", str(BUNDLED_ENVS)], capture_output=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
