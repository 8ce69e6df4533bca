// Envs: every env with its introduction, rules, tools, state schema, scenarios and provenance, with
// search; the synth run's evidence (dual-agent test cases, rejections) when the env came from one.
import { api, badge, clear, errorBox, h, json, provenanceBadge } from "./dom.js";
import { rawSchema, schemaTable } from "./schema-view.js";

export class EnvsView {
  constructor(root, ctx) {
    this.ctx = ctx;
    this.search = h("input#env-search", { type: "search", placeholder: "Search envs, tools, tasks…  ( / )", "aria-label": "search envs", autocomplete: "off" });
    this.list = h("ul#env-list.navlist", { role: "list" });
    this.detail = h("article#env-detail.detail", h("p.muted", "Pick an env on the left."));
    let timer;
    this.search.addEventListener("input", () => {
      clearTimeout(timer);
      timer = setTimeout(() => this.load(), 150);
    });
    this.search.addEventListener("keydown", (ev) => {
      if (ev.key === "ArrowDown" || ev.key === "Enter") {
        ev.preventDefault();
        this.list.querySelector("button")?.focus();
        if (ev.key === "Enter") this.list.querySelector("button")?.click();
      }
    });
    this.list.addEventListener("keydown", (ev) => moveFocus(ev, this.list, this.search));
    root.append(h("aside.sidebar", this.search, h("div.count#env-count"), this.list), this.detail);
  }

  async load() {
    try {
      const { envs } = await api(`/api/envs?q=${encodeURIComponent(this.search.value)}`);
      document.getElementById("env-count").textContent = `${envs.length} env${envs.length === 1 ? "" : "s"}`;
      clear(
        this.list,
        envs.map((e) =>
          h("li", h("button.navitem", { type: "button", dataset: { env: e.id }, onclick: () => this.open(e.id) },
            h("span.nav-title", e.name), h("span.nav-sub", e.id, " · ", `${e.tools.length} tools · ${e.scenarios.length} scenarios`), provenanceBadge(e.provenance))),
        ),
      );
      if (!envs.length) this.list.append(h("li.muted", "No env matches."));
    } catch (e) {
      clear(this.list, errorBox(e));
    }
  }

  async open(id) {
    for (const b of this.list.querySelectorAll("button")) b.classList.toggle("active", b.dataset.env === id);
    try {
      const env = await api(`/api/env?id=${encodeURIComponent(id)}`);
      this.render(env);
      this.ctx.setHash(`envs/${id}`);
    } catch (e) {
      clear(this.detail, errorBox(e));
    }
  }

  render(env) {
    const sec = (id, title, ...body) => h(`section.block#${id}`, h("h2", title), ...body);
    const toc = h("nav.toc", ["introduction", "rules", "tools", "state", "scenarios", "provenance"].map((s) => h("a", { href: `#sec-${s}`, onclick: (ev) => { ev.preventDefault(); document.getElementById(`sec-${s}`)?.scrollIntoView(); } }, s)));
    clear(
      this.detail,
      h("header.detail-head", h("h1", env.name), h("div.meta", h("code", env.id), " ", provenanceBadge(env.provenance), " ", badge(`${env.tools.length} tools`), " ", badge(`${env.scenarios.length} scenarios`), " ", badge(`max ${env.max_steps} steps`)), toc),
      sec("sec-introduction", "Introduction", h("p.prose", env.introduction)),
      sec("sec-rules", "Rules", env.rules.length ? h("ol.rules", env.rules.map((r) => h("li", r))) : h("p.muted", "No rules.")),
      sec("sec-tools", `Tools (${env.tools.length})`, env.terminating_tools.length ? h("p.muted", "Ending the episode: ", env.terminating_tools.join(", ")) : null, h("div.tools", env.tools.map((t) => toolCard(t, env.terminating_tools)))),
      sec("sec-state", "State schema", env.state_schema ? [schemaTable(env.state_schema, "no properties listed"), rawSchema(env.state_schema)] : h("p.muted", "This env declares no state schema.")),
      sec("sec-scenarios", `Scenarios (${env.scenarios.length})`, h("div.scenarios", env.scenarios.map((s) => scenarioCard(s, this.ctx)))),
      sec("sec-provenance", "Provenance", provenance(env)),
    );
    this.detail.scrollTop = 0;
  }
}

export function moveFocus(ev, list, before) {
  const items = [...list.querySelectorAll("button.navitem")];
  const i = items.indexOf(document.activeElement);
  let next = null;
  if (ev.key === "ArrowDown" || ev.key === "j") next = items[Math.min(items.length - 1, i + 1)];
  else if (ev.key === "ArrowUp" || ev.key === "k") next = i <= 0 ? before : items[i - 1];
  if (next) {
    ev.preventDefault();
    next.focus();
  }
}

