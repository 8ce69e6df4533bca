import { CHART_CSS, reportCharts } from "../bridge/tools/record/report-charts.js";
import { chartRunOf, runTitle } from "./report-page.js";
import type { RolloutResults } from "./summarize.js";

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const pct = (x: number | null | undefined) => (x === null || x === undefined ? "—" : `${(100 * x).toFixed(1)}%`);
const letter = (i: number) => String.fromCharCode(65 + i);

/** One run on the comparison page. */
export interface ComparedRun {
  /** How the page names it (the run folder as given on the command line). */
  label: string;
  results: RolloutResults;
  /** Its own report page, relative to the comparison page, when there is one. */
  report?: string;
}

const STYLE = `
body{font:14px/1.45 system-ui,sans-serif;margin:0;background:#f6f7f9;color:#1d2330}
header{background:#1d2330;color:#fff;padding:16px 24px}header h1{margin:0 0 4px;font-size:18px}header .meta{opacity:.8;font-size:12px}
main{max-width:1360px;margin:0 auto;padding:16px 24px}h2{font-size:16px;margin:24px 0 8px}
table{border-collapse:collapse;width:100%;background:#fff;font-size:13px}td,th{padding:5px 9px;border-bottom:1px solid #e5e7eb;text-align:left;vertical-align:top}
th{background:#eef0f3}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums}td.up{font-weight:600}td.down{font-weight:600;text-decoration:underline}
td.wrap{word-break:break-all;font-family:ui-monospace,monospace;font-size:12px}
@media print{body{background:#fff}header{background:#fff;color:#000;border-bottom:2px solid #000}main{max-width:none}}
${CHART_CSS}`;

/**
 * Runs side by side on one self-contained page (inline CSS and SVG, no scripts, nothing fetched):
 * headline figures with the change from run A, the charts with every run on them, mean reward and
 * success per env, and the settings that differ (a comparison is only as fair as its settings).
 */
