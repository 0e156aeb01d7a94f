// Clicking a legend entry hides or shows the series it names in that plot.
// The page is complete without this script; it only adds the toggling.
(function () {
  document.querySelectorAll("svg.plot").forEach(function (svg) {
    svg.querySelectorAll(".legend[data-series]").forEach(function (entry) {
      entry.addEventListener("click", function () {
        var name = entry.getAttribute("data-series");
        var off = !entry.classList.contains("off");
        entry.classList.toggle("off", off);
        svg.querySelectorAll(".series[data-series], .fault, .unavailable").forEach(function (el) {
          var key = el.getAttribute("data-series") || (el.classList.contains("fault") ? "fault" : "unavailable");
          if (key === name) { el.classList.toggle("off", off); }
        });
      });
    });
  });
})();
