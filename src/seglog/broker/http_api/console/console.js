// The seglog console: a hash-routed single page over the broker's HTTP API.
// Every piece of data (topic names, keys, values, headers, principals) is hostile input:
// it reaches the page only through textContent and SVG attributes, never as markup.

const CLUSTER = document.querySelector('meta[name="seglog-cluster-id"]').content;
const SVG_NS = "http://www.w3.org/2000/svg";
const AUTH_KEY = "seglog.console.auth";
const main = document.getElementById("main");

/** What /v1/whoami said (or its stand-in on a broker without it). */
let me = { principal: null, authentication: "none", write_enabled: false };
/** Timers of the page shown: cleared when another is shown. */
let timers = [];
/** Incremented on each navigation, so that a late answer does not draw on the next page. */
let generation = 0;

class HttpError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

// ------------------------------------------------------------------ helpers

/** An element with attributes and children (strings become text nodes). */
function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) el.addEventListener(name.slice(2), value);
    else if (name === "text") el.textContent = String(value);
    else el.setAttribute(name, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

/** An SVG element with attributes. */
function s(tag, attrs = {}, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== null && value !== undefined) el.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function enc(text) {
  return encodeURIComponent(text);
}

function bytes(n) {
  if (n === null || n === undefined) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let value = Number(n);
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

function num(n) {
  return n === null || n === undefined ? "" : Number(n).toLocaleString("en");
}

function time(ms) {
  return ms === null || ms === undefined || ms < 0 ? "" : new Date(Number(ms)).toISOString();
}

function table(headers, rows, attrs = {}) {
  const head = h("tr", {}, headers.map((x) => h("th", { text: x })));
  const body = document.createElement("tbody");
  const fragment = document.createDocumentFragment();
  for (const row of rows) fragment.append(row);
  body.append(fragment);
  return h("table", attrs, h("thead", {}, head), body);
}

function cell(value, cls) {
  return h("td", { class: cls, text: value === null || value === undefined ? "" : value });
}

function later(fn, ms) {
  const id = setInterval(fn, ms);
  timers.push(id);
}

// ------------------------------------------------------------------ the API

function authHeader() {
  const token = sessionStorage.getItem(AUTH_KEY);
  return token ? { Authorization: `Basic ${token}` } : {};
}

/** JSON from the API; HttpError for any answer but a 2xx. */
async function api(path, options = {}) {
  const headers = { "X-Seglog-Console": "1", Accept: "application/json", ...authHeader() };
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const reply = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
    credentials: "omit",
    cache: "no-store",
  });
  let body = null;
  try {
    body = await reply.json();
  } catch {
    body = null;
  }
  if (!reply.ok) {
    const message = body && body.message ? body.message : `${reply.status} ${reply.statusText}`;
    throw new HttpError(reply.status, message);
  }
  return body;
}

function v3(path) {
  return `/v3/clusters/${enc(CLUSTER)}${path}`;
}

/** What an error means on a page: login on 401, "not authorized" on 403. */
function failure(error, what) {
  if (error instanceof HttpError && error.status === 401) {
    showLogin("Please log in.");
    return h("p", { class: "muted", text: "Authentication required." });
  }
  if (error instanceof HttpError && error.status === 403) {
    return h("p", { class: "forbidden", "data-testid": "forbidden", text: `not authorized: ${error.message}` });
  }
  if (error instanceof HttpError && error.status === 404 && what) {
    return h("p", { class: "muted", "data-testid": "missing", text: `${what}: ${error.message}` });
  }
  return h("p", { class: "error", text: String(error.message || error) });
}

// ------------------------------------------------------------------ login

async function whoami() {
  try {
    me = await api("/v1/whoami");
  } catch (error) {
    if (error instanceof HttpError && error.status === 404) {
      // A broker without /v1/whoami: read-only; whether credentials are needed (and these
      // are right) is told by a route that every principal may call.
      await api("/v1/topics");
      const token = sessionStorage.getItem(AUTH_KEY);
      const principal = token ? `User:${new TextDecoder().decode(Uint8Array.from(atob(token), (c) => c.charCodeAt(0))).split(":")[0]}` : null;
      me = { principal, authentication: token ? "basic" : "none", write_enabled: false };
    } else {
      throw error;
    }
  }
  document.getElementById("whoami").textContent = me.principal ? me.principal : "";
  document.getElementById("logout").hidden = me.authentication !== "basic";
  return me;
}

