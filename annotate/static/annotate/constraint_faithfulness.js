/* The constraint_faithfulness study kind on the annotation page (CoScript App. D): three
 * questions answered Yes / No / Not sure and, when the steps are not correct, the wrong
 * steps with their error types (Table 10) or "other". It knows nothing about saving or
 * submitting: annotate.js calls init(), getDraft(), getAnswer() and showErrors(); the
 * server decides whether an answer is complete. */
"use strict";
window.AnnotateKind = window.AnnotateCore.defineKind((function () {
  const QUESTIONS = ["specific_goal_ok", "meets_constraint", "steps_correct"];
  let ctx = null;
  let answers = {};       // question -> "yes" | "no" | "not_sure" | null
  let wrong = [];         // [{step, error_types: [..], other}] sorted by step
  let current = 0;        // the question the Y / N / S keys answer
  let errorTypes = [];    // [[key, label, aspect, explanation], ...]
  const $ = window.AnnotateCore.byId;

  function stepText(n) {
    const b = document.querySelector('.fs-step[data-step="' + n + '"] .step-text');
    return b ? b.textContent : "";
  }

  function setCurrent(i) {
    current = Math.max(0, Math.min(QUESTIONS.length - 1, i));
    document.querySelectorAll(".fs-question").forEach((fs, k) => fs.classList.toggle("current", k === current));
  }

  function setAnswer(question, value, viaShortcut) {
    answers[question] = value;
    document.querySelectorAll('input[name="' + question + '"]').forEach((r) => { r.checked = r.value === value; });
    render();
    ctx.changed(viaShortcut ? "shortcut" : "choice", question + ":" + value);
  }

  function shortcutAnswer(value) {
    setAnswer(QUESTIONS[current], value, true);
    if (current + 1 < QUESTIONS.length) {
      setCurrent(current + 1);
      $("question-" + (current + 1)).scrollIntoView({ block: "nearest" });
    } else if (value === "no") {
      const first = document.querySelector(".fs-step:not([disabled])");
      if (first) first.focus();  // on to marking the wrong steps
    }
  }

  function toggleStep(n) {
    const at = wrong.findIndex((w) => w.step === n);
    if (at < 0 && answers.steps_correct !== "no") return;  // marking needs No to question 3; unmarking never
    if (at >= 0) wrong.splice(at, 1);
    else { wrong.push({ step: n, error_types: [], other: "" }); wrong.sort((a, b) => a.step - b.step); }
    render();
    ctx.changed(at >= 0 ? "unlink_step" : "link_step", "step" + n);
  }

  function renderSteps() {
    const enabled = answers.steps_correct === "no";
    document.querySelectorAll(".fs-step").forEach((b) => {
      const n = Number(b.dataset.step);
      const marked = wrong.some((w) => w.step === n);
      b.disabled = !enabled;
      b.classList.toggle("marked", marked);
      b.setAttribute("aria-pressed", marked ? "true" : "false");
      b.querySelector(".mark-state").textContent = marked ? "marked wrong" : "not marked";
    });
  }

  function checkbox(entry, key, label, title) {
    const id = "step-" + entry.step + "-type-" + key;
    const wrap = document.createElement("label");
    wrap.className = "check fs-type";
    wrap.htmlFor = id;
    if (title) wrap.title = title;
    const box = document.createElement("input");
    box.type = "checkbox";
    box.id = id;
    box.value = key;
    box.checked = entry.error_types.indexOf(key) >= 0;
    box.addEventListener("change", () => {
      const i = entry.error_types.indexOf(key);
      if (box.checked && i < 0) entry.error_types.push(key);
      if (!box.checked && i >= 0) entry.error_types.splice(i, 1);
      ctx.changed("choice", "step" + entry.step + ":" + key + (box.checked ? "" : ":off"));
    });
    wrap.appendChild(box);
    wrap.appendChild(document.createTextNode(" " + label));
    return wrap;
  }

  function renderWrong() {
    const section = $("wrong-steps-section");
    section.hidden = !(answers.steps_correct === "no" || wrong.length > 0);
    const ol = $("wrong-steps");
    ol.textContent = "";
    wrong.forEach((entry) => {
      const li = document.createElement("li");
      li.className = "failure";
      li.id = "wrong-step-" + entry.step;
      const fs = document.createElement("fieldset");
      const legend = document.createElement("legend");
      legend.textContent = "Step " + entry.step + ": " + stepText(entry.step);
      fs.appendChild(legend);
      const group = document.createElement("div");
      group.className = "fs-types";
      group.setAttribute("role", "group");
      group.setAttribute("aria-label", "Error types of step " + entry.step);
      errorTypes.forEach((t) => group.appendChild(checkbox(entry, t[0], t[1], t[2] + ": " + t[3])));
      group.appendChild(checkbox(entry, "other", "Other", "Describe what you think is wrong"));
      fs.appendChild(group);
      const otherLabel = document.createElement("label");
      otherLabel.htmlFor = "step-" + entry.step + "-other";
      otherLabel.className = "sr-only";
      otherLabel.textContent = "Other: what is wrong with step " + entry.step;
      fs.appendChild(otherLabel);
      const other = document.createElement("input");
      other.type = "text";
      other.id = "step-" + entry.step + "-other";
      other.className = "fs-other";
      other.placeholder = "Other: describe what you think is wrong";
      other.value = entry.other;
      other.addEventListener("input", () => {
        entry.other = other.value;
        const box = $("step-" + entry.step + "-type-other");
        const has = entry.error_types.indexOf("other") >= 0;
        if (other.value.trim() && !has) { entry.error_types.push("other"); box.checked = true; }
        ctx.changed(null);
      });
      fs.appendChild(other);
      fs.appendChild(window.AnnotateCore.removeButton("Unmark step " + entry.step, () => {
        toggleStep(entry.step);
        const b = document.querySelector('.fs-step[data-step="' + entry.step + '"]');
        if (b && !b.disabled) b.focus();
      }));
      fs.appendChild(window.AnnotateCore.errorLine("wrong-step-" + entry.step + "-error"));
      li.appendChild(fs);
      ol.appendChild(li);
    });
  }

  function render() {
    renderSteps();
    renderWrong();
  }

  function init(context) {
    ctx = context;
    const draft = context.draft || {};
    errorTypes = JSON.parse($("error-types").textContent);
    QUESTIONS.forEach((q) => {
      answers[q] = ["yes", "no", "not_sure"].indexOf(draft[q]) >= 0 ? draft[q] : null;
      document.querySelectorAll('input[name="' + q + '"]').forEach((r) => {
        r.checked = r.value === answers[q];
        r.addEventListener("change", () => { if (r.checked) setAnswer(q, r.value, false); });
      });
    });
    wrong = Array.isArray(draft.wrong_steps) ? draft.wrong_steps
      .filter((w) => w && Number.isInteger(w.step))
      .map((w) => ({
        step: w.step,
        error_types: Array.isArray(w.error_types) ? w.error_types.slice() : [],
        other: typeof w.other === "string" ? w.other : "",
      })) : [];
    wrong.sort((a, b) => a.step - b.step);
    document.querySelectorAll(".fs-step").forEach((b) => b.addEventListener("click", () => toggleStep(Number(b.dataset.step))));
    document.querySelectorAll(".fs-question").forEach((fs, k) => fs.addEventListener("focusin", () => setCurrent(k)));
    $("comments").value = typeof draft.comments === "string" ? draft.comments : "";
    $("comments").addEventListener("input", () => ctx.changed(null));
    $("error-types-help").addEventListener("toggle", (e) => { if (e.target.open) ctx.log("help_open", "error_types"); });
    const firstOpen = QUESTIONS.findIndex((q) => answers[q] === null);
    setCurrent(firstOpen < 0 ? 0 : firstOpen);
    render();
  }

  function getDraft() {
    const draft = { wrong_steps: wrong.map((w) => ({ step: w.step, error_types: w.error_types.slice(), other: w.other })),
      comments: $("comments").value };
    QUESTIONS.forEach((q) => { draft[q] = answers[q]; });
    return draft;
  }

  function hasContent() {
    const d = getDraft();
    return QUESTIONS.some((q) => d[q] !== null) || d.wrong_steps.length > 0 || d.comments.trim() !== "";
  }

  function showErrors(errors) {
    document.querySelectorAll(".fs-question .field-error, #wrong-steps-error, .failure .field-error").forEach((el) => { el.textContent = ""; });
    document.querySelectorAll(".fs-question").forEach((fs) => fs.classList.remove("missing"));
    (errors || []).forEach((e) => {
      const field = e.field || "";
      let el = null;
      if (QUESTIONS.indexOf(field) >= 0) {
        el = $(field + "-error");
        el.closest(".fs-question").classList.add("missing");
      } else if (field === "wrong_steps") {
        el = $("wrong-steps-error");
      } else {
        const m = /^wrong_steps\.(\d+)\./.exec(field);
        if (m) el = $("wrong-step-" + m[1] + "-error");
      }
      window.AnnotateCore.appendError(el, e.message);
    });
  }

  const shortcuts = {
    y: () => shortcutAnswer("yes"),
    n: () => shortcutAnswer("no"),
    s: () => shortcutAnswer("not_sure"),
    "1": () => { setCurrent(0); $("question-1").scrollIntoView({ block: "nearest" }); },
    "2": () => { setCurrent(1); $("question-2").scrollIntoView({ block: "nearest" }); },
    "3": () => { setCurrent(2); $("question-3").scrollIntoView({ block: "nearest" }); },
  };

  return { init, getDraft, hasContent, showErrors, shortcuts };
})());
