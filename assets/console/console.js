// keyhaven console: the little the pages need beyond HTML (they all work without it). Loaded as a file: the CSP
// allows no inline script.
(() => {
  const COLORS = ["#1a7f37", "#b42318", "#9a6700", "#0a58ca", "#8250df", "#bf3989", "#57606a", "#0550ae", "#953800", "#116329"];

  // A chart: <div class="chart" data-chart='{"x":[unix seconds…],"series":[{"label":"VALID","values":[…]}…]}'>.
  function drawCharts(root) {
    if (typeof uPlot !== "function") return;
    for (const el of root.querySelectorAll("[data-chart]")) {
      if (el.dataset.drawn === "1") continue;
      let data;
      try {
        data = JSON.parse(el.dataset.chart);
      } catch {
        continue;
      }
      el.dataset.drawn = "1";
      const width = Math.max(320, el.clientWidth || 800);
      const opts = {
        width,
        height: 240,
        series: [{}, ...data.series.map((s, i) => ({ label: s.label, stroke: COLORS[i % COLORS.length], width: 2 }))],
        axes: [{}, { size: 50 }],
        scales: { x: { time: true } },
      };
      // uPlot sets its sizes through the CSSOM (element.style), which the CSP permits; it writes no style attribute.
      new uPlot(opts, [data.x, ...data.series.map((s) => s.values)], el);
    }
  }

  // A copy button: <button data-copy="#id-of-the-code-element">.
  document.addEventListener("click", (event) => {
    const button = event.target.closest("[data-copy]");
    if (!button) return;
    const source = document.querySelector(button.dataset.copy);
    if (!source || !navigator.clipboard) return;
    navigator.clipboard.writeText(source.textContent.trim()).then(() => {
      button.textContent = "Copied";
    });
  });

  // A form that asks first: <form data-confirm="Delete this key?">.
  document.addEventListener(
    "submit",
    (event) => {
      const form = event.target.closest("form[data-confirm]");
      if (form && !window.confirm(form.dataset.confirm)) event.preventDefault();
    },
    true,
  );

  document.addEventListener("DOMContentLoaded", () => drawCharts(document));
  // htmx swaps a fragment in: draw the charts it brought (htmx 2 and 4 name the event differently).
  for (const name of ["htmx:afterSettle", "htmx:after:swap", "htmx:after:settle"]) {
    document.addEventListener(name, (event) => drawCharts(event.target instanceof Element ? event.target : document));
  }
})();
