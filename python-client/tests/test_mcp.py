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
if not hasattr(mcp, "Client"):  # the trainer venv: verifiers 0.3.1 pins mcp<2, which has no Client
    pytest.skip("the MCP tests need mcp>=2.3 (python-client[test]); this venv has mcp<2", allow_module_level=True)
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


def _reach(url: str) -> str:
    """A server bound to the wildcard address is reached over loopback: tests send nothing else."""
    return url.replace("://0.0.0.0:", "://127.0.0.1:")


class McpServer:
    def __init__(self, process: subprocess.Popen[bytes], info: dict[str, Any], log: Path) -> None:
        self.process = process
        self.info = info
        self.log = log

    @property
    def url(self) -> str:
        return _reach(self.info["mcp"])

    def control(self, method: str, path: str, body: Any = None, token: str | None = CONTROL_TOKEN) -> tuple[int, Any]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(_reach(self.info["control"]) + path, data=data, method=method)
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
        # its status is kept (closed, not ended: no score), what needs the episode is refused
        status, gone = server.control("GET", "/sessions/closer")
        assert status == 200 and gone["connected"] is False and gone["ended"] is False and gone["closed"], gone
        status, gone = server.control("GET", "/sessions/closer/state")
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
    # a body over the limit (4 MiB) is read and dropped, so urllib, which sends it all before
    # reading, gets the 413 rather than a broken pipe
    status, body = post({"X-EnvScaler-Scenario": "library-1"}, {**init, "pad": "x" * (5 << 20)})
    assert status == 413 and body["error"]["data"]["code"] == "payload_too_large", body
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
                # its status is kept after the close (docs/mcp.md), naming who closed it; what needs
                # the episode is refused
                status, body = s.control("GET", "/sessions/sleepy")
                assert status == 200 and body["connected"] is False and body["ended"] is False and "idle reaper" in body["closed"], body
                status, body = s.control("GET", "/sessions/sleepy/state")
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
        url = s.url

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
                calls = LIBRARY_1["reference_actions"]
                await c.call_tool(calls[0]["name"], calls[0]["arguments"])
                snap = s.control("POST", "/sessions/rec/snapshot")[1]
                await c.call_tool(calls[1]["name"], calls[1]["arguments"])
                # forks and restores are recorded too (forked_from and the actions before the fork)
                fork = s.control("POST", "/sessions/rec/fork")[1]
                async with session(s.url, {"X-EnvScaler-Fork": fork["session_id"]}) as f:
                    await f.call_tool(calls[2]["name"], calls[2]["arguments"])
                assert s.control("POST", "/sessions/rec/restore", {"snapshot_id": snap["snapshot_id"]})[0] == 200
                for a in calls[1:]:
                    await c.call_tool(a["name"], a["arguments"])
                assert s.control("POST", "/sessions/rec/finish")[1]["reward"] == 1.0

        asyncio.run(main())
    files = list(record.glob("mcp-*.jsonl"))
    assert len(files) == 1
    out = subprocess.run(["node", str(CLI), "replay", str(files[0]), "--envs", str(BUNDLED_ENVS)], capture_output=True, timeout=120, check=False)
    assert out.returncode == 0, out.stdout.decode() + out.stderr.decode()
    # the session until its restore, the fork, and the session after the restore
    assert "3/3 episodes replayed exactly" in out.stdout.decode() + out.stderr.decode(), out.stdout.decode()


# ---------------------------------------------------------------------- snapshot, fork, restore (control routes)


def played(r: Any) -> tuple[bool, str, Any]:
    """What a tool call gave the agent: the error flag, the text and the step number."""
    return r.is_error, text(r), (r.meta or {}).get("envscaler/step")


def fork_of(server: McpServer, path: str, rollout: str | None = None) -> dict[str, Any]:
    status, fork = server.control("POST", path, {"rollout": rollout} if rollout else {})
    assert status == 200, fork
    return fork


