// sluice console: confirmation of destructive forms, and an optional
// refresh of the page (kept off while a form field has the focus).
(function () {
  "use strict";
  document.addEventListener("submit", function (e) {
    var msg = e.target.getAttribute("data-confirm");
    if (msg && !window.confirm(msg)) { e.preventDefault(); }
  });
  var box = document.getElementById("autorefresh");
  if (!box) { return; }
  box.checked = sessionStorage.getItem("sluice-refresh") === "1";
  box.addEventListener("change", function () { sessionStorage.setItem("sluice-refresh", box.checked ? "1" : "0"); });
  setInterval(function () {
    var a = document.activeElement;
    if (box.checked && !(a && (a.tagName === "INPUT" && a !== box || a.tagName === "TEXTAREA" || a.tagName === "SELECT"))) {
      window.location.reload();
    }
  }, 5000);
})();
