import { readFileSync } from "node:fs";
import { z } from "zod";
import { LlmError, type LlmClient } from "../llm/llm-client.js";
import { MINE_EXAMPLES, minePrompt } from "../prompts.js";
import { jaccard, shingles, words } from "../text-similarity.js";

export type TaskFormat = "jsonl" | "json" | "api-bank";

/** A field as text: a string as it is, anything else as its JSON (never "[object Object]"). */
function asText(v: unknown): string {
  return typeof v === "string" ? v : v === undefined || v === null ? "" : JSON.stringify(v);
}

/** Task texts from a file: JSONL or a JSON array of strings or {task|text|query} objects, or API-Bank samples. */
export function readTaskTexts(path: string, format: TaskFormat): string[] {
  const text = readFileSync(path, "utf8");
  const items: unknown[] = format === "jsonl" ? text.split("\n").filter((l) => l.trim()).map((l): unknown => JSON.parse(l)) : (JSON.parse(text) as unknown[]);
  return items
    .map((item) => {
      if (typeof item === "string") return item;
      const o = item as Record<string, unknown>;
      if (format === "api-bank") return apiBankRequest(asText(o.input));
      return asText(o.task ?? o.text ?? o.query);
    })
    .map((t) => t.trim())
    .filter(Boolean);
}

/** The user's request inside an API-Bank sample: after "User:", up to the API/time/AI markers. */
export function apiBankRequest(input: string): string {
  const at = input.lastIndexOf("User:");
  if (at < 0) return "";
  const rest = input.slice(at + 5);
  const cut = rest.search(/\nGenerate API Request: |\nAPI-Request: |TIME: |\nAI: /);
  return (cut >= 0 ? rest.slice(0, cut) : rest).trim();
}

const MULTIMODAL = /\b(image|images|photo|photos|picture|pictures|video|videos|audio|voice|song|songs|music|draw|drawing)\b/i;
const CURRENCY = /[$€£¥₹]|\b(usd|eur|gbp|jpy|dollars?|euros?|currency|exchange rate)\b/i;
const EMAIL = /[\w.+-]+@[\w-]+\.[\w.]+/;
const URL_RE = /\bhttps?:\/\/|\bwww\./i;

/** Why a task is not worth an LLM call (the original's filters), or null. */
export function prefilterReason(task: string): string | null {
  const letters = task.replace(/[^\p{L}]/gu, "");
  const latin = letters.replace(/[^A-Za-z]/g, "");
  if (letters.length === 0 || latin.length / letters.length < 0.9) return "not English";
  if (task.length < 15) return "too short to describe a system";
  if (MULTIMODAL.test(task)) return "multimodal";
  if (CURRENCY.test(task)) return "mentions currencies";
  if (EMAIL.test(task)) return "contains an e-mail address";
  if (URL_RE.test(task)) return "contains a URL";
  return null;
}

// The verdict and the env come first and the reason last, and the reason may be missing: Qwen2.5-Coder
// 0.5B stopped most replies at the end of a sentence inside a string (docs/local-model.md), so a
// reply that loses its tail (closed by closeJson) still carries what the stage needs.
// the lengths bound what the prompt asks for (2-5 words, 2-3 sentences, one sentence) with room to
// spare; under --json-mode schema a constrained decoder stops a string there instead of letting a
// small model repeat itself to the token cap
export const MineJudgement = z.object({ needs_env: z.boolean(), topic: z.string().min(1).max(80), description: z.string().min(1).max(600), reason: z.string().max(300).default("") });

/** Words in a row of the prompt's examples that make a sentence a copy of them ("a library s loans"). */
const COPIED_RUN_WORDS = 4;

const EXAMPLE_RUNS = shingles(MINE_EXAMPLES, COPIED_RUN_WORDS);

const copiesExamples = (sentence: string): boolean => [...shingles(sentence, COPIED_RUN_WORDS)].some((run) => EXAMPLE_RUNS.has(run));

