import { CHART_CSS, reportCharts, type ChartRun } from "../bridge/tools/record/report-charts.js";
import type { RolloutResults } from "./summarize.js";

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const pct = (x: number | null | undefined) => (x === null || x === undefined ? "—" : `${(100 * x).toFixed(1)}%`);
const num = (x: number, d = 2) => (Number.isInteger(x) ? String(x) : x.toFixed(d));
const anchor = (key: string) => `ep-${key.replace(/[^A-Za-z0-9_-]/g, "_")}`;

const FAILURE_LABEL: Record<string, string> = {
  unparseable_output: "unparseable model output",
  invalid_tool_call: "invalid tool call (unknown tool, bad arguments)",
  env_fault: "env fault (timeout, memory, crash)",
  max_steps: "max steps reached",
  user_simulator_failed: "user simulator failure",
  endpoint_error: "model endpoint error",
  bridge_error: "bridge error",
};

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0 0 4px;font-size:18px}header .meta{opacity:.8;font-size:12px}
main{max-width:1360px;margin:0 auto;padding:16px 24px}h2{font-size:16px;margin:24px 0 8px}
.cards{display:flex;flex-wrap:wrap;gap:12px}.card{background:#fff;border-radius:8px;padding:10px 16px;box-shadow:0 1px 2px #0001;min-width:130px}
.card .v{font-size:22px;font-weight:700}.card .l{font-size:11px;text-transform:uppercase;letter-spacing:.05em;color:#667}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}td,th{padding:5px 9px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top}
th{background:#eef0f3}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}.ok{color:#047857;font-weight:600}.bad{color:#b91c1c;font-weight:600}
.tag{display:inline-block;background:#fee2e2;color:#991b1b;border-radius:4px;padding:0 5px;margin:0 2px;font-size:11px}
dl.settings{display:grid;grid-template-columns:max-content auto;gap:2px 14px;background:#fff;padding:10px 16px;border-radius:8px;font-size:13px}
dl.settings dt{color:#667}dl.settings dd{margin:0;font-family:ui-monospace,monospace;word-break:break-all}
tr:target{background:#fef9c3}
@media print{body{background:#fff}header{background:#fff;color:#000;border-bottom:2px solid #000}main{max-width:none}}
${CHART_CSS}`;

/** A run's episodes as the charts see them; an episode with no end reason is named by what cut it short. */
export function chartRunOf(r: RolloutResults, label: string): ChartRun {
  return {
    label,
    passHatK: r.totals.pass_hat_k,
    episodes: r.episodes.map((e) => {
      // an episode the model endpoint or the bridge cut short is shown as that, never as a score:
      // the rollout finished it (end_reason "client") only to close it, and will play it again
      const cut = e.failures.find((f) => f === "endpoint_error" || f === "bridge_error");
      return { env_id: e.env_id, scenario_id: e.scenario_id, reward: cut ? null : e.reward, success: e.success, steps: e.steps, end: cut ?? e.end_reason ?? "open" };
    }),
  };
}

/** What a run is called on a page: its model, and the benchmark when it is an eval. */
export const runTitle = (r: RolloutResults) => (r.settings.benchmark ? `eval ${r.settings.benchmark.name} · ${r.settings.model}` : `rollout · ${r.settings.model}`);

/**
 * The run as one self-contained HTML page (inline CSS, no scripts, nothing fetched): headline
 * numbers, pass^k, per-env and per-scenario tables, failures by kind linked to the episodes, and
 * each episode linked to its own page when the trajectory was at hand.
 */
/** A benchmark's official accuracy per category (`eval bfcl|acebench`), with its further figures (ACEBench's process accuracy). */
export type CategoryAccuracy = Record<string, { episodes: number; passed: number; accuracy: number; [metric: string]: number }>;

export function reportPage(r: RolloutResults, categories?: CategoryAccuracy): string {
  const s = r.settings;
  const t = r.totals;
  const ks = Object.keys(t.pass_hat_k);
  const title = runTitle(r);
  const card = (id: string, label: string, value: string) => `<div class="card" id="${id}"><div class="v">${esc(value)}</div><div class="l">${esc(label)}</div></div>`;
  const settings: [string, string][] = [
    ...(s.benchmark ? ([["benchmark", `${s.benchmark.name} (${s.benchmark.split}; ${s.benchmark.protocol})`], ["data version", s.benchmark.data_version]] as [string, string][]) : []),
    ...(s.benchmark?.not_comparable ?? []).map((w): [string, string] => ["NOT COMPARABLE", w]),
    ["agent model", s.model],
    ["endpoint", s.base_url],
    ["agent mode", s.agent_mode],
    ["sampling", JSON.stringify(s.sampling)],
    ["system prompt", s.system_prompt],
    ["user simulator", s.user ? `${s.user.model ?? "(default)"} @ ${s.user.base_url ?? "(env)"}${s.user.temperature !== undefined ? ` · temperature ${s.user.temperature}` : ""}` : "none"],
    ["trials per scenario", String(s.trials)],
    ["max steps", s.max_steps === null ? "the scenario's" : String(s.max_steps)],
    ["base seed", String(s.seed)],
    ["scenarios", `${r.per_scenario.length} (${s.scenarios.join(", ")})`],
    ["run", `${r.started} → ${r.finished} · ${r.episodes.length}/${r.planned} episodes`],
  ];
  const metrics = [...new Set(Object.values(categories ?? {}).flatMap((c) => Object.keys(c).filter((k) => !["episodes", "passed", "accuracy"].includes(k))))];
  const catRows = Object.entries(categories ?? {})
    .map(([c, v]) => `<tr><td>${esc(c)}</td><td class="n">${v.passed}/${v.episodes}</td><td class="n">${num(v.accuracy, 3)}</td>${metrics.map((m) => `<td class="n">${v[m] === undefined ? "—" : num(v[m], 3)}</td>`).join("")}</tr>`)
    .join("");
  const catTable = categories
    ? `<h2>Accuracy per category</h2><table id="per-category"><thead><tr><th>category</th><th class="n">passed</th><th class="n">accuracy</th>${metrics.map((m) => `<th class="n">${esc(m.replace(/_/g, " "))}</th>`).join("")}</tr></thead><tbody>${catRows}</tbody></table>\n`
    : "";
  const passCols = ks.map((k) => `<th class="n">pass^${k}</th>`).join("");
  const envRows = r.per_env
    .map((e) => `<tr><td>${esc(e.env_id)}</td><td class="n">${e.episodes}</td><td class="n">${num(e.mean_reward, 3)}</td><td class="n">${pct(e.success_rate)}</td>${ks.map((k) => `<td class="n">${pct(e.pass_hat_k[k])}</td>`).join("")}</tr>`)
    .join("");
  const scenRows = r.per_scenario
    .map((x) => `<tr><td>${esc(x.scenario_id)}</td><td>${esc(x.env_id)}</td><td class="n">${x.successes}/${x.trials}</td><td class="n">${num(x.mean_reward, 3)}</td><td class="n">${num(x.mean_steps, 1)}</td><td class="n">${Math.round(x.mean_tokens)}</td></tr>`)
    .join("");
  const failRows = Object.entries(r.failures)
    .map(([k, f]) => `<tr data-kind="${k}"><td>${esc(FAILURE_LABEL[k] ?? k)}</td><td class="n">${f.episodes}</td><td class="n">${f.occurrences}</td><td>${f.keys.map((key) => `<a href="#${anchor(key)}">${esc(key)}</a>`).join(" ")}</td></tr>`)
    .join("");
  const epRows = r.episodes
    .map(
      (e) =>
        `<tr id="${anchor(e.key)}"><td>${e.page ? `<a href="${esc(e.page)}">${esc(e.key)}</a>` : esc(e.key)}</td><td class="n">${e.seed}</td><td class="n ${e.success ? "ok" : "bad"}">${num(e.reward, 3)}</td><td>${esc(e.end_reason ?? "—")}</td><td class="n">${e.steps}</td><td class="n">${e.prompt_tokens}+${e.completion_tokens}</td><td class="n">${(e.model_ms / 1000).toFixed(1)}</td><td>${e.failures.map((f) => `<span class="tag">${esc(f)}</span>`).join("")}</td></tr>`,
    )
    .join("");
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title><style>${STYLE}</style></head><body>
<header><h1>${esc(title)}</h1><div class="meta">${esc(s.agent_mode)} mode · ${r.episodes.length} episodes · ${esc(r.finished)}</div></header>
<main>
<section class="cards" id="totals">${card("mean-reward", "mean reward", num(t.mean_reward, 3))}${card("success-rate", "success rate", pct(t.success_rate))}${ks.map((k) => card(`pass-${k}`, `pass^${k}`, pct(t.pass_hat_k[k]))).join("")}${card("steps", "steps / episode", num(t.mean_steps, 1))}${card("tokens", "tokens / episode", `${Math.round(t.mean_prompt_tokens)}+${Math.round(t.mean_completion_tokens)}`)}${card("tps", "completion tokens per second of model time (prompt processing included)", num(t.completion_tokens_per_s, 1))}${card("retries", "model call retries", String(t.model_retries))}</section>
<h2>Charts</h2>${reportCharts([chartRunOf(r, s.model)])}
<h2>Settings</h2><dl class="settings" id="settings">${settings.map(([k, v]) => `<dt>${esc(k)}</dt><dd>${esc(v)}</dd>`).join("")}</dl>
${catTable}<h2>Per env</h2><table id="per-env"><thead><tr><th>env</th><th class="n">episodes</th><th class="n">mean reward</th><th class="n">success</th>${passCols}</tr></thead><tbody>${envRows}</tbody></table>
<h2>Failures by kind</h2><table id="failures"><thead><tr><th>kind</th><th class="n">episodes</th><th class="n">occurrences</th><th>episodes affected</th></tr></thead><tbody>${failRows}</tbody></table>
<h2>Per scenario</h2><table id="per-scenario"><thead><tr><th>scenario</th><th>env</th><th class="n">successes</th><th class="n">mean reward</th><th class="n">steps</th><th class="n">tokens</th></tr></thead><tbody>${scenRows}</tbody></table>
<h2>Episodes</h2><table id="episodes"><thead><tr><th>episode</th><th class="n">seed</th><th class="n">reward</th><th>end</th><th class="n">steps</th><th class="n">tokens (prompt+completion)</th><th class="n">model s</th><th>failures</th></tr></thead><tbody>${epRows}</tbody></table>
</main></body></html>
`;
}
