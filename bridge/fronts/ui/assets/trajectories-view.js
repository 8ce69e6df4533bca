// Trajectories: the recorded files under --trajectories, filtered by env, scenario, reward and how
// they ended; one episode step by step (the page `envscaler view` writes, framed, with the current
// step marked), replayed to find the first divergence, and the selection exported as SFT data.
import { api, badge, clear, errorBox, h, json } from "./dom.js";
import { diffList } from "./play-view.js";

export class TrajectoriesView {
  constructor(root, ctx) {
    this.ctx = ctx;
    this.all = [];
    this.selected = new Set();
    this.env = h("select#f-env", { "aria-label": "env" });
    this.scenario = h("input#f-scenario", { type: "search", placeholder: "scenario contains…", "aria-label": "scenario" });
    this.minReward = h("input#f-min-reward", { type: "number", step: "any", placeholder: "min reward", "aria-label": "minimum reward" });
    this.endReason = h("select#f-end", { "aria-label": "end reason" });
    const reload = () => void this.load();
    for (const el of [this.env, this.endReason]) el.addEventListener("change", reload);
    for (const el of [this.scenario, this.minReward]) el.addEventListener("input", () => { clearTimeout(this.t); this.t = setTimeout(reload, 200); });
    this.table = h("div#traj-table.table-wrap");
    // the charts of the filtered episodes, drawn by the server (the same as a rollout's report.html), framed on demand
    this.charts = h("details#traj-charts.charts-box", h("summary", "Charts of these episodes: reward, per env, pass^k, endings, steps"));
    this.charts.addEventListener("toggle", () => this.charts.open && this.showCharts());
    this.status = h("div#traj-status.muted");
    this.viewer = h("div#traj-viewer.viewer", h("p.muted", "Open an episode to step through it."));
    this.exportBtn = h("button#export-sft", { type: "button", onclick: () => void this.export() }, "Export selected as SFT (JSONL)");
    root.append(
      h("form.filterbar", { onsubmit: (ev) => ev.preventDefault() }, h("label", "Env ", this.env), h("label", "Scenario ", this.scenario), h("label", "Reward ≥ ", this.minReward), h("label", "Ended ", this.endReason), this.exportBtn),
      this.status,
      this.charts,
      h("div.traj-grid", this.table, this.viewer),
    );
    document.addEventListener("keydown", (ev) => {
      if (root.hidden || ev.target.matches?.("input, textarea, select") || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.key === "n" || ev.key === "ArrowRight") this.go(1);
      else if (ev.key === "p" || ev.key === "ArrowLeft") this.go(-1);
      else return;
      ev.preventDefault();
    });
  }

  async load() {
    const q = new URLSearchParams();
    if (this.env.value) q.set("env", this.env.value);
    if (this.scenario.value) q.set("scenario", this.scenario.value);
    if (this.minReward.value !== "") q.set("min_reward", this.minReward.value);
    if (this.endReason.value) q.set("end_reason", this.endReason.value);
    try {
      const r = await api(`/api/trajectories?${q}`);
      if (!this.all.length || !q.toString()) {
        this.all = r.episodes;
        fillSelect(this.env, "any env", [...new Set(r.episodes.map((e) => e.env_id))]);
        fillSelect(this.endReason, "any ending", [...new Set(r.episodes.map((e) => e.end_reason ?? e.how))]);
      }
      clear(this.status, `${r.episodes.length} episodes in `, h("code", r.root),
        r.skipped.length ? h("details.raw.skipped", h("summary", `${r.skipped.length} damaged lines skipped`), h("ul", r.skipped.map((k) => h("li", h("code", `${k.file}:${k.line}`), " ", k.reason)))) : null);
      this.query = q.toString();
      this.renderTable(r.episodes);
      if (this.charts.open) this.showCharts();
    } catch (e) {
      clear(this.status, errorBox(e));
    }
  }

  showCharts() {
    const src = `/trajectories/charts?${this.query ?? ""}`;
    const frame = this.charts.querySelector("iframe");
    if (frame?.getAttribute("src") === src) return;
    if (frame) frame.src = src;
    else this.charts.append(h("iframe#charts-frame", { title: "charts of the listed episodes", src }));
  }

