// The dashboard refreshes itself: every second it asks the manager for the board (the same
// server-rendered, escaped HTML the page was first served with) and swaps it in. Nothing is
// built from data here, so nothing here can turn an item name into markup.
(function () {
  "use strict";
  var board = document.getElementById("board");
  var live = document.getElementById("live");
  var failures = 0;

  function say(text, trouble) {
    live.textContent = text;
    live.className = trouble ? "live trouble" : "live";
  }

  function refresh() {
    fetch("ui/board", { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        if (!response.ok) { throw new Error("HTTP " + response.status); }
        return response.text();
      })
      .then(function (html) {
        board.innerHTML = html;
        failures = 0;
        say("live: updated " + new Date().toLocaleTimeString(), false);
      })
      .catch(function (error) {
        failures += 1;
        say("cannot reach the manager (" + error.message + "); retrying", true);
      })
      .finally(function () {
        setTimeout(refresh, Math.min(1000 * Math.pow(2, failures), 10000));
      });
  }

  say("live", false);
  setTimeout(refresh, 1000);
})();