function showLogin(message) {
  generation += 1;
  clearTimers();
  const user = h("input", { name: "user", autocomplete: "username", required: true });
  const password = h("input", { name: "password", type: "password", autocomplete: "current-password" });
  const status = h("p", { class: "error", "data-testid": "login-status", text: message || "" });
  const form = h(
    "form",
    { class: "login", "data-testid": "login" },
    h("h1", { text: "Log in" }),
    h("label", {}, "User ", user),
    h("label", {}, "Password ", password),
    h("button", { type: "submit", text: "Log in" }),
    status,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const raw = new TextEncoder().encode(`${user.value}:${password.value}`);
    sessionStorage.setItem(AUTH_KEY, btoa(String.fromCharCode(...raw)));
    try {
      await whoami();
      route();
    } catch (error) {
      sessionStorage.removeItem(AUTH_KEY);
      status.textContent = error.status === 401 ? "Invalid user or password." : String(error.message);
    }
  });
  main.replaceChildren(form);
  user.focus();
}

document.getElementById("logout").addEventListener("click", () => {
  sessionStorage.removeItem(AUTH_KEY);
  showLogin("Logged out.");
});

// ------------------------------------------------------------------ router

function clearTimers() {
  for (const id of timers) clearInterval(id);
  timers = [];
}

const PAGES = [
  [/^\/?$/, "overview", overviewPage],
  [/^\/topics$/, "topics", topicsPage],
  [/^\/topics\/([^/]+)$/, "topics", topicPage],
  [/^\/messages$/, "messages", messagesPage],
  [/^\/messages\/([^/]+)$/, "messages", messagesPage],
  [/^\/groups$/, "groups", groupsPage],
  [/^\/groups\/([^/]+)$/, "groups", groupPage],
  [/^\/security$/, "security", securityPage],
];

function route() {
  clearTimers();
  generation += 1;
  const mine = generation;
  const [path, search] = location.hash.replace(/^#/, "").split("?");
  const query = new URLSearchParams(search || "");
  for (const [pattern, name, page] of PAGES) {
    const match = pattern.exec(path);
    if (!match) continue;
    for (const link of document.querySelectorAll("nav a")) {
      link.classList.toggle("current", link.dataset.page === name);
    }
    let args;
    try {
      args = match.slice(1).map(decodeURIComponent);
    } catch {
      main.replaceChildren(h("p", { text: "Malformed address." }));
      return;
    }
    const root = h("div", { "data-page": name });
    main.replaceChildren(root);
    const alive = () => mine === generation;
    page(root, alive, query, ...args).catch((error) => {
      if (alive()) root.replaceChildren(failure(error));
    });
    return;
  }
  main.replaceChildren(h("p", { text: "No such page." }));
}

window.addEventListener("hashchange", route);

// ------------------------------------------------------------------ overview

async function overviewPage(root, alive) {
  root.append(h("h1", { text: "Overview" }));
  const body = h("div");
  root.append(body);
  const history = [];
  async function draw() {
    let overview;
    try {
      overview = await api("/v1/overview");
    } catch (error) {
      if (alive()) body.replaceChildren(failure(error, "overview not available on this broker"));
      return;
    }
    if (!alive()) return;
    body.replaceChildren(
      h(
        "div",
        { class: "cards" },
        h("div", { class: "card" }, "Cluster ", h("b", { text: overview.cluster_id })),
        h("div", { class: "card" }, "Version ", h("b", { "data-testid": "version", text: overview.version })),
        h("div", { class: "card" }, "Node ", h("b", { text: overview.node_id })),
      ),
      h("h2", { text: "Brokers" }),
      table(
        ["Node", "Host", "Port", "Alive"],
        (overview.nodes || []).map((n) =>
          h("tr", {}, cell(n.node_id, "num"), cell(n.host), cell(n.port, "num"), cell(n.alive ? "yes" : "no")),
        ),
        { "data-testid": "brokers" },
      ),
      h("h2", { text: "Listeners" }),
      table(
        ["Name", "Host", "Port", "Security"],
        (overview.listeners || []).map((l) =>
          h("tr", {}, cell(l.name), cell(l.host), cell(l.port, "num"), cell(l.security_protocol)),
        ),
      ),
      h("h2", { text: "Data directories" }),
      table(
        ["Path", "Used", "Free", "Total"],
        (overview.log_dirs || []).map((d) =>
          h("tr", {}, cell(d.path), cell(bytes(d.used_bytes), "num"), cell(bytes(d.free_bytes), "num"), cell(bytes(d.total_bytes), "num")),
        ),
      ),
      h("h2", { text: "Throughput" }),
      throughputChart((overview.throughput && overview.throughput.samples) || []),
      h("h2", { text: "Requests" }),
      table(
        ["API", "Count", "Rate /s", "p50 ms", "p99 ms"],
        (overview.requests || []).map((r) =>
          h("tr", {}, cell(r.api), cell(num(r.count), "num"), cell(Number(r.rate_per_sec).toFixed(2), "num"), cell(r.p50_ms, "num"), cell(r.p99_ms, "num")),
        ),
        { "data-testid": "requests" },
      ),
    );
    history.push(overview);
  }
  await draw();
  later(draw, 5000);
}

/** Bytes in and out per second over time, as two polylines. */
function throughputChart(samples) {
  const width = 720;
  const height = 160;
  const pad = 30;
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, "data-testid": "throughput-chart" });
  if (samples.length === 0) {
    svg.append(s("text", { x: pad, y: height / 2 }, "no samples yet"));
    return svg;
  }
  const t0 = samples[0].time_ms;
  const t1 = Math.max(samples[samples.length - 1].time_ms, t0 + 1);
  const top = Math.max(1, ...samples.map((x) => Math.max(x.bytes_in_per_sec, x.bytes_out_per_sec)));
  const point = (x, v) =>
    `${(pad + ((x.time_ms - t0) / (t1 - t0)) * (width - 2 * pad)).toFixed(1)},${(height - pad - (v / top) * (height - 2 * pad)).toFixed(1)}`;
  svg.append(
    s("polyline", { class: "line", points: samples.map((x) => point(x, x.bytes_in_per_sec)).join(" ") }),
    s("polyline", { class: "line out", points: samples.map((x) => point(x, x.bytes_out_per_sec)).join(" ") }),
    s("text", { x: pad, y: 12 }, `${bytes(top)}/s`),
    s("text", { x: pad, y: height - 8 }, "in (blue) / out (green) per second"),
  );
  return svg;
}

