// The appliance dashboard: polls /v1/stats every second and writes the numbers into the page.
// Text goes in with textContent only, so rule names and front-end stats cannot inject markup.
"use strict";

const POLL_MS = 1000;
let previous = null; // {time, lookups} of the last poll, for the lookup rate
let polls = 0;

function show(id, value) {
  document.getElementById(id).textContent = value;
}

function percent(fraction) {
  return (100 * fraction).toFixed(1) + " %";
}

function duration(seconds) {
  const s = Math.floor(seconds);
  const h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
  return h ? `${h} h ${m} min` : m ? `${m} min ${s % 60} s` : `${s} s`;
}

function showRules(rules) {
  const body = document.getElementById("rules");
  body.replaceChildren(...rules.map((rule) => {
    const row = document.createElement("tr");
    row.id = `rule-${rule.id}`;
    for (const [suffix, value] of [["id", rule.id], ["name", rule.name ?? ""],
                                   ["priority", rule.priority], ["hits", rule.hits]]) {
      const cell = document.createElement("td");
      cell.id = `rule-${rule.id}-${suffix}`;
      cell.textContent = value;
      row.appendChild(cell);
    }
    return row;
  }));
  document.getElementById("no-rules").hidden = rules.length > 0;
}

function flatten(stats, prefix, out) {
  for (const [key, value] of Object.entries(stats)) {
    if (value !== null && typeof value === "object" && !Array.isArray(value)) {
      flatten(value, `${prefix}${key}.`, out);
    } else {
      out.push([prefix + key, value]);
    }
  }
  return out;
}

function showFrontends(frontends) {
  const box = document.getElementById("frontends");
  const names = Object.keys(frontends).sort();
  box.replaceChildren(...names.map((name) => {
    // The heading sits outside the <dl>: inside its two-column grid it would take a cell and
    // push every figure onto the next label.
    const panel = document.createElement("div");
    panel.id = `frontend-${name}`;
    const title = document.createElement("h3");
    title.textContent = name;
    const list = document.createElement("dl");
    panel.append(title, list);
    for (const [key, value] of flatten(frontends[name], "", [])) {
      const term = document.createElement("dt");
      term.textContent = key;
      const data = document.createElement("dd");
      data.textContent = String(value);
      list.append(term, data);
    }
    return panel;
  }));
  if (!names.length) box.textContent = "none registered";
}

function render(stats) {
  const c = stats.counters;
  show("backend", stats.backend);
  show("uptime", duration(stats.uptime));
  show("occupancy-used", stats.occupancy.used);
  show("occupancy-capacity", stats.occupancy.capacity);
  show("load-factor", percent(stats.occupancy.load_factor));
  document.getElementById("occupancy-bar").style.width = percent(stats.occupancy.load_factor).replace(" ", "");
  for (const name of ["inserts", "updates", "deletes", "lookups", "misses"]) show(name, c[name]);
  show("insert-failures", c.insert_failures);
  show("exact-hits", c.exact_hits);
  show("rule-hits", c.rule_hits);
  show("hit-rate", stats.hit_rate === null ? "–" : percent(stats.hit_rate));
  const now = performance.now();
  if (previous && now > previous.time && c.lookups >= previous.lookups) {
    show("lookup-rate", ((c.lookups - previous.lookups) * 1000 / (now - previous.time)).toFixed(1));
  }
  previous = { time: now, lookups: c.lookups };
  showRules(stats.rules);
  showFrontends(stats.frontends);
}

async function poll() {
  const status = document.getElementById("status");
  try {
    const response = await fetch("v1/stats", { cache: "no-store" });
    if (!response.ok) throw new Error(`HTTP ${response.status}`);
    render(await response.json());
    status.textContent = "live · " + new Date().toLocaleTimeString();
    status.classList.remove("offline");
  } catch (error) {
    status.textContent = `offline: ${error.message}`;
    status.classList.add("offline");
  }
  show("polls", ++polls);
}

poll();
setInterval(poll, POLL_MS);
