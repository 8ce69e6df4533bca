"""Transcript: an episode as the OpenAI chat messages its agent saw, kept beside any env class.

The agent loop (``envscaler.Agent``, and the TypeScript agent in agent/run-episode.ts) sends the
model a system prompt (instructions, the env's introduction and rules, and in prompt mode the
tools), the task or the simulated user's opening, then after each step the assistant's turn and
what came back: in fc mode one ``tool`` message per tool call id, in prompt mode one user turn
of ``<tool_response>`` blocks; a text reply is answered by a user turn (the simulated user, or
the bridge's note). A :class:`Transcript` records the reset and each step's action and result and
builds exactly those messages, by the same functions the agent uses, so a trainer that drives an
env by hand gets the conversation a policy run through ``Agent`` would have seen.

    tr = Transcript()
    obs, info = env.reset(scenario_id="library-1")
    tr.start(obs, info)
    obs, reward, terminated, truncated, info = env.step(action)
    tr.record(action, obs, terminated, truncated, info)
    tr.messages()            # fc mode; tr.messages("prompt") for prompt mode
    tr.tools                 # the OpenAI function schemas (pass them to the chat template in fc mode)

``EnvScalerEnv`` and ``AsyncEnvScalerEnv`` keep one (``env.transcript``, ``env.messages``); for the
vector env, :class:`VectorTranscripts` keeps one per slot from the batched results.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "TASK_DONE",
    "AgentMode",
    "Transcript",
    "VectorTranscripts",
    "assistant_message",
    "observation_messages",
    "slot_info",
    "start_messages",
    "system_prompt",
]

AgentMode = Literal["fc", "prompt"]

#: The closing reply of a task agent (the original's convention; the SFT filter looks for it).
TASK_DONE = "Task Completed"

# The same instructions as the TypeScript agent (agent/system-prompt.ts), so a policy trained
# through either path sees the same prompt.
_TASK = "\n".join(
    [
        "You are an agent that completes the task you are given by operating an environment through its tools.",
        "",
        "How to work:",
        "- Work step by step: call one tool, read its result, then decide the next step.",
        "- Avoid making several tool calls in one step.",
        "- Look things up before you change them: use the query tools to confirm ids and current values, then use the tools that modify state.",
        "- Use only the information in the task and in tool results; do not invent ids or values.",
        "- Follow the environment's rules below.",
        f"- When you believe the task is complete, reply with only '{TASK_DONE}' and no tool call.",
    ]
)
_CONVERSATION = "\n".join(
    [
        "You are an agent that helps a user by talking with them and operating an environment through its tools.",
        "",
        "How to work:",
        "- Work step by step: call one tool, read its result, then decide the next step.",
        "- Avoid making several tool calls in one step.",
        "- If you need information only the user has (who they are, which item, which option), ask the user for it.",
        "- In one step, either call a tool or talk to the user, never both.",
        "- Look things up before you change them: use the query tools to confirm ids and current values, then use the tools that modify state.",
        "- Use only the information the user gives and tool results; do not invent ids or values.",
        "- Follow the environment's rules below.",
        "- When you have done what the user asked, tell them what you did.",
    ]
)


def _tools_section(tools: Sequence[Any]) -> str:
    # JSON.stringify's compact form, as agent/system-prompt.ts writes it
    lines = "\n".join(json.dumps(t, separators=(",", ":"), ensure_ascii=False) for t in tools)
    return (
        "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
        f"You are provided with function signatures within <tools></tools> XML tags:\n<tools>\n{lines}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n"
        '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
    )


def system_prompt(info: Mapping[str, Any], mode: AgentMode = "fc", instructions: str | None = None) -> str:
    """The default system prompt for a reset's ``info``: instructions for its scenario mode, the env's introduction and rules, and (prompt mode) the tools."""
    head = instructions if instructions is not None else (_CONVERSATION if info.get("mode") == "conversation" else _TASK)
    rules = "\n".join(f"- {r}" for r in info.get("rules") or []) or "- (none)"
    text = (
        f"{head}\n\nThe following is an introduction to the current environment:\n"
        f"# Environment Information\n\n## Brief Introduction:\n{info.get('introduction', '')}\n\n## Environment Rules / Constraints:\n{rules}"
    )
    return f"{text}\n\n{_tools_section(info.get('tools') or [])}" if mode == "prompt" else text


def start_messages(observation: str, info: Mapping[str, Any], mode: AgentMode = "fc", instructions: str | None = None) -> list[dict[str, Any]]:
    """The conversation after a reset: the system prompt and the task (or the simulated user's opening)."""
    return [{"role": "system", "content": system_prompt(info, mode, instructions)}, {"role": "user", "content": observation}]


def _is_message(action: Mapping[str, Any]) -> bool:
    # the bridge's rule (bridge/core/episode/action-parser.ts parseAction): a dict is an assistant
    # message when it has tool_calls or a role, or content and no call name
    return "tool_calls" in action or "role" in action or ("content" in action and not any(k in action for k in ("name", "tool", "function")))


def assistant_message(action: Any, step_info: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The assistant's turn for an action as the agent wrote it.

    Text stays text (``content``; the env found any tool calls in it, and their results come back as
    a user turn); an assistant message dict is kept as given. A tool call or a list of them (the
    bridge's other action shapes) becomes a message whose ``tool_calls`` carry the ids the bridge
    gave them (``step_info["tool_calls"]``), so each ``tool`` message answers an id of its turn."""
    if isinstance(action, str):
        return {"role": "assistant", "content": action}
    if isinstance(action, Mapping) and _is_message(action):
        message = dict(action)
        message.setdefault("role", "assistant")
        return message
    calls = (step_info or {}).get("tool_calls") or []
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": c.get("id"), "type": "function", "function": {"name": c.get("name"), "arguments": json.dumps(c.get("arguments"), ensure_ascii=False)}} for c in calls],
    }


def observation_messages(assistant: Mapping[str, Any], observation: Mapping[str, Any], content: str, mode: AgentMode = "fc") -> list[dict[str, Any]]:
    """What the agent reads after its turn ``assistant``: the step's ``observation`` (``info["observation"]``) as chat messages.

    fc mode: one ``tool`` message per call id of the turn (every id answered, as endpoints demand);
    prompt mode, or calls the env found in text: one user turn of ``<tool_response>`` blocks; a
    text reply: the user's words (the simulated user, or the bridge's note about the action)."""
    results = observation.get("tool_results") or []
    calls = assistant.get("tool_calls") or []
    if mode == "prompt" or (results and not calls):
        text = "\n".join(f"<tool_response>\n{r.get('content', '')}\n</tool_response>" for r in results) if results else content
        return [{"role": "user", "content": text}]
    if calls:
        by_id = {r.get("tool_call_id"): r for r in results}
        out: list[dict[str, Any]] = []
        for c in calls:
            r = by_id.get(c.get("id"))
            out.append({"role": "tool", "tool_call_id": c.get("id"), "name": (c.get("function") or {}).get("name"), "content": r.get("content") if r else content})
        return out
    return [{"role": "user", "content": content}]


def _copied(value: Any) -> Any:
    """A copy of an action's dicts and lists (the caller may reuse its objects); strings and
    numbers are shared. Cheaper than ``copy.deepcopy``: this runs on every step."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    return value


@dataclass(slots=True)
class _Step:
    action: Any
    content: str
    observation: dict[str, Any]
    ended: bool
    tool_calls: list[dict[str, Any]]


@dataclass
class Transcript:
    """One episode's reset and steps, as the agent saw them; :meth:`messages` renders the chat.

    ``info`` is the reset's info (``tools``, ``mode``, ``introduction``, ``rules``, ``max_steps``);
    ``prefix`` holds messages given instead of a reset (:meth:`from_messages`: a conversation
    built elsewhere, continued here); an empty prefix means the conversation before
    ``steps_before`` is not known here (an env restored to, or forked from, a snapshot another
    env took: keep that env's transcript, e.g. with ``envscaler.fork_point``). A step that ended the episode adds its assistant turn but no
    observation: the agent never reads it (the agent loop stops there too)."""

    info: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    steps: list[_Step] = field(default_factory=list)
    prefix: list[dict[str, Any]] | None = None
    #: steps played before this transcript began (a prefix given with :meth:`from_messages`)
    steps_before: int = 0

    @classmethod
    def from_messages(cls, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]] = (), steps: int = 0, max_steps: int | None = None) -> Transcript:
        """A transcript that starts from a conversation built elsewhere (``steps`` of them played)."""
        info: dict[str, Any] = {"tools": [dict(t) for t in tools]}
        if max_steps is not None:
            info["max_steps"] = max_steps
        return cls(info=info, prefix=[dict(m) for m in messages], steps_before=steps)

    @property
    def tools(self) -> list[dict[str, Any]]:
        return list(self.info.get("tools") or [])

    @property
    def step_count(self) -> int:
        """The episode's steps so far (the bridge's ``info["step"]``)."""
        return self.steps_before + len(self.steps)

    @property
    def ended(self) -> bool:
        return bool(self.steps) and self.steps[-1].ended

    def start(self, observation: str, info: Mapping[str, Any]) -> None:
        """Records a reset (its observation content and info); forgets the previous episode."""
        self.info = dict(info)
        self.observation = observation
        self.steps = []
        self.prefix = None
        self.steps_before = 0

    def record(self, action: Any, observation: str, terminated: bool, truncated: bool, info: Mapping[str, Any]) -> None:
        """Records a step: the action sent and the step's result (content, flags, info)."""
        full = info.get("observation")
        # the observation and calls are the env's own fresh objects (a new info per step): kept as they are
        self.steps.append(
            _Step(
                action=_copied(action),
                content=observation,
                observation=full if isinstance(full, dict) else {"content": observation},
                ended=bool(terminated or truncated),
                tool_calls=info.get("tool_calls") or [],
            )
        )

    def copy(self) -> Transcript:
        """An independent copy (for a fork: the child continues from the same conversation)."""
        return copy.deepcopy(self)

    def messages(self, mode: AgentMode = "fc", instructions: str | None = None) -> list[dict[str, Any]]:
        """The conversation as the agent in ``mode`` saw it (``instructions``: the system prompt's head, as ``Agent(instructions=...)``)."""
        if mode not in ("fc", "prompt"):
            raise ValueError("mode is 'fc' or 'prompt'")
        if self.prefix is not None:
            out = [dict(m) for m in self.prefix]
        elif self.info or self.observation:
            out = start_messages(self.observation, self.info, mode, instructions)
        else:
            out = []  # no reset recorded (an env that was handed a session): the steps it saw
        for s in self.steps:
            assistant = assistant_message(s.action, {"tool_calls": s.tool_calls})
            out.append(assistant)
            if not s.ended:
                out += observation_messages(assistant, s.observation, s.content, mode)
        return out