def test_a_fork_plays_on_exactly_as_its_source(server: McpServer) -> None:
    calls = LIBRARY_1["reference_actions"]

    async def main() -> None:
        async with session(server.url, on("library-1", seed=11, rollout="fork-src")) as a:
            for call in calls[:3]:
                assert not (await a.call_tool(call["name"], call["arguments"])).is_error
            src_state = server.control("GET", "/sessions/fork-src/state")[1]
            fork = fork_of(server, "/sessions/fork-src/fork", rollout="fork-copy")
            assert fork["forked_from"]["session_id"] == server.control("GET", "/sessions/fork-src")[1]["session_id"]
            assert fork["forked_from"]["step"] == fork["step"] == 3
            assert fork["state_hash"] == src_state["state_hash"] and (fork["scenario_id"], fork["seed"]) == ("library-1", 11)
            # the fork holds its episode (and a session slot) until a client connects to it
            waiting = server.control("GET", "/sessions/fork-copy")[1]
            assert waiting["connected"] is False and waiting["steps"] == 3
            async with session(server.url, {"X-EnvScaler-Fork": fork["session_id"]}) as b:
                status = server.control("GET", "/sessions/fork-copy")[1]
                assert status["connected"] is True and status["session_id"] == fork["session_id"]
                assert [t.name for t in (await b.list_tools()).tools] == [t.name for t in (await a.list_tools()).tools]
                assert b.instructions == a.instructions
                assert server.control("GET", "/sessions/fork-copy/state")[1]["state"] == src_state["state"]
                # the same calls from here give byte-identical results, step numbers and states
                for call in [*calls[3:], {"name": "get_book", "arguments": {"book_id": 42}}]:
                    ra, rb = await a.call_tool(call["name"], call["arguments"]), await b.call_tool(call["name"], call["arguments"])
                    assert played(ra) == played(rb), call
                    sa, sb = server.control("GET", "/sessions/fork-src/state")[1], server.control("GET", "/sessions/fork-copy/state")[1]
                    assert sa["state_hash"] == sb["state_hash"] and sa["state"] == sb["state"]
                score_a = server.control("POST", "/sessions/fork-src/finish")[1]
                score_b = server.control("POST", "/sessions/fork-copy/finish")[1]
                assert score_a["reward"] == score_b["reward"] == 1.0
                assert (score_a["state_hash"], score_a["steps"], score_a["reward_info"]) == (score_b["state_hash"], score_b["steps"], score_b["reward_info"])
            # the fork was its own session: closing it left the source alone (the closed fork's
            # status and score are kept after the close; its episode is gone)
            status, copy = server.control("GET", "/sessions/fork-copy")
            assert status == 200 and copy["connected"] is False and copy["closed"], copy
            assert server.control("GET", "/sessions/fork-copy/state")[1]["error"]["code"] == "session_closed"
            assert server.control("GET", "/sessions/fork-src")[0] == 200

    asyncio.run(main())


def test_a_fork_diverges_without_touching_its_source(server: McpServer) -> None:
    async def main() -> None:
        async with session(server.url, on("library-1", rollout="div-src")) as a:
            fork = fork_of(server, "/sessions/div-src/fork")
            async with session(server.url, {"X-EnvScaler-Fork": fork["session_id"], "X-EnvScaler-Rollout": "div-copy"}) as b:
                assert not (await b.call_tool("return_book", {"loan_id": "L0009"})).is_error
                assert server.control("GET", "/sessions/div-copy/state")[1]["state"]["loans"]["L0009"]["status"] == "returned"
                assert server.control("GET", "/sessions/div-src/state")[1]["state"]["loans"]["L0009"]["status"] == "active"
                again = await a.call_tool("return_book", {"loan_id": "L0009"})
                assert json.loads(text(again))["success"] is True

    asyncio.run(main())


