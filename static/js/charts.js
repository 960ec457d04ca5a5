// Draws every chart of the page: each <script type="application/json" class="plotly-figure"
// data-target="ID"> holds a plotly figure (data, layout) and its config, written by
// core/charts.py; it is drawn into the element with that id. No inline script needed.
(function () {
  "use strict";

  function drawAll() {
    if (!window.Plotly) {
      return;
    }
    document.querySelectorAll("script.plotly-figure[type='application/json']").forEach(function (block) {
      var target = document.getElementById(block.getAttribute("data-target"));
      if (!target || target.getAttribute("data-drawn") === "yes") {
        return;
      }
      var spec = JSON.parse(block.textContent);
      target.setAttribute("data-drawn", "yes");
      window.Plotly.newPlot(target, spec.figure.data || [], spec.figure.layout || {}, spec.config || {});
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
