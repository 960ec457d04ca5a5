/* The multiple-choice page (goal-step tasks): one or more questions, each saved on every
   change (server draft plus a localStorage copy) and submitted on its own; the server decides. */
(function () {
  "use strict";
  const state = JSON.parse(document.getElementById("page-state").textContent);
  const cards = Array.from(document.querySelectorAll(".mc-item"));
  const seq = state.items.map((item) => item.draftSeq);
  const submitted = state.items.map(() => false);
  const loadedAt = performance.now();
  let lastActive = performance.now();
  let current = 0;

  function $(id) { return document.getElementById(id); }
  function csrfToken() {
    const m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  function localKey(i) { return "mc-draft:" + state.items[i].assignment; }
  function setStatus(text) { $("save-status").textContent = text; }

  async function post(url, body) {
    const response = await fetch(url, {
      method: "POST", credentials: "same-origin",
      headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken() },
      body: JSON.stringify(body),
    });
    let data = {};
    try { data = await response.json(); } catch (e) { data = { message: "The server sent no answer (" + response.status + ")." }; }
    return { ok: response.ok && data.ok !== false, status: response.status, data: data };
  }

  function choiceOf(i) {
    const checked = cards[i].querySelector("input[type=radio]:checked");
    if (!checked) return null;
    return /^\d+$/.test(checked.value) ? Number(checked.value) : checked.value;
  }

  function restore(i) {
    let draft = state.items[i].draft || {};
    try {
      const local = JSON.parse(localStorage.getItem(localKey(i)) || "null");
      if (local && local.seq > seq[i]) { draft = local.draft; save(i, draft); }
    } catch (e) { /* no local copy */ }
    if (draft.choice !== null && draft.choice !== undefined) {
      const input = cards[i].querySelector('input[value="' + draft.choice + '"]');
      if (input) input.checked = true;
    }
  }

  function takeActive() {
    const now = performance.now();
    const ms = document.visibilityState === "visible" ? now - lastActive : 0;
    lastActive = now;
    return Math.round(ms);
  }

  async function save(i, draft) {
    seq[i] += 1;
    const body = { draft: draft || { choice: choiceOf(i) }, seq: seq[i], active_ms: takeActive() };
    try { localStorage.setItem(localKey(i), JSON.stringify({ seq: seq[i], draft: body.draft })); } catch (e) { /* full */ }
    setStatus("Saving…");
    const result = await post(state.items[i].saveUrl, body);
    setStatus(result.ok ? "All changes saved" : (result.data.message || "Not saved"));
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
    const fmt = (s) => Math.floor(s / 60) + ":" + String(Math.floor(s % 60)).padStart(2, "0");
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
    const missing = cards.map((_, i) => i).filter((i) => !submitted[i] && choiceOf(i) === null);
    if (missing.length) {
      showErrors(missing.map((i) => "Question " + (i + 1) + ": choose one option. " + $("guidance").textContent));
      setCurrent(missing[0]);
      return;
    }
    busy = true;
    const problems = [];
    let next = state.nextUrl;
    for (let i = 0; i < cards.length; i++) {
      if (submitted[i]) continue;
      const result = await post(state.items[i].submitUrl, {
        answer: { choice: choiceOf(i) }, submission_id: state.items[i].assignment + ":" + seq[i],
      });
      if (result.ok) {
        submitted[i] = true;
        next = result.data.next || next;
        cards[i].disabled = true;
        cards[i].querySelector(".mc-state").textContent = "Submitted";
        try { localStorage.removeItem(localKey(i)); } catch (e) { /* ignore */ }
      } else {
        problems.push("Question " + (i + 1) + ": " + (result.data.message || "not submitted"));
        if (result.status === 403) break;
      }
    }
    busy = false;
    if (problems.length) { showErrors(problems); return; }
    window.location.assign(next);
  }

  cards.forEach((card, i) => {
    restore(i);
    card.addEventListener("change", () => save(i));
    card.addEventListener("focusin", () => setCurrent(i));
  });
  setCurrent(0);
  $("mc-page").addEventListener("submit", submitPage);
  document.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); submitPage(); return; }
    if (window.AnnotateKeys.ignore(e)) return;
    const options = cards[current].querySelectorAll("input[type=radio]").length - 1;
    if (/^[1-9]$/.test(e.key) && Number(e.key) <= options) { e.preventDefault(); choose(current, String(Number(e.key) - 1)); }
    else if (e.key === "0") { e.preventDefault(); const extra = cards[current].querySelector(".mc-extra input"); if (extra) choose(current, extra.value); }
    else if (e.key === "j" || e.key === "J") { e.preventDefault(); setCurrent(current + 1); cards[current].scrollIntoView({ block: "center" }); }
    else if (e.key === "k" || e.key === "K") { e.preventDefault(); setCurrent(current - 1); cards[current].scrollIntoView({ block: "center" }); }
  });
  tick();
  setInterval(tick, 500);
})();
