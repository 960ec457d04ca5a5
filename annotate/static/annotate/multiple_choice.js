/* The multiple-choice page (goal-step tasks): one or more questions, each saved on every
   change (server draft plus a localStorage copy) and submitted on its own; the server decides.
   The request, the local copy, the active-time clock (paused while the page is hidden, as on
   every annotator page; each save carries what it counted since the previous save, and a save
   is sent when the page is hidden and before a submit) and the
   shortcut keys are core.js's (window.AnnotateCore). Each question has its own "This item is
   broken" / "I'm unsure" controls (annotate/_item_flags.html, core.js's itemFlags, as on the
   one-item page): the flag goes with that question's draft and answer, and a question flagged
   broken is submitted without a choice (docs/annotation.md, "Flags"). */
(function () {
  "use strict";
  const core = window.AnnotateCore;
  const state = JSON.parse(document.getElementById("page-state").textContent);
  const cards = Array.from(document.querySelectorAll(".mc-item"));
  const seq = state.items.map((item) => item.draftSeq);
  const submitted = state.items.map(() => false);
  const localCopies = state.items.map((item) => core.localDraft(item.assignment));
  // The time counted since the last save goes with a save when the page is hidden and before
  // a submit (as on the one-item page), so time spent after the last change is not lost.
  const clock = core.activeClock({ hidden: () => flush() });
  const loadedAt = performance.now();
  let current = 0;
  // One flag helper per question; a flag or reason change saves at once; the note is kept in
  // this browser at each keystroke (the copy a reload sends) and saved 0.7 s after typing stops.
  const saveTimers = cards.map(() => null);
  const flags = cards.map((card, i) => core.itemFlags(card, (type) => {
    if (type) { save(i).catch(() => { /* kept in this browser: the next save carries it */ }); return; }
    localCopies[i].save(seq[i] + 1, draftOf(i));
    saveSoon(i);
  }));

  const $ = core.byId;
  function setStatus(text) { $("save-status").textContent = text; }

  function choiceOf(i) {
    const checked = cards[i].querySelector("input[type=radio]:checked");
    if (!checked) return null;
    return /^\d+$/.test(checked.value) ? Number(checked.value) : checked.value;
  }

  /* Question i's draft (and answer): its choice and its flag. */
  function draftOf(i) { return flags[i].withFlag({ choice: choiceOf(i) }); }

  function saveSoon(i) {
    if (saveTimers[i]) clearTimeout(saveTimers[i]);
    saveTimers[i] = setTimeout(() => {
      saveTimers[i] = null;
      if (!submitted[i]) save(i).catch(() => { /* kept in this browser: the next save carries it */ });
    }, 700);
  }

  function restore(i) {
    let draft = state.items[i].draft || {};
    const local = localCopies[i].load();
    if (local && local.seq > seq[i]) { draft = local.draft; save(i, draft); }
    if (draft.choice !== null && draft.choice !== undefined) {
      const input = cards[i].querySelector('input[value="' + draft.choice + '"]');
      if (input) input.checked = true;
    }
    flags[i].set(draft.flag);
  }

  async function save(i, draft) {
    seq[i] += 1;
    const body = { draft: draft || draftOf(i), seq: seq[i], active_ms: clock.take() };
    localCopies[i].save(seq[i], body.draft);
    setStatus("Saving…");
    let result;
    try {
      result = await core.post(state.items[i].saveUrl, body);
    } catch (e) {
      clock.giveBack(body.active_ms);  // not delivered: the next save carries it
      throw e;
    }
    setStatus(result.ok ? "All changes saved" : (result.data.message || "Not saved"));
  }

  function flush() {
    const i = submitted.indexOf(false);
    return i < 0 ? Promise.resolve() : save(i).catch(() => { /* kept: the next save carries it */ });
  }

  function setCurrent(i) {
    current = Math.max(0, Math.min(cards.length - 1, i));
    cards.forEach((card, k) => card.classList.toggle("current", k === current));
  }

  function choose(i, value) {
    const input = cards[i].querySelector('input[value="' + value + '"]');
    if (!input || submitted[i]) return;
    input.checked = true;
    input.focus();
    save(i);
    if (i + 1 < cards.length) setCurrent(i + 1);
  }

  function secondsLeft() {
    const waited = (performance.now() - loadedAt) / 1000;
    return Math.max(0, ...state.items.map((item) => state.minSeconds - item.elapsedSeconds - waited));
  }

  function tick() {
    const left = Math.ceil(secondsLeft());
    const fmt = core.formatSeconds;
    $("timer-text").textContent = left > 0 ? fmt(left) + " until submission becomes open"
      : "Time elapsed: " + fmt((performance.now() - loadedAt) / 1000 + Math.min(...state.items.map((x) => x.elapsedSeconds)));
  }

  function showErrors(lines) {
    const box = $("errors");
    box.replaceChildren(...lines.map((line) => { const p = document.createElement("p"); p.textContent = line; return p; }));
    box.hidden = lines.length === 0;
    if (lines.length) box.focus();
  }

  let busy = false;
  async function submitPage(event) {
    if (event) event.preventDefault();
    if (busy) return;
    // A question flagged broken needs no choice (never a trap); the server checks its reason.
    const missing = cards.map((_, i) => i).filter((i) => !submitted[i] && !flags[i].broken() && choiceOf(i) === null);
    if (missing.length) {
      showErrors(missing.map((i) => "Question " + (i + 1) + ": choose one option. " + $("guidance").textContent));
      setCurrent(missing[0]);
      return;
    }
    busy = true;
    await flush();
    const problems = [];
    let firstProblem = null;
    let next = state.nextUrl;
    for (let i = 0; i < cards.length; i++) {
      if (submitted[i]) continue;
      flags[i].showErrors([]);
      const result = await core.post(state.items[i].submitUrl, {
        answer: draftOf(i), submission_id: state.items[i].assignment + ":" + seq[i],
      });
      if (result.ok) {
        submitted[i] = true;
        next = result.data.next || next;
        cards[i].disabled = true;
        cards[i].querySelector(".mc-state").textContent = "Submitted";
        localCopies[i].clear();
      } else {
        problems.push("Question " + (i + 1) + ": " + (result.data.message || "not submitted"));
        flags[i].showErrors(result.data.errors);  // the flag's own messages, beside its controls
        if (firstProblem === null) firstProblem = i;
        if (result.status === 403) break;
      }
    }
    busy = false;
    if (problems.length) { showErrors(problems); setCurrent(firstProblem); return; }
    window.location.assign(next);
  }

  cards.forEach((card, i) => {
    restore(i);
    // The flag's controls save through their helper (above); a choice saves here.
    card.addEventListener("change", (e) => { if (!e.target.closest(".item-flags")) save(i); });
    card.addEventListener("focusin", () => setCurrent(i));
  });
  setCurrent(0);
  $("mc-page").addEventListener("submit", submitPage);
  function move(by) { setCurrent(current + by); cards[current].scrollIntoView({ block: "center" }); }
  core.shortcuts(submitPage, (key) => {
    const options = cards[current].querySelectorAll("input[type=radio]").length - 1;
    if (/^[1-9]$/.test(key) && Number(key) <= options) return () => choose(current, String(Number(key) - 1));
    if (key === "0") return () => { const extra = cards[current].querySelector(".mc-extra input"); if (extra) choose(current, extra.value); };
    if (key === "j") return () => move(1);
    if (key === "k") return () => move(-1);
    return null;
  });
  tick();
  setInterval(tick, 500);
})();
