// toolgate console: follows the calls view live. The page works without
// this script; with it, calls recorded after the page was drawn appear at
// the top. Every value is set as text, never as markup.
(function () {
  "use strict";
  var body = document.getElementById("calls-body");
  var state = document.getElementById("live-state");
  if (!body || !body.dataset.live || !window.EventSource) {
    return;
  }
  var say = function (text) {
    if (state) {
      state.textContent = text;
    }
  };
  var source = new EventSource(body.dataset.live);
  source.addEventListener("calls", function (event) {
    JSON.parse(event.data).forEach(function (call) {
      var row = document.createElement("tr");
      row.id = "call-" + call.id;
      row.className = "new";
      call.cells.forEach(function (text, i) {
        var cell = document.createElement("td");
        if (i === 0) {
          var link = document.createElement("a");
          link.href = call.href;
          link.textContent = text;
          cell.appendChild(link);
        } else {
          cell.textContent = text;
        }
        row.appendChild(cell);
      });
      body.insertBefore(row, body.firstChild);
    });
  });
  source.onopen = function () {
    say("Following new calls live.");
  };
  source.onerror = function () {
    say("Live updates paused: reconnecting.");
  };
})();
