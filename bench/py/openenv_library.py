"""The library env (library_env.py, a port of envs/library) written as an OpenEnv environment the
way OpenEnv's own template (`openenv init`) lays one out: an Action and an Observation (pydantic
models), an Environment subclass with reset/step/state, `create_app(...)` for the FastAPI +
WebSocket server, and an EnvClient subclass for the client. The reference that `npm run bench`
measures our bridge against.

    python openenv_library.py serve [--max-sessions N]   # prints {"port": P} once it listens
"""
from __future__ import annotations

import argparse
import json
import socket
import sys
from typing import Any, Dict, Optional
from uuid import uuid4

from openenv.core import EnvClient
from openenv.core.client_types import StepResult
from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import Action, Observation, State
from pydantic import Field

from library_env import SCENARIOS, Library, initial_state


class LibraryAction(Action):
    """One tool call: the tool's name and its arguments."""

    tool: str = Field(..., description="name of one of the library's tools")
    arguments: Dict[str, Any] = Field(default_factory=dict, description="the tool's arguments")


class LibraryObservation(Observation):
    """The tool's result as JSON text (the task text after a reset)."""

    content: str = Field(default="", description="JSON text of the tool's result, or the task")


class LibraryEnvironment(Environment):
    # each WebSocket session gets its own instance and its own state copy
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self):
        super().__init__()
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._library: Optional[Library] = None

    def reset(self, seed: Optional[int] = None, episode_id: Optional[str] = None, scenario_id: str = "library-1", **kwargs: Any) -> LibraryObservation:
        self._library = Library(initial_state(scenario_id))
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return LibraryObservation(content=SCENARIOS[scenario_id]["task"], done=False, reward=0.0)

    def step(self, action: LibraryAction, timeout_s: Optional[float] = None, **kwargs: Any) -> LibraryObservation:  # type: ignore[override]
        if self._library is None:
            self.reset()
        self._state.step_count += 1
        result = self._library.call(action.tool, action.arguments)
        return LibraryObservation(content=json.dumps(result), done=False, reward=0.0)

    @property
    def state(self) -> State:
        return self._state


class LibraryClient(EnvClient[LibraryAction, LibraryObservation, State]):
    def _step_payload(self, action: LibraryAction) -> Dict:
        return {"tool": action.tool, "arguments": action.arguments}

    def _parse_result(self, payload: Dict) -> StepResult[LibraryObservation]:
        obs = payload.get("observation", {})
        return StepResult(
            observation=LibraryObservation(content=obs.get("content", ""), done=payload.get("done", False), reward=payload.get("reward")),
            reward=payload.get("reward"),
            done=payload.get("done", False),
        )

    def _parse_state(self, payload: Dict) -> State:
        return State(episode_id=payload.get("episode_id"), step_count=payload.get("step_count", 0))


def serve(max_sessions: int) -> None:
    import uvicorn

    app = create_app(LibraryEnvironment, LibraryAction, LibraryObservation, env_name="library", max_concurrent_envs=max_sessions)
    # bind here, on a free loopback port, and tell the parent which one
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    print(json.dumps({"port": sock.getsockname()[1]}), flush=True)
    # one server process, access logs off (they would slow the peer down, not us)
    config = uvicorn.Config(app, log_level="warning", access_log=False, ws_max_queue=1024)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("cmd", choices=["serve"])
    p.add_argument("--max-sessions", type=int, default=4096)
    a = p.parse_args()
    sys.exit(serve(a.max_sessions))
