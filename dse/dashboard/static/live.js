// A running study's page follows it in place, never reloading (scroll and zoom stay): every
// POLL_MS it asks the server for the study's state (/state/NAME), swaps in the parts whose HTML
// changed (the counts, the workloads table, each workload's best), adds the sections of
// workloads that appeared, and for each plot, by its key, draws it when new, redraws it when
// its digest changed and removes it when gone. It stops once the study is no longer running.
const POLL_MS = 2000;

async function fetchJson(url) {
  const response = await fetch(url, {cache: "no-store"});
  if (!response.ok) throw new Error(`${url}: HTTP ${response.status}`);
  return response.json();
}

function swap(element, html) {
  // only what changed: a part replaced needlessly would lose a selection or an open menu
  if (element && element.dataset.html !== html && element.innerHTML !== html) {
    element.innerHTML = html;
    element.dataset.html = html;
  }
}

function section(live, index) {
  let found = document.getElementById(`workload-${index}`);
  if (found) return found;
  found = document.createElement("section");
  found.className = "workload";
  found.id = `workload-${index}`;
  const head = document.createElement("div");
  head.className = "section-head";
  const plots = document.createElement("div");
  plots.className = "plots";
  plots.dataset.configUrl = live.dataset.configUrl;
  found.append(head, plots);
  document.getElementById("sections").append(found);
  return found;
}

async function syncPlots(live, holder, figures) {
  const wanted = new Set(figures.map(([key]) => key));
  for (const plot of holder.querySelectorAll(":scope > .plot[data-key]")) {
    if (!wanted.has(plot.dataset.key)) {
      Plotly.purge(plot.querySelector(".plotly-graph-div"));
      plot.remove();
    }
  }
  let previous = null;
  for (const [key, hash] of figures) {
    let plot = holder.querySelector(`:scope > .plot[data-key="${CSS.escape(key)}"]`);
    if (!plot) {
      plot = document.createElement("div");
      plot.className = "plot";
      plot.dataset.key = key;
      const graph = document.createElement("div");
      graph.className = "plotly-graph-div";
      graph.id = `plot-${key}`;
      graph.style.width = "100%";
      plot.append(graph);
    }
    if (previous ? previous.nextElementSibling !== plot : holder.firstElementChild !== plot) {
      if (previous) previous.after(plot); else holder.prepend(plot);
    }
    previous = plot;
    if (plot.dataset.hash === hash) continue;
    const figure = await fetchJson(live.dataset.figureUrl.replace("KEY",
                                                                  encodeURIComponent(key)));
    const graph = plot.querySelector(".plotly-graph-div");
    if (graph.data) {
      await Plotly.react(graph, figure.data, dseLayout(figure.layout), DSE_PLOT_CONFIG);
    } else {
      graph.style.height = `${figure.layout.height || 420}px`;
      await dsePlot(graph, figure);
      dseOpensTrials(graph);
    }
    plot.dataset.hash = hash;
  }
}

async function refresh(live) {
  const state = await fetchJson(live.dataset.stateUrl);
  for (const [id, html] of Object.entries(state.parts)) swap(document.getElementById(id), html);
  const total = document.getElementById("all-total");
  if (total) total.textContent = state.total.toLocaleString("en");
  await syncPlots(live, document.querySelector(".plots.overview"), state.overview);
  const shown = new Set(state.sections.map((s) => `workload-${s.index}`));
  for (const old of document.querySelectorAll("#sections > section.workload")) {
    if (!shown.has(old.id)) old.remove();  // a study grown past a few: one at a time
  }
  for (const s of state.sections) {
    const holder = section(live, s.index);
    swap(holder.querySelector(".section-head"), s.head);
    await syncPlots(live, holder.querySelector(".plots"), s.figures);
  }
  return state.status;
}

window.addEventListener("load", () => {
  const live = document.getElementById("live");
  if (!live || live.dataset.status !== "running") return;
  const poll = async () => {
    let status = "running";
    try {
      status = await refresh(live);
    } catch (error) {
      console.warn("refreshing the study failed; trying again", error);
    }
    if (status === "running") {
      window.setTimeout(poll, POLL_MS);
    } else {
      const note = document.getElementById("live-note");
      if (note) note.textContent = "The study has stopped.";
    }
  };
  window.setTimeout(poll, POLL_MS);
});
