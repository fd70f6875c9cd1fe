// Draws the memleak-ai report from window.MEMLEAK: the timelines with the inlined Chart.js (Debian's
// libjs-chart.js), the flame graph with flame.js (ours), the table as DOM text.
(function () {
  "use strict";
  const M = window.MEMLEAK;
  const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf"];
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  function fmtBytes(v) {
    if (v == null) return "";
    let u = 0, x = Math.abs(v);
    while (x >= 1024 && u < units.length - 1) { x /= 1024; u++; }
    return (v < 0 ? "-" : "") + (u ? x.toFixed(1) : x.toFixed(0)) + " " + units[u];
  }
  // A line chart of series [{label, values}] over t (seconds); a null value is a gap, drawn across.
  // Labels come from the traced program: Chart.js draws them on the canvas, as text.
  function plot(el, t, series) {
    if (!t.length || !series.length) { el.textContent = "(no data)"; el.style.height = "auto"; return; }
    const canvas = document.createElement("canvas");
    el.appendChild(canvas);
    new Chart(canvas, {
      type: "line",
      data: {
        datasets: series.map((s, i) => s.peak ? {
          label: s.label, data: [{ x: s.peak.at_s, y: s.peak.bytes }], showLine: false, pointRadius: 7,
          pointStyle: "triangle", borderColor: "#000", backgroundColor: "#d62728" } : {
          label: s.label, data: t.map((x, k) => ({ x, y: s.values[k] })), spanGaps: true,
          borderColor: COLORS[i % COLORS.length], backgroundColor: COLORS[i % COLORS.length],
          borderWidth: 2, pointRadius: 0, pointHitRadius: 4, tension: 0 }),
      },
      options: {
        animation: false, responsive: true, maintainAspectRatio: false,
        interaction: { mode: "nearest", axis: "x", intersect: false },
        scales: {
          x: { type: "linear", title: { display: true, text: "seconds since start" } },
          y: { beginAtZero: true, ticks: { callback: v => fmtBytes(v) } },
        },
        plugins: {
          legend: { position: "bottom", labels: { boxWidth: 14 } },
          tooltip: { callbacks: {
            title: items => (items.length ? items[0].parsed.x.toFixed(1) + " s" : ""),
            label: c => `${c.dataset.label}: ${fmtBytes(c.parsed.y)}`,
          } },
        },
      },
    });
  }
  document.getElementById("title").textContent = "memleak-ai report: " + (M.pid ? "pid " + M.pid : "node-wide");
  document.getElementById("meta").textContent = M.reports + " reports over " + M.duration_s.toFixed(1) +
    " s; generated " + new Date(M.time_unix * 1000).toISOString();
  // The high-water mark: one marked point on the layers' chart, at its time.
  const layers = Object.keys(M.timeline.layers).map(k => ({ label: k, values: M.timeline.layers[k] }));
  if (M.peak) {
    document.getElementById("meta").textContent += "; peak " + fmtBytes(M.peak.bytes) + " at " +
      M.peak.at_s.toFixed(1) + " s" + (M.exited ? "; the target exited: rows as of its last live report" : "");
    layers.push({ label: "peak", values: M.timeline.t.map(() => null), peak: M.peak });
  }
  plot(document.getElementById("layers"), M.timeline.t, layers);
  plot(document.getElementById("stacks"), M.timeline.t, M.timeline.stacks);
  MemleakFlame.draw(document.getElementById("flame"), M.flame,
                    { width: Math.min(1100, window.innerWidth - 60), format: fmtBytes });
  const body = document.querySelector("#table tbody");
  // With children followed, the rows of several processes share the table: each names its pid.
  const multi = new Set(M.table.map(r => r.pid)).size > 1 || M.table.some(r => r.pid !== M.pid);
  M.table.forEach((r, i) => {
    const tr = document.createElement("tr");
    const cells = [i + 1, multi ? `${r.layer} (pid ${r.pid})` : r.layer, r.verdict, r.leak_score.toFixed(2), fmtBytes(r.bytes), r.count,
                   r.oldest_age_s.toFixed(1), fmtBytes(r.growth_bytes_per_s) + "/s",
                   r.frames.join("\n")];
    cells.forEach((c, k) => {
      const td = document.createElement("td");
      td.textContent = c;  // names come from the traced program: text, never markup
      if (k === 2 && r.verdict === "growing") td.className = "growing";
      if (k >= 3 && k <= 7) td.className = "num";
      if (k === 8) td.className = "stack";
      tr.appendChild(td);
    });
    body.appendChild(tr);
  });
  document.body.dataset.rendered = "yes";
})();
