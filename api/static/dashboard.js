// The appliance dashboard: polls /v1/stats and /metrics every second, keeps the last minutes of
// samples, and draws rates, ratios and latency from the differences between samples (server
// uptime is the clock, so a slow poll does not bend a rate). /v1/overlay is read at start and
// after a reload. Text goes in with textContent only, so names from the API cannot inject markup.
"use strict";

const POLL_MS = 1000;
const HISTORY_SECONDS = 120;      // the longest window a chart shows
const MIN_WINDOW_SECONDS = 30;    // a young appliance's charts still span this much
const LATENCY_SMOOTHING = 5;      // latency quantiles over this many poll intervals
const RULE_ROWS = 8;              // the busiest rules listed
const RULE_SERIES = 5;            // the busiest rules get a hits/s line
const LATENCY_METRIC = "pynq_kv_frontend_request_duration_seconds";
const LATENCY_ORDER = ["resp", "udp", "admin"]; // the latency legend's order; others follow
const COLORS = ["#4ea1ff", "#f2b84b", "#b18cff", "#46c7d6", "#ef6b73", "#3ecf8e", "#e37ad6"];
const FRONTEND_COLORS = { resp: COLORS[0], udp: COLORS[1], admin: COLORS[2] };
// The counter(s) of each front-end that count requests; others use the first of FALLBACK found.
const REQUEST_COUNTERS = {
  resp: ["total_commands_processed"],
  udp: ["requests_binary", "requests_text"],
  admin: ["requests"],
};
const FALLBACK_REQUEST_COUNTERS = [["requests"], ["total_commands_processed"], ["rx_datagrams"]];
// /v1/overlay fields shown elsewhere on the page or changing every second
const OVERLAY_SKIP = new Set(["occupancy", "uptime", "config"]);

let samples = [];   // {t, reloads, stats, latency: {frontend: histogram}} oldest first
let overlayReloads = null;
let polls = 0;
let paused = false;
let busy = false;

const $ = (id) => document.getElementById(id);

// -- formatting -------------------------------------------------------------------------------

function format(value) {
  if (value === null || value === undefined) return "–";
  if (typeof value === "bigint") return value.toLocaleString("en-US");
  if (typeof value === "number") return value.toLocaleString("en-US", { maximumFractionDigits: 3 });
  if (Array.isArray(value)) return value.map((v) => (Array.isArray(v) ? v.join(" ") : format(v))).join(", ");
  return String(value);
}

function percent(fraction) {
  return fraction === null || fraction === undefined ? "–" : (100 * fraction).toFixed(1) + " %";
}

// Three significant figures at most: 0 µs, 8.5 µs, 85.3 µs, 1.25 ms, 120 ms, 2.5 s.
function latencyText(seconds) {
  if (seconds === null || seconds === undefined) return "–";
  const [value, unit] = seconds >= 1 ? [seconds, "s"] : seconds >= 1e-3 ? [seconds * 1e3, "ms"] : [seconds * 1e6, "µs"];
  return String(parseFloat(value.toFixed(value >= 100 ? 0 : value >= 10 ? 1 : 2))) + " " + unit;
}

function duration(seconds) {
  const s = Math.floor(seconds);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60);
  return d ? `${d} d ${h} h` : h ? `${h} h ${m} min` : m ? `${m} min ${s % 60} s` : `${s} s`;
}

const humanize = (key) => key.replaceAll("_", " ");

// JSON with integers beyond 2^53 (a 64-bit hash seed) kept exact as BigInt, for display only.
function parseJson(text) {
  return JSON.parse(text, (key, value, context) =>
    typeof value === "number" && Number.isInteger(value) && !Number.isSafeInteger(value) && context?.source
      ? BigInt(context.source) : value);
}

// -- reading the endpoints ----------------------------------------------------------------------

async function fetchText(path) {
  const response = await fetch(path, { cache: "no-store" });
  if (!response.ok) throw new Error(`${path}: HTTP ${response.status}`);
  return response.text();
}

// The front-ends' latency histograms from Prometheus text, by their frontend label:
// {name: {buckets: cumulative [[le, count]], count, sum}}.
function parseLatency(text) {
  const histograms = {};
  for (const line of text.split("\n")) {
    if (!line.startsWith(LATENCY_METRIC)) continue;
    const [, suffix, labels, value] = line.match(/^\w+?(_bucket|_count|_sum)\{([^}]*)\}\s+(\S+)/) ?? [];
    const frontend = labels?.match(/frontend="([^"]*)"/)?.[1];
    if (frontend === undefined) continue;
    const h = (histograms[frontend] ??= { buckets: [], count: 0, sum: 0 });
    if (suffix === "_bucket") {
      const le = labels.match(/le="([^"]+)"/)[1];
      h.buckets.push([le === "+Inf" ? Infinity : Number(le), Number(value)]);
    } else if (suffix === "_count") h.count = Number(value);
    else h.sum = Number(value);
  }
  for (const h of Object.values(histograms)) h.buckets.sort((a, b) => a[0] - b[0]);
  return histograms;
}

