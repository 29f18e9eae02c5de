// Every plotted point that carries a trial (its number in customdata) opens that trial's
// config page when clicked. The page's URL pattern comes from the element that holds the
// plots: data-config-url, with TRIAL where the number goes.
window.addEventListener("load", () => {
  document.querySelectorAll("[data-config-url]").forEach((holder) => {
    const pattern = holder.dataset.configUrl;
    holder.querySelectorAll(".plotly-graph-div").forEach((graph) => {
      if (!graph.on) return;
      graph.on("plotly_click", (event) => {
        const point = event.points && event.points[0];
        if (point && point.customdata !== undefined && point.customdata !== null) {
          window.location.href = pattern.replace("TRIAL", String(point.customdata));
        }
      });
    });
  });
});
