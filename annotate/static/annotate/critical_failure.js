/* The critical_failure study kind on the annotation page: the has_failure choice, the list
 * of failures (description + linked L1/L2 steps) and the comments. It knows nothing about
 * saving or submitting: annotate.js calls init(), getDraft() and showErrors(). */
"use strict";
window.AnnotateKind = (function () {
  let ctx = null;
  let failures = [];            // [{description, L1_steps: [int], L2_steps: [int]}]
  let hasFailure = null;        // true | false | null
  const $ = (id) => document.getElementById(id);

  function changed(type, target) {
    if (type) ctx.log(type, target);
    ctx.onChange();
  }

  function setChoice(value, viaShortcut) {
    hasFailure = value;
    $("has-failure-yes").checked = value === true;
    $("has-failure-no").checked = value === false;
    if (value === true && failures.length === 0) {
      failures.push({ description: "", L1_steps: [], L2_steps: [] });
    }
    render();
    changed(viaShortcut ? "shortcut" : "choice", value === true ? "has_failure" : "no_failure");
  }

  function stepToggle(list, n, index) {
    const failure = failures[index];
    const key = list + "_steps";
    const at = failure[key].indexOf(n);
    if (at >= 0) failure[key].splice(at, 1); else { failure[key].push(n); failure[key].sort((a, b) => a - b); }
    renderFailures(index, list + "." + n);
    changed(at >= 0 ? "unlink_step" : "link_step", "failure" + (index + 1) + ":" + list + "." + n);
  }

  function addFailure(viaShortcut) {
    if (hasFailure !== true) { setChoice(true, viaShortcut); if (failures.length === 1 && !failures[0].description) { focusDescription(0); return; } }
    failures.push({ description: "", L1_steps: [], L2_steps: [] });
    render();
    changed("add_failure", String(failures.length));
    focusDescription(failures.length - 1);
  }

  function focusDescription(index) {
    const el = document.getElementById("failure-" + (index + 1) + "-description");
    if (el) el.focus();
  }

  function removeFailure(index) {
    failures.splice(index, 1);
    render();
    changed("remove_failure", String(index + 1));
    const add = $("add-failure");
    if (add) add.focus();
  }

  function stepGroup(list, count, index) {
    const group = document.createElement("div");
    group.className = "step-toggles";
    group.setAttribute("role", "group");
    const labelId = "failure-" + (index + 1) + "-" + list + "-label";
    group.setAttribute("aria-labelledby", labelId);
    const label = document.createElement("span");
    label.id = labelId;
    label.className = "toggle-label";
    label.textContent = list + " step(s)";
    group.appendChild(label);
    for (let n = 1; n <= count; n++) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "toggle";
      b.dataset.link = list + "." + n;
      const on = failures[index][list + "_steps"].indexOf(n) >= 0;
      b.setAttribute("aria-pressed", on ? "true" : "false");
      b.setAttribute("aria-label", "Failure " + (index + 1) + ": link step " + list + "." + n);
      b.textContent = list + "." + n;
      b.addEventListener("click", () => stepToggle(list, n, index));
      group.appendChild(b);
    }
    return group;
  }

  function renderFailures(keepIndex, keepLink) {
    const ol = $("failures");
    ol.textContent = "";
    failures.forEach((failure, index) => {
      const li = document.createElement("li");
      li.className = "failure";
      li.id = "failure-" + (index + 1);
      const fs = document.createElement("fieldset");
      const legend = document.createElement("legend");
      legend.textContent = "Failure " + (index + 1);
      fs.appendChild(legend);
      const labelEl = document.createElement("label");
      labelEl.htmlFor = "failure-" + (index + 1) + "-description";
      labelEl.textContent = "Description of failure " + (index + 1);
      labelEl.className = "sr-only";
      fs.appendChild(labelEl);
      const ta = document.createElement("textarea");
      ta.id = "failure-" + (index + 1) + "-description";
      ta.rows = 2;
      ta.placeholder = "Briefly describe this critical failure";
      ta.value = failure.description;
      ta.addEventListener("input", () => { failure.description = ta.value; changed(null); });
      fs.appendChild(ta);
      fs.appendChild(stepGroup("L1", ctx.nL1, index));
      fs.appendChild(stepGroup("L2", ctx.nL2, index));
      const rm = document.createElement("button");
      rm.type = "button";
      rm.className = "remove";
      rm.textContent = "Remove failure " + (index + 1);
      rm.addEventListener("click", () => removeFailure(index));
      fs.appendChild(rm);
      const err = document.createElement("p");
      err.className = "field-error";
      err.id = "failure-" + (index + 1) + "-error";
      err.setAttribute("aria-live", "polite");
      fs.appendChild(err);
      li.appendChild(fs);
      ol.appendChild(li);
    });
    if (keepIndex !== undefined && keepLink) {
      const again = document.querySelector("#failure-" + (keepIndex + 1) + " [data-link='" + keepLink + "']");
      if (again) again.focus();
    }
  }

  function render() {
    const section = $("failures-section");
    section.hidden = !(hasFailure === true || failures.length > 0);
    $("failures-conflict").hidden = !(hasFailure === false && failures.length > 0);
    renderFailures();
  }

  function init(context) {
    ctx = context;
    const draft = context.draft || {};
    hasFailure = typeof draft.has_failure === "boolean" ? draft.has_failure : null;
    failures = Array.isArray(draft.failures) ? draft.failures.map((f) => ({
      description: typeof f.description === "string" ? f.description : "",
      L1_steps: Array.isArray(f.L1_steps) ? f.L1_steps.slice() : [],
      L2_steps: Array.isArray(f.L2_steps) ? f.L2_steps.slice() : [],
    })) : [];
    $("has-failure-yes").checked = hasFailure === true;
    $("has-failure-no").checked = hasFailure === false;
    $("comments").value = typeof draft.comments === "string" ? draft.comments : "";
    $("has-failure-yes").addEventListener("change", () => setChoice(true, false));
    $("has-failure-no").addEventListener("change", () => setChoice(false, false));
    $("add-failure").addEventListener("click", () => addFailure(false));
    $("comments").addEventListener("input", () => changed(null));
    $("failure-types").addEventListener("toggle", (e) => { if (e.target.open) ctx.log("help_open", "failure_types"); });
    render();
  }

  function getDraft() {
    return {
      has_failure: hasFailure,
      failures: failures.map((f) => ({ description: f.description, L1_steps: f.L1_steps.slice(), L2_steps: f.L2_steps.slice() })),
      comments: $("comments").value,
    };
  }

  function hasContent() {
    const d = getDraft();
    return d.has_failure !== null || d.failures.length > 0 || d.comments.trim() !== "";
  }

  function showErrors(errors) {
    document.querySelectorAll(".failure .field-error").forEach((el) => { el.textContent = ""; });
    (errors || []).forEach((e) => {
      const m = /^failures\[(\d+)\]/.exec(e.field || "");
      if (m) {
        const el = document.getElementById("failure-" + m[1] + "-error");
        if (el) el.textContent = (el.textContent ? el.textContent + " " : "") + e.message;
      }
    });
  }

  return {
    init: init,
    getDraft: getDraft,
    getAnswer: getDraft,
    hasContent: hasContent,
    showErrors: showErrors,
    shortcuts: {
      n: () => setChoice(false, true),
      f: () => setChoice(true, true),
      a: () => addFailure(true),
    },
  };
})();
