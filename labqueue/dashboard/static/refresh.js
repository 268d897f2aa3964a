// labqueue dashboard: refresh the overview's numbers in place every few seconds, while the
// tab is visible. Only the <section data-refresh> is replaced (forms outside it keep what
// was typed). With JavaScript off the page's Refresh link does the same.
(function () {
  "use strict";
  var live = document.querySelector("[data-refresh]");
  if (!live || !window.fetch || !window.DOMParser) return;
  var every = Math.max(2, Number(live.getAttribute("data-refresh")) || 5) * 1000;
  setInterval(function () {
    if (document.hidden) return;
    fetch(location.href, { credentials: "same-origin" })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (html === null) return;
        var fresh = new DOMParser().parseFromString(html, "text/html").querySelector("[data-refresh]");
        if (fresh && live.parentNode) {
          live.parentNode.replaceChild(document.importNode(fresh, true), live);
          live = document.querySelector("[data-refresh]");
        }
      })
      .catch(function () { /* the next tick tries again */ });
  }, every);
})();