/**
 * The description without its sentences that copy the mine prompt's examples of an environment
 * ("a clinic's appointments, a library's loans, an inventory"). Qwen2.5-Coder 0.5B copied them for
 * 4 of 10 API-Bank lines and the 1.5B for 2 (docs/local-model.md): such a sentence says nothing of
 * the task's own system, and two descriptions carrying it look alike enough to be merged into one
 * env (the 1.5B's stress-management and milk-allergy lines were). A re-ask does not help: the 1.5B
 * answered three re-asks of a line with the same reply byte for byte, so the sentence is dropped
 * and the rest kept.
 */
export function withoutCopiedExamples(description: string): string {
  // a sentence ends at . ! or ? before a capital ("e.g. a clinic's" goes on)
  const sentences = description.split(/(?<=[.!?])\s+(?=[A-Z])/);
  return sentences.filter((s) => !copiesExamples(s)).join(" ").trim();
}

/** Fewer words than this left after dropping the copied examples: nothing of the task's system was said. */
const MIN_OWN_WORDS = 5;

const checkJudgement = (j: z.infer<typeof MineJudgement>): string | null =>
  j.needs_env && words(withoutCopiedExamples(j.description)).length < MIN_OWN_WORDS
    ? "the description only repeats this prompt's examples of an environment; describe the system this task needs (its records and what users do with them)"
    : null;

export interface MinedEnv {
  topic: string;
  description: string;
  source_tasks: string[];
}

export interface Rejection {
  item: string;
  reason: string;
}

export interface MineResult {
  envs: MinedEnv[];
  rejected: Rejection[];
}

export interface MineOptions {
  /** Tasks this similar (word-shingle Jaccard) to an earlier one are duplicates. @default 0.8 */
  taskSimilarity?: number;
  /** Env descriptions this similar to a kept one are merged into it. @default 0.5 */
  envSimilarity?: number;
  limit?: number;
  onProgress?: (done: number, total: number) => void;
}

/**
 * Stage 1: from task texts to env descriptions. Cheap filters and near-duplicate removal first,
 * then one LLM judgement per remaining task, then near-duplicate env descriptions are merged.
 */
export async function mine(llm: LlmClient, tasks: string[], options: MineOptions = {}): Promise<MineResult> {
  const rejected: Rejection[] = [];
  const kept: { task: string; sh: Set<string> }[] = [];
  for (const task of tasks) {
    const why = prefilterReason(task);
    if (why) {
      rejected.push({ item: task, reason: why });
      continue;
    }
    const sh = shingles(task);
    const dup = kept.find((k) => jaccard(k.sh, sh) >= (options.taskSimilarity ?? 0.8));
    if (dup) {
      rejected.push({ item: task, reason: `near-duplicate of "${dup.task}"` });
      continue;
    }
    kept.push({ task, sh });
  }
  const todo = kept.slice(0, options.limit ?? kept.length);
  let done = 0;
  // the stage shows (0/n) while its first slow call runs, not only once an item has finished
  options.onProgress?.(0, todo.length);
  const judged = await Promise.all(
    todo.map(async ({ task }) => {
      try {
        return { task, j: await llm.askJson("mine", minePrompt(task), MineJudgement, checkJudgement) };
      } catch (e) {
        if (!(e instanceof LlmError)) throw e;
        rejected.push({ item: task, reason: e.message });
        return null;
      } finally {
        options.onProgress?.(++done, todo.length);
      }
    }),
  );
  const envs: (MinedEnv & { sh: Set<string> })[] = [];
  for (const r of judged) {
    if (!r) continue;
    if (!r.j.needs_env) {
      rejected.push({ item: r.task, reason: `no stateful env needed: ${r.j.reason || "(the model gave no reason)"}` });
      continue;
    }
    const description = withoutCopiedExamples(r.j.description);
    const sh = shingles(`${r.j.topic} ${description}`, 1);
    const same = envs.find((e) => jaccard(e.sh, sh) >= (options.envSimilarity ?? 0.5));
    if (same) same.source_tasks.push(r.task);
    else envs.push({ topic: r.j.topic, description, source_tasks: [r.task], sh });
  }
  return { envs: envs.map(({ sh: _, ...e }) => e), rejected };
}