def test_restore_rewinds_a_session_even_after_its_end(server: McpServer) -> None:
    calls = LIBRARY_1["reference_actions"]

    async def main() -> None:
        async with session(server.url, on("library-1", seed=5, rollout="rewind")) as c:
            for call in calls[:2]:
                await c.call_tool(call["name"], call["arguments"])
            status, snap = server.control("POST", "/sessions/rewind/snapshot")
            assert status == 200 and snap["step"] == 2 and snap["bytes"] > 0, snap
            at_snapshot = server.control("GET", "/sessions/rewind/state")[1]
            assert snap["state_hash"] == at_snapshot["state_hash"]
            first = [played(await c.call_tool(call["name"], call["arguments"])) for call in calls[2:]]
            after = server.control("GET", "/sessions/rewind/state")[1]
            assert after["state_hash"] != snap["state_hash"]

            status, back = server.control("POST", "/sessions/rewind/restore", {"snapshot_id": snap["snapshot_id"]})
            assert status == 200 and back["step"] == 2 and back["state_hash"] == snap["state_hash"], back
            assert server.control("GET", "/sessions/rewind/state")[1] == at_snapshot
            assert server.control("GET", "/sessions/rewind")[1]["steps"] == 2
            # the same calls again: the same results and state (the RNG and clock were rewound too)
            assert [played(await c.call_tool(call["name"], call["arguments"])) for call in calls[2:]] == first
            assert server.control("GET", "/sessions/rewind/state")[1] == after

            # after the episode ended, a restore opens it again; the snapshot outlives restores
            assert server.control("POST", "/sessions/rewind/finish")[1]["reward"] == 1.0
            assert json.loads(text(await c.call_tool("get_book", {"book_id": "B001"})))["error"]["type"] == "episode_done"
            assert server.control("POST", "/sessions/rewind/restore", {"snapshot_id": snap["snapshot_id"]})[0] == 200
            assert server.control("GET", "/sessions/rewind/reward")[1]["error"]["code"] == "episode_running"
            assert played(await c.call_tool(calls[2]["name"], calls[2]["arguments"])) == first[0]

    asyncio.run(main())


def test_a_group_forks_from_one_snapshot_then_drops_it(server: McpServer) -> None:
    """GRPO-style: snapshot once, fork N sessions from it; each plays on from the same point."""

    async def main() -> None:
        base = server.stats()["runtime"]
        async with session(server.url, on("library-1", seed=9, rollout="group-src")) as src:
            await src.call_tool("list_member_loans", {"member_id": "M013"})
            snap = server.control("POST", "/sessions/group-src/snapshot")[1]
            assert server.control("GET", f"/snapshots/{snap['snapshot_id']}")[1]["step"] == 1
            # the source moves on; forks of the snapshot start where it was taken
            await src.call_tool("return_book", {"loan_id": "L0009"})
            forks = [fork_of(server, f"/snapshots/{snap['snapshot_id']}/fork", rollout=f"group-{i}") for i in range(3)]
            assert {(f["step"], f["state_hash"], f["forked_from"]["snapshot_id"]) for f in forks} == {(1, snap["state_hash"], snap["snapshot_id"])}
            results = []
            for f in forks:
                async with session(server.url, {"X-EnvScaler-Fork": f["rollout"]}) as c:
                    r = await c.call_tool("checkout_book", {"member_id": "M013", "book_id": "B006"})
                    state = server.control("GET", f"/sessions/{f['rollout']}/state")[1]
                    results.append((played(r), state["state_hash"], state["state"]))
            assert results[0][0][0] is False and all(r == results[0] for r in results)
            assert results[0][2]["loans"]["L0009"]["status"] == "active"  # not the source's later return

            assert server.control("DELETE", f"/snapshots/{snap['snapshot_id']}")[1]["dropped"] is True
            assert server.control("DELETE", f"/snapshots/{snap['snapshot_id']}")[1]["dropped"] is False
            status, gone = server.control("POST", f"/snapshots/{snap['snapshot_id']}/fork")
            assert status == 404 and gone["error"]["code"] == "unknown_snapshot"
            # a session's snapshots go with it
            kept = server.control("POST", "/sessions/group-src/snapshot")[1]
        wait_for(lambda: server.stats()["runtime"]["episodes"] == base["episodes"], 10, what="every episode to be freed")
        assert server.stats()["runtime"]["snapshots"] == base["snapshots"]
        status, gone = server.control("POST", f"/snapshots/{kept['snapshot_id']}/fork")
        assert status == 404 and gone["error"]["code"] == "unknown_snapshot"

    asyncio.run(main())


