// The data manager's page: "select every item on this page" ticks the rows' boxes, and only
// the chosen action's parameters are shown. Without JavaScript every box is ticked by hand and
// every parameter shows; the server reads only the chosen action's.
(function () {
  "use strict";

  function bind() {
    var all = document.getElementById("select-page");
    if (all) {
      all.addEventListener("change", function () {
        document.querySelectorAll("input.select-item").forEach(function (box) {
          box.checked = all.checked;
        });
      });
    }
    var action = document.getElementById("bulk-action");
    if (!action) {
      return;
    }
    function show() {
      document.querySelectorAll(".action-params").forEach(function (part) {
        var names = (part.getAttribute("data-actions") || "").split(" ");
        part.hidden = names.indexOf(action.value) < 0;
      });
    }
    action.addEventListener("change", show);
    show();
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", bind);
  } else {
    bind();
  }
})();