def snapshot_transcript(known: Mapping[str, Transcript], snapshot_id: str, info: Mapping[str, Any]) -> Transcript:
    """The conversation up to a snapshot an env took (``known``: its transcripts by snapshot id); for
    one it did not take, an empty transcript holding the fork's info (earlier messages are not known)."""
    t = known.get(snapshot_id)
    return t.copy() if t is not None else Transcript(info=dict(info), prefix=[], steps_before=int(info.get("step") or 0))


def slot_info(infos: Mapping[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s info out of a vector env's batched info (gymnasium's dict of arrays with ``_key`` masks)."""
    out: dict[str, Any] = {}
    for k, v in infos.items():
        if k.startswith("_"):
            continue
        mask = infos.get(f"_{k}")
        if mask is not None and not bool(mask[i]):
            continue
        out[k] = slot_info(v, i) if isinstance(v, Mapping) else _plain(v[i])
    return out


def _plain(v: Any) -> Any:
    item = getattr(v, "item", None)
    return item() if item is not None and getattr(v, "shape", None) == () else v


class VectorTranscripts:
    """One :class:`Transcript` per sub-env of an ``EnvScalerVectorEnv`` (``AutoresetMode.NEXT_STEP``).

    Feed it what ``reset`` and ``step`` return; it follows the autoreset (a slot that ended on
    step t starts a new transcript on step t+1) and hands back each finished episode's transcript:

        vt = VectorTranscripts(vec.num_envs)
        vt.reset(*vec.reset(seed=0))
        obs, rewards, terminated, truncated, infos = vec.step(actions)
        for i, tr in vt.step(actions, obs, terminated, truncated, infos):
            ...  # slot i's episode ended: tr.messages(), tr.tools
    """

    def __init__(self, num_envs: int) -> None:
        self.transcripts = [Transcript() for _ in range(num_envs)]
        self._ended = [False] * num_envs

    def __getitem__(self, i: int) -> Transcript:
        return self.transcripts[i]

    def __len__(self) -> int:
        return len(self.transcripts)

    def reset(self, observations: Sequence[str], infos: Mapping[str, Any], mask: Sequence[bool] | None = None) -> None:
        """Records a vector ``reset`` (``mask``: the ``reset_mask`` it was given, if any)."""
        for i in range(len(self.transcripts)):
            if mask is None or mask[i]:
                self.transcripts[i] = Transcript()
                self.transcripts[i].start(str(observations[i]), slot_info(infos, i))
                self._ended[i] = False

    def fork(self, source: int, outcomes: Sequence[object], targets: Sequence[int] | None = None) -> None:
        """Records a vector ``fork`` (``outcomes``: what ``vec.fork(source, targets)`` returned): each
        target that forked continues ``source``'s conversation; one whose fork failed keeps its own."""
        chosen = [i for i in range(len(self.transcripts)) if i != source] if targets is None else [i for i in targets if i != source]
        for i, outcome in zip(chosen, outcomes):
            if isinstance(outcome, str):
                self.transcripts[i] = self.transcripts[source].copy()
                self._ended[i] = self._ended[source]

    def step(self, actions: Sequence[Any], observations: Sequence[str], terminated: Sequence[bool], truncated: Sequence[bool], infos: Mapping[str, Any]) -> list[tuple[int, Transcript]]:
        """Records a vector ``step``; returns ``(slot, transcript)`` of the episodes that ended in it."""
        done: list[tuple[int, Transcript]] = []
        for i, tr in enumerate(self.transcripts):
            info = slot_info(infos, i)
            if self._ended[i]:
                # NEXT_STEP autoreset: this slot's action was ignored and its result is a reset
                self.transcripts[i] = Transcript()
                self.transcripts[i].start(str(observations[i]), info)
                self._ended[i] = False
                continue
            tr.record(actions[i], str(observations[i]), bool(terminated[i]), bool(truncated[i]), info)
            if terminated[i] or truncated[i]:
                self._ended[i] = True
                done.append((i, tr))
        return done
