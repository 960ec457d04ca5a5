/* The one rule every annotation page's shortcuts follow: a key typed into a text field is
 * text, never a shortcut. Text fields are textareas, selects, contenteditable elements and
 * every input that takes typing (all types but the buttons, boxes, ranges and pickers).
 * A key held with Ctrl, Cmd or Alt, or typed while an input method composes, is left alone. */
"use strict";
window.AnnotateKeys = (function () {
  const NOT_TYPING = new Set(["checkbox", "radio", "button", "submit", "reset", "image", "range", "color", "file"]);

  function isTextField(el) {
    if (!el || el.nodeType !== 1) return false;
    if (el.isContentEditable) return true;
    const tag = el.tagName;
    if (tag === "TEXTAREA" || tag === "SELECT") return true;
    return tag === "INPUT" && !NOT_TYPING.has((el.type || "text").toLowerCase());
  }

  /* True when this keydown must not trigger a page shortcut. */
  function ignore(e) {
    return e.isComposing || e.ctrlKey || e.metaKey || e.altKey || isTextField(e.target);
  }

  return { isTextField: isTextField, ignore: ignore };
})();
