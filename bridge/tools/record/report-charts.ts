import { passHatK } from "./pass-hat-k.js";

/** One episode as the charts see it (a rollout's row, or a recorded trajectory's summary). */
export interface ChartEpisode {
  env_id: string;
  scenario_id: string;
  reward: number | null;
  success: boolean;
  steps: number;
  /** end_reason, or what cut the episode short when it has none (endpoint_error, bridge_error, open, closed). */
  end: string;
}

/** One run on the charts: a rollout's results, or the trajectories a filter selected. */
export interface ChartRun {
  label: string;
  episodes: ChartEpisode[];
  /** k → pass^k; computed from the episodes (k = 1..most trials of a scenario) when not given. */
  passHatK?: Record<string, number | null>;
}

const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
const pct = (x: number) => `${Number((100 * x).toFixed(1))}%`;
const fmt = (x: number) => String(Number(x.toFixed(2)));
const mean = (xs: number[]) => (xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : 0);
const sd = (xs: number[]) => {
  const m = mean(xs);
  return xs.length > 1 ? Math.sqrt(xs.reduce((a, x) => a + (x - m) ** 2, 0) / (xs.length - 1)) : 0;
};

/** How an episode ended, in words, in a fixed order (the order the breakdown lists them). */
const END_LABEL: [string, string][] = [
  ["text_reply", "text reply"],
  ["terminating_tool", "terminating tool"],
  ["user_stop", "user stopped"],
  ["client", "finished by the client"],
  ["max_steps", "step cap"],
  ["turn_step_limit", "turn step cap"],
  ["env_fault", "env fault"],
  ["endpoint_error", "model endpoint error"],
  ["bridge_error", "bridge error"],
  ["closed", "closed before it ended"],
  ["open", "no end recorded"],
];
const endLabel = (k: string) => END_LABEL.find(([x]) => x === k)?.[1] ?? k.replace(/_/g, " ");

// Runs are told apart by fill pattern, line dash and marker shape, never by colour alone (print, colour blindness).
const INK = ["#1e293b", "#9a3412", "#1d4ed8", "#166534"];
const DASH = ["", "6 4", "2 3", "10 3 2 3"];
const SERIES = ["solid", "hatched", "dotted", "cross-hatched"];

/** The pattern defs of one chart; ids carry the chart's prefix (several charts share one page). */
function defs(p: string, n: number): string {
  const out: string[] = [];
  for (let i = 0; i < n; i++) {
    const c = INK[i % INK.length]!;
    const kind = i % 4;
    const body =
      kind === 0
        ? `<rect width="8" height="8" fill="${c}"/>`
        : kind === 1
          ? `<rect width="8" height="8" fill="#fff"/><path d="M-2 2l4-4M0 8l8-8M6 10l4-4" stroke="${c}" stroke-width="2"/>`
          : kind === 2
            ? `<rect width="8" height="8" fill="#fff"/><circle cx="2" cy="2" r="1.6" fill="${c}"/><circle cx="6" cy="6" r="1.6" fill="${c}"/>`
            : `<rect width="8" height="8" fill="#fff"/><path d="M0 0l8 8M8 0l-8 8" stroke="${c}" stroke-width="1.4"/>`;
    out.push(`<pattern id="${p}-s${i}" width="8" height="8" patternUnits="userSpaceOnUse">${body}</pattern>`);
  }
  return `<defs>${out.join("")}</defs>`;
}

function marker(i: number, x: number, y: number): string {
  const c = INK[i % INK.length]!;
  switch (i % 4) {
    case 0:
      return `<circle cx="${x}" cy="${y}" r="4.5" fill="${c}"/>`;
    case 1:
      return `<rect x="${x - 4.5}" y="${y - 4.5}" width="9" height="9" fill="#fff" stroke="${c}" stroke-width="2"/>`;
    case 2:
      return `<path d="M${x} ${y - 5.5}L${x + 5} ${y + 4}H${x - 5}Z" fill="${c}"/>`;
    default:
      return `<path d="M${x - 5} ${y}L${x} ${y - 5}L${x + 5} ${y}L${x} ${y + 5}Z" fill="#fff" stroke="${c}" stroke-width="2"/>`;
  }
}

