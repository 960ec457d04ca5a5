/* The annotation page, shared by the one-item study kinds: goal acknowledgement, step
 * openings and the progress bar (where the kind's template has them), autosave (on every change and every few seconds), tab-visible time,
 * the timer, keyboard shortcuts and Submit & Continue.
 *
 * The server decides everything: it records the goal acknowledgement and each step
 * opening when they happen, refuses early or incomplete submits, and stores the draft.
 * This script only reports what happens and shows what the server says. A copy of the
 * draft is kept in localStorage so nothing typed is lost if the network drops. The request,
 * that copy, the active-time clock and the shortcut keys are core.js's (window.AnnotateCore);
 * the kind's part of the page is its own script (window.AnnotateKind). */
"use strict";
(function () {
  const state = JSON.parse(document.getElementById("page-state").textContent);
  const core = window.AnnotateCore;
  const kind = core.defineKind(window.AnnotateKind);
  const $ = core.byId;
  const localCopy = core.localDraft(state.assignment);
  const submissionId = (window.crypto && crypto.randomUUID) ? crypto.randomUUID()
    : String(Date.now()) + "-" + Math.random().toString(16).slice(2);

  let seq = state.draftSeq || 0;
  let draftDirty = false;
  let events = [];
  let inflight = null;
  let again = false;
  let stopped = false;      // the server said this item is closed (already submitted)
  let submitting = false;
  let touched = false;      // something was entered on this page and not yet submitted
  const pageStart = performance.now();
  const opened = new Set(state.stepsOpened || []);
  const totalSteps = state.nL1 + state.nL2;

  function status(text) { $("save-status").textContent = text; }

  function log(type, target) {
    const e = { type: type, client_t: Math.round(performance.now() - pageStart) };
    if (target !== undefined && target !== null) e.target = String(target);
    events.push(e);
  }

  // Visible time: hiding the page logs it and saves what was counted so far.
  const clock = core.activeClock({
    visible: () => log("visible"),
    hidden: () => { log("hidden"); save(); },
  });

  // ---- "This item is broken" / "I'm unsure" (annotate/_item_flags.html): core.js's helper,
  // the same as on a page of several items; kept in the draft and sent with the answer.
  const flags = core.itemFlags($("annotation"), (type, target) => changed(type, target));
  const withFlag = flags.withFlag;
  const fullDraft = () => withFlag(kind.getDraft());

  function backup() { localCopy.save(seq, fullDraft()); }

  function markTouched() {
    touched = kind.hasContent() || flags.value() !== null;
    $("unsaved").hidden = !touched;
  }

  async function save() {
    if (stopped) return;
    if (inflight) { again = true; return inflight; }
    const sentEvents = events;
    events = [];
    const body = { events: sentEvents, active_ms: clock.take() };
    const sentSeq = seq;
    if (draftDirty) { body.draft = fullDraft(); body.seq = seq; }
    status("Saving…");
    inflight = (async () => {
      try {
        const r = await core.post(state.saveUrl, body);
        if (r.status === 200) {
          if (body.draft && sentSeq === seq) draftDirty = false;
          status("All changes saved");
        } else if (r.status === 409 || r.status === 403 || r.status === 404) {
          stopped = true;
          status(r.data.message || "This item is closed.");
        } else {
          status(r.data.message || "Not saved.");
        }
      } catch (e) {
        events = sentEvents.concat(events);
        clock.giveBack(body.active_ms);
        status("Not saved yet: no connection. Your work is kept in this browser and will be saved when the connection is back.");
      } finally {
        inflight = null;
      }
    })();
    await inflight;
    if (again) { again = false; return save(); }
  }

  let saveTimer = null;
  function saveSoon(ms) {
    if (saveTimer) clearTimeout(saveTimer);
    saveTimer = setTimeout(() => { saveTimer = null; save(); }, ms);
  }

  function onChange() {
    seq += 1;
    draftDirty = true;
    backup();
    markTouched();
    saveSoon(700);
  }

  // ---- steps and goal
  function renderStep(button) {
    const read = opened.has(button.dataset.step);
    button.classList.toggle("read", read);
    button.setAttribute("aria-pressed", read ? "true" : "false");
    const sr = button.querySelector(".read-state");
    if (sr) sr.textContent = read ? "read" : "not yet read";
  }

  function renderProgress() {
    if (!$("step-progress")) return;  // a kind without required step openings
    const k = opened.size;
    const pct = totalSteps ? Math.round((100 * k) / totalSteps) : 100;
    $("step-progress-bar").style.width = pct + "%";
    $("step-progress-label").textContent = k + "/" + totalSteps + " steps (" + pct + "%)";
    $("step-progress").setAttribute("aria-valuenow", String(k));
    $("step-progress").setAttribute("aria-valuetext", k + " of " + totalSteps + " steps read");
  }

  document.querySelectorAll("button.step").forEach((button) => {
    renderStep(button);
    button.addEventListener("click", () => {
      const name = button.dataset.step;
      if (opened.has(name)) return;
      opened.add(name);
      renderStep(button);
      renderProgress();
      log("step_open", name);
      save();
    });
  });
  renderProgress();

  const goal = $("goal-ack");  // absent for kinds without the goal acknowledgement
  if (goal) {
    goal.checked = !!state.goalAcknowledged;
    goal.addEventListener("change", () => {
      log(goal.checked ? "goal_ack" : "goal_unack");
      save();
    });
  }

  // ---- the kind's part of the page; a newer local copy of the draft wins over the server's
  let draft = state.draft || {};
  const local = localCopy.load();
  if (local && local.seq > seq) {
    draft = local.draft;
    seq = local.seq;
    draftDirty = true;
  }
  const changed = (type, target) => { if (type) log(type, target); onChange(); };
  kind.init({ draft: draft, nL1: state.nL1, nL2: state.nL2, onChange: onChange, changed: changed, log: log });
  flags.set(draft.flag);
  markTouched();
  if (draftDirty) save();

  setInterval(() => {
    if (!stopped && !submitting) save();
  }, state.autosaveSeconds * 1000);

  // ---- timer
  const fmt = core.formatSeconds;
  const submitButton = $("submit");
  function tick() {
    const elapsed = state.elapsedSeconds + (performance.now() - pageStart) / 1000;
    const left = state.minSeconds - elapsed;
    if (left > 0) {
      $("timer-text").textContent = fmt(Math.ceil(left)) + " until submission becomes open";
      submitButton.setAttribute("aria-disabled", "true");
      submitButton.classList.add("not-open");
    } else {
      $("timer-text").textContent = "Time elapsed: " + fmt(elapsed);
      submitButton.removeAttribute("aria-disabled");
      submitButton.classList.remove("not-open");
    }
  }
  tick();
  setInterval(tick, 500);

  // ---- submit
  function showErrors(message, errors) {
    const box = $("errors");
    box.textContent = "";
    const p = document.createElement("p");
    p.textContent = message;
    box.appendChild(p);
    if (errors && errors.length) {
      const ul = document.createElement("ul");
      errors.forEach((e) => { const li = document.createElement("li"); li.textContent = e.message; ul.appendChild(li); });
      box.appendChild(ul);
    }
    box.hidden = false;
    document.querySelectorAll("button.step").forEach((b) => b.classList.toggle("missing", (errors || []).some((e) => e.field === "steps") && !opened.has(b.dataset.step)));
    if (goal) goal.closest(".goal-box").classList.toggle("missing", (errors || []).some((e) => e.field === "goal"));
    kind.showErrors(errors || []);
    flags.showErrors(errors || []);
    box.focus();
  }

  async function submit(event) {
    if (event) event.preventDefault();
    if (submitting) return;
    submitting = true;
    submitButton.disabled = true;
    log("submit_attempt");
    try {
      await save();
      const r = await core.post(state.submitUrl, { answer: withFlag(kind.getAnswer()), submission_id: submissionId });
      if (r.status === 200 && r.data.ok) {
        localCopy.clear();
        stopped = true;
        status("Submitted");
        window.location.assign(r.data.next);
        return;
      }
      showErrors(r.data.message || "The answer was not submitted.", r.data.errors);
    } catch (e) {
      showErrors("Could not reach the server. Your answer is kept in this browser; press Submit & Continue again in a moment.", []);
    }
    submitting = false;
    submitButton.disabled = false;
  }
  $("annotation").addEventListener("submit", submit);

  // ---- keyboard shortcuts
  core.shortcuts(submit, (key) => kind.shortcuts[key]);

  // Leaving the page: keep the newest draft in this browser (the next visit sends it).
  window.addEventListener("pagehide", () => { if (!stopped && draftDirty) backup(); });
})();
