"""One episode of an `envscaler mcp` env played by an OpenAI Agents SDK agent, scored by the trainer.

The agent sees only MCP: the env's tools (each call is one step of the session's own sandboxed
episode) and the task (the server's `task` prompt). The trainer's side ends and scores the episode
on the control route before the session closes. Tested by python-client/tests/test_mcp.py
(`test_openai_agents_sdk_example_plays_an_episode`) against the local OpenAI fixture.

    npx envscaler mcp --scenarios 'library-*' --port 8765 --control-token secret
    OPENAI_BASE_URL=http://127.0.0.1:8080/v1 OPENAI_API_KEY=x \\
        python python-client/examples/openai_agents_mcp.py --scenario library-1 --control-token secret --model qwen

Needs `pip install openai-agents` (python-client's [test] extra has it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.request
from typing import Any

from agents import Agent, OpenAIChatCompletionsModel, Runner, set_tracing_disabled
from agents.mcp import MCPServerStreamableHttp
from openai import AsyncOpenAI


def envscaler_error(exc: BaseException) -> tuple[str, str] | None:
    """The typed code and message of an `envscaler mcp` refusal inside what the MCP SDK raised.

    The SDK runs its transport in anyio task groups, so a refused `initialize` (unknown_scenario,
    too_many_sessions, session_closed, ...) reaches the caller as an ExceptionGroup (possibly
    nested, possibly re-raised by the Agents SDK as the cause of its own error) holding an
    MCPError whose `error.data["code"]` is the typed code. None when there is none.
    """
    seen: set[int] = set()
    stack: list[BaseException] = [exc]
    while stack:
        e = stack.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        data = getattr(getattr(e, "error", None), "data", None)  # MCPError (McpError in older SDKs)
        if isinstance(data, dict) and isinstance(data.get("code"), str):
            return data["code"], str(getattr(e.error, "message", e))  # type: ignore[attr-defined]
        stack.extend(getattr(e, "exceptions", ()))  # an ExceptionGroup's members (exceptiongroup's backport too)
        stack.extend(x for x in (e.__cause__, e.__context__) if x is not None)
    return None


def finish(control_url: str, token: str, rollout: str, message: str | None) -> dict[str, Any]:
    """The trainer's side: ends the episode (after the agent's final reply) and returns its score."""
    body = json.dumps({"message": message} if message else {}).encode()
    req = urllib.request.Request(f"{control_url}/sessions/{rollout}/finish", data=body, method="POST", headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return json.load(r)


async def rollout(
    mcp_url: str, control_url: str, control_token: str, scenario: str, seed: int, rollout_id: str, model: str, openai_client: AsyncOpenAI | None = None, max_turns: int = 30
) -> dict[str, Any]:
    """Plays one episode; returns the agent's final output and the episode's score."""
    params = {"url": mcp_url, "headers": {"X-EnvScaler-Scenario": scenario, "X-EnvScaler-Seed": str(seed), "X-EnvScaler-Rollout": rollout_id}}
    # max_retry_attempts stays 0: the SDK retries a failed call in a *new* MCP session, which here
    # would be a new episode, not the same one
    async with MCPServerStreamableHttp(name="env", params=params, cache_tools_list=True, max_retry_attempts=0, client_session_timeout_seconds=60) as env:
        task = (await env.get_prompt("task")).messages[0].content.text
        agent = Agent(
            name="agent",
            instructions=f"You operate a system through its tools.\n\n{task}",
            mcp_servers=[env],
            # Chat Completions: what OpenAI-compatible servers (vLLM, llama.cpp, the test fixture) speak
            model=OpenAIChatCompletionsModel(model=model, openai_client=openai_client or AsyncOpenAI()),
        )
        result = await Runner.run(agent, "Do the task.", max_turns=max_turns)
        final = result.final_output if isinstance(result.final_output, str) else None
        score = finish(control_url, control_token, rollout_id, final)
    # leaving the block closed the MCP session: the episode's sandbox is freed
    return {"final_output": final, "score": score}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mcp-url", default="http://127.0.0.1:8765/mcp")
    ap.add_argument("--control-url", default="http://127.0.0.1:8765/control")
    ap.add_argument("--control-token", required=True)
    ap.add_argument("--scenario", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rollout", default="agents-sdk-0")
    ap.add_argument("--model", required=True)
    a = ap.parse_args()
    set_tracing_disabled(True)  # no traces sent anywhere
    try:
        out = asyncio.run(rollout(a.mcp_url, a.control_url, a.control_token, a.scenario, a.seed, a.rollout, a.model))
    except Exception as e:
        typed = envscaler_error(e)
        if typed is None:
            raise
        # one line with the code (e.g. "unknown_scenario: no scenario nope-1 ..."), not a task-group traceback
        raise SystemExit(f"envscaler mcp refused: {typed[0]}: {typed[1]}") from None
    print(json.dumps({"final_output": out["final_output"], "reward": out["score"]["reward"], "checks": out["score"]["reward_info"]["checks"]}, indent=2))


if __name__ == "__main__":
    main()