// ------------------------------------------------------------------ topics

async function topicsPage(root, alive) {
  const started = performance.now();
  root.append(h("h1", { text: "Topics" }));
  const answer = await api(v3("/topics"));
  if (!alive()) return;
  const topics = answer.data.slice().sort((a, b) => (a.topic_name < b.topic_name ? -1 : 1));
  const filter = h("input", { type: "search", placeholder: "filter", "data-testid": "topic-filter" });
  const rows = topics.map((t) => {
    const link = h("a", { href: `#/topics/${enc(t.topic_name)}`, text: t.topic_name });
    const row = h(
      "tr",
      { "data-topic": t.topic_name },
      h("td", {}, link),
      cell(t.partitions_count, "num"),
      cell(bytes(t.size_bytes), "num"),
      cell(num(t.record_count), "num"),
      cell(t.key_index ? "yes" : ""),
      cell(t.is_internal ? "yes" : ""),
    );
    row.dataset.name = t.topic_name.toLowerCase();
    return row;
  });
  const grid = table(["Name", "Partitions", "Size", "Records", "Key index", "Internal"], rows, {
    "data-testid": "topics",
  });
  filter.addEventListener("input", () => {
    const needle = filter.value.toLowerCase();
    for (const row of rows) row.hidden = needle !== "" && !row.dataset.name.includes(needle);
  });
  root.append(h("form", { class: "inline" }, filter, h("span", { class: "muted", text: `${topics.length} topics` })), grid);
  // Read by the benchmark: how long the page took from the request to the table in the page.
  requestAnimationFrame(() => {
    root.dataset.renderMs = String(Math.round(performance.now() - started));
    root.dataset.rendered = "true";
  });
}

