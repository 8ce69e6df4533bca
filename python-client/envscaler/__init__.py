"""Python client of the EnvScaler bridge: gymnasium envs over ZeroMQ (see README.md).

The protocol (docs/protocol.md in the repository) is in ``envscaler.protocol``; everything a
trainer normally needs is importable from here.
"""

from .agent import Agent, EpisodeResult, rollout
from .async_bridge_client import AsyncBridgeClient
from .async_env import AsyncEnvScalerEnv
from .bridge_client import BridgeClient
from .envscaler_env import EnvScalerEnv
from .fork_point import ForkPoint, afork_point, fork_point
from .launch import Bridge, connect, launch
from .previous_episode import AsyncPreviousEpisode, PreviousEpisode, ScoreNotFetched
from .protocol import (
    ERROR_CODES,
    PROTOCOL_VERSION,
    BridgeError,
    BridgeExited,
    BridgeTimeout,
    error_for,
)
from .replay import replay
from .spaces import AgentAction, AnyText, TextBatch
from .transcript import Transcript, VectorTranscripts
from .vector_env import EnvScalerVectorEnv

__version__ = "0.1.0"

#: ``gymnasium.make(ENV_ID, endpoint=..., max_episode_steps=n)`` and ``gymnasium.make_vec(ENV_ID, ...)``.
ENV_ID = "envscaler/EnvScaler-v0"


def _register() -> None:
    import gymnasium

    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point="envscaler.envscaler_env:EnvScalerEnv")


_register()

__all__ = [
    "ENV_ID",
    "ERROR_CODES",
    "PROTOCOL_VERSION",
    "Agent",
    "AgentAction",
    "AnyText",
    "AsyncBridgeClient",
    "AsyncEnvScalerEnv",
    "AsyncPreviousEpisode",
    "Bridge",
    "BridgeClient",
    "BridgeError",
    "BridgeExited",
    "BridgeTimeout",
    "EnvScalerEnv",
    "EnvScalerVectorEnv",
    "EpisodeResult",
    "ForkPoint",
    "PreviousEpisode",
    "ScoreNotFetched",
    "TextBatch",
    "Transcript",
    "VectorTranscripts",
    "afork_point",
    "connect",
    "error_for",
    "fork_point",
    "launch",
    "replay",
    "rollout",
]