// -- derived series -------------------------------------------------------------------------------

// Per-second rate of get(sample) between consecutive samples; null where it cannot be known.
function rateSeries(get) {
  return samples.map((s, i) => {
    if (i === 0) return null;
    const before = get(samples[i - 1]), after = get(s), dt = s.t - samples[i - 1].t;
    if (before === undefined || after === undefined || !(dt > 0) || after < before) return null;
    return (after - before) / dt;
  });
}

function requestCounters(name, counters) {
  const known = REQUEST_COUNTERS[name];
  if (known) return known;
  return FALLBACK_REQUEST_COUNTERS.find((keys) => keys.every((k) => typeof counters[k] === "number")) ?? [];
}

function frontendRequests(name) {
  return (s) => {
    const counters = s.stats.frontends[name];
    if (!counters) return undefined;
    const keys = requestCounters(name, counters);
    if (!keys.length || keys.some((k) => typeof counters[k] !== "number")) return undefined;
    return keys.reduce((total, k) => total + counters[k], 0);
  };
}

// Like Prometheus' histogram_quantile: the q-quantile of the requests between two histograms.
function quantile(q, before, after) {
  const total = after.count - before.count;
  if (!(total > 0) || after.buckets.length !== before.buckets.length) return null;
  const rank = q * total;
  let lowerBound = 0, lowerCount = 0;
  for (let i = 0; i < after.buckets.length; i++) {
    const [le, cumulative] = after.buckets[i];
    const count = cumulative - before.buckets[i][1];
    if (count >= rank) {
      if (le === Infinity) return lowerBound;
      return lowerBound + (le - lowerBound) * ((rank - lowerCount) / Math.max(count - lowerCount, 1e-12));
    }
    lowerBound = le;
    lowerCount = count;
  }
  return lowerBound;
}

// The q-quantile of one front-end's requests over the last LATENCY_SMOOTHING polls, per sample;
// a front-end that appeared meanwhile counts from zero.
function latencySeries(frontend, q) {
  return samples.map((s, i) => {
    const after = s.latency[frontend];
    if (i === 0 || !after) return null;
    const before = samples[Math.max(0, i - LATENCY_SMOOTHING)].latency[frontend]
      ?? { buckets: after.buckets.map(([le]) => [le, 0]), count: 0, sum: 0 };
    return quantile(q, before, after);
  });
}

const latencyRank = (name) => (LATENCY_ORDER.includes(name) ? LATENCY_ORDER.indexOf(name) : LATENCY_ORDER.length);

const last = (values) => [...values].reverse().find((v) => v !== null && v !== undefined) ?? null;

// -- drawing --------------------------------------------------------------------------------------

function chart(id, series, options = {}) {
  const figure = $(id);
  const times = samples.map((s) => s.t);
  const span = times.length ? times[times.length - 1] - times[0] : 0;
  const shown = Math.min(HISTORY_SECONDS, Math.max(MIN_WINDOW_SECONDS, Math.ceil(span / 10) * 10));
  $("window").textContent = shown >= 60 ? `${shown / 60} min` : `${shown} s`;
  drawTimeSeries(figure.querySelector("svg"), figure.querySelector(".legend"), times, series, shown, options);
}

function keyValueRows(table, entries, idPrefix) {
  table.replaceChildren(...entries.map(([key, value]) => {
    const row = document.createElement("tr");
    const label = document.createElement("th");
    label.className = "label";
    label.textContent = humanize(key);
    const figure = document.createElement("td");
    figure.className = typeof value === "number" || typeof value === "bigint" ? "figure number" : "figure";
    figure.textContent = format(value);
    if (idPrefix) figure.id = `${idPrefix}${key}`;
    row.append(label, figure);
    return row;
  }));
}

// Nested objects as dotted keys; arrays and scalars are leaves.
function flatten(object, prefix = "", out = []) {
  for (const [key, value] of Object.entries(object)) {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) flatten(value, `${prefix}${key}.`, out);
    else out.push([prefix + key, value]);
  }
  return out;
}

function keyValueTable(id, entries) {
  const table = document.createElement("table");
  table.className = "kv";
  table.id = id;
  keyValueRows(table, entries, `${id}-`);
  return table;
}

