"""envscaler.tokens.render with the real Qwen2.5 tokenizer and chat template, on episodes played through a real bridge.

The tokenizer files are read from the shared folder (never committed): ``../shared`` next to the
checkout, or ``$ENVSCALER_SHARED``. Without it this module skips (with
``ENVSCALER_SHARED_REQUIRED=1``, as scripts/test-all.sh sets when the folder exists, it fails).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest

import envscaler
from envscaler import Agent, AsyncEnvScalerEnv, fork_point
from envscaler.tokens import render, template_messages

from helpers import NOTES_ENVS, REFERENCE_ACTIONS, REPO, start_bridge
from user_sim import scripted_user

SHARED = Path(os.environ.get("ENVSCALER_SHARED") or REPO.parent / "shared").resolve()
TOKENIZER = SHARED / "tools" / "hf-model" / "tokenizer-qwen2.5"
if not TOKENIZER.is_dir():
    if os.environ.get("ENVSCALER_SHARED_REQUIRED") == "1":
        raise RuntimeError(f"ENVSCALER_SHARED_REQUIRED=1 but {TOKENIZER} is missing (ENVSCALER_SHARED={SHARED})")
    pytest.skip(f"needs {TOKENIZER}; set ENVSCALER_SHARED to the shared folder, default ../shared next to the checkout", allow_module_level=True)
transformers = pytest.importorskip("transformers", reason="envscaler.tokens is tested with transformers: pip install -e 'python-client[test]' (or [tokens])")

#: an assistant turn in Qwen's ChatML: what the model writes runs from after the generation prompt through <|im_end|>
ASSISTANT = re.compile(r"<\|im_start\|>assistant\n(.*?<\|im_end\|>)", re.S)


@pytest.fixture(scope="module")
def tok() -> Any:
    return transformers.AutoTokenizer.from_pretrained(str(TOKENIZER))


def _decode(tok: Any, ids: list[int]) -> str:
    return str(tok.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False))


def _ids(encoded: Any) -> list[int]:
    """apply_chat_template(tokenize=True)'s ids, whether it returns a list or a BatchEncoding."""
    ids = encoded["input_ids"] if not isinstance(encoded, list) else encoded
    return [int(t) for t in ids]


