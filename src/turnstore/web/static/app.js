// turnstore viewer: small progressive enhancements. Every page works without this file.
"use strict";

// Open the tool call named by the address (#call-N) and bring it into view.
function openTarget() {
  const id = decodeURIComponent(location.hash.slice(1));
  if (!id) return;
  const target = document.getElementById(id);
  if (!target) return;
  if (target.tagName === "DETAILS") target.open = true;
  target.scrollIntoView({ block: "start" });
  target.classList.add("flash");
}

// Replace a "show earlier / later turns" link with the turns it points to, in place.
async function loadFragment(link) {
  link.setAttribute("aria-busy", "true");
  try {
    const response = await fetch(link.dataset.fragment, { headers: { Accept: "text/html" } });
    if (!response.ok) throw new Error(String(response.status));
    // Server-rendered and escaped; a <template> never runs what it parses.
    const template = document.createElement("template");
    template.innerHTML = await response.text();
    const pager = link.closest(".pager");
    const before = pager.nextElementSibling === null ? null : window.scrollY;
    const height = document.documentElement.scrollHeight;
    pager.replaceWith(template.content);
    // Earlier turns go above what is being read: keep it where it was.
    if (before !== null) window.scrollTo(0, before + document.documentElement.scrollHeight - height);
  } catch (error) {
    window.location.href = link.href;
  }
}

document.addEventListener("click", (event) => {
  const toggle = event.target.closest("[data-toggle-all]");
  if (toggle) {
    const open = toggle.dataset.toggleAll === "open";
    document.querySelectorAll("details.call").forEach((d) => { d.open = open; });
    return;
  }
  const more = event.target.closest("a[data-fragment]");
  if (more && !event.metaKey && !event.ctrlKey && !event.shiftKey) {
    event.preventDefault();
    loadFragment(more);
  }
});

window.addEventListener("hashchange", openTarget);
if (document.readyState === "loading") {
  document.addEventListener("DOMContentLoaded", openTarget);
} else {
  openTarget();
}