export function comparePage(runs: ComparedRun[]): string {
  if (runs.length < 2) throw new Error("a comparison needs at least two runs");
  const A = runs[0]!.results;
  const delta = (v: number | null | undefined, a: number | null | undefined, i: number, asPct: boolean) => {
    if (i === 0 || v === null || v === undefined || a === null || a === undefined) return "";
    const d = v - a;
    const txt = asPct ? `${d >= 0 ? "+" : ""}${(100 * d).toFixed(1)} pt` : `${d >= 0 ? "+" : ""}${d.toFixed(3)}`;
    return ` <small>(${d === 0 ? "±0" : txt} vs A)</small>`;
  };
  const head = `<tr><th>metric</th>${runs.map((r, i) => `<th class="n">${letter(i)}: ${esc(r.label)}</th>`).join("")}</tr>`;
  const ks = [...new Set(runs.flatMap((r) => Object.keys(r.results.totals.pass_hat_k)))].sort((a, b) => Number(a) - Number(b));
  const metric = (name: string, get: (r: RolloutResults) => number | null | undefined, asPct: boolean) =>
    `<tr><td>${esc(name)}</td>${runs
      .map((r, i) => {
        const v = get(r.results);
        const d = v !== null && v !== undefined && i > 0 ? v - (get(A) ?? v) : 0;
        return `<td class="n${d > 0 ? " up" : d < 0 ? " down" : ""}">${v === null || v === undefined ? "—" : asPct ? pct(v) : v.toFixed(3)}${delta(v, get(A), i, asPct)}</td>`;
      })
      .join("")}</tr>`;
  const totals = [
    `<tr><td>episodes</td>${runs.map((r) => `<td class="n">${r.results.episodes.length}/${r.results.planned}</td>`).join("")}</tr>`,
    // cut short by the model endpoint or the bridge: not scores of the model (the run exits 3 and plays them again)
    `<tr><td>cut short by an endpoint or bridge error</td>${runs.map((r) => `<td class="n">${r.results.episodes.filter((e) => e.failures.some((f) => f === "endpoint_error" || f === "bridge_error")).length}</td>`).join("")}</tr>`,
    metric("mean reward", (r) => r.totals.mean_reward, false),
    metric("success rate", (r) => r.totals.success_rate, true),
    ...ks.map((k) => metric(`pass^${k}`, (r) => r.totals.pass_hat_k[k], true)),
    metric("steps / episode", (r) => r.totals.mean_steps, false),
  ].join("");
  const envs = [...new Set(runs.flatMap((r) => r.results.per_env.map((e) => e.env_id)))].sort();
  const envRows = envs
    .map((env) => {
      const cells = runs.map((r, i) => {
        const e = r.results.per_env.find((x) => x.env_id === env);
        const a = A.per_env.find((x) => x.env_id === env);
        return e ? `<td class="n">${e.mean_reward.toFixed(3)}${delta(e.mean_reward, a?.mean_reward, i, false)}</td><td class="n">${pct(e.success_rate)}</td><td class="n">${e.episodes}</td>` : `<td class="n">—</td><td class="n">—</td><td class="n">0</td>`;
      });
      return `<tr><td>${esc(env)}</td>${cells.join("")}</tr>`;
    })
    .join("");
  const envHead = `<tr><th rowspan="2">env</th>${runs.map((r, i) => `<th class="n" colspan="3">${letter(i)}: ${esc(r.label)}</th>`).join("")}</tr><tr>${runs.map(() => `<th class="n">mean reward</th><th class="n">success</th><th class="n">episodes</th>`).join("")}</tr>`;
  const settingRows = settingsDiff(runs.map((r) => r.results));
  const links = runs.map((r, i) => `<li>${letter(i)}: <strong>${esc(r.label)}</strong> — ${esc(runTitle(r.results))}${r.report ? ` · <a href="${esc(r.report)}">its report</a>` : ""}</li>`).join("");
  const title = `compare: ${runs.map((r, i) => `${letter(i)} ${r.label}`).join(" vs ")}`;
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>${esc(title)}</title><style>${STYLE}</style></head><body>
<header><h1>${esc(title)}</h1><div class="meta">${runs.length} runs · generated ${esc(new Date().toISOString())}</div></header>
<main>
<ul id="runs">${links}</ul>
<h2>Totals</h2><table id="totals"><thead>${head}</thead><tbody>${totals}</tbody></table>
<h2>Charts</h2>${reportCharts(runs.map((r) => chartRunOf(r.results, r.label)))}
<h2>Per env</h2><table id="per-env"><thead>${envHead}</thead><tbody>${envRows}</tbody></table>
<h2>Settings that differ</h2>${settingRows ? `<table id="settings-diff"><thead>${head.replace("metric", "setting")}</thead><tbody>${settingRows}</tbody></table>` : `<p id="settings-diff">none: the runs share every setting but the model's outputs.</p>`}
</main></body></html>
`;
}

function settingsDiff(rs: RolloutResults[]): string {
  const flat = (r: RolloutResults): Record<string, string> => {
    const s = r.settings;
    return {
      benchmark: s.benchmark ? `${s.benchmark.name} ${s.benchmark.split} (${s.benchmark.data_version})` : "none",
      "agent model": s.model,
      endpoint: s.base_url,
      "agent mode": s.agent_mode,
      sampling: JSON.stringify(s.sampling),
      "system prompt": s.system_prompt,
      "user simulator": s.user ? `${s.user.model ?? "(default)"} @ ${s.user.base_url ?? "(env)"}` : "none",
      trials: String(s.trials),
      "max steps": s.max_steps === null ? "the scenario's" : String(s.max_steps),
      "base seed": String(s.seed),
      scenarios: s.scenarios.join(", "),
    };
  };
  const all = rs.map(flat);
  return Object.keys(all[0]!)
    .filter((k) => new Set(all.map((x) => x[k])).size > 1)
    .map((k) => `<tr><td>${esc(k)}</td>${all.map((x) => `<td class="wrap">${esc(x[k]!)}</td>`).join("")}</tr>`)
    .join("");
}
