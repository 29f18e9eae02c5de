// A running study's page follows it: every POLL_MS it asks the server for the study's state
// (counts, each workload's best, a digest of each plot) and redraws, in place, only the plots
// whose digest changed. It stops once the study is no longer running. A plot that appears
// (a workload's first feasible trial) needs the page's layout to change: the page reloads.
const POLL_MS = 2000;

function setText(element, value) {
  if (element && value !== null && value !== undefined) element.textContent = value;
}

async function refresh(live) {
  const state = await (await fetch(live.dataset.stateUrl, {cache: "no-store"})).json();
  setText(document.getElementById("total"), state.total.toLocaleString("en"));
  setText(document.getElementById("status"), state.status);
  setText(document.getElementById("updated"), state.updated);
  const sections = document.querySelectorAll("section.workload");
  state.workloads.forEach((w, i) => {
    const section = sections[i];
    if (!section) return;
    setText(section.querySelector(".trials"), w.trials.toLocaleString("en"));
    setText(section.querySelector(".feasible"), w.ok.toLocaleString("en"));
    const number = section.querySelector(".best-number");
    if (number && w.best_number !== null) {
      setText(number, String(w.best_number));
      number.href = number.href.replace(/\/config\/\d+\//, `/config/${w.best_number}/`);
    }
    setText(section.querySelector(".best-value"), w.best_value);
  });
  const shown = new Map([...document.querySelectorAll(".plot[data-key]")]
    .map((plot) => [plot.dataset.key, plot]));
  const keys = Object.keys(state.figures);
  if (keys.length !== shown.size || keys.some((key) => !shown.has(key))) {
    window.location.reload();
    return state.status;
  }
  for (const key of keys) {
    const plot = shown.get(key);
    if (plot.dataset.hash === state.figures[key]) continue;
    const url = live.dataset.figureUrl.replace("KEY", encodeURIComponent(key));
    const figure = await (await fetch(url, {cache: "no-store"})).json();
    await Plotly.react(plot.querySelector(".plotly-graph-div"), figure.data,
                       dseLayout(figure.layout));
    plot.dataset.hash = state.figures[key];
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
      setText(document.getElementById("live-note"), "The study has stopped.");
    }
  };
  window.setTimeout(poll, POLL_MS);
});
