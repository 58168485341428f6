// What every page's header does. A plain script loaded in <head>, so that the remembered theme
// applies before the page is first painted.
//
// The colour theme follows the system's setting until the person picks light or dark with the
// header's switch; the choice is remembered in this browser. The key and its values ("auto",
// "light", "dark" in localStorage "theme") are those of Django's admin, so both agree.
//
// On phones the navigation folds behind a Menu button; without this script it stays unfolded.
// The reader's time zone goes into the "tz" cookie, so dates come in it.
"use strict";
(() => {
  const KEY = "theme";
  const root = document.documentElement;
  const systemDark = window.matchMedia("(prefers-color-scheme: dark)");

  function remembered() {
    try {
      return localStorage.getItem(KEY);
    } catch {
      return null;
    }
  }

  function apply(mode) {
    root.dataset.theme = mode === "light" || mode === "dark" ? mode : "auto";
  }

  function isDark() {
    return root.dataset.theme === "dark" || (root.dataset.theme === "auto" && systemDark.matches);
  }

  /** The switch says what it turns the page to, as ChatGPT's and Claude's do. */
  function showState(button) {
    button.textContent = isDark() ? "Light theme" : "Dark theme";
  }

  apply(remembered());
  root.classList.add("has-script");

  // The reader's time zone, for the dates the server writes (chatapp.middleware).
  try {
    const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
    if (zone && !document.cookie.split("; ").includes(`tz=${encodeURIComponent(zone)}`)) {
      const secure = location.protocol === "https:" ? "; secure" : "";
      document.cookie = `tz=${encodeURIComponent(zone)}; path=/; max-age=31536000; samesite=lax${secure}`;
    }
  } catch {
    // No Intl time zone: dates stay in the server's.
  }

  function menuSetup() {
    const toggle = document.getElementById("menu-toggle");
    const nav = document.getElementById("site-nav");
    if (!toggle || !nav) {
      return;
    }
    const setOpen = (open) => {
      toggle.setAttribute("aria-expanded", String(open));
      nav.classList.toggle("open", open);
    };
    toggle.hidden = false;
    toggle.addEventListener("click", () => {
      setOpen(toggle.getAttribute("aria-expanded") !== "true");
    });
    nav.addEventListener("keydown", (event) => {
      if (event.key === "Escape" && nav.classList.contains("open")) {
        setOpen(false);
        toggle.focus();
      }
    });
  }

  function themeSwitchSetup() {
    const button = document.getElementById("theme-toggle");
    if (!button) {
      return;
    }
    showState(button);
    button.hidden = false;
    button.addEventListener("click", () => {
      const mode = isDark() ? "light" : "dark";
      try {
        localStorage.setItem(KEY, mode);
      } catch {
        // Storage refused (private mode): the switch still works for this page.
      }
      apply(mode);
      showState(button);
    });
    systemDark.addEventListener("change", () => showState(button));
    window.addEventListener("storage", (event) => {
      if (event.key === KEY) {
        apply(event.newValue);
        showState(button);
      }
    });
  }

  document.addEventListener("DOMContentLoaded", () => {
    menuSetup();
    themeSwitchSetup();
  });
})();
