/* Tickwheel dashboard: the copy buttons beside short ids (the full id to the clipboard). */
(function () {
  "use strict";
  document.addEventListener("click", function (ev) {
    var b = ev.target.closest("button[data-copy]");
    if (!b || !navigator.clipboard) { return; }
    navigator.clipboard.writeText(b.dataset.copy).then(function () {
      b.textContent = "copied";
    }, function () { /* no clipboard permission: the title still shows the id */ });
  });
})();
