"""Stage 3: SFT with TRL's SFTTrainer and a LoRA adapter on RUN/sft/sft.jsonl.

    python examples/train/sft.py --run runs/recipe --model path/to/qwen2.5-coder-0.5b-instruct [--max-steps 2]

Each exported row (``messages`` with ``tool_calls`` + ``tools``) is rendered by
``envscaler.tokens.render`` with the model's chat template into ``input_ids`` and a
``completion_mask`` that is 1 on the assistant turns only (the tool calls and the final reply), and
handed to SFTTrainer as a processed dataset: TRL's own ``assistant_only_loss`` needs a chat template
with ``{% generation %}`` markers, which Qwen2.5's does not have, and without a mask the loss would
mostly be the system prompt and tool schemas. Rows longer than ``--max-length`` tokens are left
out (cutting them would cut the turns that are trained).

Writes RUN/models/sft/adapter/ (the LoRA adapter), RUN/models/sft/model.json (base + adapters, what
the later stages load) and RUN/models/sft/log.json (TRL's log history, wall time).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from recipe_common import CPU_TRAINER_ARGS, load_model, lora_config, log, model_spec, read_jsonl, save_model_spec, write_json


def rendered_rows(rows: list[dict[str, Any]], tokenizer: Any, max_length: int) -> tuple[list[dict[str, Any]], int]:
    from envscaler.tokens import render

    out, dropped = [], 0
    for r in rows:
        ep = render(tokenizer, r["messages"], r.get("tools") or None)
        if len(ep.input_ids) > max_length:
            dropped += 1
            continue
        out.append({"input_ids": ep.input_ids, "completion_mask": ep.loss_mask})
    return out, dropped


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--run", type=Path, required=True)
    ap.add_argument("--model", required=True, help="the base model: a Hugging Face folder")
    ap.add_argument("--max-steps", type=int, default=20, help="optimizer steps (-1: --epochs over the data)")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--batch", type=int, default=1, help="rows per micro-batch")
    ap.add_argument("--grad-accum", type=int, default=1)
    ap.add_argument("--lr", type=float, default=2e-4)
    ap.add_argument("--lora-r", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=6144, help="longest row kept, in tokens")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    t0 = time.monotonic()
    out = args.run / "models" / "sft"
    model, tok = load_model(args.model, args.threads)
    tok.padding_side = "right"
    rows, dropped = rendered_rows(read_jsonl(args.run / "sft" / "sft.jsonl"), tok, args.max_length)
    if not rows:
        raise SystemExit(f"no SFT row fits in --max-length {args.max_length} tokens ({dropped} longer)")
    lengths = sorted(len(r["input_ids"]) for r in rows)
    log(f"sft: {len(rows)} rows ({dropped} longer than {args.max_length} left out), tokens per row {lengths[0]}-{lengths[-1]}")
    config = SFTConfig(
        output_dir=str(out / "trainer"),
        max_steps=args.max_steps,
        num_train_epochs=args.epochs,
        per_device_train_batch_size=args.batch,
        gradient_accumulation_steps=args.grad_accum,
        learning_rate=args.lr,
        **CPU_TRAINER_ARGS,
        seed=args.seed,
        max_length=args.max_length,
        completion_only_loss=True,
    )
    lora = lora_config(args.lora_r)
    trainer = SFTTrainer(model=model, args=config, train_dataset=Dataset.from_list(rows), processing_class=tok, peft_config=lora)
    t_train = time.monotonic()
    trainer.train()
    train_s = time.monotonic() - t_train
    trainer.model.save_pretrained(str(out / "adapter"))
    save_model_spec(out, model_spec(args.model), out / "adapter", "sft")
    history = [dict(h) for h in trainer.state.log_history]
    result = {
        "rows": len(rows),
        "dropped_too_long": dropped,
        "tokens_per_row": {"min": lengths[0], "max": lengths[-1], "total": sum(lengths)},
        "steps": trainer.state.global_step,
        "train_seconds": train_s,
        "wall_seconds": time.monotonic() - t0,
        "log_history": history,
        "settings": vars(args) | {"run": str(args.run)},
    }
    write_json(out / "log.json", result)
    losses = [h["loss"] for h in history if "loss" in h]
    log(f"sft: {trainer.state.global_step} steps in {train_s:.0f} s, loss {losses[0] if losses else '-'} -> {losses[-1] if losses else '-'}")
    return result


if __name__ == "__main__":
    main()