async function topicPage(root, alive, query, topic) {
  root.append(
    h("h1", {}, "Topic ", h("span", { "data-testid": "topic-name", text: topic })),
    h("p", {}, h("a", { href: `#/messages/${enc(topic)}`, text: "Browse messages" })),
  );
  const base = v3(`/topics/${enc(topic)}`);
  let info;
  try {
    info = await api(base);
  } catch (error) {
    root.append(failure(error));
    return;
  }
  if (!alive()) return;
  root.append(
    h(
      "div",
      { class: "cards" },
      h("div", { class: "card" }, "Partitions ", h("b", { text: info.partitions_count })),
      h("div", { class: "card" }, "Size ", h("b", { text: bytes(info.size_bytes) })),
      h("div", { class: "card" }, "Records ", h("b", { text: num(info.record_count) })),
      h("div", { class: "card" }, "Key index ", h("b", { text: info.key_index ? "on" : "off" })),
    ),
  );
  const partsBox = h("div");
  const segBox = h("div", { "data-testid": "segments" });
  const configBox = h("div", { "data-testid": "config-section" });
  root.append(h("h2", { text: "Partitions" }), partsBox, h("h2", { text: "Segments" }), legend(), segBox, h("h2", { text: "Configs" }), configBox);
  const byOffsets = h("input", { type: "checkbox", "data-testid": "width-by-offsets" });
  segBox.before(h("label", {}, byOffsets, " width by offsets (not size)"));

  const partitions = (await api(`${base}/partitions`)).data;
  if (!alive()) return;
  partsBox.append(
    table(
      ["Partition", "Leader", "Log start", "High watermark", "LSO", "Records", "Size", "Segments"],
      partitions.map((p) =>
        h(
          "tr",
          {},
          h("td", {}, h("a", { href: `#/messages/${enc(topic)}?partition=${p.partition_id}`, text: p.partition_id })),
          cell(p.leader ? p.leader.broker_id : "", "num"),
          cell(num(p.log_start_offset), "num"),
          cell(num(p.high_watermark), "num"),
          cell(num(p.last_stable_offset), "num"),
          cell(num(p.high_watermark - p.log_start_offset), "num"),
          cell(bytes(p.size_bytes), "num"),
          cell(p.segment_count, "num"),
        ),
      ),
      { "data-testid": "partitions" },
    ),
  );
  const answers = [];
  const drawAll = () => {
    segBox.replaceChildren(...answers.map((a) => (a instanceof Node ? a : segmentsView(a, byOffsets.checked))));
  };
  byOffsets.addEventListener("change", drawAll);
  // A few partitions at a time: a topic of many partitions neither waits for each in turn
  // nor floods the broker.
  for (let first = 0; first < partitions.length; first += 8) {
    const chunk = partitions.slice(first, first + 8).map((p) =>
      api(`/v1/topics/${enc(topic)}/partitions/${p.partition_id}/segments`).catch((error) => failure(error, "segments")),
    );
    answers.push(...(await Promise.all(chunk)));
    if (!alive()) return;
  }
  drawAll();

  try {
    const configs = (await api(`${base}/configs`)).data;
    if (!alive()) return;
    configBox.append(
      table(
        ["Name", "Value", "Source"],
        configs.map((c) =>
          h(
            "tr",
            { class: c.is_default ? "muted" : null },
            cell(c.name),
            cell(c.is_sensitive ? "******" : c.value === null ? "(null)" : c.value),
            cell(c.source),
          ),
        ),
        { "data-testid": "configs" },
      ),
    );
  } catch (error) {
    configBox.append(failure(error));
  }
}

function legend() {
  const item = (cls, text) => h("span", {}, h("i", { class: cls }), text);
  return h(
    "p",
    { class: "legend" },
    item("plain", "segment"),
    item("active", "active"),
    item("past-retention", "past retention"),
    item("cleaner-next", "cleaner next"),
    item("cleaned", "cleaned"),
    h("span", { class: "muted", text: "dark band: offset index fill" }),
  );
}

