"""Token ids and a loss mask for an episode's chat messages, through a Hugging Face tokenizer's chat template.

Trainers that learn from multi-turn rollouts (verl, TRL's ``rollout_func``, OpenRLHF, slime)
want the episode as ``prompt_ids`` (what the model was first given) and ``response_ids``
(everything after it) with a mask over the response: 1 on tokens the model produced (its
assistant turns), 0 on tokens it read (tool results, the simulated user, the template's own
markup). :func:`render` builds them from messages such as ``env.messages`` or
``EpisodeResult.messages``:

    from transformers import AutoTokenizer            # pip install 'envscaler[tokens]'
    tok = AutoTokenizer.from_pretrained("Qwen/Qwen2.5-7B-Instruct")
    r = render(tok, result.messages, tools=result.tools)            # fc mode: tools go to the template
    r = render(tok, result.messages)                                # prompt mode: tools are in the system prompt
    r.prompt_ids, r.response_ids, r.response_mask

How: the chat template renders the whole conversation once (that text is what ``decode``
gives back, byte for byte), and each assistant turn's span in it is found by rendering the
conversation up to that turn with the generation prompt (where the model starts writing) and
up to its end. Each piece is tokenized on its own, so no token straddles a turn's edge, as
when the model generated that turn after its prompt. A template that rewrites earlier turns
when later ones are added (Qwen3's drops older ``<think>`` blocks) has no such spans: that is
a ``ValueError`` naming the turn, not a silently wrong mask.

The mask covers what the model writes: the turn's text and the end-of-turn token
(``tokenizer.eos_token``, ``<|im_end|>`` for Qwen), not the template's text after it (the
newline Qwen puts after ``<|im_end|>``) nor the ``<|im_start|>assistant\\n`` before it.

**Token-in/token-out**: re-tokenizing the text of a turn does not always give the ids the model
sampled (a tool call parsed and re-rendered by the template differs in spacing; a merge can
differ), which makes the update off-policy. Pass the model's own ids with ``generated={i: ids}``
(``i``: the assistant message's index; ``EpisodeResult.generated_ids`` collects them when a
policy returns ``"completion_ids"``): those ids are used verbatim, mask 1, in place of the
turn's rendered text; the template's closing markup follows with mask 0 (and the end-of-turn
token too, when the model's ids do not end with it: a reply cut at the token cap).

``transformers`` is imported by the caller (any object with ``apply_chat_template``,
``encode`` and ``eos_token`` works); this module needs nothing beyond the standard library.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["RenderedEpisode", "render", "template_messages"]


@dataclass
class RenderedEpisode:
    """One episode as token ids (see :func:`render`)."""

    #: the conversation up to where the model first writes (through the generation prompt)
    prompt_ids: list[int]
    #: every token after the prompt: the model's turns and what it read between them
    response_ids: list[int]
    #: per ``response_ids`` token: 1 = the model produced it (assistant turn), 0 = it read it
    response_mask: list[int]
    #: ``(start, end)`` token ranges of the trained assistant turns in :attr:`input_ids`
    assistant_spans: list[tuple[int, int]] = field(default_factory=list)

    @property
    def input_ids(self) -> list[int]:
        return self.prompt_ids + self.response_ids

    @property
    def loss_mask(self) -> list[int]:
        """Per :attr:`input_ids` token: the prompt's zeros, then :attr:`response_mask`."""
        return [0] * len(self.prompt_ids) + self.response_mask


