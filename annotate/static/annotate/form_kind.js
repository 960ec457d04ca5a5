/* The kind's part of the one-item page for a study kind that brings no script of its own: its
 * item template is a plain form part (radio buttons, checkboxes, selects, text fields, each
 * with a `name`). The draft is {name: value} over those fields: a checkbox group gives the
 * list of its checked values, one checkbox true/false, an empty field null, and a field (or a
 * fieldset around it) marked `data-number` gives numbers. The server's field errors are shown
 * beside the field they name. */
"use strict";
window.AnnotateKind = window.AnnotateCore.defineKind((function () {
  const form = document.getElementById("annotation");
  let fields = [];

  function names() {
    return Array.from(new Set(fields.map((el) => el.name)));
  }

  function wantsNumber(el) {
    return el.type === "number" || el.closest("[data-number]") !== null;
  }

  function typed(el, value) {
    if (!wantsNumber(el)) return value;
    const n = Number(value);
    return value !== "" && Number.isFinite(n) ? n : value;
  }

  function valueOf(name) {
    const group = fields.filter((el) => el.name === name);
    const first = group[0];
    if (first.type === "checkbox") {
      if (group.length === 1) return first.checked;
      return group.filter((el) => el.checked).map((el) => typed(el, el.value));
    }
    if (first.type === "radio") {
      const chosen = group.find((el) => el.checked);
      return chosen ? typed(chosen, chosen.value) : null;
    }
    return first.value === "" ? null : typed(first, first.value);
  }

  function show(name, value) {
    const group = fields.filter((el) => el.name === name);
    group.forEach((el) => {
      if (el.type === "checkbox") {
        el.checked = group.length === 1 ? value === true
          : Array.isArray(value) && value.map(String).includes(el.value);
      } else if (el.type === "radio") {
        el.checked = value !== null && value !== undefined && String(value) === el.value;
      } else {
        el.value = value === null || value === undefined ? "" : String(value);
      }
    });
  }

  function getDraft() {
    const draft = {};
    names().forEach((name) => { draft[name] = valueOf(name); });
    return draft;
  }

  return {
    init(context) {
      // The kind's own fields: everything named in the form but the shared goal checkbox.
      fields = Array.from(form.querySelectorAll("input[name], select[name], textarea[name]"))
        .filter((el) => el.id !== "goal-ack");
      names().forEach((name) => { if (name in context.draft) show(name, context.draft[name]); });
      fields.forEach((el) => {
        const kind = el.type === "checkbox" || el.type === "radio" || el.tagName === "SELECT" ? "change" : "input";
        el.addEventListener(kind, () => context.changed("field_change", el.name));
      });
    },
    getDraft: getDraft,
    hasContent() {
      return Object.values(getDraft()).some((v) => v !== null && v !== false && !(Array.isArray(v) && !v.length));
    },
    showErrors(errors) {
      form.querySelectorAll(".field-error").forEach((el) => el.remove());
      errors.forEach((error) => {
        // A field's error names it, or the answer's part it fills (`answer.<name>`).
        const field = fields.find((el) => el.name === error.field || "answer." + el.name === error.field);
        if (!field) return;
        const anchor = field.closest("fieldset") || field;
        const line = window.AnnotateCore.errorLine("error-" + error.field);
        line.textContent = error.message;
        anchor.insertAdjacentElement("afterend", line);
      });
    },
  };
})());