/** One partition's segments as a line of boxes, with its log start, LSO and HW marked. */
function segmentsView(answer, byOffsets) {
  const width = 900;
  const height = 70;
  const barTop = 18;
  const barHeight = 30;
  const segments = answer.segments;
  const weight = (seg) => Math.max(1, byOffsets ? seg.next_offset - seg.base_offset : seg.size_bytes);
  const total = segments.reduce((sum, seg) => sum + weight(seg), 0) || 1;
  const svg = s("svg", {
    width,
    height,
    viewBox: `0 0 ${width} ${height}`,
    "data-testid": "segment-line",
    "data-partition": answer.partition,
  });
  let x = 0;
  const offsetX = [];
  for (const seg of segments) {
    const w = (weight(seg) / total) * width;
    const classes = ["seg"];
    if (seg.active) classes.push("active");
    if (seg.past_retention) classes.push("past-retention");
    if (seg.cleaner === "next") classes.push("cleaner-next");
    if (seg.cleaner === "cleaned") classes.push("cleaned");
    const fill = seg.index_max_entries > 0 ? Math.min(1, seg.index_entries / seg.index_max_entries) : 0;
    const title = [
      `offsets ${seg.base_offset} to ${seg.next_offset - 1}`,
      `${bytes(seg.size_bytes)}`,
      `index ${seg.index_entries}/${seg.index_max_entries}`,
      `time index ${seg.time_index_entries}/${seg.time_index_max_entries}`,
      seg.max_timestamp !== null ? `newest ${time(seg.max_timestamp)}` : null,
      seg.key_index ? "key index" : null,
      seg.active ? "active" : null,
      seg.past_retention ? "past retention" : null,
      seg.cleaner ? `cleaner: ${seg.cleaner}` : null,
    ]
      .filter((t) => t)
      .join("\n");
    svg.append(
      s(
        "g",
        { "data-base-offset": seg.base_offset },
        s("rect", { class: classes.join(" "), x: x.toFixed(1), y: barTop, width: Math.max(1, w).toFixed(1), height: barHeight }, s("title", {}, title)),
        s("rect", { class: "fill", x: x.toFixed(1), y: barTop + barHeight - 5, width: Math.max(0, w * fill).toFixed(1), height: 5 }),
      ),
    );
    offsetX.push([seg.base_offset, seg.next_offset, x, w]);
    x += w;
  }
  const at = (offset) => {
    for (const [base, next, left, w] of offsetX) {
      if (offset >= base && offset <= next) return left + (next > base ? ((offset - base) / (next - base)) * w : 0);
    }
    return offset < (offsetX[0] || [0])[0] ? 0 : width;
  };
  const mark = (offset, label, y) => {
    const mx = Math.min(width - 1, Math.max(1, at(offset)));
    svg.append(
      s("line", { class: "mark", x1: mx, x2: mx, y1: barTop - 4, y2: barTop + barHeight + 4 }),
      s("text", { x: Math.min(width - 90, mx + 2), y }, `${label} ${offset}`),
    );
  };
  mark(answer.log_start_offset, "log start", 12);
  mark(answer.high_watermark, "HW", height - 6);
  if (answer.last_stable_offset !== answer.high_watermark) mark(answer.last_stable_offset, "LSO", height - 6);
  const facts = [
    `partition ${answer.partition}`,
    `${segments.length} segments`,
    `policy ${answer.cleanup_policy}`,
    answer.dirty_ratio !== null && answer.dirty_ratio !== undefined
      ? `dirty ratio ${Number(answer.dirty_ratio).toFixed(2)} (cleans at ${answer.min_cleanable_dirty_ratio})`
      : null,
    answer.retention_ms >= 0 ? `retention ${answer.retention_ms} ms` : "retention unlimited",
    answer.retention_bytes >= 0 ? `${bytes(answer.retention_bytes)}` : null,
  ].filter((t) => t);
  return h("div", { class: "partition-segments" }, h("p", { class: "muted", text: facts.join(" · ") }), svg);
}

// ------------------------------------------------------------------ messages

/** A record field's bytes: text given as UTF-8, else base64. */
function fieldBytes(value, encoding) {
  if (value === null || value === undefined) return null;
  if (encoding === "base64") return Uint8Array.from(atob(value), (c) => c.charCodeAt(0));
  return new TextEncoder().encode(value);
}

function showValue(value, encoding, format) {
  if (value === null || value === undefined) return h("span", { class: "muted", text: "null" });
  const raw = fieldBytes(value, encoding);
  if (format === "hex") {
    const hex = Array.from(raw, (b) => b.toString(16).padStart(2, "0")).join(" ");
    return h("pre", { class: "value", text: hex });
  }
  const text = encoding === "base64" ? new TextDecoder("utf-8", { fatal: false }).decode(raw) : value;
  if (format === "json") {
    try {
      return h("pre", { class: "value", text: JSON.stringify(JSON.parse(text), null, 2) });
    } catch {
      return h("pre", { class: "value", text });
    }
  }
  return h("pre", { class: "value", text });
}

function recordsTable(records, format) {
  return table(
    ["Partition", "Offset", "Timestamp", "Key", "Value", "Headers"],
    records.map((r) =>
      h(
        "tr",
        { "data-offset": r.offset },
        cell(r.partition, "num"),
        cell(r.offset, "num"),
        cell(time(r.timestamp), "time"),
        h("td", { class: "key" }, showValue(r.key, r.key_encoding, format === "json" ? "text" : format)),
        h("td", { class: "value" }, showValue(r.value, r.value_encoding, format)),
        h(
          "td",
          {},
          (r.headers || []).map((x) =>
            h("div", {}, h("b", { text: `${x.key}: ` }), showValue(x.value, x.value_encoding, format === "json" ? "text" : format)),
          ),
        ),
      ),
    ),
    { "data-testid": "records" },
  );
}

