/* The completion page's "Copy code" button. The button stays hidden without this script (the
 * code is plain text to copy by hand). Where the clipboard API is missing or refused (an
 * insecure origin, a denied permission), the code is selected instead so that Ctrl+C / a long
 * press copies it, and the status line says so. */
"use strict";
(function () {
  const button = document.getElementById("copy-code");
  if (!button) return;
  const code = document.getElementById(button.dataset.target);
  const status = document.getElementById("copy-status");
  if (!code) return;
  button.hidden = false;

  function selectCode() {
    const range = document.createRange();
    range.selectNodeContents(code);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
  }

  function fallback() {
    selectCode();
    button.dataset.copied = "selected";
    status.textContent = "The code is selected: press Ctrl+C (or ⌘+C, or long-press) to copy it.";
  }

  button.addEventListener("click", async () => {
    const text = code.textContent.trim();
    if (!navigator.clipboard || !window.isSecureContext) { fallback(); return; }
    try {
      await navigator.clipboard.writeText(text);
      button.dataset.copied = "clipboard";
      status.textContent = "Copied.";
    } catch (e) {
      fallback();
    }
  });
})();
