// Draws the dashboard's plots: the server sends each without a template, and every plot of a
// page takes the house template (DSE_TEMPLATE, from /assets/template.js) from here.
function dseLayout(layout) {
  return Object.assign({}, layout, {template: DSE_TEMPLATE});
}

function dsePlot(id, figure) {
  return Plotly.newPlot(id, figure.data, dseLayout(figure.layout), DSE_PLOT_CONFIG);
}