async function messagesPage(root, alive, query, topic) {
  root.append(h("h1", { text: "Messages" }));
  const names = (await api("/v1/topics")).topics;
  if (!alive()) return;
  const picker = h("select", { "data-testid": "topic-select" }, h("option", { value: "", text: "choose a topic" }), names.map((n) => h("option", { value: n, text: n, selected: n === topic })));
  picker.addEventListener("change", () => {
    location.hash = picker.value ? `#/messages/${enc(picker.value)}` : "#/messages";
  });
  root.append(h("form", { class: "inline" }, "Topic ", picker));
  if (!topic) return;
  let info;
  try {
    info = await api(v3(`/topics/${enc(topic)}`));
  } catch (error) {
    root.append(failure(error));
    return;
  }
  if (!alive()) return;
  const partition = h("select", { name: "partition", "data-testid": "partition" });
  for (let p = 0; p < info.partitions_count; p += 1) {
    partition.append(h("option", { value: p, text: p, selected: String(p) === query.get("partition") }));
  }
  const mode = h("select", { name: "mode" }, h("option", { value: "offset", text: "from offset" }), h("option", { value: "timestamp", text: "from time (ms or ISO)" }));
  const from = h("input", { name: "from", value: query.get("offset") || "0", "data-testid": "from", size: 24 });
  const format = h("select", { name: "format", "data-testid": "format" }, h("option", { value: "text", text: "text" }), h("option", { value: "json", text: "JSON pretty" }), h("option", { value: "hex", text: "hex" }));
  const results = h("div", { "data-testid": "results" });
  let shown = [];
  let nextOffset = null;
  const more = h("button", { type: "button", hidden: true, text: "Next page" });
  const render = () => results.replaceChildren(shown.length ? recordsTable(shown, format.value) : h("p", { class: "muted", "data-testid": "no-records", text: "no records" }));
  format.addEventListener("change", render);

  async function browse(offsetOrNull) {
    const params = new URLSearchParams({ limit: "50" });
    if (offsetOrNull !== null) params.set("offset", String(offsetOrNull));
    else if (mode.value === "offset") params.set("offset", String(Number(from.value) || 0));
    else {
      const ms = /^\d+$/.test(from.value) ? Number(from.value) : Date.parse(from.value);
      params.set("timestamp", String(Number.isNaN(ms) ? 0 : ms));
    }
    try {
      const page = await api(`/v1/topics/${enc(topic)}/partitions/${partition.value}/records?${params}`);
      shown = page.records;
      nextOffset = page.next_offset;
      more.hidden = page.next_offset >= page.high_watermark;
      render();
    } catch (error) {
      results.replaceChildren(failure(error));
    }
  }
  more.addEventListener("click", () => browse(nextOffset));
  const browseForm = h("form", { class: "inline", "data-testid": "browse" }, "Partition ", partition, mode, from, "Show as ", format, h("button", { type: "submit", text: "Browse" }), more);
  browseForm.addEventListener("submit", (event) => {
    event.preventDefault();
    browse(null);
  });
  root.append(browseForm);

  if (info.key_index) {
    const key = h("input", { name: "key", placeholder: "key", "data-testid": "key" });
    const keyForm = h("form", { class: "inline", "data-testid": "key-search" }, "Key ", key, h("button", { type: "submit", text: "Find by key" }));
    keyForm.addEventListener("submit", async (event) => {
      event.preventDefault();
      try {
        const params = new URLSearchParams({ key: key.value, all: "true", limit: "50" });
        shown = (await api(`/v1/topics/${enc(topic)}/records?${params}`)).records;
        more.hidden = true;
        render();
      } catch (error) {
        results.replaceChildren(failure(error));
      }
    });
    root.append(keyForm);
  } else {
    root.append(h("p", { class: "muted", text: "This topic has no key index (key.index.enable): no search by key." }));
  }
  if (me.write_enabled) root.append(produceForm(topic, info.partitions_count));
  root.append(results);
  if (query.has("offset") || query.has("partition")) await browse(null);
}

function produceForm(topic, partitions) {
  const partition = h("select", { name: "partition" }, h("option", { value: "", text: "any" }));
  for (let p = 0; p < partitions; p += 1) partition.append(h("option", { value: p, text: p }));
  const key = h("input", { name: "key", placeholder: "key (text)" });
  const value = h("textarea", { name: "value", placeholder: "value (text or JSON)", rows: 3, cols: 50 });
  const asJson = h("input", { type: "checkbox", name: "json" });
  const status = h("span", { "data-testid": "produce-status" });
  const form = h("form", { class: "inline", "data-testid": "produce" }, h("b", { text: "Produce" }), "Partition ", partition, key, value, h("label", {}, asJson, " JSON"), h("button", { type: "submit", text: "Send" }), status);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = {};
    if (partition.value !== "") body.partition_id = Number(partition.value);
    if (key.value !== "") body.key = { type: "STRING", data: key.value };
    try {
      body.value = asJson.checked ? { type: "JSON", data: JSON.parse(value.value) } : { type: "STRING", data: value.value };
      const answer = await api(v3(`/topics/${enc(topic)}/records`), { method: "POST", body });
      status.textContent = `written at partition ${answer.partition_id} offset ${answer.offset}`;
    } catch (error) {
      status.textContent = error.status === 403 ? `not authorized: ${error.message}` : String(error.message);
    }
  });
  return form;
}

