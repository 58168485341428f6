// A Copy button beside something shown once (a new token): it copies the text of the element
// its data-copy names and says so in its status. Without this script the button stays hidden
// and the text is selected and copied by hand.
"use strict";
(() => {
  async function copied(text) {
    try {
      await navigator.clipboard.writeText(text);
      return true;
    } catch {
      return false;
    }
  }

  function setup() {
    for (const button of document.querySelectorAll("button[data-copy]")) {
      const source = document.getElementById(button.dataset.copy);
      const status = document.getElementById(`${button.id}-status`);
      if (!source || !navigator.clipboard) {
        continue;
      }
      button.hidden = false;
      button.addEventListener("click", async () => {
        if (await copied(source.textContent.trim())) {
          status.textContent = "Copied.";
        } else {
          // Refused (no permission): the text is selected, for the keyboard's copy.
          getSelection().selectAllChildren(source);
          status.textContent = "Could not copy: it is selected, press Ctrl+C or ⌘C.";
        }
      });
    }
  }

  document.addEventListener("DOMContentLoaded", setup);
})();