def template_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The messages in the shape chat templates read: a tool call's ``arguments`` as an object
    (the OpenAI wire carries a JSON string, which templates such as Qwen2.5's would print as a
    quoted string), and ``content: None`` as ``""``. Arguments that are not a JSON object stay as
    they are (the model wrote them so)."""
    out: list[dict[str, Any]] = []
    for m in messages:
        d = dict(m)
        if d.get("content") is None:
            d["content"] = ""
        calls = d.get("tool_calls")
        if calls:
            fixed = []
            for call in calls:
                c = dict(call)
                fn = c.get("function")
                if isinstance(fn, Mapping) and isinstance(fn.get("arguments"), str):
                    try:
                        args = json.loads(fn["arguments"])
                    except ValueError:
                        args = None
                    if isinstance(args, dict):
                        c["function"] = {**fn, "arguments": args}
                fixed.append(c)
            d["tool_calls"] = fixed
        out.append(d)
    return out


def _template(tokenizer: Any, messages: list[dict[str, Any]], tools: Sequence[Mapping[str, Any]] | None, generation: bool, kwargs: Mapping[str, Any]) -> str:
    text = tokenizer.apply_chat_template(messages, tools=list(tools) if tools else None, tokenize=False, add_generation_prompt=generation, **kwargs)
    if not isinstance(text, str):
        raise TypeError(f"apply_chat_template returned {type(text).__name__}, not text")
    return text


def _encode(tokenizer: Any, text: str) -> list[int]:
    return [int(t) for t in tokenizer.encode(text, add_special_tokens=False)] if text else []


def render(
    tokenizer: Any,
    messages: Sequence[Mapping[str, Any]],
    tools: Sequence[Mapping[str, Any]] | None = None,
    *,
    generated: Mapping[int, Sequence[int]] | None = None,
    train_from: int = 0,
    end_of_turn: str | None = None,
    chat_template_kwargs: Mapping[str, Any] | None = None,
) -> RenderedEpisode:
    """``messages`` (OpenAI chat shape) as ``prompt_ids``, ``response_ids`` and ``response_mask``.

    - ``tools``: the function schemas for the chat template (fc mode); None in prompt mode, where
      the system prompt already describes them.
    - ``generated``: the model's own ids for assistant turns, by message index (token-in/token-out).
    - ``train_from``: assistant turns before this message index are context, not trained (mask 0,
      part of the prompt): ``EpisodeResult.prefix_messages`` for a continuation from a fork.
    - ``end_of_turn``: the text that closes an assistant turn (default ``tokenizer.eos_token``).
    - ``chat_template_kwargs``: passed to ``apply_chat_template`` (e.g. ``enable_thinking``).

    The prompt ends with the generation prompt of the first trained assistant turn; with no such
    turn, everything is prompt. Without ``generated``, ``tokenizer.decode(input_ids)`` is
    ``apply_chat_template(template_messages(messages), tools=tools, tokenize=False)``.
    """
    msgs = template_messages(messages)
    kwargs = dict(chat_template_kwargs or {})
    generated = dict(generated or {})
    for i in generated:
        if not (0 <= i < len(msgs)) or msgs[i].get("role") != "assistant":
            raise ValueError(f"generated ids for message {i}, which is not an assistant message")
    eot = end_of_turn if end_of_turn is not None else getattr(tokenizer, "eos_token", None)
    full = _template(tokenizer, msgs, tools, False, kwargs)

    # the text as pieces: (text, trained) for the template's and the readers' text, and per
    # assistant turn its start (after the generation prompt) and end
    turns = [i for i, m in enumerate(msgs) if m.get("role") == "assistant" and i >= train_from]
    ids: list[int] = []
    mask: list[int] = []
    spans: list[tuple[int, int]] = []
    prompt_len: int | None = None
    pos = 0  # how much of `full` is tokenized
    for i in turns:
        before = _template(tokenizer, msgs[:i], tools, True, kwargs)
        upto = _template(tokenizer, msgs[: i + 1], tools, False, kwargs)
        if not (upto.startswith(before) and full.startswith(upto) and len(before) >= pos):
            raise ValueError(
                f"the chat template does not render message {i} (an assistant turn) as an addition to the messages before it "
                "(it rewrites earlier turns, e.g. drops older <think> blocks): render each turn on its own prompt instead"
            )
        ids += _encode(tokenizer, full[pos : len(before)])
        mask += [0] * (len(ids) - len(mask))
        if prompt_len is None:
            prompt_len = len(ids)
        turn = full[len(before) : len(upto)]
        cut = turn.rfind(eot) + len(eot) if eot and eot in turn else len(turn)  # the model writes through its end-of-turn token
        start = len(ids)
        own = generated.get(i)
        if own is None:
            ids += _encode(tokenizer, turn[:cut])
            tail = turn[cut:]
        else:
            ids += [int(t) for t in own]
            closed = bool(eot) and len(own) > 0 and _encode(tokenizer, str(eot)) == [int(own[-1])]
            tail = turn[cut:] if closed or cut == len(turn) else turn[cut - len(str(eot)) :]
        mask += [1] * (len(ids) - len(mask))
        spans.append((start, len(ids)))
        ids += _encode(tokenizer, tail)
        mask += [0] * (len(ids) - len(mask))
        pos = len(upto)
    ids += _encode(tokenizer, full[pos:])
    mask += [0] * (len(ids) - len(mask))
    if prompt_len is None:
        prompt_len = len(ids)
    return RenderedEpisode(prompt_ids=ids[:prompt_len], response_ids=ids[prompt_len:], response_mask=mask[prompt_len:], assistant_spans=spans)
