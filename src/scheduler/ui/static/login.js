/* The login link: /login#token=SECRET. The token sits in the fragment, which the
   browser never sends to a server (no access log, no Referer); this script posts it
   once with the page's CSRF token and removes it from the address bar and history.
   A link opened on this very page only changes the fragment: hashchange. */
(function () {
  "use strict";
  function useLink() {
    var match = /(?:^#|&)token=([^&]+)/.exec(window.location.hash);
    if (!match) { return; }
    window.history.replaceState(null, "", window.location.pathname + window.location.search);
    document.getElementById("link-token").value = decodeURIComponent(match[1]);
    document.getElementById("login-link-form").submit();
  }
  window.addEventListener("hashchange", useLink);
  useLink();
}());
