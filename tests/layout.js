// Measures a report as the browser lays it out, on load, and writes what it found into a "layout" element:
// the window's width, how wide the page scrolls, elements reaching past the window's edges, chart labels
// reaching past their chart, and chart labels drawn over one another (boxes sharing more than 1 px each way).
addEventListener("load", () => {
  const width = document.documentElement.clientWidth;
  const describe = (el) => el.tagName.toLowerCase() + ": " + (el.textContent || "").trim().slice(0, 80);
  const wide = [];
  for (const el of document.body.querySelectorAll("*")) {
    if (el.closest("svg") !== null && el.tagName.toLowerCase() !== "svg") continue;  // a chart's marks: below
    const box = el.getBoundingClientRect();
    if (box.width > 0 && (box.left < -1 || box.right > width + 1)) wide.push(describe(el));
  }
  const outside = [], overlapping = [];
  for (const chart of document.querySelectorAll("svg")) {
    const frame = chart.getBoundingClientRect();
    const labels = [...chart.querySelectorAll("text")].map((label) => [label, label.getBoundingClientRect()]);
    for (const [label, box] of labels) {
      if (box.left < frame.left - 1 || box.right > frame.right + 1 || box.top < frame.top - 1
          || box.bottom > frame.bottom + 1) outside.push(describe(label));
    }
    for (let i = 0; i < labels.length; i++) {
      for (let j = i + 1; j < labels.length; j++) {
        const [a, p] = labels[i], [b, q] = labels[j];
        const across = Math.min(p.right, q.right) - Math.max(p.left, q.left);
        const down = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
        if (across > 1 && down > 1) overlapping.push(describe(a) + " | " + describe(b));
      }
    }
  }
  const found = document.createElement("pre");
  found.id = "layout";
  found.textContent = JSON.stringify({width, scroll_width: document.documentElement.scrollWidth, wide, outside,
                                      overlapping});
  document.body.appendChild(found);
});