def test_snapshot_and_fork_limits_are_typed_errors(tmp_path: Path, built_bridge: None) -> None:
    with start_mcp(tmp_path, "--max-snapshots", "1", "--max-sessions", "3", "--idle-timeout", "2") as s:

        async def main() -> None:
            async with session(s.url, on("library-1", rollout="lim")), session(s.url, on("library-2", rollout="other")):
                first = s.control("POST", "/sessions/lim/snapshot")
                assert first[0] == 200
                status, body = s.control("POST", "/sessions/lim/snapshot")
                assert status == 413 and body["error"]["code"] == "too_large" and "1 snapshots" in body["error"]["message"], body
                # a restore must stay in the session's scenario (its tools and task were sent at initialize)
                other = s.control("POST", "/sessions/other/snapshot")[1]
                status, body = s.control("POST", "/sessions/lim/restore", {"snapshot_id": other["snapshot_id"]})
                assert status == 400 and body["error"]["code"] == "bad_request" and "library-2" in body["error"]["message"]
                # a fork takes a session slot: two sessions open, one fork waiting, the next is refused
                fork = s.control("POST", "/sessions/lim/fork", {"rollout": "lim-fork"})[1]
                status, body = s.control("POST", "/sessions/lim/fork")
                assert status == 503 and body["error"]["code"] == "too_many_sessions"
                with pytest.raises(Exception) as refused:
                    async with session(s.url, on("library-1")):
                        pass
                assert refusal(refused.value)[0] == "too_many_sessions"
                # connecting: with the scenario header too, to an unknown fork, or twice
                for headers, code in (({"X-EnvScaler-Fork": "lim-fork", "X-EnvScaler-Scenario": "library-1"}, "bad_request"), ({"X-EnvScaler-Fork": "no-such-fork"}, "unknown_session")):
                    with pytest.raises(Exception) as no:
                        async with session(s.url, headers):
                            pass
                    assert refusal(no.value)[0] == code, refusal(no.value)
                async with session(s.url, {"X-EnvScaler-Fork": fork["session_id"]}):
                    with pytest.raises(Exception) as twice:
                        async with session(s.url, {"X-EnvScaler-Fork": fork["session_id"]}):
                            pass
                    assert refusal(twice.value)[0] == "bad_request"
                # an ended episode cannot be snapshotted or forked
                s.control("POST", "/sessions/lim/finish")
                assert s.control("POST", "/sessions/lim/fork")[1]["error"]["code"] == "episode_done"
                assert s.control("DELETE", f"/snapshots/{first[1]['snapshot_id']}")[1]["dropped"] is True
                assert s.control("POST", "/sessions/lim/snapshot")[1]["error"]["code"] == "episode_done"
            # a session without an episode has nothing to fork
            async with session(s.url, {"X-EnvScaler-Rollout": "empty"}):
                assert s.control("POST", "/sessions/empty/fork")[1]["error"]["code"] == "no_episode"
            # a fork nobody connects to is reaped like an idle session, freeing its sandbox
            async with session(s.url, on("library-1", rollout="orphan-src")):
                orphan = s.control("POST", "/sessions/orphan-src/fork")[1]
                # closed: its status is kept after the close, naming why; its episode is gone (polled by
                # status, which is not a request of the session: /state would keep it from going idle)
                wait_for(lambda: "closed" in s.control("GET", f"/sessions/{orphan['session_id']}")[1], 20, what="the reaper to close the unclaimed fork")
                status, kept = s.control("GET", f"/sessions/{orphan['session_id']}")
                assert status == 200 and kept["connected"] is False and "no client connected" in kept["closed"], kept
                body = s.control("GET", f"/sessions/{orphan['session_id']}/state")[1]
                assert body["error"]["code"] == "session_closed" and "no client connected" in body["error"]["message"]
                st = s.stats()
                assert st["forks_waiting"] == 0 and st["runtime"]["episodes"] == st["sessions"] <= 1

        asyncio.run(main())


# ---------------------------------------------------------------------- the OpenAI Agents SDK example


