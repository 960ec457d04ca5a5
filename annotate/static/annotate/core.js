/* What every annotator page script shares, loaded first as window.AnnotateCore (a plain
 * script, like every script of these pages: the Content-Security-Policy allows this site's
 * files and nothing inline):
 *
 * - post(url, body): a JSON POST with Django's CSRF token; resolves to {ok, status, data},
 *   where a body that is not JSON becomes {ok: false, message}; rejects only when the server
 *   cannot be reached.
 * - localDraft(assignment): the copy of an item's draft kept in this browser (save, load,
 *   clear), so nothing typed is lost when the network drops.
 * - activeClock(hooks): the one measure of active time, sent as active_ms with each save. It
 *   runs only while the page is visible (document.visibilityState), from the moment the script
 *   starts; take() hands over what accumulated since the last take (whole milliseconds, the
 *   fraction kept), giveBack(ms) returns time a save failed to deliver.
 * - shortcuts(onSubmit, onKey): Ctrl/Cmd+Enter submits; every other key goes to onKey unless it
 *   was typed into a text field (isTextField, ignoreKey).
 * - defineKind(kind): checks a study kind's part of the one-item page (window.AnnotateKind).
 * - itemFlags(root, changed): one item's "This item is broken" / "I'm unsure" controls
 *   (annotate/_item_flags.html), on the one-item page and on each item of a page of several.
 * - byId, appendError, errorLine, removeButton, formatSeconds: small DOM and timer helpers. */