  renderTable(eps) {
    if (!eps.length) return clear(this.table, h("p.muted", "No recorded episodes here. `npx envscaler serve` records every episode to trajectories/; point --trajectories at that folder."));
    const key = (e) => `${e.file}\n${e.episode_id}`;
    const all = h("input", { type: "checkbox", "aria-label": "select all", onchange: () => { for (const e of eps) all.checked ? this.selected.add(key(e)) : this.selected.delete(key(e)); this.renderTable(eps); } });
    all.checked = eps.every((e) => this.selected.has(key(e)));
    // fixed column widths: long ids and paths are cut with an ellipsis (the whole text on hover), so the table keeps to its pane
    const cut = (spec, text) => h(spec, { title: text }, text);
    clear(this.table, h("table.data.episodes",
      h("colgroup", ["c-box", "c-ep", "c-scen", "c-num", "c-num", "c-reward", "c-end", "c-file"].map((c) => h(`col.${c}`))),
      h("thead", h("tr", h("th", all), h("th", "episode"), h("th", { title: "scenario, and its env below" }, "scenario"), h("th.n", { title: "seed" }, "seed"), h("th.n", "steps"), h("th", "reward"), h("th", "ended"), h("th", "file"))),
      h("tbody", eps.map((e) => {
        const box = h("input", { type: "checkbox", "aria-label": `select ${e.episode_id}`, checked: this.selected.has(key(e)), onchange: () => (box.checked ? this.selected.add(key(e)) : this.selected.delete(key(e))) });
        return h("tr", { dataset: { episode: e.episode_id }, class: this.current?.start.episode_id === e.episode_id ? "active" : "" },
          h("td", box),
          h("td.cut", h("button.link", { type: "button", title: e.episode_id, onclick: () => void this.open(e.file, e.episode_id) }, e.episode_id)),
          h("td.cut", cut("code", e.scenario_id), cut("div.muted.small", e.env_id)), h("td.n", e.seed), h("td.n", e.steps),
          h("td", e.reward === null ? "—" : badge(String(e.reward), e.reward >= 1 ? "pass" : e.reward > 0 ? "warning" : "fail")),
          cut("td.cut", e.end_reason ?? e.how), cut("td.cut.small", e.file));
      }))));
  }

  async open(file, id) {
    try {
      this.current = await api(`/api/trajectories/episode?file=${encodeURIComponent(file)}&id=${encodeURIComponent(id)}`);
      this.file = file;
      this.pos = 0;
      for (const tr of this.table.querySelectorAll("tr[data-episode]")) tr.classList.toggle("active", tr.dataset.episode === id);
      this.ctx.setHash(`trajectories/${encodeURIComponent(file)}/${id}`);
      this.renderViewer();
    } catch (e) {
      clear(this.viewer, errorBox(e));
    }
  }

  renderViewer() {
    const e = this.current;
    const s = e.start;
    this.frame = h("iframe#episode-frame", { title: "episode page", src: `/trajectories/page?file=${encodeURIComponent(this.file)}&id=${encodeURIComponent(s.episode_id)}` });
    this.frame.addEventListener("load", () => this.mark());
    this.stepBox = h("div#step-detail.step-detail");
    this.replayBox = h("div#replay-result");
    clear(this.viewer,
      h("div.viewer-head", h("strong", s.env_id), " · ", h("code", s.scenario_id), " · seed ", s.seed, " · ", `${e.steps.length} steps`),
      h("div.stepper",
        h("button#prev-step", { type: "button", onclick: () => this.go(-1), title: "p or ←" }, "◀ Prev"),
        h("span#step-pos"),
        h("button#next-step", { type: "button", onclick: () => this.go(1), title: "n or →" }, "Next ▶"),
        h("button#replay", { type: "button", onclick: () => void this.replay() }, "Replay and verify")),
      this.replayBox,
      this.stepBox,
      this.frame,
    );
    this.go(0);
  }

