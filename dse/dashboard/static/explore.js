// Every plotted point that carries a trial (its number in customdata) opens that trial's
// config page when clicked. The page's URL pattern comes from the element that holds the
// plots: data-config-url, with TRIAL where the number goes. A live page calls dseOpensTrials
// for each plot it draws later.
function dseOpensTrials(graph) {
  const holder = graph.closest("[data-config-url]");
  if (!holder || !graph.on || graph.dataset.opensTrials) return;
  graph.dataset.opensTrials = "1";
  graph.on("plotly_click", (event) => {
    const point = event.points && event.points[0];
    if (point && point.customdata !== undefined && point.customdata !== null) {
      window.location.href = holder.dataset.configUrl.replace("TRIAL", String(point.customdata));
    }
  });
}

window.addEventListener("load", () => {
  document.querySelectorAll("[data-config-url] .plotly-graph-div").forEach(dseOpensTrials);
});