const W = 640;
const FONT = `font-family="system-ui,sans-serif" font-size="12" fill="#1d2330"`;

function svg(id: string, h: number, title: string, body: string, n: number): string {
  return `<svg id="${id}" class="chart" viewBox="0 0 ${W} ${h}" width="${W}" height="${h}" role="img" aria-labelledby="${id}-t" ${FONT}><title id="${id}-t">${esc(title)}</title>${defs(id, n)}${body}</svg>`;
}

function legend(id: string, runs: ChartRun[], y: number, withLine = false): string {
  if (runs.length < 2 && !withLine) return "";
  let x = 60;
  return runs
    .map((r, i) => {
      const sw = withLine
        ? `<line x1="${x}" y1="${y}" x2="${x + 28}" y2="${y}" stroke="${INK[i % 4]}" stroke-width="2" stroke-dasharray="${DASH[i % 4]}"/>${marker(i, x + 14, y)}`
        : `<rect x="${x}" y="${y - 7}" width="22" height="12" fill="url(#${id}-s${i})" stroke="${INK[i % 4]}"/>`;
      const text = `${String.fromCharCode(65 + i)}: ${r.label} (${SERIES[i % 4]})`;
      const out = `${sw}<text x="${x + 34}" y="${y + 4}">${esc(text.length > 60 ? `${text.slice(0, 59)}…` : text)}</text>`;
      x += 40 + Math.min(60, text.length) * 6.6;
      return out;
    })
    .join("");
}

/** Vertical grouped bars: one group per bin, one bar per run; y is the share of that run's episodes. */
function binChart(id: string, title: string, xTitle: string, bins: string[], counts: number[][], runs: ChartRun[]): string {
  const h = 300;
  const left = 64;
  const top = runs.length > 1 ? 34 : 14;
  const plotH = h - top - 62;
  const plotW = W - left - 14;
  const shares = counts.map((c, r) => {
    const n = runs[r]!.episodes.length || 1;
    return c.map((x) => x / n);
  });
  const max = Math.max(0.05, ...shares.flat());
  // a top of 20 %, 40 %, … : quarter ticks at round numbers
  const yMax = Math.min(1, Math.ceil(max * 5) / 5);
  const gw = plotW / bins.length;
  // bars no wider than 56 px, a group centred in its bin
  const bw = Math.max(3, Math.min(56, (gw - 6) / runs.length));
  const parts: string[] = [];
  for (let t = 0; t <= 4; t++) {
    const v = (yMax * t) / 4;
    const y = top + plotH - (v / yMax) * plotH;
    parts.push(`<line x1="${left}" y1="${y}" x2="${left + plotW}" y2="${y}" stroke="#d1d5db" stroke-width="${t === 0 ? 1.5 : 0.6}"/><text x="${left - 6}" y="${y + 4}" text-anchor="end">${pct(v)}</text>`);
  }
  bins.forEach((b, i) => {
    const gx = left + i * gw + 3 + (gw - 6 - bw * runs.length) / 2;
    const mid = left + i * gw + gw / 2;
    runs.forEach((_, r) => {
      const v = shares[r]![i]!;
      const bh = (v / yMax) * plotH;
      const x = gx + r * bw;
      const y = top + plotH - bh;
      if (v > 0) parts.push(`<rect x="${x.toFixed(1)}" y="${y.toFixed(1)}" width="${(bw - 1).toFixed(1)}" height="${bh.toFixed(1)}" fill="url(#${id}-s${r})" stroke="${INK[r % 4]}"><title>${esc(`${runs[r]!.label}: ${counts[r]![i]} episodes (${pct(v)}) in ${b}`)}</title></rect>`);
      if (counts[r]![i]! > 0 && bw >= 12) parts.push(`<text x="${(x + bw / 2).toFixed(1)}" y="${(y - 3).toFixed(1)}" text-anchor="middle" font-size="10">${counts[r]![i]}</text>`);
    });
    if (bins.length <= 12 || i % Math.ceil(bins.length / 12) === 0) parts.push(`<text x="${mid.toFixed(1)}" y="${top + plotH + 15}" text-anchor="middle" font-size="10.5">${esc(b)}</text>`);
  });
  parts.push(`<text x="${left + plotW / 2}" y="${h - 26}" text-anchor="middle">${esc(xTitle)}</text>`);
  parts.push(`<text x="14" y="${top + plotH / 2}" transform="rotate(-90 14 ${top + plotH / 2})" text-anchor="middle">share of episodes</text>`);
  parts.push(`<text x="${left}" y="${h - 6}" font-size="10.5" fill="#4b5563">${esc(runs.map((r, i) => `${runs.length > 1 ? `${String.fromCharCode(65 + i)}: ` : ""}${r.episodes.length} episodes`).join(" · "))}; bar labels are episode counts</text>`);
  parts.push(legend(id, runs, 14));
  return svg(id, h, title, parts.join(""), runs.length);
}

