import type { RecordedEpisode } from "./trajectory-reader.js";
import { episodeReward } from "./sft-export.js";

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");

/** Pretty JSON when the text is JSON (tool results usually are), else the text itself. */
function pretty(text: string): string {
  try {
    return JSON.stringify(JSON.parse(text), null, 2);
  } catch {
    return text;
  }
}

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0 0 4px;font-size:18px}
header .meta{opacity:.8;font-size:12px}main{max-width:980px;margin:0 auto;padding:16px 24px}
.msg{background:#fff;border-radius:8px;padding:10px 14px;margin:10px 0;box-shadow:0 1px 2px #0001;border-left:4px solid #999}
.msg .who{font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:#667;margin-bottom:4px}
.user{border-color:#3b82f6}.end{border-color:#6b7280;border-left-style:dashed;font-size:12.5px;color:#4b5563}.assistant{border-color:#10b981}.tool{border-color:#f59e0b}.error{border-color:#ef4444}
pre{white-space:pre-wrap;word-break:break-word;margin:4px 0;font:12px/1.4 ui-monospace,monospace;background:#f3f4f6;padding:6px 8px;border-radius:4px}
.diff{font:12px ui-monospace,monospace;margin:4px 0 0 0;padding:0;list-style:none}.diff li{padding:1px 0}
.op-add{color:#047857}.op-remove{color:#b91c1c}.op-replace{color:#92400e}
table{border-collapse:collapse;width:100%;background:#fff}td,th{padding:6px 10px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top}
.ui-current{outline:3px solid #6366f1;outline-offset:2px}
.pass{color:#047857;font-weight:600}.fail{color:#b91c1c;font-weight:600}.reward{font-size:22px;font-weight:700}`;

function diffList(diff: { op: string; path: string; value?: unknown; old?: unknown }[]): string {
  if (!diff.length) return "";
  const item = (d: (typeof diff)[number]) =>
    `<li class="op-${esc(d.op)}">${esc(d.op)} ${esc(d.path)}${d.old !== undefined ? ` <s>${esc(JSON.stringify(d.old).slice(0, 200))}</s>` : ""}${d.value !== undefined ? ` → ${esc(JSON.stringify(d.value).slice(0, 300))}` : ""}</li>`;
  return `<div class="who">state changes</div><ul class="diff">${diff.map(item).join("")}</ul>`;
}

/** The observation a task episode ends with after a text reply (episode.ts): no user wrote it. */
export const TASK_END_NOTE = "Task finished";
const isEndNote = (step: { end_reason?: string | null; observation: { role: string; content: string } }) => step.end_reason === "text_reply" && step.observation.content === TASK_END_NOTE;

/**
 * One episode as a single self-contained HTML page (inline CSS, no scripts, nothing fetched):
 * the conversation, each tool call with its result and state changes, the checks and the reward.
 */
export function episodePage(e: RecordedEpisode): string {
  const s = e.start;
  const parts: string[] = [];
  parts.push(`<div class="msg user"><div class="who">${s.observation.role === "user" ? "task / user" : esc(s.observation.role)}</div><pre>${esc(s.observation.content)}</pre></div>`);
  for (const step of e.steps) {
    const action = typeof step.action === "string" ? step.action : JSON.stringify(step.action, null, 2);
    if (step.tool_calls.length) {
      for (const c of step.tool_calls) {
        const res = step.observation.tool_results?.find((r) => r.tool_call_id === c.id);
        parts.push(
          `<div class="msg ${res && !res.ok ? "error" : "tool"}" data-step="${step.step}"><div class="who">step ${step.step} · tool call</div><pre>${esc(c.name)}(${esc(JSON.stringify(c.arguments))})</pre>` +
            `<div class="who">result</div><pre>${esc(pretty(res?.content ?? step.observation.content))}</pre></div>`,
        );
      }
      const d = diffList(step.diff);
      if (d) parts.push(`<div class="msg tool">${d}</div>`);
    } else {
      parts.push(`<div class="msg assistant" data-step="${step.step}"><div class="who">step ${step.step} · agent</div><pre>${esc(action)}</pre></div>`);
      // a task episode's text reply ends it: the "Task finished" observation is the env's note, not a user's turn
      if (isEndNote(step)) parts.push(`<div class="msg end" data-end="${esc(step.end_reason ?? "")}"><div class="who">episode ended</div>the agent's text reply ended the task</div>`);
      else parts.push(`<div class="msg ${step.error ? "error" : "user"}"><div class="who">${esc(step.observation.role)}</div><pre>${esc(step.observation.content)}</pre></div>`);
    }
  }
  const last = e.end?.how === "finish" ? e.end.result : e.steps.at(-1);
  const checks = last?.reward_info?.checks ?? [];
  const reward = episodeReward(e);
  const checkRows = checks
    .map((c) => `<tr><td class="${c.passed ? "pass" : "fail"}">${c.passed ? "✓ pass" : "✗ fail"}</td><td>${esc(c.description)}</td><td>${esc(c.error ?? "")}</td></tr>`)
    .join("");
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(s.scenario_id)} · ${esc(s.episode_id)}</title><style>${STYLE}</style></head><body>
<header><h1>${esc(s.env_id)} · ${esc(s.scenario_id)}</h1><div class="meta">episode ${esc(s.episode_id)} · seed ${s.seed} · ${e.steps.length} steps · ${esc(s.time)} · env ${esc(s.env_hash.slice(0, 12))}</div></header>
<main><section id="conversation">${parts.join("\n")}</section>
<section id="result"><h2>Result</h2><p class="reward" id="reward">reward ${reward === null ? "— (episode did not end)" : reward}${last?.end_reason ? ` <small>(${esc(last.end_reason)})</small>` : ""}</p>
<table id="checks"><thead><tr><th>check</th><th>description</th><th>error</th></tr></thead><tbody>${checkRows}</tbody></table></section></main></body></html>
`;
}
