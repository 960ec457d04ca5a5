/* The critical_failure study kind on the annotation page: the has_failure choice, the list
 * of failures (description + linked L1/L2 steps) and the comments. It knows nothing about
 * saving or submitting: annotate.js calls init(), getDraft() and showErrors().
 *
 * Keyboard: choosing "critical failures identified" (F or a click) puts the cursor in an
 * empty failure's description, so what is typed next is text. Each failure's L1 and L2 step
 * toggles are one Tab stop each (the arrow keys move within them); while one has focus,
 * digits link or unlink step n of that list (two digits in a row for steps 10 and above). */
"use strict";
window.AnnotateKind = window.AnnotateCore.defineKind((function () {
  let ctx = null;
  let failures = [];            // [{description, L1_steps: [int], L2_steps: [int]}]
  let hasFailure = null;        // true | false | null
  const $ = window.AnnotateCore.byId;

  function setChoice(value, viaShortcut) {
    hasFailure = value;
    $("has-failure-yes").checked = value === true;
    $("has-failure-no").checked = value === false;
    // Going back to "no critical failures" takes away the empty failures (no description, no
    // step) that choosing "critical failures identified" added; one with anything in it stays,
    // with the warning, so nothing typed is lost.
    if (value === false) failures = failures.filter((f) => !isBlank(f));
    const created = value === true && failures.length === 0;
    if (created) failures.push({ description: "", L1_steps: [], L2_steps: [] });
    render();
    ctx.changed(viaShortcut ? "shortcut" : "choice", value === true ? "has_failure" : "no_failure");
    if (created) focusDescription(0);
  }

  function isBlank(failure) {
    return !failure.description.trim() && failure.L1_steps.length === 0 && failure.L2_steps.length === 0;
  }

  // F: "critical failures identified", then the cursor in an empty description (adding a
  // failure, as A does, when every failure already has one).
  function identifyFailures() {
    if (hasFailure !== true) setChoice(true, true);
    const empty = failures.findIndex((f) => !f.description.trim());
    if (empty >= 0) focusDescription(empty); else addFailure(true);
  }

  function stepToggle(list, n, index) {
    const failure = failures[index];
    const key = list + "_steps";
    const at = failure[key].indexOf(n);
    if (at >= 0) failure[key].splice(at, 1); else { failure[key].push(n); failure[key].sort((a, b) => a - b); }
    const button = document.querySelector("#failure-" + (index + 1) + " [data-link='" + list + "." + n + "']");
    if (button) button.setAttribute("aria-pressed", at >= 0 ? "false" : "true");
    ctx.changed(at >= 0 ? "unlink_step" : "link_step", "failure" + (index + 1) + ":" + list + "." + n);
  }

  // Digits typed on a failure's step toggles: "1" then "2" within DIGIT_WAIT_MS is step 12; a
  // digit that cannot start a longer step number in this list acts at once.
  const DIGIT_WAIT_MS = 700;
  let pending = null;   // {group, list, index, count, text, timer}

  function commitDigits() {
    if (!pending) return;
    const p = pending;
    pending = null;
    clearTimeout(p.timer);
    const n = parseInt(p.text, 10);
    if (n >= 1 && n <= p.count) stepToggle(p.list, n, p.index);
  }

  function onDigit(group, list, index, count, digit) {
    if (pending && pending.group !== group) commitDigits();
    const text = (pending ? pending.text : "") + digit;
    if (pending) clearTimeout(pending.timer);
    pending = { group: group, list: list, index: index, count: count, text: text, timer: null };
    if (text.length >= String(count).length || parseInt(text, 10) * 10 > count) commitDigits();
    else pending.timer = setTimeout(commitDigits, DIGIT_WAIT_MS);
  }

  // One Tab stop per list (roving tabindex): the focused toggle is the group's stop.
  function rove(group, button) {
    group.querySelectorAll("button.toggle").forEach((b) => { b.tabIndex = b === button ? 0 : -1; });
  }

  function onGroupKey(e, group, list, index, count) {
    if (e.ctrlKey || e.metaKey || e.altKey) return;
    if (/^[0-9]$/.test(e.key)) {
      e.preventDefault();
      onDigit(group, list, index, count, e.key);
      return;
    }
    commitDigits();
    const buttons = Array.from(group.querySelectorAll("button.toggle"));
    const at = buttons.indexOf(document.activeElement);
    let to = null;
    if (e.key === "ArrowRight" || e.key === "ArrowDown") to = Math.min(buttons.length - 1, at + 1);
    else if (e.key === "ArrowLeft" || e.key === "ArrowUp") to = Math.max(0, at - 1);
    else if (e.key === "Home") to = 0;
    else if (e.key === "End") to = buttons.length - 1;
    if (to === null || at < 0) return;
    e.preventDefault();
    rove(group, buttons[to]);
    buttons[to].focus();
  }

  function addFailure(viaShortcut) {
    if (hasFailure !== true) { setChoice(true, viaShortcut); if (failures.length === 1 && !failures[0].description) { focusDescription(0); return; } }
    failures.push({ description: "", L1_steps: [], L2_steps: [] });
    render();
    ctx.changed("add_failure", String(failures.length));
    focusDescription(failures.length - 1);
  }

  function focusDescription(index) {
    const el = document.getElementById("failure-" + (index + 1) + "-description");
    if (el) el.focus();
  }

  function removeFailure(index) {
    failures.splice(index, 1);
    render();
    ctx.changed("remove_failure", String(index + 1));
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
    const linked = failures[index][list + "_steps"];
    const stop = linked.length && linked[0] <= count ? linked[0] : 1;
    for (let n = 1; n <= count; n++) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "toggle";
      b.dataset.link = list + "." + n;
      const on = failures[index][list + "_steps"].indexOf(n) >= 0;
      b.setAttribute("aria-pressed", on ? "true" : "false");
      b.setAttribute("aria-label", "Failure " + (index + 1) + ": link step " + list + "." + n);
      b.textContent = list + "." + n;
      b.tabIndex = n === stop ? 0 : -1;
      b.addEventListener("click", () => { commitDigits(); stepToggle(list, n, index); });
      b.addEventListener("focus", () => rove(group, b));
      group.appendChild(b);
    }
    group.addEventListener("keydown", (e) => onGroupKey(e, group, list, index, count));
    group.addEventListener("focusout", (e) => { if (!group.contains(e.relatedTarget)) commitDigits(); });
    return group;
  }

  function renderFailures() {
    commitDigits();
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
      ta.addEventListener("input", () => { failure.description = ta.value; ctx.changed(null); });
      fs.appendChild(ta);
      fs.appendChild(stepGroup("L1", ctx.nL1, index));
      fs.appendChild(stepGroup("L2", ctx.nL2, index));
      fs.appendChild(window.AnnotateCore.removeButton("Remove failure " + (index + 1), () => removeFailure(index)));
      fs.appendChild(window.AnnotateCore.errorLine("failure-" + (index + 1) + "-error"));
      li.appendChild(fs);
      ol.appendChild(li);
    });
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
    $("comments").addEventListener("input", () => ctx.changed(null));
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
      if (m) window.AnnotateCore.appendError($("failure-" + m[1] + "-error"), e.message);
    });
  }

  const shortcuts = {
    n: () => setChoice(false, true),
    f: identifyFailures,
    a: () => addFailure(true),
  };

  return { init, getDraft, hasContent, showErrors, shortcuts };
})());