function rewardHistogram(runs: ChartRun[]): string {
  const all = runs.flatMap((r) => r.episodes.map((e) => e.reward).filter((x): x is number => x !== null));
  const lo = Math.min(0, ...all);
  const hi = Math.max(1, ...all);
  const n = 10;
  const width = (hi - lo) / n;
  const bins = Array.from({ length: n }, (_, i) => `${fmt(lo + i * width)}–${fmt(lo + (i + 1) * width)}`);
  // the last bin holds its upper edge: a reward of exactly 1 is in 0.9–1
  const counts = runs.map((r) => {
    const c = new Array<number>(n).fill(0);
    for (const e of r.episodes) if (e.reward !== null) c[Math.min(n - 1, Math.floor((e.reward - lo) / width))]!++;
    return c;
  });
  return binChart("ch-reward", "Reward per episode (histogram)", "reward", bins, counts, runs);
}

function stepsHistogram(runs: ChartRun[]): string {
  const max = Math.max(1, ...runs.flatMap((r) => r.episodes.map((e) => e.steps)));
  const width = Math.max(1, Math.ceil((max + 1) / 20));
  const n = Math.floor(max / width) + 1;
  const bins = Array.from({ length: n }, (_, i) => (width === 1 ? String(i) : `${i * width}–${i * width + width - 1}`));
  const counts = runs.map((r) => {
    const c = new Array<number>(n).fill(0);
    for (const e of r.episodes) c[Math.floor(e.steps / width)]!++;
    return c;
  });
  return binChart("ch-steps", "Steps per episode (histogram)", "agent steps in the episode", bins, counts, runs);
}