def _check(tok: Any, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
    """Renders and checks the three promises: byte-for-byte text, mask = the assistant spans, and each
    turn's prompt tokenized as the tokenizer tokenizes it on its own (what an inference server sent the model)."""
    r = render(tok, messages, tools)
    tm = template_messages(messages)
    full = tok.apply_chat_template(tm, tools=tools, tokenize=False)
    assert _decode(tok, r.input_ids) == full
    assert len(r.response_mask) == len(r.response_ids) and len(r.loss_mask) == len(r.input_ids)
    spans = ASSISTANT.findall(full)
    assert len(spans) == sum(m["role"] == "assistant" for m in messages) > 0
    assert [_decode(tok, r.input_ids[a:b]) for a, b in r.assistant_spans] == spans
    assert _decode(tok, [t for t, m in zip(r.input_ids, r.loss_mask) if m]) == "".join(spans)
    # everything unmasked is the rest of the text: tool results, user turns, template markup
    assert _decode(tok, [t for t, m in zip(r.input_ids, r.loss_mask) if not m]) == ASSISTANT.sub(lambda _: "<|im_start|>assistant\n", full)
    first = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    assert r.prompt_ids == _ids(tok.apply_chat_template(tm[:first], tools=tools, add_generation_prompt=True, tokenize=True))
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    for i, (start, _) in zip(turns, r.assistant_spans):
        assert r.input_ids[:start] == _ids(tok.apply_chat_template(tm[:i], tools=tools, add_generation_prompt=True, tokenize=True))
    return r


def _play(endpoint: str, policy: Any, scenario: str, mode: str = "fc") -> envscaler.EpisodeResult:
    async def main() -> envscaler.EpisodeResult:
        env = AsyncEnvScalerEnv(endpoint)
        try:
            return await Agent(policy, mode=mode).run(env, scenario, seed=11)  # type: ignore[arg-type]
        finally:
            await env.close()

    return asyncio.run(main())


def _call(i: int, action: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"c{i}", "type": "function", "function": {"name": action["name"], "arguments": json.dumps(action["arguments"])}}


@pytest.fixture(scope="module")
def fc_episode(bridge: Any) -> envscaler.EpisodeResult:
    """notes-1 in fc mode: both reference calls in one turn (parallel), then the closing reply."""
    replies = [{"role": "assistant", "content": None, "tool_calls": [_call(i, a) for i, a in enumerate(REFERENCE_ACTIONS)]}, "Task Completed"]
    res = _play(bridge.endpoints[0], lambda m, t: replies[sum(x["role"] == "assistant" for x in m)], "notes-1")
    assert res.reward == 1.0 and [m["role"] for m in res.messages] == ["system", "user", "assistant", "tool", "tool", "assistant"]
    return res


def test_fc_mode_with_parallel_tool_calls(tok, fc_episode):
    r = _check(tok, fc_episode.messages, fc_episode.tools)
    text = _decode(tok, r.input_ids)
    # the tools went to the template (its system block), both calls are in one masked turn, both results in one unmasked user turn
    assert '"name": "delete_note"' in text.split("\n</tools>")[0]
    first = _decode(tok, r.input_ids[slice(*r.assistant_spans[0])])
    assert first.count("<tool_call>") == 2 and first.endswith("</tool_call><|im_end|>")
    assert "<|im_start|>user\n<tool_response>\n" in text and text.count("<tool_response>") == 2
    assert _decode(tok, r.prompt_ids).endswith("<|im_start|>user\n" + fc_episode.messages[1]["content"] + "<|im_end|>\n<|im_start|>assistant\n")
    assert r.response_mask[-1] == 0 and _decode(tok, r.response_ids[-1:]) == "\n"  # the newline after the last <|im_end|> is the template's


def test_prompt_mode_with_fenced_json_calls(tok, bridge):
    """Prompt mode as Qwen2.5-Coder plays it: tools in the system prompt, calls as ```json fences, results as user turns."""
    fenced = "I will add Bob's note and delete Ann's.\n" + "\n".join(f"```json\n{json.dumps(a)}\n```" for a in REFERENCE_ACTIONS)
    replies = [fenced, "Task Completed"]
    res = _play(bridge.endpoints[1], lambda m, t: replies[sum(x["role"] == "assistant" for x in m)], "notes-1", mode="prompt")
    assert res.reward == 1.0 and not res.failures
    assert [m["role"] for m in res.messages] == ["system", "user", "assistant", "user", "assistant"]
    r = _check(tok, res.messages, None)
    text = _decode(tok, r.input_ids)
    assert text.count("<tools>\n") == 1 and "<tools>\n" + json.dumps(res.tools[0], separators=(",", ":")) in text  # the agent's own tool section
    assert _decode(tok, r.input_ids[slice(*r.assistant_spans[0])]) == fenced + "<|im_end|>"


def test_a_conversation_with_a_simulated_user(tok, built_bridge):
    lines = ["Hi, I'm Carol (u3). How many notes do I have?", "Thanks. Add a note 'x' with body 'y', please."]
    replies: list[Any] = [{"role": "assistant", "content": None, "tool_calls": [_call(0, {"name": "list_notes", "arguments": {"user_id": "u3"}})]}, "You have 1 note."]
    replies += [{"role": "assistant", "content": None, "tool_calls": [_call(1, {"name": "add_note", "arguments": {"user_id": "u3", "title": "x", "body": "y"}})]}, "Done: I added 'x'."]
    with scripted_user(lines) as url, start_bridge(envs=[NOTES_ENVS], extra=("--user-base-url", url, "--user-model", "user-sim")) as b:
        res = _play(b.endpoints[0], lambda m, t: replies[sum(x["role"] == "assistant" for x in m)], "notes-2")
    assert res.end_reason == "user_stop" and res.reward == 1.0
    r = _check(tok, res.messages, res.tools)
    text = _decode(tok, r.input_ids)
    masked = _decode(tok, [t for t, m in zip(r.input_ids, r.loss_mask) if m])
    for line in lines:  # the user's words are read, never trained
        assert f"<|im_start|>user\n{line}<|im_end|>" in text and line not in masked
    assert "You have 1 note.<|im_end|>" in masked and len(r.assistant_spans) == 4


def test_token_in_token_out_uses_the_models_own_ids(tok, fc_episode):
    msgs, tools = fc_episode.messages, fc_episode.tools
    # the model wrote the calls compactly; the template re-renders them with spaces: its own ids are what was sampled
    own_text = "\n".join("<tool_call>\n" + json.dumps(a, separators=(",", ":")) + "\n</tool_call>" for a in REFERENCE_ACTIONS) + "<|im_end|>"
    own = tok.encode(own_text, add_special_tokens=False)
    r = render(tok, msgs, tools, generated={2: own})
    start, end = r.assistant_spans[0]
    assert r.input_ids[start:end] == own and all(r.loss_mask[start:end])
    templated = render(tok, msgs, tools)
    assert _decode(tok, r.input_ids) == _decode(tok, templated.input_ids).replace(_decode(tok, templated.input_ids[slice(*templated.assistant_spans[0])]), own_text)
    assert r.input_ids[end:] == templated.input_ids[templated.assistant_spans[0][1] :]  # the rest is unchanged
    # a reply cut at the token cap (no <|im_end|>): the template closes the turn, unmasked
    cut = own[:5]
    r = render(tok, msgs, tools, generated={2: cut})
    start, end = r.assistant_spans[0]
    assert r.input_ids[start:end] == cut and _decode(tok, r.input_ids[end : end + 2]) == "<|im_end|>\n" and r.loss_mask[end : end + 2] == [0, 0]
    with pytest.raises(ValueError, match="not an assistant message"):
        render(tok, msgs, tools, generated={3: own})


def test_train_from_a_fork_puts_the_prefix_in_the_prompt(tok, bridge):
    """GRPO from mid-episode: the continuation's turns are the response, the source's turns before the fork are prompt."""
    with envscaler.EnvScalerEnv(bridge.endpoints[0]) as source:
        source.reset(scenario_id="notes-1", seed=12)
        source.step({"role": "assistant", "content": None, "tool_calls": [_call(0, REFERENCE_ACTIONS[0])]})
        point = fork_point(source)

        def policy(messages: list[dict[str, Any]], tools: Any) -> Any:
            done = messages[-1]["role"] == "tool" and messages[-1]["name"] == "delete_note"
            return "Task Completed" if done else {"role": "assistant", "content": None, "tool_calls": [_call(1, REFERENCE_ACTIONS[1])]}

        (res,) = asyncio.run(envscaler.rollout(bridge, policy, start_from=point))
    assert res.reward == 1.0 and res.prefix_messages == 4
    r = render(tok, res.messages, res.tools, train_from=res.prefix_messages)
    whole = render(tok, res.messages, res.tools)
    assert r.input_ids == whole.input_ids and len(r.assistant_spans) == 2  # the same tokens; the source's turn is not trained
    prompt = tok.apply_chat_template(template_messages(res.messages[:4]), tools=res.tools, add_generation_prompt=True, tokenize=False)
    assert _decode(tok, r.prompt_ids) == prompt and r.assistant_spans[0][0] == len(r.prompt_ids)
    assert _decode(tok, [t for t, m in zip(r.input_ids, r.loss_mask) if m]) == "".join(ASSISTANT.findall(_decode(tok, r.input_ids))[1:])


def test_a_template_that_rewrites_earlier_turns_is_refused(tok, fc_episode):
    # like Qwen3's, which drops older <think> blocks: earlier assistant turns render differently once later ones follow
    rewriting = (
        "{% for m in messages %}{% if m.role == 'assistant' and not loop.last %}{{ '<|im_start|>assistant\\n(earlier)<|im_end|>\\n' }}"
        "{% else %}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{% endif %}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
    )
    msgs = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "one"}, {"role": "user", "content": "again"}, {"role": "assistant", "content": "two"}]
    with pytest.raises(ValueError, match="message 1"):
        render(tok, msgs, chat_template_kwargs={"chat_template": rewriting})
    # the same template is fine on an episode with one assistant turn
    r = render(tok, msgs[:2], chat_template_kwargs={"chat_template": rewriting})
    assert _decode(tok, r.input_ids[slice(*r.assistant_spans[0])]) == "one<|im_end|>"