  go(delta) {
    if (!this.current) return;
    const n = this.current.steps.length;
    this.pos = Math.max(0, Math.min(n, this.pos + delta));
    document.getElementById("step-pos").textContent = this.pos === 0 ? `reset (of ${n} steps)` : `step ${this.pos} of ${n}`;
    const s = this.pos === 0 ? null : this.current.steps[this.pos - 1];
    if (!s) clear(this.stepBox, h("h3", "Reset"), h("pre", this.current.start.observation.content), h("div.muted.small", "state ", h("code", this.current.start.state_hash.slice(0, 12))));
    else
      clear(this.stepBox,
        h("h3", `Step ${s.step}`, s.error ? badge(s.error.code, "fail") : null, s.end_reason ? badge(s.end_reason) : null),
        h("div.cols",
          h("div", h("h4", "action"), h("pre", typeof s.action === "string" ? s.action : json(s.action))),
          h("div", h("h4", "observation"), h("pre", s.observation.content.length > 4000 ? s.observation.content.slice(0, 4000) + "…" : s.observation.content))),
        h("h4", "state changes"), diffList(s.diff),
        h("div.muted.small", `state ${s.state_hash.slice(0, 12)} · ${s.ms} ms · reward ${s.reward}`));
    this.mark();
  }

  /** Marks the current step in the framed episode page and scrolls to it. */
  mark() {
    const doc = this.frame?.contentDocument;
    if (!doc?.body) return;
    // the page styles .ui-current itself: a <style> added from here runs under this page's CSP (style-src 'self') and is refused
    for (const el of doc.querySelectorAll(".ui-current")) el.classList.remove("ui-current");
    const els = this.pos === 0 ? [doc.querySelector(".msg")] : [...doc.querySelectorAll(`.msg[data-step="${this.pos}"]`)];
    for (const el of els) el?.classList.add("ui-current");
    // scroll the framed page only: scrollIntoView would scroll this page too
    if (els[0]) doc.defaultView.scrollTo({ top: Math.max(0, els[0].getBoundingClientRect().top + doc.defaultView.scrollY - 80) });
  }

  async replay() {
    clear(this.replayBox, h("p.muted", "Replaying in fresh sandboxes…"));
    try {
      const r = await api("/api/trajectories/replay", { file: this.file, episode_id: this.current.start.episode_id });
      const d = r.divergence;
      clear(this.replayBox,
        h("div", { class: `replay ${r.ok ? "ok" : "bad"}` },
          r.ok ? `✓ replayed exactly (${r.steps} steps)` : `✗ diverges at step ${d.step}: ${d.what}`,
          r.changed.length ? h("div.muted", "changed since recording: ", r.changed.join(", ")) : null,
          d ? h("div.cols", h("div", h("h4", "recorded"), h("pre", d.expected)), h("div", h("h4", "replayed"), h("pre", d.actual))) : null,
          d ? h("button", { type: "button", onclick: () => { this.pos = d.step; this.go(0); } }, `Go to step ${d.step}`) : null));
    } catch (e) {
      clear(this.replayBox, errorBox(e));
    }
  }

  async export() {
    const items = [...this.selected].map((k) => ({ file: k.split("\n")[0], episode_id: k.split("\n")[1] }));
    if (!items.length) return clear(this.status, "Select episodes to export first.");
    try {
      const r = await api("/api/trajectories/export", { items });
      const a = h("a#sft-download", { href: URL.createObjectURL(new Blob([r.jsonl], { type: "application/jsonl" })), download: "sft.jsonl" }, `download sft.jsonl (${r.count} episodes)`);
      clear(this.status, `${r.count} episodes exported`, r.left_out.length ? ` · left out (did not end): ${r.left_out.join(", ")}` : "", " · ", a);
      a.click();
    } catch (e) {
      clear(this.status, errorBox(e));
    }
  }
}

function fillSelect(sel, anyLabel, values) {
  const v = sel.value;
  clear(sel, h("option", { value: "" }, anyLabel), values.sort().map((x) => h("option", { value: x }, x)));
  sel.value = values.includes(v) ? v : "";
}
