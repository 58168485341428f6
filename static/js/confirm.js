// Asking before something is deleted, on pages whose Delete (or Revoke) is a link to a page
// that asks (memory/delete_confirm.html, access/token_revoke.html): that page is what happens
// without this script. With it, a link marked data-confirm opens the page's dialog instead,
// which quotes what goes (the data-confirm text) and posts to the link's address; Cancel and
// Escape close it, and the focus goes back to the link.
"use strict";
(() => {
  function setup() {
    const dialog = document.getElementById("confirm-dialog");
    if (!dialog || typeof dialog.showModal !== "function") {
      return;
    }
    const form = dialog.querySelector("form");
    const quote = document.getElementById("confirm-dialog-quote");
    let opener = null;

    document.addEventListener("click", (event) => {
      const link = event.target.closest("a[data-confirm]");
      if (!link || event.button !== 0 || event.ctrlKey || event.metaKey || event.shiftKey) {
        return;
      }
      event.preventDefault();
      opener = link;
      // The address without its query: what the page was showing (a search) is in the form.
      form.action = link.pathname;
      quote.textContent = link.dataset.confirm;
      dialog.showModal();
    });
    dialog.addEventListener("close", () => {
      opener?.focus();
      opener = null;
    });
  }

  document.addEventListener("DOMContentLoaded", setup);
})();