"use strict";
window.AnnotateCore = (function () {
  function byId(id) { return document.getElementById(id); }

  /* Adds a message to a field's error line (after what it already says). */
  function appendError(el, message) {
    if (el) el.textContent = (el.textContent ? el.textContent + " " : "") + message;
  }

  /* An empty error line for one entry of a kind's list, read out when a message arrives. */
  function errorLine(id) {
    const p = document.createElement("p");
    p.className = "field-error";
    p.id = id;
    p.setAttribute("aria-live", "polite");
    return p;
  }

  /* The button that takes an entry off a kind's list. */
  function removeButton(text, onClick) {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "remove";
    button.textContent = text;
    button.addEventListener("click", onClick);
    return button;
  }

  // ---- the server
  function csrfToken() {
    const m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body),
    });
    let data = null;
    try { data = await response.json(); } catch (e) { data = null; }
    if (data === null || typeof data !== "object") {
      data = { ok: false, message: "The server sent an unexpected answer (" + response.status + ")." };
    }
    return { ok: response.ok && data.ok !== false, status: response.status, data: data };
  }

  // ---- the copy of a draft kept in this browser, one per assignment
  function localDraft(assignment) {
    const key = "annotate:draft:" + assignment;
    return {
      save(seq, draft) {
        try { localStorage.setItem(key, JSON.stringify({ seq: seq, draft: draft })); } catch (e) { /* private mode, or full */ }
      },
      /* {seq, draft} when a usable copy is kept, else null. */
      load() {
        let copy = null;
        try { copy = JSON.parse(localStorage.getItem(key) || "null"); } catch (e) { return null; }
        if (!copy || typeof copy.seq !== "number" || !copy.draft || typeof copy.draft !== "object") return null;
        return copy;
      },
      clear() {
        try { localStorage.removeItem(key); } catch (e) { /* ignore */ }
      },
    };
  }

  // ---- active time: counted while the page is visible, paused while it is hidden
  function activeClock(hooks) {
    const on = hooks || {};
    let pending = 0;
    let visibleSince = document.visibilityState === "visible" ? performance.now() : null;

    document.addEventListener("visibilitychange", () => {
      if (document.visibilityState === "visible") {
        visibleSince = performance.now();
        if (on.visible) on.visible();
      } else {
        if (visibleSince !== null) pending += performance.now() - visibleSince;
        visibleSince = null;
        if (on.hidden) on.hidden();
      }
    });

    return {
      take() {
        if (visibleSince !== null) {
          const now = performance.now();
          pending += now - visibleSince;
          visibleSince = now;
        }
        const ms = Math.round(pending);
        pending -= ms;
        return ms;
      },
      giveBack(ms) { pending += ms; },
    };
  }

  // ---- keyboard: a key typed into a text field is text, never a shortcut. Text fields are
  // textareas, selects, contenteditable elements and every input that takes typing (all types
  // but the buttons, boxes, ranges and pickers). A key held with Ctrl, Cmd or Alt, or typed
  // while an input method composes, is left alone.
  const NOT_TYPING = new Set(["checkbox", "radio", "button", "submit", "reset", "image", "range", "color", "file"]);

  function isTextField(el) {
    if (!el || el.nodeType !== 1) return false;
    if (el.isContentEditable) return true;
    const tag = el.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    return tag === "INPUT" && !NOT_TYPING.has((el.type || "text").toLowerCase());
  }

  /* True when this keydown must not trigger a page shortcut. */
  function ignoreKey(e) {
    return e.isComposing || e.ctrlKey || e.metaKey || e.altKey || isTextField(e.target);
  }

  /* onKey(key, event) gets the key in lower case and returns the action to run (the key's
   * default is then prevented) or nothing. */
  function shortcuts(onSubmit, onKey) {
    document.addEventListener("keydown", (e) => {
      if ((e.ctrlKey || e.metaKey) && e.key === "Enter") { e.preventDefault(); onSubmit(); return; }
      if (e.defaultPrevented || ignoreKey(e)) return;
      const action = onKey(e.key.toLowerCase(), e);
      if (action) { e.preventDefault(); action(); }
    });
  }

  // ---- a study kind's script on the one-item page (annotate.js drives it)
  const KIND_FUNCTIONS = ["init", "getDraft", "hasContent", "showErrors"];

  /* init(context) gets {draft, nL1, nL2, log(eventType, target?), onChange() after every edit,
   * changed(eventType?, target?): the event, if any, logged, then onChange()};
   * getDraft() the draft to save; getAnswer() the answer to submit (the draft unless the kind
   * says otherwise); hasContent(); showErrors([{field, message}]); shortcuts {key: action}. */
  function defineKind(kind) {
    KIND_FUNCTIONS.forEach((name) => {
      if (typeof kind[name] !== "function") throw new TypeError("A study kind's script lacks " + name + "().");
    });
    return Object.assign({ getAnswer: kind.getDraft, shortcuts: {} }, kind);
  }

  // ---- "This item is broken" / "I'm unsure" (annotate/_item_flags.html, docs/annotation.md
  // "Flags"): one flag at most (ticking one clears the other), kept in the draft and sent with
  // the answer as "flag"; the server checks it. root holds one item's controls (its parts are
  // found by data-flag-part, so a page may hold several); changed(eventType?, target?) is called
  // after every edit, with "flag" when a flag or a reason changes and nothing while the note is
  // typed. Without the controls in root, an inert helper: no flag, nothing shown.
  function itemFlags(root, changed) {
    const box = root ? root.querySelector(".item-flags") : null;
    const part = (name) => box.querySelector('[data-flag-part="' + name + '"]');
    if (!box) {
      return { present: false, value: () => null, broken: () => false, set() {}, withFlag: (v) => Object.assign({}, v), showErrors() {} };
    }
    const broken = part("broken");
    const unsure = part("unsure");
    const reason = part("reason");
    const note = part("note");
    const error = part("error");

    function value() {
      if (broken.checked) return { flag: "broken", reason: reason.value, note: note.value };
      if (unsure.checked) return { flag: "unsure", note: note.value };
      return null;
    }
    function render() {
      part("broken-details").hidden = !broken.checked;
      part("note-box").hidden = !(broken.checked || unsure.checked);
    }
    /* Shows a saved flag (a draft's "flag", or nothing). */
    function set(saved) {
      const flag = saved && typeof saved === "object" ? saved : {};
      broken.checked = flag.flag === "broken";
      unsure.checked = flag.flag === "unsure";
      reason.value = typeof flag.reason === "string" ? flag.reason : "";
      note.value = typeof flag.note === "string" ? flag.note : "";
      render();
    }
    /* A copy of the draft or answer with this item's flag (or without any). */
    function withFlag(answer) {
      const flag = value();
      const out = Object.assign({}, answer);
      if (flag) out.flag = flag; else delete out.flag;
      return out;
    }
    /* The server's messages about the flag (fields flag, flag.reason, flag.note, ...). */
    function showErrors(errors) {
      error.textContent = (errors || []).filter((e) => /^flag(\.|$)/.test(e.field || "")).map((e) => e.message).join(" ");
    }

    [[broken, unsure], [unsure, broken]].forEach(([input, other]) => {
      input.addEventListener("change", () => {
        if (input.checked) other.checked = false;
        render();
        const flag = value();
        changed("flag", flag ? flag.flag : "none");
      });
    });
    reason.addEventListener("change", () => changed("flag", "reason"));
    note.addEventListener("input", () => changed(null));
    render();
    return { present: true, value: value, broken: () => broken.checked, set: set, withFlag: withFlag, showErrors: showErrors };
  }

  // ---- the timer
  function formatSeconds(seconds) {
    const s = Math.max(0, Math.floor(seconds));
    return Math.floor(s / 60) + ":" + String(s % 60).padStart(2, "0");
  }

  return {
    byId: byId,
    appendError: appendError,
    errorLine: errorLine,
    removeButton: removeButton,
    post: post,
    localDraft: localDraft,
    activeClock: activeClock,
    isTextField: isTextField,
    ignoreKey: ignoreKey,
    shortcuts: shortcuts,
    defineKind: defineKind,
    itemFlags: itemFlags,
    formatSeconds: formatSeconds,
  };
})();