/** Horizontal rows: per env and run, the mean reward (bar) with ± one standard deviation (whisker) and the success rate (text and tick). */
function perEnv(runs: ChartRun[]): string {
  const envs = [...new Set(runs.flatMap((r) => r.episodes.map((e) => e.env_id)))].sort();
  const left = 170;
  const plotW = 270;
  const rowH = 20;
  const top = runs.length > 1 ? 40 : 22;
  const rows = envs.length * runs.length;
  const h = top + rows * rowH + envs.length * 8 + 54;
  const x = (v: number) => left + Math.max(0, Math.min(1, v)) * plotW;
  const parts: string[] = [];
  for (const t of [0, 0.25, 0.5, 0.75, 1]) parts.push(`<line x1="${x(t)}" y1="${top - 4}" x2="${x(t)}" y2="${h - 48}" stroke="#d1d5db" stroke-width="${t === 0 ? 1.5 : 0.6}"/><text x="${x(t)}" y="${h - 34}" text-anchor="middle" font-size="10.5">${fmt(t)}</text>`);
  parts.push(`<text x="${left + plotW + 10}" y="${top - 8}" font-size="10.5" fill="#4b5563">mean ± sd · success · n</text>`);
  let y = top;
  for (const env of envs) {
    parts.push(`<g><title>${esc(env)}</title><text x="${left - 8}" y="${y + 14}" text-anchor="end">${esc(env.length > 24 ? `${env.slice(0, 23)}…` : env)}</text></g>`);
    runs.forEach((r, i) => {
      // an episode with no reward (a recording that never ended) is in the success rate as a failure, not in the mean
      const eps = r.episodes.filter((e) => e.env_id === env);
      const rewards = eps.map((e) => e.reward).filter((x): x is number => x !== null);
      if (eps.length) {
        const m = mean(rewards);
        const s = sd(rewards);
        const succ = mean(eps.map((e) => (e.success ? 1 : 0)));
        const cy = y + rowH / 2;
        parts.push(`<rect x="${left}" y="${y + 3}" width="${(x(m) - left).toFixed(1)}" height="${rowH - 6}" fill="url(#ch-env-s${i})" stroke="${INK[i % 4]}"><title>${esc(`${r.label} · ${env}: mean reward ${m.toFixed(3)} ± ${s.toFixed(3)}, success ${pct(succ)} of ${eps.length}`)}</title></rect>`);
        if (s > 0) parts.push(`<path d="M${x(m - s).toFixed(1)} ${cy}H${x(m + s).toFixed(1)}M${x(m - s).toFixed(1)} ${cy - 5}v10M${x(m + s).toFixed(1)} ${cy - 5}v10" stroke="#111827" stroke-width="1.4" fill="none"/>`);
        // success rate: a tall tick on the same scale
        // (a white halo keeps it visible on a dark bar)
        parts.push(`<path d="M${x(succ).toFixed(1)} ${y}v${rowH}" stroke="#fff" stroke-width="6"/><path d="M${x(succ).toFixed(1)} ${y + 1}v${rowH - 2}" stroke="#111827" stroke-width="3"/>`);
        parts.push(`<text x="${left + plotW + 10}" y="${y + 14}" font-size="11.5">${runs.length > 1 ? `${String.fromCharCode(65 + i)}  ` : ""}${m.toFixed(2)} ± ${s.toFixed(2)} · ${pct(succ)} · ${eps.length}</text>`);
      } else parts.push(`<text x="${left + 4}" y="${y + 14}" font-size="11" fill="#4b5563">${runs.length > 1 ? `${String.fromCharCode(65 + i)}: ` : ""}no episodes</text>`);
      y += rowH;
    });
    y += 8;
  }
  parts.push(`<text x="20" y="${h - 18}" font-size="10.5" fill="#4b5563">bar: mean reward · whisker: ± 1 standard deviation of the reward</text>`);
  parts.push(`<text x="20" y="${h - 5}" font-size="10.5" fill="#4b5563">thick tick: success rate (same 0–1 scale) · n: episodes</text>`);
  parts.push(legend("ch-env", runs, 16));
  return svg("ch-env", h, "Mean reward per env, with spread and success rate", parts.join(""), runs.length);
}

function passK(run: ChartRun): Record<string, number | null> {
  if (run.passHatK) return run.passHatK;
  const by = new Map<string, { n: number; c: number }>();
  for (const e of run.episodes) {
    const t = by.get(e.scenario_id) ?? { n: 0, c: 0 };
    t.n++;
    if (e.success) t.c++;
    by.set(e.scenario_id, t);
  }
  const most = Math.min(16, Math.max(0, ...[...by.values()].map((t) => t.n)));
  const out: Record<string, number | null> = {};
  for (let k = 1; k <= most; k++) out[k] = passHatK([...by.values()], k);
  return out;
}