function toolCard(t, terminating) {
  const f = t.function;
  return h("details.card.tool", h("summary", h("code.tool-name", f.name), terminating.includes(f.name) ? badge("ends episode", "warn") : null, h("span.tool-summary", f.description)), h("div.card-body", h("p", f.description), schemaTable(f.parameters), rawSchema(f.parameters)));
}

function call(a) {
  return h("code.call", `${a.name}(${json(a.arguments ?? {}, 0)})`);
}

function scenarioCard(s, ctx) {
  const checks = s.checks.map((c) =>
    h("li.check", badge(c.kind, "kind"), " ", c.description, c.kind === "js" ? h("details.raw", h("summary", "source"), h("pre", c.source)) : c.kind === "outputs" ? h("div.muted", "outputs: ", c.outputs.join(" · ")) : c.kind === "reference_state" ? h("div.muted", c.match_new_ids ? "new record ids may differ" : "exact equality") : null),
  );
  return h(
    "div.card.scenario",
    { dataset: { scenario: s.id } },
    h("div.scenario-head", h("code", s.id), " ", badge(s.mode, s.mode === "conversation" ? "conv" : "task"), " ", badge(`reward: ${s.reward}`), h("button.primary.small", { type: "button", onclick: () => ctx.play(s.id) }, "Play ▸")),
    h("p.prose", s.task),
    s.user_instructions ? h("div.sub", h("h4", "Simulated user's instructions"), h("p.prose", s.user_instructions)) : null,
    h("div.sub", h("h4", `Checks (${s.checks.length})`), s.checks.length ? h("ul.checks", checks) : h("p.muted", "No checks: the reward is 0.")),
    h("div.sub", h("h4", "Reference solution"), s.reference_actions?.length ? h("ol.calls", s.reference_actions.map((a) => h("li", call(a)))) : h("p.muted", "None."), s.reference_messages?.length ? h("div.muted", "then says: ", s.reference_messages.join(" / ")) : null),
    s.state_overrides || s.initial_state ? h("details.raw", h("summary", s.initial_state ? "initial state" : "state overrides"), h("pre", json(s.initial_state ?? s.state_overrides))) : null,
  );
}

function provenance(env) {
  const p = env.provenance;
  const where = h("p", "Bundle folder: ", h("code", env.dir), h("br"), "Content hash: ", h("code", env.content_hash.slice(0, 16)));
  if (p.kind === "bundled") return [h("p", "Hand-written, shipped with envscaler."), where];
  if (p.kind === "local") return [h("p", "A local bundle folder (no synth run or importer left its files next to it)."), where];
  if (p.kind === "import") return [h("p", `Imported from ${p.from}.`), where];
  const s = env.synth;
  return [
    h("p", "Synthesized by ", h("code", "envscaler synth"), " in the run ", h("code", s.run), s.topic ? [" from the topic “", s.topic, "”"] : null, "."),
    where,
    h("div.stats", stat("dual-agent pass rate", s.pass_rate === undefined ? "—" : `${Math.round(s.pass_rate * 100)}%`), stat("test cases", s.cases.length), stat("scenarios kept", s.scenarios_kept.length), stat("rejected here", s.rejected.length)),
    h("h3", "Dual-agent test (tester calls, judge verdicts)"),
    s.cases.length
      ? h("table.data.cases", h("thead", h("tr", h("th", "#"), h("th", "case"), h("th", "call"), h("th", "verdict"), h("th", "judge's reason"))),
          h("tbody", s.cases.map((c) => h("tr", { class: `verdict-${c.result}` }, h("td", c.round), h("td", c.case_type), h("td", call({ name: c.tool, arguments: c.arguments }), h("details.raw", h("summary", "observation and diff"), h("pre", c.observation), h("pre", json(c.diff)))), h("td", badge(c.result, c.result)), h("td", c.reason)))))
      : h("p.muted", "No build-report.json found for this env."),
    h("h3", "Rejected for this env"),
    rejections(s.rejected),
    h("details", h("summary", `Everything else the run rejected (${s.run_rejected.length})`), rejections(s.run_rejected)),
  ];
}

const stat = (label, value) => h("div.stat", h("div.stat-value", String(value)), h("div.stat-label", label));

function rejections(list) {
  if (!list.length) return h("p.muted", "Nothing.");
  return h("table.data", h("thead", h("tr", h("th", "stage"), h("th", "item"), h("th", "why"))), h("tbody", list.map((r) => h("tr", h("td", r.stage ?? ""), h("td", r.item), h("td", r.reason)))));
}