function showOverlay(overlay) {
  const g = overlay.geometry ?? {};
  $("geometry-summary").textContent =
    `${g.ways}×${g.rows} + ${g.stash} stash · ${g.key_width}-bit keys · ${g.value_width}-bit values · ${g.rules} rule entries`;
  const scalars = Object.entries(overlay).filter(([k, v]) => !OVERLAY_SKIP.has(k) && (v === null || typeof v !== "object" || Array.isArray(v)));
  const sections = Object.entries(overlay).filter(([k, v]) => !OVERLAY_SKIP.has(k) && v !== null && typeof v === "object" && !Array.isArray(v));
  sections.sort(([a], [b]) => (b === "manifest") - (a === "manifest")); // a manifest comes first
  const parts = [keyValueTable("overlay-main", scalars)];
  for (const [name, value] of sections) {
    const title = document.createElement("h3");
    title.textContent = humanize(name);
    parts.push(title, keyValueTable(`overlay-${name}`, flatten(value)));
  }
  if (overlay.config) {
    const details = document.createElement("details");
    const summary = document.createElement("summary");
    summary.textContent = "serve settings";
    details.append(summary, keyValueTable("overlay-config", flatten(overlay.config)));
    parts.push(details);
  }
  $("overlay").replaceChildren(...parts);
}

function showFrontends(frontends) {
  const names = Object.keys(frontends).sort();
  $("frontends").replaceChildren(...names.map((name) => {
    const panel = document.createElement("div");
    panel.className = "frontend";
    panel.id = `frontend-${name}`;
    const title = document.createElement("h3");
    title.textContent = name;
    const swatch = document.createElement("i");
    swatch.style.background = frontendColor(name, names);
    title.prepend(swatch);
    panel.append(title, keyValueTable(`frontend-${name}-counters`, flatten(frontends[name])));
    return panel;
  }));
  if (!names.length) $("frontends").textContent = "none registered";
}

function frontendColor(name, names) {
  return FRONTEND_COLORS[name] ?? COLORS[(3 + names.indexOf(name)) % COLORS.length];
}

function showRules(rules) {
  const rates = new Map(rules.map((rule) => [rule.id, last(rateSeries((s) => s.ruleHits[rule.id]))]));
  const most = Math.max(1, ...rules.map((rule) => rule.hits));
  const busiest = [...rules].sort((a, b) => b.hits - a.hits || a.id - b.id);
  $("rules").replaceChildren(...busiest.slice(0, RULE_ROWS).map((rule) => {
    const row = document.createElement("tr");
    row.id = `rule-${rule.id}`;
    for (const [suffix, value] of [["id", rule.id], ["name", rule.name ?? ""], ["priority", rule.priority],
                                   ["hits", format(rule.hits)], ["rate", shortNumber(rates.get(rule.id) ?? 0)]]) {
      const cell = document.createElement("td");
      cell.id = `rule-${rule.id}-${suffix}`;
      cell.textContent = value;
      row.appendChild(cell);
    }
    const barCell = document.createElement("td");
    barCell.className = "bar-cell";
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.dataset.hits = rule.hits;
    bar.style.width = `${(100 * rule.hits) / most}%`;
    barCell.appendChild(bar);
    row.appendChild(barCell);
    return row;
  }));
  $("no-rules").hidden = rules.length > 0;
  $("more-rules").hidden = rules.length <= RULE_ROWS;
  $("more-rules").textContent = `${rules.length - RULE_ROWS} more rules with fewer hits (GET /v1/rules)`;
  chart("chart-rules", busiest.slice(0, RULE_SERIES).map((rule, i) => ({
    name: rule.name ?? `rule ${rule.id}`, color: COLORS[i % COLORS.length],
    values: rateSeries((s) => s.ruleHits[rule.id]),
  })));
}