function passHatKChart(runs: ChartRun[]): string {
  const series = runs.map(passK);
  const K = Math.max(1, ...series.map((s) => Object.keys(s).length));
  const h = 300;
  const left = 64;
  const top = runs.length > 1 ? 34 : 20;
  const plotW = W - left - 40;
  const plotH = h - top - 62;
  const x = (k: number) => left + (K === 1 ? plotW / 2 : ((k - 1) / (K - 1)) * plotW);
  const y = (v: number) => top + plotH - v * plotH;
  const parts: string[] = [];
  for (const t of [0, 0.25, 0.5, 0.75, 1]) parts.push(`<line x1="${left}" y1="${y(t)}" x2="${left + plotW}" y2="${y(t)}" stroke="#d1d5db" stroke-width="${t === 0 ? 1.5 : 0.6}"/><text x="${left - 6}" y="${y(t) + 4}" text-anchor="end">${pct(t)}</text>`);
  for (let k = 1; k <= K; k++) parts.push(`<text x="${x(k)}" y="${top + plotH + 15}" text-anchor="middle" font-size="10.5">${k}</text>`);
  // where two runs reach the same value at a k, their labels would sit on top of each other: that k gets one label naming both
  const same = (k: string) => series.length === 2 && series[0]![k] != null && series[1]![k] != null && Math.abs(series[0]![k] - series[1]![k]) < 0.005;
  series.forEach((s, i) => {
    const pts = Object.entries(s).filter((e): e is [string, number] => e[1] !== null).map(([k, v]) => [x(Number(k)), y(v), v, k] as const);
    if (pts.length > 1) parts.push(`<polyline points="${pts.map(([a, b]) => `${a.toFixed(1)},${b.toFixed(1)}`).join(" ")}" fill="none" stroke="${INK[i % 4]}" stroke-width="2" stroke-dasharray="${DASH[i % 4]}"/>`);
    for (const [a, b, v, k] of pts) {
      parts.push(marker(i, a, b));
      // labels above for the first run, below for the second, so two runs' labels do not overlap
      // (kept inside the plot: a label below a point at 0% would sit on the k axis, so the second run's goes to its right there)
      if (pts.length <= 10 && i === 0) parts.push(`<text x="${a.toFixed(1)}" y="${(v > 0.95 ? b + 17 : b - 9).toFixed(1)}" text-anchor="middle" font-size="10.5">${same(k) ? `A, B: ${pct(v)}` : pct(v)}</text>`);
      else if (pts.length <= 10 && i === 1 && !same(k)) parts.push(v > 0.08 ? `<text x="${a.toFixed(1)}" y="${(b + 17).toFixed(1)}" text-anchor="middle" font-size="10.5">${pct(v)}</text>` : `<text x="${(a + 8).toFixed(1)}" y="${(b - 3).toFixed(1)}" font-size="10.5">${pct(v)}</text>`);
    }
  });
  parts.push(`<text x="${left + plotW / 2}" y="${h - 26}" text-anchor="middle">k (all of k trials of a scenario succeed)</text>`);
  parts.push(`<text x="14" y="${top + plotH / 2}" transform="rotate(-90 14 ${top + plotH / 2})" text-anchor="middle">pass^k</text>`);
  if (K === 1) parts.push(`<text x="${left + plotW / 2}" y="${h - 6}" text-anchor="middle" font-size="10.5" fill="#4b5563">one trial per scenario: only pass^1; run with --trials N for the curve</text>`);
  parts.push(legend("ch-passk", runs, 14, runs.length > 1));
  return svg("ch-passk", h, "pass^k for k = 1..trials", parts.join(""), runs.length);
}

