// Time-series charts drawn as SVG, small enough to read: no library, no network.
// Each chart records what it plotted in data attributes (the svg's data-series holds every
// series' values, each path its series name and point count) so tests and people can check
// the picture against the numbers.
"use strict";

const SVG_NS = "http://www.w3.org/2000/svg";
const HOVER_PIXELS = 24; // the pointer picks the sample within this distance

function svgElement(name, attributes) {
  const element = document.createElementNS(SVG_NS, name);
  for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
  return element;
}

// A round axis top at or above value: 1, 2, 2.5 or 5 times a power of ten.
function niceCeiling(value) {
  if (!(value > 0)) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

// Short axis and legend numbers: 950, 1.2k, 3.4M.
function shortNumber(value) {
  const size = Math.abs(value);
  if (size >= 1e6) return (value / 1e6).toFixed(size >= 1e7 ? 0 : 1) + "M";
  if (size >= 1e3) return (value / 1e3).toFixed(size >= 1e4 ? 0 : 1) + "k";
  if (size >= 10 || Number.isInteger(value)) return value.toFixed(0);
  return value.toFixed(size >= 1 ? 1 : 2);
}

// Draw series over time into svg and their latest values into legend.
//   times: sample times in seconds (ascending); windowSeconds: how much of the past to show
//   series: [{name, color, values, dashed}] with values[i] at times[i] (null: no figure, a gap);
//           a dashed series is drawn as a dashed line with no area
//   options: stacked (areas on top of each other), yMax (fixed axis top), format (legend text),
//            tickFormat (axis text, default format), logScale (a decade axis from the smallest
//            positive figure to the largest: for figures spanning orders of magnitude)
function drawTimeSeries(svg, legend, times, series, windowSeconds, options = {}) {
  const format = options.format ?? shortNumber;
  const tickFormat = options.tickFormat ?? format;
  const width = svg.clientWidth || 400, height = svg.clientHeight || 160;
  const left = 46, right = 10, top = 8, bottom = 20;
  svg.setAttribute("viewBox", `0 0 ${width} ${height}`);
  const now = times.length ? times[times.length - 1] : 0;
  const x = (t) => left + (width - left - right) * (1 - (now - t) / windowSeconds);

  // stacked: each series is drawn from the running total below it
  const base = times.map(() => 0);
  const bands = series.map((s) => {
    const low = base.slice();
    const high = s.values.map((v, i) => (v === null ? null : (options.stacked ? low[i] : 0) + v));
    if (options.stacked) high.forEach((v, i) => { if (v !== null) base[i] = v; });
    return { ...s, low: options.stacked ? low : times.map(() => 0), high };
  });
  const plotted = bands.flatMap((b) => b.high.filter((v) => v !== null));
  const peak = Math.max(0, ...plotted);
  let y, ticks;
  if (options.logScale) { // decades: 10^low at the bottom (zero sits there too), 10^high on top
    const positive = plotted.filter((v) => v > 0);
    const high = Math.ceil(Math.log10(positive.length ? peak : 1));
    const low = Math.min(high - 1, Math.floor(Math.log10(positive.length ? Math.min(...positive) : 0.1)));
    const level = (v) => (Math.log10(Math.max(v, 10 ** low)) - low) / (high - low);
    y = (v) => top + (height - top - bottom) * (1 - Math.min(level(v), 1));
    ticks = Array.from({ length: high - low + 1 }, (_, k) => 10 ** (low + k));
  } else {
    const yTop = options.yMax ?? 4 * niceCeiling(peak / 4); // four round steps up the axis
    y = (v) => top + (height - top - bottom) * (1 - Math.min(v, yTop) / yTop);
    ticks = [0, 1, 2, 3, 4].map((k) => (yTop * k) / 4);
  }

  const parts = [];
  for (const [tick, value] of ticks.entries()) {
    const level = y(value);
    parts.push(svgElement("line", { x1: left, x2: width - right, y1: level, y2: level,
                                    class: tick ? "grid" : "axis" }));
    const label = svgElement("text", { x: left - 6, y: level + 4, class: "tick", "text-anchor": "end" });
    label.textContent = tickFormat(value);
    parts.push(label);
  }
  for (const ago of [windowSeconds, windowSeconds / 2, 0]) {
    const label = svgElement("text", { x: x(now - ago), y: height - 5, class: "tick",
                                       "text-anchor": ago === windowSeconds ? "start" : ago ? "middle" : "end" });
    label.textContent = ago ? `−${ago >= 60 ? ago / 60 + " min" : ago + " s"}` : "now";
    parts.push(label);
  }

  const recorded = {};
  for (const band of bands) {
    recorded[band.name] = band.values;
    // one sub-path per unbroken run of figures; null values split the line
    let line = "", area = "", run = [], points = 0;
    const flush = () => {
      if (run.length) {
        line += "M" + run.map((i) => `${x(times[i]).toFixed(1)},${y(band.high[i]).toFixed(1)}`).join("L");
        area += "M" + run.map((i) => `${x(times[i]).toFixed(1)},${y(band.high[i]).toFixed(1)}`).join("L")
              + "L" + run.slice().reverse().map((i) => `${x(times[i]).toFixed(1)},${y(band.low[i]).toFixed(1)}`).join("L")
              + "Z";
        points += run.length;
      }
      run = [];
    };
    band.high.forEach((v, i) => { if (v === null || now - times[i] > windowSeconds) flush(); else run.push(i); });
    flush();
    if (!band.dashed) {
      parts.push(svgElement("path", { d: area || "M0,0", fill: band.color, class: "area",
                                      "fill-opacity": options.stacked ? 0.55 : 0.12 }));
    }
    const path = svgElement("path", { d: line || "M0,0", stroke: band.color, class: "line",
                                      "data-series": band.name, "data-points": points });
    if (band.dashed) path.setAttribute("stroke-dasharray", "5 4");
    parts.push(path);
  }
  const cursor = svgElement("line", { y1: top, y2: height - bottom, class: "cursor", visibility: "hidden" });
  parts.push(cursor);
  svg.replaceChildren(...parts);
  svg.dataset.series = JSON.stringify(recorded);

  const figures = series.map((s) => {
    const item = document.createElement("span");
    item.className = "item";
    const swatch = document.createElement("i");
    swatch.style.background = s.color;
    if (s.dashed) swatch.className = "dashed";
    const name = document.createElement("span");
    name.className = "label";
    name.textContent = s.name;
    const value = document.createElement("b");
    value.className = "figure";
    item.append(swatch, name, value);
    return [item, value];
  });
  const when = document.createElement("span");
  when.className = "when";
  legend.replaceChildren(...figures.map(([item]) => item), when);

  // The legend shows the latest figures, or those under the pointer; the pointer's position
  // survives the redraw of the next poll.
  const show = (pointerX) => {
    let index = -1;
    if (pointerX !== null && times.length) {
      index = times.reduce((best, t, i) => (Math.abs(x(t) - pointerX) < Math.abs(x(times[best]) - pointerX) ? i : best), 0);
      if (Math.abs(x(times[index]) - pointerX) > HOVER_PIXELS) index = -1; // nothing sampled there
    }
    figures.forEach(([, value], k) => {
      const values = series[k].values;
      const v = index >= 0 ? values[index] : [...values].reverse().find((w) => w !== null);
      value.textContent = v === null || v === undefined ? "–" : format(v);
    });
    cursor.setAttribute("visibility", index >= 0 ? "visible" : "hidden");
    if (index >= 0) cursor.setAttribute("x1", x(times[index]));
    if (index >= 0) cursor.setAttribute("x2", x(times[index]));
    when.textContent = index >= 0 ? `${(now - times[index]).toFixed(0)} s ago` : "";
  };
  svg.onmousemove = (event) => {
    svg.dataset.pointer = event.clientX - svg.getBoundingClientRect().left;
    show(Number(svg.dataset.pointer));
  };
  svg.onmouseleave = () => { delete svg.dataset.pointer; show(null); };
  show(svg.dataset.pointer === undefined ? null : Number(svg.dataset.pointer));
}
