// A <select data-autosubmit> submits its form when its value changes (the filters of the
// leaderboards). Without JavaScript the form's <noscript> button does the same.
(function () {
  "use strict";

  function bind() {
    document.querySelectorAll("select[data-autosubmit]").forEach(function (select) {
      select.addEventListener("change", function () {
        if (select.form) {
          select.form.submit();
        }
      });
    });
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", bind);
  } else {
    bind();
  }
})();