@contextmanager
def openai_fixture(tmp_path: Path, script: list[Any]) -> Iterator[tuple[str, Path]]:
    """tests/openai-fixture.ts as a process: scripted chat completions; yields its base URL and the request log."""
    script_file, requests = tmp_path / "script.json", tmp_path / "requests.jsonl"
    script_file.write_text(json.dumps(script))
    process = subprocess.Popen(
        ["node", "--import", "tsx", str(REPO / "tests" / "openai-fixture-main.ts"), str(script_file), str(requests)], cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        line = process.stdout.readline() if process.stdout else b""
        if not line:
            raise AssertionError(f"the OpenAI fixture did not start: {process.stderr.read().decode() if process.stderr else ''}")
        yield json.loads(line)["base_url"], requests
    finally:
        process.terminate()
        process.wait(15)


def test_openai_agents_sdk_example_plays_an_episode(server: McpServer, tmp_path: Path) -> None:
    pytest.importorskip("agents", reason="the Agents SDK example needs `openai-agents` (python-client[test])")
    import importlib.util

    from agents import set_tracing_disabled
    from openai import AsyncOpenAI

    spec = importlib.util.spec_from_file_location("openai_agents_mcp", REPO / "python-client" / "examples" / "openai_agents_mcp.py")
    assert spec and spec.loader
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    set_tracing_disabled(True)

    calls = LIBRARY_1["reference_actions"]
    final = "Returned the overdue book, paid the fine and checked out both books."
    # the scripted model: one tool call per turn (the reference solution), then its closing reply
    script: list[Any] = [{"tool_calls": [{"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": json.dumps(c["arguments"])}}]} for i, c in enumerate(calls)]
    script.append(final)
    with openai_fixture(tmp_path, script) as (base_url, requests):
        model = AsyncOpenAI(base_url=base_url, api_key="fixture-key", max_retries=0)
        out = asyncio.run(example.rollout(server.url, server.info["control"], CONTROL_TOKEN, "library-1", 3, "agents-sdk-1", "fixture", model))
        sent = [json.loads(line) for line in requests.read_text().splitlines()]
    assert out["final_output"] == final
    assert out["score"]["reward"] == 1.0 and out["score"]["steps"] == len(calls) + 1, out["score"]
    # the SDK gave the model the env's tools (from tools/list) and the task (from the task prompt)
    assert len(sent) == len(calls) + 1
    assert [t["function"]["name"] for t in sent[0]["tools"]] == [t["function"]["name"] for t in manifest("library")["tools"]]
    assert LIBRARY_1["task"] in sent[0]["messages"][0]["content"]
    # each tool call reached the session's episode, and its result went back to the model
    tool_results = [m for m in sent[-1]["messages"] if m["role"] == "tool"]
    assert len(tool_results) == len(calls) and all('"success"' in str(m["content"]) for m in tool_results)
    # the SDK closed its session on the way out: the episode was freed, and its score is kept
    status, body = server.control("GET", "/sessions/agents-sdk-1")
    assert status == 200 and body["connected"] is False and body["ended"] is True, body
    status, body = server.control("GET", "/sessions/agents-sdk-1/reward")
    assert status == 200 and body["reward"] == 1.0 and body["closed"], body
    assert server.control("GET", "/sessions/agents-sdk-1/state")[1]["error"]["code"] == "session_closed"

    # a refused session: the example reads the typed code out of the SDK's ExceptionGroup
    with pytest.raises(BaseException) as refused:
        asyncio.run(
            example.rollout(server.url, server.info["control"], CONTROL_TOKEN, "nope-1", 3, "agents-sdk-2", "fixture", AsyncOpenAI(base_url="http://127.0.0.1:9/v1", api_key="x", max_retries=0))
        )
    typed = example.envscaler_error(refused.value)
    assert typed is not None and typed[0] == "unknown_scenario", repr(refused.value)
    assert "nope-1" in typed[1]


def test_a_normal_clients_session_is_not_counted_as_refused(server: McpServer) -> None:
    before = server.stats()["refused"]

    async def main() -> None:
        async with session(server.url, on("library-1")) as c:  # the SDK's default: probe, then initialize
            assert not (await c.call_tool("get_book", {"book_id": "B001"})).is_error

    asyncio.run(main())
    assert server.stats()["refused"] == before
    assert server.control("GET", "/stats", token="wrong")[0] == 401
    assert server.stats()["refused"] == before + 1
