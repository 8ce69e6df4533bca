// The playground's shell: three views behind tabs, the address bar's hash as the route, and
// keyboard shortcuts (1 2 3 switch views, / searches envs, u undoes, b branches, ? lists the keys).
import { api, errorBox, h } from "./dom.js";
import { EnvsView } from "./envs-view.js";
import { PlayView } from "./play-view.js";
import { TrajectoriesView } from "./trajectories-view.js";

const views = ["envs", "play", "trajectories"];
const ctx = {
  info: null,
  setHash(route) {
    history.replaceState(null, "", `#${route}`);
  },
  play(scenarioId) {
    show("play");
    play.select(scenarioId);
  },
};

const roots = Object.fromEntries(views.map((v) => [v, document.getElementById(`view-${v}`)]));
const envs = new EnvsView(roots.envs, ctx);
const play = new PlayView(roots.play, ctx);
const traj = new TrajectoriesView(roots.trajectories, ctx);
let trajLoaded = false;

function show(name) {
  for (const v of views) {
    roots[v].hidden = v !== name;
    const tab = document.getElementById(`tab-${v}`);
    tab.setAttribute("aria-selected", String(v === name));
    tab.tabIndex = v === name ? 0 : -1;
  }
  if (name === "trajectories" && !trajLoaded) {
    trajLoaded = true;
    void traj.load();
  }
  if (!location.hash.startsWith(`#${name}`)) ctx.setHash(name);
}

for (const v of views) document.getElementById(`tab-${v}`).addEventListener("click", () => show(v));
document.querySelector("[role=tablist]").addEventListener("keydown", (ev) => {
  const i = views.findIndex((v) => document.getElementById(`tab-${v}`) === document.activeElement);
  if (i < 0 || (ev.key !== "ArrowRight" && ev.key !== "ArrowLeft")) return;
  const next = views[(i + (ev.key === "ArrowRight" ? 1 : views.length - 1)) % views.length];
  show(next);
  document.getElementById(`tab-${next}`).focus();
});

const help = document.getElementById("help");
document.addEventListener("keydown", (ev) => {
  if (ev.target.matches?.("input, textarea, select") || ev.ctrlKey || ev.metaKey || ev.altKey) {
    if (ev.key === "Escape") ev.target.blur?.();
    return;
  }
  if (ev.key >= "1" && ev.key <= "3") show(views[Number(ev.key) - 1]);
  else if (ev.key === "/") {
    show("envs");
    document.getElementById("env-search").focus();
  } else if (ev.key === "?") help.hidden = !help.hidden;
  else if ((ev.key === "u" || ev.key === "b") && !roots.play.hidden && play.ep) void (ev.key === "u" ? play.undo() : play.branch());
  else if (ev.key === "Escape") help.hidden = true;
  else return;
  ev.preventDefault();
});
document.getElementById("help-close").addEventListener("click", () => (help.hidden = true));
addEventListener("pagehide", () => play.closeAll());

async function boot() {
  try {
    ctx.info = await api("/api/info");
    document.getElementById("status").textContent = `${ctx.info.envs} envs · simulated user ${ctx.info.user_attached ? "configured" : "not configured"}`;
    const { envs: list } = await api("/api/envs");
    play.setScenarios(list);
    play.setAgentDefaults(ctx.info.agent);
    await envs.load();
  } catch (e) {
    document.querySelector("main").prepend(errorBox(e));
  }
  const [view, ...rest] = location.hash.slice(1).split("/");
  if (view === "play") {
    show("play");
    if (rest[0]) play.select(decodeURIComponent(rest[0]));
    if (rest[1]) play.seed.value = rest[1];
  } else if (view === "trajectories") {
    show("trajectories");
    if (rest.length >= 2) void traj.open(decodeURIComponent(rest[0]), rest[1]);
  } else {
    show("envs");
    if (view === "envs" && rest[0]) void envs.open(decodeURIComponent(rest[0]));
  }
}

void boot();