function render() {
  const current = samples[samples.length - 1];
  const stats = current.stats, c = stats.counters;
  $("backend").textContent = stats.backend;
  $("uptime").textContent = duration(stats.uptime);

  const names = Object.keys(stats.frontends).sort();
  const perFrontend = names.map((name) => ({ name, color: frontendColor(name, names),
                                              values: rateSeries(frontendRequests(name)) }));
  chart("chart-frontends", perFrontend);
  const outcome = (key) => rateSeries((s) => s.stats.counters[key]);
  chart("chart-outcomes", [
    { name: "exact hits", color: "#3ecf8e", values: outcome("exact_hits") },
    { name: "rule hits", color: "#4ea1ff", values: outcome("rule_hits") },
    { name: "misses", color: "#ef6b73", values: outcome("misses") },
  ], { stacked: true });
  const lookups = outcome("lookups");
  const hits = samples.map((s) => s.stats.counters.exact_hits + s.stats.counters.rule_hits);
  const intervalRatio = samples.map((s, i) => {
    if (i === 0) return null;
    const dl = s.stats.counters.lookups - samples[i - 1].stats.counters.lookups;
    return dl > 0 ? (hits[i] - hits[i - 1]) / dl : null;
  });
  chart("chart-hit-ratio", [
    { name: "each second", color: "#3ecf8e", values: intervalRatio },
    { name: "since start", color: "#8a97a8", values: samples.map((s) => s.stats.hit_rate) },
  ], { yMax: 1, format: (v) => `${Math.round(100 * v)} %` });
  chart("chart-occupancy", [
    { name: "entries", color: "#46c7d6", values: samples.map((s) => s.stats.occupancy.used) },
  ], { yMax: stats.occupancy.capacity, format: format,
        tickFormat: (v) => `${Math.round((100 * v) / stats.occupancy.capacity)} %` });
  const timed = Object.keys(current.latency).sort((a, b) => latencyRank(a) - latencyRank(b) || a.localeCompare(b));
  const latency = Object.fromEntries(timed.map((name) => [name, { p50: latencySeries(name, 0.5),
                                                                   p99: latencySeries(name, 0.99) }]));
  chart("chart-latency", timed.flatMap((name) => [
    { name: `${name} p99`, color: frontendColor(name, names), values: latency[name].p99 },
    { name: `${name} p50`, color: frontendColor(name, names), values: latency[name].p50, dashed: true },
  ]), { format: latencyText, logScale: true });

  const latestRates = perFrontend.map((s) => [s.name, last(s.values)]);
  $("tile-requests").textContent = format(Math.round(latestRates.reduce((sum, [, r]) => sum + (r ?? 0), 0)));
  $("tile-requests-sub").textContent = latestRates.map(([n, r]) => `${n} ${shortNumber(r ?? 0)}`).join(" · ");
  $("tile-lookups").textContent = format(Math.round(last(lookups) ?? 0));
  $("tile-lookups-sub").textContent = `${format(c.lookups)} since start`;
  $("tile-hit-ratio").textContent = percent(stats.hit_rate);
  $("tile-hit-ratio-sub").textContent = `last second ${percent(last(intervalRatio))}`;
  $("tile-occupancy").textContent = percent(stats.occupancy.load_factor);
  $("tile-occupancy-sub").textContent = `${format(stats.occupancy.used)} of ${format(stats.occupancy.capacity)} slots`;
  $("tile-rule-hits").textContent = format(c.rule_hits);
  $("tile-rule-hits-sub").textContent = `${shortNumber(last(outcome("rule_hits")) ?? 0)}/s · ${stats.rules.length} rules`;
  const resp = latency.resp;
  $("tile-latency").textContent = latencyText(resp ? last(resp.p99) : null);
  $("tile-latency-sub").textContent = [`p50 ${latencyText(resp ? last(resp.p50) : null)}`,
    ...timed.filter((name) => name !== "resp").map((name) => `${name} p99 ${latencyText(last(latency[name].p99))}`)].join(" · ");

  keyValueRows($("counters"), Object.entries(c), "counter-");
  showRules(stats.rules);
  showFrontends(stats.frontends);
}

// -- polling --------------------------------------------------------------------------------------

function setState(state, text) {
  document.body.dataset.state = state;
  $("status").className = `status ${state}`;
  $("status").textContent = text;
}

async function poll() {
  if (paused || busy) return;
  busy = true;
  try {
    const [statsText, metricsText] = await Promise.all([fetchText("v1/stats"), fetchText("metrics")]);
    const stats = JSON.parse(statsText); // plain numbers: rates are computed from these
    const previous = samples[samples.length - 1];
    if (previous && (stats.reloads !== previous.reloads || stats.uptime < previous.t)) samples = []; // counters restarted
    samples.push({ t: stats.uptime, reloads: stats.reloads, stats, latency: parseLatency(metricsText),
                   ruleHits: Object.fromEntries(stats.rules.map((rule) => [rule.id, rule.hits])) });
    samples = samples.filter((s) => stats.uptime - s.t <= HISTORY_SECONDS + 2);
    if (overlayReloads !== stats.reloads) {
      showOverlay(parseJson(await fetchText("v1/overlay")));
      overlayReloads = stats.reloads;
    }
    render();
    setState("live", "live · " + new Date().toLocaleTimeString());
  } catch (error) {
    setState("offline", `offline: ${error.message}`);
  } finally {
    busy = false;
    $("polls").textContent = ++polls;
    if (paused) setState("paused", "paused");
  }
}

$("pause").addEventListener("click", () => {
  paused = !paused;
  $("pause").textContent = paused ? "resume" : "pause";
  $("pause").setAttribute("aria-pressed", String(paused));
  if (paused && !busy) setState("paused", "paused");
  if (!paused) poll();
});

poll();
setInterval(poll, POLL_MS);
