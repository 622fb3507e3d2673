// The tamesu HTML report's only script: filters, search, open/close all, and every test opened for printing.
// The page is complete without it; nothing here loads or sends anything.
(function () {
  "use strict";
  var root = document.documentElement;
  root.classList.add("js");
  var tests = Array.prototype.slice.call(document.querySelectorAll("details.test"));
  var buttons = Array.prototype.slice.call(document.querySelectorAll("[data-filter]"));
  var search = document.querySelector(".controls input");
  var shown = document.querySelector(".controls .shown");
  var state = { status: "all", text: "" };

  function apply() {
    var count = 0;
    tests.forEach(function (test) {
      var visible = (state.status === "all" || test.dataset.status === state.status) &&
        (!state.text || test.dataset.name.indexOf(state.text) !== -1);
      test.hidden = !visible;
      if (visible) { count += 1; }
    });
    buttons.forEach(function (button) {
      button.setAttribute("aria-pressed", String(button.dataset.filter === state.status));
    });
    if (shown) { shown.textContent = count + " of " + tests.length + " shown"; }
  }

  buttons.forEach(function (button) {
    button.addEventListener("click", function () { state.status = button.dataset.filter; apply(); });
  });
  if (search) {
    search.addEventListener("input", function () { state.text = search.value.trim().toLowerCase(); apply(); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("[data-expand]"), function (button) {
    button.addEventListener("click", function () {
      var open = button.dataset.expand === "1";
      tests.forEach(function (test) { if (!test.hidden) { test.open = open; } });
    });
  });

  // Paper shows what the screen hides: open every test before printing, restore afterwards.
  var closed = [];
  window.addEventListener("beforeprint", function () {
    closed = Array.prototype.slice.call(document.querySelectorAll("details:not([open])"));
    closed.forEach(function (d) { d.open = true; });
  });
  window.addEventListener("afterprint", function () {
    closed.forEach(function (d) { d.open = false; });
    closed = [];
  });

  // A link to #t-... opens that test.
  function openTarget() {
    var id = decodeURIComponent(location.hash.slice(1));
    var target = id && document.getElementById(id);
    if (target && target.tagName === "DETAILS") { target.open = true; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  apply();
})();