/** Horizontal grouped bars: for each way an episode ended, each run's share of its episodes. */
function endReasons(runs: ChartRun[]): string {
  const seen = new Set(runs.flatMap((r) => r.episodes.map((e) => e.end)));
  const order = [...END_LABEL.map(([k]) => k).filter((k) => seen.has(k)), ...[...seen].filter((k) => !END_LABEL.some(([x]) => x === k)).sort()];
  const left = 170;
  const plotW = 300;
  const rowH = 18;
  const top = runs.length > 1 ? 40 : 22;
  const h = top + order.length * (rowH * runs.length + 8) + 30;
  const parts: string[] = [];
  for (const t of [0, 0.5, 1]) parts.push(`<line x1="${left + t * plotW}" y1="${top - 4}" x2="${left + t * plotW}" y2="${h - 26}" stroke="#d1d5db" stroke-width="${t === 0 ? 1.5 : 0.6}"/><text x="${left + t * plotW}" y="${h - 12}" text-anchor="middle" font-size="10.5">${pct(t)}</text>`);
  let y = top;
  for (const k of order) {
    parts.push(`<text x="${left - 8}" y="${y + 13}" text-anchor="end">${esc(endLabel(k))}</text>`);
    runs.forEach((r, i) => {
      const c = r.episodes.filter((e) => e.end === k).length;
      const share = r.episodes.length ? c / r.episodes.length : 0;
      if (c) parts.push(`<rect x="${left}" y="${y + 2}" width="${(share * plotW).toFixed(1)}" height="${rowH - 4}" fill="url(#ch-end-s${i})" stroke="${INK[i % 4]}"><title>${esc(`${r.label}: ${c} episodes (${pct(share)}): ${endLabel(k)}`)}</title></rect>`);
      parts.push(`<text x="${left + share * plotW + 6}" y="${y + 13}" font-size="11.5">${runs.length > 1 ? `${String.fromCharCode(65 + i)}: ` : ""}${c} (${pct(share)})</text>`);
      y += rowH;
    });
    y += 8;
  }
  parts.push(legend("ch-end", runs, 16));
  return svg("ch-end", h, "How episodes ended", parts.join(""), runs.length);
}

/**
 * The charts of one run, or of runs side by side (A, B, … told apart by pattern, dash and marker,
 * not colour): reward histogram, mean reward per env with spread and success rate, pass^k against
 * k, how episodes ended, steps per episode. Inline SVG with presentation attributes only (no style
 * attributes: the playground's CSP forbids inline styles), 640 px wide, scaled down by CSS.
 */
export function reportCharts(runs: ChartRun[]): string {
  const fig = (id: string, caption: string, body: string) => `<figure class="fig" id="${id}">${body}<figcaption>${esc(caption)}</figcaption></figure>`;
  return `<div class="charts">${[
    fig("fig-reward", "Reward per episode", rewardHistogram(runs)),
    fig("fig-passk", "pass^k against k", passHatKChart(runs)),
    fig("fig-env", "Per env: mean reward, spread, success rate", perEnv(runs)),
    fig("fig-end", "How episodes ended", endReasons(runs)),
    fig("fig-steps", "Steps per episode", stepsHistogram(runs)),
  ].join("")}</div>`;
}

/** CSS for the charts: two columns at 1400 px; one on narrow screens and in print (at full size, so the 12 px text stays legible on paper). */
export const CHART_CSS = `.charts{display:grid;grid-template-columns:repeat(2,minmax(0,1fr));gap:14px;align-items:start}
.fig{margin:0;background:#fff;border-radius:8px;padding:8px 10px;box-shadow:0 1px 2px #0001;break-inside:avoid}
.fig svg{width:100%;height:auto;display:block}.fig figcaption{font-size:12px;color:#4b5563;margin-top:2px}
@media (max-width:900px){.charts{grid-template-columns:1fr}}
@media print{.charts{grid-template-columns:1fr;gap:8px}.fig{box-shadow:none;border:1px solid #ccc}.fig svg{max-width:640px}}`;