// ------------------------------------------------------------------ groups

async function groupsPage(root, alive) {
  root.append(h("h1", { text: "Groups" }));
  let groups;
  try {
    groups = (await api(v3("/consumer-groups"))).data;
  } catch (error) {
    root.append(failure(error, "groups not available on this broker"));
    return;
  }
  if (!alive()) return;
  root.append(
    table(
      ["Group", "Type", "State", "Assignor", "Coordinator"],
      groups.map((g) =>
        h(
          "tr",
          { "data-group": g.consumer_group_id },
          h("td", {}, h("a", { href: `#/groups/${enc(g.consumer_group_id)}`, text: g.consumer_group_id })),
          cell(g.type),
          cell(g.state),
          cell(g.partition_assignor),
          cell(g.coordinator ? g.coordinator.broker_id : "", "num"),
        ),
      ),
      { "data-testid": "groups" },
    ),
  );
}

async function groupPage(root, alive, query, group) {
  const base = v3(`/consumer-groups/${enc(group)}`);
  root.append(h("h1", {}, "Group ", h("span", { "data-testid": "group-name", text: group })));
  let info;
  try {
    info = await api(base);
  } catch (error) {
    root.append(failure(error, "groups not available on this broker"));
    return;
  }
  if (!alive()) return;
  const summary = h("div", { class: "cards" });
  const members = h("div");
  const lags = h("div");
  const chart = h("div");
  root.append(
    h("div", { class: "cards" }, h("div", { class: "card" }, "Type ", h("b", { text: info.type })), h("div", { class: "card" }, "State ", h("b", { "data-testid": "group-state", text: info.state }))),
    h("h2", { text: "Lag" }),
    summary,
    chart,
    h("h2", { text: "Members" }),
    members,
    h("h2", { text: "Committed offsets and lag per partition" }),
    lags,
  );
  if (me.write_enabled) root.append(resetForm(group));
  const history = [];
  async function poll() {
    try {
      const [consumers, lagRows, lagSummary] = await Promise.all([
        api(`${base}/consumers`),
        api(`${base}/lags`),
        api(`${base}/lag-summary`).catch(() => null),
      ]);
      if (!alive()) return;
      const total = lagRows.data.reduce((sum, r) => sum + Math.max(0, r.lag || 0), 0);
      history.push({ time_ms: Date.now(), lag: total });
      if (history.length > 360) history.shift();
      summary.replaceChildren(
        h("div", { class: "card" }, "Total lag ", h("b", { "data-testid": "total-lag", text: total })),
        lagSummary ? h("div", { class: "card" }, "Max lag ", h("b", { text: `${lagSummary.max_lag} (${lagSummary.max_lag_topic_name || ""}-${lagSummary.max_lag_partition_id ?? ""})` })) : null,
      );
      chart.replaceChildren(lagChart(history));
      members.replaceChildren(
        table(
          ["Member", "Instance", "Client", "Host", "Assignments"],
          consumers.data.map((c) =>
            h("tr", {}, cell(c.consumer_id), cell(c.instance_id), cell(c.client_id), cell(c.host), cell((c.assignments || []).map((a) => `${a.topic_name}-${a.partition_id}`).join(", "))),
          ),
          { "data-testid": "members" },
        ),
      );
      lags.replaceChildren(
        table(
          ["Topic", "Partition", "Committed", "Log end", "Lag", "Member"],
          lagRows.data.map((r) =>
            h("tr", {}, cell(r.topic_name), cell(r.partition_id, "num"), cell(num(r.current_offset), "num"), cell(num(r.log_end_offset), "num"), cell(num(r.lag), "num"), cell(r.consumer_id)),
          ),
          { "data-testid": "lags" },
        ),
      );
    } catch (error) {
      if (alive()) lags.replaceChildren(failure(error));
    }
  }
  await poll();
  later(poll, 2000);
}

function lagChart(history) {
  const width = 720;
  const height = 140;
  const pad = 24;
  const svg = s("svg", { width, height, viewBox: `0 0 ${width} ${height}`, "data-testid": "lag-chart", "data-points": history.length });
  const top = Math.max(1, ...history.map((p) => p.lag));
  const t0 = history.length ? history[0].time_ms : 0;
  const t1 = history.length ? Math.max(history[history.length - 1].time_ms, t0 + 1) : 1;
  const points = history.map((p) => `${(pad + ((p.time_ms - t0) / (t1 - t0)) * (width - 2 * pad)).toFixed(1)},${(height - pad - (p.lag / top) * (height - 2 * pad)).toFixed(1)}`);
  svg.append(s("polyline", { class: "line", points: points.join(" ") }), s("text", { x: pad, y: 12 }, `max ${top}`), s("text", { x: pad, y: height - 6 }, "total lag while this page is open"));
  return svg;
}

