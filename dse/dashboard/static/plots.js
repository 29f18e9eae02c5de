// Draws the dashboard's plots: the server sends each without a template, and every plot of a
// page takes the house template (DSE_TEMPLATE, from /assets/template.js) from here. A fixed
// uirevision lets a live page redraw a plot with new data and keep what the user did to it
// (zoom, pan, legend items hidden).
function dseLayout(layout) {
  return Object.assign({uirevision: "dse"}, layout, {template: DSE_TEMPLATE});
}

function dsePlot(id, figure) {
  return Plotly.newPlot(id, figure.data, dseLayout(figure.layout), DSE_PLOT_CONFIG);
}