function resetForm(group) {
  const topic = h("input", { name: "topic", placeholder: "topic", required: true });
  const partition = h("input", { name: "partition", placeholder: "partition (all)", size: 8 });
  const to = h("select", { name: "to" }, h("option", { value: "earliest", text: "earliest" }), h("option", { value: "latest", text: "latest" }), h("option", { value: "offset", text: "offset" }), h("option", { value: "timestamp", text: "timestamp (ms)" }));
  const where = h("input", { name: "where", placeholder: "offset or ms", size: 14 });
  const status = h("span", { "data-testid": "reset-status" });
  const form = h("form", { class: "inline", "data-testid": "reset" }, h("b", { text: "Reset offsets" }), topic, partition, to, where, h("button", { type: "submit", text: "Reset" }), status);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { topic: topic.value };
    if (partition.value !== "") body.partition = Number(partition.value);
    body.to = to.value === "offset" ? { offset: Number(where.value) } : to.value === "timestamp" ? { timestamp: Number(where.value) } : to.value;
    try {
      const answer = await api(`/v1/groups/${enc(group)}/offsets/reset`, { method: "POST", body });
      status.textContent = answer.offsets.map((o) => `${o.topic}-${o.partition}: ${o.offset}`).join(", ");
    } catch (error) {
      status.textContent = error.status === 403 ? `not authorized: ${error.message}` : String(error.message);
    }
  });
  return form;
}

// ------------------------------------------------------------------ security

async function securityPage(root, alive) {
  root.append(h("h1", { text: "Security" }));
  const section = (title, testid) => {
    const box = h("div", { "data-testid": testid });
    root.append(h("h2", { text: title }), box);
    return box;
  };
  const users = section("Users", "users");
  const acls = section("ACLs", "acls");
  const quotas = section("Quotas", "quotas");
  const transactions = section("Transactions", "transactions");
  const load = async (box, path, draw, what) => {
    try {
      const body = await api(path);
      if (alive()) box.replaceChildren(draw(body));
    } catch (error) {
      if (alive()) box.replaceChildren(failure(error, what));
    }
  };
  await Promise.all([
    load(users, "/v1/users", (b) => table(["User", "Mechanisms"], b.users.map((u) => h("tr", {}, cell(u.name), cell(u.mechanisms.map((m) => `${m.mechanism} (${m.iterations})`).join(", "))))), "users not available"),
    load(
      acls,
      v3("/acls"),
      (b) =>
        table(
          ["Resource", "Name", "Pattern", "Principal", "Host", "Operation", "Permission"],
          b.data.map((a) => h("tr", {}, cell(a.resource_type), cell(a.resource_name), cell(a.pattern_type), cell(a.principal), cell(a.host), cell(a.operation), cell(a.permission))),
        ),
      "ACLs not available",
    ),
    load(
      quotas,
      "/v1/quotas",
      (b) =>
        table(
          ["Entity", "Values"],
          b.quotas.map((q) =>
            h("tr", {}, cell(q.entity.map((e) => `${e.entity_type}=${e.entity_name === null ? "<default>" : e.entity_name}`).join(", ")), cell(Object.entries(q.values).map(([k, v]) => `${k}=${v}`).join(", "))),
          ),
        ),
      "quotas not available",
    ),
    load(
      transactions,
      "/v1/transactions",
      (b) =>
        table(
          ["Transactional id", "Producer", "Epoch", "State", "Timeout ms", "Started", "Partitions", ""],
          b.transactions.map((t) =>
            h(
              "tr",
              { class: t.hanging ? "hanging" : null },
              cell(t.transactional_id),
              cell(t.producer_id, "num"),
              cell(t.producer_epoch, "num"),
              cell(t.state),
              cell(t.timeout_ms, "num"),
              cell(time(t.start_time_ms)),
              cell(t.partitions.map((p) => `${p.topic}-${p.partition}`).join(", ")),
              h("td", {}, t.hanging ? h("span", { class: "badge hanging", text: "hanging" }) : null),
            ),
          ),
        ),
      "transactions not available",
    ),
  ]);
}

// ------------------------------------------------------------------ start

async function start() {
  try {
    await whoami();
  } catch (error) {
    if (error instanceof HttpError && error.status === 401) {
      showLogin("");
      return;
    }
    main.replaceChildren(failure(error));
    return;
  }
  route();
}

start();
