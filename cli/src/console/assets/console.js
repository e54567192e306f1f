// The introspect console. Every value from the registry is put into the page as text
// (textContent, text nodes), never as markup.
"use strict";

const state = { apps: new Map(), view: null, refresh: null, holdsAt: 0, offset: 0, diff: null,
  routeQuery: { consumer_app: "", method: "", tag: "" }, session: null, actionResult: null };

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "on") for (const [ev, fn] of Object.entries(v)) node.addEventListener(ev, fn);
    else node.setAttribute(k, String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

const short = (r) => (r && r.length > 12 ? r.slice(0, 12) + "…" : r || "");
const pct = (s) => (s * 100).toFixed(s < 0.1 ? 1 : 0) + "%";
const appLink = (name) => el("a", { href: "#/app/" + encodeURIComponent(name) }, name);
const hue = (r) => { let h = 0; for (const c of r || "") h = (h * 31 + c.charCodeAt(0)) % 360; return h; };
function ago(ms) {
  const s = Math.max(0, Math.round((Date.now() - ms) / 1000));
  if (s < 60) return s + "s";
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  return Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
}
const left = (ms) => Math.max(0, Math.round(ms / 1000)) + "s left";

async function api(path) {
  const response = await fetch(path, { credentials: "same-origin" });
  if (response.status === 401) { showLogin(); throw new Error("login needed"); }
  const body = await response.json();
  if (!response.ok) throw new Error(body.error || response.statusText);
  if (body.registry) document.getElementById("registry").textContent = "registry: " + body.registry;
  return body;
}

// A write action: a JSON POST; the answer's error, when it fails, is thrown.
async function post(path, body) {
  const response = await fetch(path, {
    method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json" }, body: JSON.stringify(body),
  });
  if (response.status === 401) { showLogin(); throw new Error("login needed"); }
  const answer = await response.json();
  if (!response.ok) throw new Error(answer.error || response.statusText);
  return answer;
}

// Whether this page may act (a console with a token, logged in), asked once per login.
async function session() {
  if (!state.session) {
    try { state.session = await api("/api/session"); } catch (e) { state.session = { actions: false, why_not: String(e.message || e) }; }
  }
  return state.session;
}

function showLogin() {
  document.getElementById("login").hidden = false;
  document.getElementById("main").replaceChildren();
}

async function login(event) {
  event.preventDefault();
  const token = document.getElementById("token").value;
  const response = await fetch("/api/login", {
    method: "POST", credentials: "same-origin",
    headers: { "content-type": "application/json" }, body: JSON.stringify({ token }),
  });
  if (!response.ok) { document.getElementById("login-error").textContent = "wrong token"; return; }
  document.getElementById("token").value = "";
  document.getElementById("login").hidden = true;
  state.session = null;
  connect();
  route();
}

function main(...children) {
  document.getElementById("main").replaceChildren(...children.flat(Infinity).filter((c) => c !== null && c !== undefined));
}
function error(e) { main(el("p", { class: "error" }, String(e.message || e))); }

// ---- apps page ----

function revisionBar(revisions) {
  return el("div", { class: "bar", title: revisions.map((r) => short(r.revision) + " " + pct(r.share)).join(", ") },
    revisions.map((r) => {
      const span = el("span");
      span.style.width = r.share * 100 + "%";
      span.style.background = `hsl(${hue(r.revision)} 55% 55%)`;
      return span;
    }));
}

function appRow(a) {
  const tags = [];
  if (!a.synced) tags.push(el("span", { class: "tag" }, "reading"));
  if (a.protection_active) tags.push(el("span", { class: "tag warn" }, "protection active"));
  if (a.failed) tags.push(el("span", { class: "tag bad" }, "failed"));
  return el("tr", { "data-app": a.app },
    el("td", {}, appLink(a.app), " ", tags),
    el("td", { class: "num" }, a.instances),
    el("td", {}, revisionBar(a.revisions),
      el("div", { class: "muted mono" }, a.revisions.slice(0, 4).map((r) => short(r.revision) + " " + pct(r.share)).join("  "),
        a.revisions.length > 4 ? `  +${a.revisions.length - 4} more` : "")),
    el("td", { class: "num" }, a.disabled),
    el("td", { class: "num" }, a.held),
    el("td", { class: "num" }, a.set_aside));
}

function renderApps() {
  const search = document.getElementById("search");
  const q = search ? search.value.toLowerCase() : "";
  const body = el("tbody");
  const names = [...state.apps.keys()].sort();
  let shown = 0;
  for (const name of names) {
    if (q && !name.toLowerCase().includes(q)) continue;
    if (++shown > 2000) break;
    body.append(appRow(state.apps.get(name)));
  }
  const table = document.getElementById("apps-table");
  if (table) table.replaceChildren(appsHead(), body);
  const count = document.getElementById("apps-count");
  if (count) count.textContent = `${shown > 2000 ? "2000+" : shown} of ${state.apps.size} apps`;
}

function appsHead() {
  return el("thead", {}, el("tr", {}, el("th", {}, "app"), el("th", { class: "num" }, "instances"),
    el("th", {}, "revisions (share of instances)"), el("th", { class: "num" }, "disabled"),
    el("th", { class: "num" }, "held"), el("th", { class: "num" }, "set aside")));
}

async function showApps() {
  const body = await api("/api/apps");
  if (state.view.kind !== "apps") return;
  state.apps = new Map(body.apps.map((a) => [a.app, a]));
  // A refresh keeps the search box, and what was typed in it.
  if (!document.getElementById("search")) {
    const search = el("input", { id: "search", type: "search", placeholder: "search apps", "aria-label": "search apps",
      on: { input: renderApps } });
    main(el("div", {}, search, " ", el("span", { id: "apps-count", class: "muted" })),
      el("p", { id: "apps-error", class: "error" }), el("table", { id: "apps-table" }));
    search.focus();
  }
  document.getElementById("apps-error").textContent = body.error ? "listing apps failed: " + body.error : "";
  renderApps();
}

// ---- app page ----

function params(p) {
  const entries = Object.entries(p || {});
  if (!entries.length) return el("span", { class: "muted" }, "none");
  return el("span", { class: "mono" }, entries.map(([k, v]) => k + "=" + v).join(", "));
}

// The action buttons of one instance, from what the app's rules say of it now.
function actionCell(app, i, rules) {
  const address = i.address;
  const disabled = (rules.disabled || []).includes(address);
  const weight = (rules.weights || {})[address];
  const tag = (rules.tags || {})[address];
  const run = (action, body, what) => async (e) => {
    e.preventDefault();
    try {
      const answer = await post("/api/actions/" + action, Object.assign({ app, address }, body));
      state.actionResult = { ok: true, text: `${what}: ${answer.change} (${answer.action.key})` };
    } catch (err) {
      state.actionResult = { ok: false, text: `${what}: ${err.message || err}` };
    }
    refresh();
  };
  const weightInput = el("input", { type: "number", min: 0, max: 10000, class: "small", placeholder: weight || "100", "aria-label": "weight of " + address, "data-input": "weight" });
  const tagInput = el("input", { class: "small", placeholder: tag || "tag", "aria-label": "tag of " + address, "data-input": "tag" });
  return el("td", { class: "actions" },
    disabled ? [el("span", { class: "tag bad" }, "disabled by rule"), " ",
      el("button", { "data-action": "enable", on: { click: run("enable", {}, "enable " + address) } }, "enable")]
      : el("button", { "data-action": "disable", on: { click: run("disable", {}, "disable " + address) } }, "disable"),
    el("form", { class: "inline", "data-form": "weight", on: { submit: (e) => {
      const v = weightInput.value.trim();
      return run("weight", { weight: v === "" ? null : Number(v) }, (v === "" ? "clear weight of " : `weight ${v} for `) + address)(e);
    } } }, weightInput, el("button", { type: "submit", "data-action": "weight" }, weight ? "weight " + weight : "weight")),
    el("form", { class: "inline", "data-form": "tag", on: { submit: (e) => {
      const v = tagInput.value.trim();
      return run("tag", { tag: v === "" ? null : v }, (v === "" ? "untag " : `tag ${v} for `) + address)(e);
    } } }, tagInput, el("button", { type: "submit", "data-action": "tag" }, tag ? "tag: " + tag : "tag")));
}

// The console's action log: who did what, when, and how it went.
function actionLog(log) {
  if (!log) return null;
  const items = (log.actions || []).slice(0, 50).map((e) => el("li", { "data-action-id": e.id, "data-outcome": e.outcome },
    el("span", { class: "muted" }, new Date(e.at_ms).toLocaleTimeString()), " ",
    el("span", { class: "tag " + (e.outcome === "ok" ? "ok" : e.outcome === "conflict" ? "warn" : "bad") }, e.outcome === "ok" ? e.change : e.outcome), " ",
    el("b", {}, e.action + (e.value ? " " + e.value : "")), " ", el("span", { class: "mono" }, e.app + " " + e.address), " ",
    el("span", { class: "muted mono", title: `versions ${e.version_before || "none"} → ${e.version_after || "none"}` }, e.key), " ",
    el("span", { class: "muted" }, "by " + e.session + " from " + e.client),
    e.error ? el("div", { class: "error" }, e.error) : null));
  return el("div", { class: "revision", id: "action-log" }, el("h3", {}, `action log: ${log.recorded}`),
    items.length ? el("ul", { class: "log" }, items) : el("p", { class: "muted" }, "no actions yet"));
}

function instanceRow(i, act) {
  const tags = [];
  tags.push(el("span", { class: "tag " + (i.enabled && !i.stopping ? "ok" : "bad") }, i.stopping ? "stopping" : i.enabled ? "enabled" : "disabled"));
  if (!i.healthy) tags.push(el("span", { class: "tag bad" }, "unhealthy"));
  if (i.held) tags.push(el("span", { class: "tag warn" }, "held: " + i.held));
  if (i.set_aside) tags.push(el("span", { class: "tag warn" }, "set aside"));
  return el("tr", { "data-address": i.address },
    el("td", { class: "mono" }, i.address), el("td", {}, tags),
    el("td", { title: new Date(i.seen_since_ms).toISOString() }, (i.seen_at_start ? "≥ " : "") + ago(i.seen_since_ms)),
    el("td", { class: "mono" }, i.metadata_service, " ", el("span", { class: "muted" }, i.storage_type)),
    act ? act(i) : null);
}

function renderDiff(diff) {
  if (!diff) return null;
  if (diff.error) return el("p", { class: "error" }, diff.error);
  const items = [];
  for (const d of diff.diffs || []) {
    items.push(el("h4", {}, short(d.from) + " → " + short(d.to)));
    const list = el("ul", { class: "mono" });
    if (d.app_changed) list.append(el("li", {}, "~ app name"));
    for (const k of d.only_in_from) list.append(el("li", {}, "- " + k + "  (only in " + short(d.from) + ")"));
    for (const k of d.only_in_to) list.append(el("li", {}, "+ " + k + "  (only in " + short(d.to) + ")"));
    for (const [k, changes] of Object.entries(d.changed)) {
      for (const c of changes) list.append(el("li", {}, `~ ${k}  ${c.field}: ${c.before ?? "(absent)"} -> ${c.after ?? "(absent)"}`));
    }
    if (!list.children.length) list.append(el("li", {}, "same services and params: the revisions come from different rules"));
    items.push(list);
  }
  for (const r of diff.revisions || []) if (r.error) items.push(el("p", { class: "error" }, short(r.revision) + ": " + r.error));
  return el("div", { class: "revision" }, el("h3", {}, "difference"), items);
}

function holdsList(holds) {
  if (!holds.length) return null;
  state.holdsAt = Date.now();
  return el("div", { class: "revision" }, el("h3", {}, `held: ${holds.length}`),
    el("ul", {}, holds.map((h) => el("li", {}, el("span", { class: "mono" }, h.address), " ",
      el("span", { class: "tag warn" }, h.cause), " ",
      el("span", { class: "countdown", "data-ends": h.ends_in_ms }, left(h.ends_in_ms))))));
}

async function showApp(name) {
  let path = "/api/app?name=" + encodeURIComponent(name) + "&offset=" + state.offset;
  if (state.diff) path += "&a=" + encodeURIComponent(state.diff[0]) + "&b=" + encodeURIComponent(state.diff[1]);
  const who = await session();
  const [a, c, rules, log] = await Promise.all([api(path), consumersOf("app=" + encodeURIComponent(name)),
    who.actions ? api("/api/actions?app=" + encodeURIComponent(name)).catch((e) => ({ error: e.message })) : null,
    who.actions ? api("/api/audit").catch(() => null) : null]);
  if (state.view.name !== name) return;
  const act = rules && !rules.error ? (i) => actionCell(name, i, rules) : null;
  const s = a.summary;
  const header = el("div", {}, el("h2", {}, a.app),
    el("p", { class: "muted" }, `${s.instances} instances, ${a.revisions.length} revisions, ${s.disabled} disabled, ${s.held} held, ${s.set_aside} set aside`,
      a.protection_active ? el("span", { class: "tag warn" }, " protection active") : null,
      a.synced ? null : el("span", { class: "tag" }, "reading")));
  const byRevision = new Map();
  for (const i of a.instances) { if (!byRevision.has(i.revision)) byRevision.set(i.revision, []); byRevision.get(i.revision).push(i); }
  const sections = a.revisions.map((r) => el("section", { class: "revision", "data-revision": r.revision },
    el("h3", {}, el("span", { class: "mono", title: r.revision }, short(r.revision)), ` — ${r.instances} instances (${pct(r.share)})`),
    r.error ? el("p", { class: "error" }, "metadata unavailable: " + r.error)
      : el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "match key"), el("th", {}, "port"), el("th", {}, "path"), el("th", {}, "params"))),
        el("tbody", {}, (r.services || []).map((sv) => el("tr", {}, el("td", { class: "mono" }, el("a", { href: "#/service/" + encodeURIComponent(sv.name), title: "endpoints and routing" }, sv.match_key)), el("td", {}, sv.port), el("td", { class: "mono" }, sv.path), el("td", {}, params(sv.params)))))),
    el("table", { class: "instances" }, el("thead", {}, el("tr", {}, el("th", {}, "address"), el("th", {}, "state"), el("th", {}, "registered for"), el("th", {}, "MetadataService"),
      act ? el("th", {}, "actions") : null)),
      el("tbody", {}, (byRevision.get(r.revision) || []).map((i) => instanceRow(i, act))))));
  const revs = a.revisions.map((r) => r.revision);
  const pick = (id, at) => el("select", { id }, revs.map((r, n) => { const o = el("option", { value: r }, short(r)); if (n === at) o.selected = true; return o; }));
  const diffForm = revs.length > 1 ? el("form", { class: "inline", on: { submit: (e) => {
    e.preventDefault(); state.diff = [document.getElementById("rev-a").value, document.getElementById("rev-b").value]; refresh(); } } },
    "compare ", pick("rev-a", 0), pick("rev-b", 1), el("button", { type: "submit" }, "diff")) : null;
  const paging = a.instances_total > a.limit ? el("p", {},
    `instances ${a.offset + 1}–${Math.min(a.offset + a.limit, a.instances_total)} of ${a.instances_total} `,
    a.offset > 0 ? el("button", { on: { click: () => { state.offset = Math.max(0, a.offset - a.limit); refresh(); } } }, "previous") : null,
    a.offset + a.limit < a.instances_total ? el("button", { on: { click: () => { state.offset = a.offset + a.limit; refresh(); } } }, "next") : null) : null;
  const changes = el("div", { class: "revision" }, el("h3", {}, "changes"),
    el("ul", { class: "log" }, a.log.map((e) => el("li", {}, el("span", { class: "muted" }, new Date(e.at_ms).toLocaleTimeString()), " ",
      el("span", { class: "tag" }, e.kind), " ", el("span", { class: "mono" }, e.address), " ", el("span", { class: "muted" }, e.detail)))));
  const result = state.actionResult;
  const actions = who.actions ? [
    result ? el("p", { id: "action-result", class: result.ok ? "muted" : "error" }, result.text) : null,
    rules && rules.error ? el("p", { class: "error" }, "the app's rules cannot be read: " + rules.error) : null]
    : el("p", { class: "muted", id: "read-only" }, who.why_not || "read-only");
  main(header, actions, el("div", { class: "cols" }, el("div", {}, paging, sections, diffForm, renderDiff(a.diff), consumersTable(c, true)),
    el("div", {}, holdsList(a.holds), actionLog(log), changes)));
}

// ---- consumers ----

// The registered consumers (of an interface or routing to an app); an answer that fails
// shows as an error in the table, not as a broken page.
async function consumersOf(query) {
  try { return await api("/api/consumers?" + query); } catch (e) { return { error: e.message, consumers: [], total: 0, stale: 0 }; }
}

function verdictTag(c) {
  const lasted = Math.round(c.differs_for_ms / 1000);
  const text = c.verdict === "stale" ? `stale for ${lasted}s` : c.verdict === "different" ? `different for ${lasted}s` : c.verdict;
  return el("span", { class: c.verdict === "same" ? "tag ok" : c.verdict === "unknown" ? "tag" : "tag warn", "data-verdict": c.verdict }, text);
}

// Whether the consumer routes by the rules written now: same, different (an older set), unknown.
function rulesTag(c) {
  const title = `routes by ${c.rules_digest || "none"} (${(c.rule_keys || []).join(", ") || "no rule"}); written now: ${c.current_rules_digest || "unknown"}`;
  const text = c.rules === "different" ? "older rules" : c.rules;
  return el("span", { class: c.rules === "same" ? "tag ok" : c.rules === "different" ? "tag warn" : "tag", "data-rules": c.rules, title }, text);
}

// Which level of discovery the consumer's set comes from, and why: its migration step,
// from its app's migration rule or its own, and APPLICATION_FIRST's fallback.
function levelTag(c) {
  if (!c.level) return el("span", { class: "tag", title: "an earlier writer: the record does not say" }, "unknown");
  const why = c.step_rule ? `${c.step} from the migration rule ${c.step_rule}` : `${c.step}, the consumer's own step`;
  const title = why + (c.fallback ? ": the application level has no endpoint, so the interface level serves" : "");
  const text = c.level + (c.fallback ? " (fallback)" : "");
  return el("span", { class: c.level === "interface" ? "tag warn" : "tag ok", "data-level": c.level, title }, text);
}

function consumersTable(c, withInterface) {
  const head = ["consumer app", "host", "id", "registered for"].concat(withInterface ? ["interface"] : [], ["endpoints", "digest", "position", "set", "rules", "level"]);
  return el("div", { class: "revision", id: "consumers" },
    el("h3", {}, `consumers: ${c.total}` + (c.stale ? `, ${c.stale} stale` : "") + (c.older_rules ? `, ${c.older_rules} by older rules` : "") + (c.interface_only ? `, ${c.interface_only} of interface-only providers` : "")),
    c.error ? el("p", { class: "error" }, c.error) : null,
    c.total ? el("table", {}, el("thead", {}, el("tr", {}, head.map((h) => el("th", {}, h)))),
      el("tbody", {}, c.consumers.map((r) => el("tr", { "data-consumer": r.id },
        el("td", {}, r.app), el("td", { class: "mono" }, r.host), el("td", { class: "mono", title: r.id }, short(r.id)),
        el("td", {}, ago(r.registered_ms)), withInterface ? el("td", { class: "mono" }, r.interface) : null,
        el("td", {}, r.endpoints), el("td", { class: "mono", title: "the console's: " + (r.current_digest || "none") }, r.digest),
        el("td", {}, r.position || "–"), el("td", {}, verdictTag(r)), el("td", {}, rulesTag(r)),
        el("td", {}, levelTag(r), r.interface_only ? el("span", { class: "tag warn", title: "its providers register at the interface level only: the work left of a migration" }, "interface-only providers") : null)))))
      : el("p", { class: "muted" }, "no consumer registered a record (ResolverBuilder::register_consumer)"));
}

// ---- routing panel ----

// Where a call to the interface would go now, as a balanced channel routes it under the
// config centre's rules; an answer that fails shows in the panel, not as a broken page.
async function routeOf(name) {
  const q = state.routeQuery;
  let path = "/api/route?interface=" + encodeURIComponent(name);
  for (const k of ["consumer_app", "method", "tag"]) if (q[k]) path += "&" + k + "=" + encodeURIComponent(q[k]);
  try { return await api(path); } catch (e) { return { error: e.message }; }
}

function routeForm() {
  const field = (key, label, hint) => el("input", { id: "route-" + key, value: state.routeQuery[key], placeholder: hint, "aria-label": label,
    on: { input: (e) => { state.routeQuery[key] = e.target.value.trim(); } } });
  return el("form", { id: "route-form", class: "inline", on: { submit: (e) => { e.preventDefault(); refresh(); } } },
    field("consumer_app", "consumer app", "consumer app"), field("method", "method", "method"), field("tag", "tag", "tag (dubbo.tag)"),
    el("button", { type: "submit" }, "explain"));
}

// Why health ejected a provider, since when, and when it is tried again.
function ejectionText(e) {
  const r = e.reason;
  const why = {
    refused: "connection refused",
    failing: `${r.consecutive} calls in a row failed`,
    failure_rate: `${r.failures} of its last ${r.calls} calls failed`,
    slow: `answers in ${r.latency} ms where the others' median is ${r.median} ms`,
    hung: "a call waited and it did not answer a liveness check",
    lost: "a call's connection was lost and it did not answer a liveness check",
    held: "held by self-preservation, not answering yet",
  }[r.kind] || r.kind;
  const method = e.method ? ` (${e.method})` : "";
  const next = e.next_try_in_ms == null ? "" : `, tried again in ${(e.next_try_in_ms / 1000).toFixed(1)} s`;
  return `${why}${method}, for ${(e.ejected_for_ms / 1000).toFixed(1)} s${next}`;
}

function routedCell(p) {
  if (p.routed && p.set_aside) return [el("span", { class: "tag ok" }, "routed"), " ", el("span", { class: "tag bad" }, "set aside by health"),
    " ", el("span", { class: "muted" }, p.ejection ? ejectionText(p.ejection) : "")];
  if (p.routed) return el("span", { class: "tag ok" }, "routed");
  return [el("span", { class: "tag bad" }, "routed out"), " ", el("span", { class: "muted" }, p.routed_out_by || "")];
}

function routeRow(p) {
  const notes = [];
  const configured = Object.entries(p.configured || {});
  if (configured.length) notes.push(el("div", { class: "muted mono" }, "configured: " + configured.map(([k, v]) => k + "=" + v).join(", ")));
  if ((p.bad_params || []).length) notes.push(el("div", { class: "error mono" }, "unparsed, read as default: " + p.bad_params.join(", ")));
  return el("tr", { "data-address": p.address, "data-routed": String(p.routed) },
    el("td", { class: "mono" }, p.address, notes), el("td", {}, appLink(p.app)),
    el("td", {}, p.tag ? el("span", { class: "tag" }, p.tag) : el("span", { class: "muted" }, "–")),
    el("td", {}, el("span", { class: "tag " + (p.enabled ? "ok" : "bad") }, p.enabled ? "enabled" : "disabled")),
    el("td", { class: "num" }, p.weight), el("td", {}, routedCell(p)));
}

// How a routed call is made: cluster, retries, load balancer, timeout, each with its source.
function callPolicy(c) {
  const row = (name, s, extra) => el("tr", {}, el("th", {}, name), el("td", { class: "mono" }, s.value + (extra || "")), el("td", { class: "muted" }, s.from));
  return el("details", { id: "call-policy", open: true }, el("summary", {}, "how calls are made"),
    el("table", { class: "call" }, el("tbody", {},
      row("cluster", c.cluster), row("retries", c.retries, ` (${c.tries} tries)`), row("loadbalance", c.loadbalance),
      row("timeout", c.timeout, c.timeout.value === "none" ? "" : " ms"))),
    el("p", { class: "muted" }, "retried: " + c.retried),
    c.not_applied.map((n) => el("p", { class: "not-applied" }, el("span", { class: "tag warn" }, "not applied"), " ", n)));
}

function routingPanel(r) {
  const parts = [el("h3", {}, "routing"), routeForm()];
  if (r.error) return el("div", { class: "revision", id: "routing" }, parts, el("p", { class: "error" }, r.error));
  const asked = [r.consumer_app ? "consumer app " + r.consumer_app : "no consumer app", r.method ? "method " + r.method : "any method",
    r.tag ? "tag " + r.tag : "untagged"].join(", ");
  parts.push(el("p", { class: "muted" }, `a call as ${asked}, read at ${new Date().toLocaleTimeString()}`));
  if (r.level) parts.push(el("p", { class: "muted", id: "route-level" }, "providers from the " + r.level));
  const rules = el("ul", { class: "rules" },
    r.rules_in_force.map((k) => el("li", { "data-rule": k }, el("span", { class: "tag ok" }, "in force"), " ", el("span", { class: "mono" }, k))),
    r.problems.map((p) => el("li", { "data-rule": p.key, class: "not-applied" }, el("span", { class: "tag warn" }, "not applied"), " ",
      el("span", { class: "mono" }, p.key), " ", el("span", { class: "muted" }, p.reason))),
    (r.notes || []).map((n) => el("li", { "data-rule": n.key }, el("span", { class: "tag warn" }, "noted"), " ",
      el("span", { class: "mono" }, n.key), " ", el("span", { class: "muted" }, n.reason))));
  parts.push(rules.children.length ? rules : el("p", { class: "muted" }, "no rules in force: calls go by what the providers publish"));
  // Rules written where no known member reads them (a misplaced key, an unknown interface or app).
  const unread = r.rules_nobody_reads;
  if (unread === null) parts.push(el("p", { class: "muted" }, "rules nobody reads: cannot tell (the registry could not be asked)"));
  else if (unread && unread.length) parts.push(el("ul", { class: "rules", id: "unread-rules" }, unread.map((u) => el("li", { "data-rule": u.key, class: "not-applied" },
    el("span", { class: "tag bad" }, "read by nobody"), " ", el("span", { class: "mono" }, u.key), " ", el("span", { class: "muted" }, u.why)))));
  if (r.steps.length) parts.push(el("details", {}, el("summary", {}, `steps (${r.steps.length})`), el("ol", { class: "mono" }, r.steps.map((s) => el("li", {}, s)))));
  if (r.why_empty) parts.push(el("p", { class: "error" }, "no providers: " + r.why_empty));
  if (r.call) parts.push(callPolicy(r.call));
  const routed = r.providers.filter((p) => p.routed).length;
  parts.push(el("p", { class: "muted" }, `${routed} of ${r.providers_total} providers routed` +
    (r.providers_total > r.providers.length ? ` (first ${r.providers.length} shown)` : "")));
  if (r.providers.length) {
    parts.push(el("table", { class: "routes" }, el("thead", {}, el("tr", {}, ["provider", "app", "tag", "state", "weight", "routed"].map((h) =>
      el("th", { class: h === "weight" ? "num" : null }, h)))), el("tbody", {}, r.providers.map(routeRow))));
  }
  return el("div", { class: "revision", id: "routing" }, parts);
}

// ---- service page ----

async function showService(name) {
  const [s, c, r] = await Promise.all([api("/api/service?name=" + encodeURIComponent(name)), consumersOf("interface=" + encodeURIComponent(name)), routeOf(name)]);
  if (state.view.name !== name) return;
  // A refresh keeps the cursor in the routing form.
  const focused = document.activeElement && document.activeElement.id.startsWith("route-") ? document.activeElement.id : null;
  main(el("h2", {}, s.interface),
    el("p", {}, "apps the mapping names: ", s.apps.length ? s.apps.map((a, n) => [n ? ", " : "", appLink(a)]) : el("span", { class: "muted" }, "none")),
    s.error ? el("p", { class: "error" }, s.error) : null,
    s.unreadable ? el("p", { class: "error" }, s.unreadable) : null,
    el("p", { class: "muted" }, `application level: ${s.total} endpoints` + (s.total > s.endpoints.length ? ` (first ${s.endpoints.length} shown)` : "")),
    el("table", {}, el("thead", {}, el("tr", {}, ["app", "address", "protocol", "revision", "service"].map((h) => el("th", {}, h)))),
      el("tbody", {}, s.endpoints.map((e) => el("tr", {}, el("td", {}, appLink(e.app)),
        el("td", { class: "mono" }, e.host.includes(":") ? `[${e.host}]:${e.port}` : `${e.host}:${e.port}`),
        el("td", {}, e.protocol), el("td", { class: "mono", title: e.revision }, short(e.revision)),
        el("td", { class: "mono" }, matchKey(e.service)))))),
    interfaceLevel(s),
    routingPanel(r),
    consumersTable(c, false));
  if (focused) {
    const input = document.getElementById(focused);
    if (input) { input.focus(); input.setSelectionRange(input.value.length, input.value.length); }
  }
}

// The interface level beside the application level: the providers' URLs (Dubbo 2.7,
// register-mode=interface or all), and where the interface stands in a migration.
const MIGRATION = {
  "application": "application level only: migrated",
  "both": "both levels: its providers register both",
  "interface-only": "interface level only: consumers reading the application level alone cannot call it (the work left of a migration)",
  "none": "no provider at either level",
};

function interfaceLevel(s) {
  const i = s.interface_level || { total: 0, endpoints: [] };
  return el("div", { class: "revision", id: "interface-level" },
    el("h3", {}, `interface level: ${i.total} provider URLs`),
    el("p", { class: s.migration === "interface-only" ? "error" : "muted", "data-migration": s.migration }, MIGRATION[s.migration] || s.migration),
    i.error ? el("p", { class: "muted" }, i.error) : null,
    i.endpoints.length ? el("table", {}, el("thead", {}, el("tr", {}, ["app", "address", "protocol", "service"].map((h) => el("th", {}, h)))),
      el("tbody", {}, i.endpoints.map((e) => el("tr", {}, el("td", {}, e.app),
        el("td", { class: "mono" }, e.host.includes(":") ? `[${e.host}]:${e.port}` : `${e.host}:${e.port}`),
        el("td", {}, e.protocol), el("td", { class: "mono" }, matchKey(e.service)))))) : null);
}

function matchKey(s) {
  let k = (s.group ? s.group + "/" : "") + s.name;
  if (s.version) k += ":" + s.version;
  if (s.protocol) k += ":" + s.protocol;
  return k;
}

// ---- routing and live updates ----

function parseRoute() {
  const hash = location.hash.replace(/^#/, "");
  const [, kind, rest] = hash.match(/^\/(app|service)\/(.*)$/) || [];
  if (kind) return { kind, name: decodeURIComponent(rest) };
  return { kind: "apps" };
}

function refresh() {
  const v = state.view;
  const run = v.kind === "app" ? showApp(v.name) : v.kind === "service" ? showService(v.name) : showApps();
  return run.catch(error);
}

function route() {
  const next = parseRoute();
  if (!state.view || state.view.kind !== next.kind || state.view.name !== next.name) {
    state.offset = 0; state.diff = null; state.routeQuery = { consumer_app: "", method: "", tag: "" }; state.actionResult = null;
  }
  state.view = next;
  return refresh();
}

function later() {
  if (state.refresh) return;
  state.refresh = setTimeout(() => { state.refresh = null; refresh(); }, 150);
}

function connect() {
  const live = document.getElementById("live");
  const source = new EventSource("/api/events");
  source.onopen = () => { live.textContent = "live"; live.className = "live on"; };
  source.onerror = () => { live.textContent = "reconnecting"; live.className = "live off"; };
  source.addEventListener("hello", () => { if (state.view) later(); });
  source.addEventListener("app", (e) => {
    const data = JSON.parse(e.data);
    if (data.summary) state.apps.set(data.app, data.summary);
    const v = state.view;
    if (v.kind === "apps") {
      const row = document.querySelector(`tr[data-app="${CSS.escape(data.app)}"]`);
      if (row && data.summary) { const fresh = appRow(data.summary); fresh.classList.add("flash"); row.replaceWith(fresh); }
      else renderApps();
    } else if (v.kind === "app" && v.name === data.app) later();
    else if (v.kind === "service") later();
  });
  source.addEventListener("removed", (e) => {
    state.apps.delete(JSON.parse(e.data).app);
    if (state.view.kind === "apps") renderApps(); else later();
  });
  source.addEventListener("consumers", () => { if (state.view.kind !== "apps") later(); });
  source.addEventListener("action", () => { if (state.view.kind === "app") later(); });
  source.addEventListener("resync", later);
  source.addEventListener("apps", later);
}

setInterval(() => {
  const passed = Date.now() - state.holdsAt;
  for (const c of document.querySelectorAll(".countdown")) c.textContent = left(Number(c.dataset.ends) - passed);
}, 1000);

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login-form").addEventListener("submit", login);
  document.getElementById("service-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const name = document.getElementById("service-name").value.trim();
    if (name) location.hash = "#/service/" + encodeURIComponent(name);
  });
  window.addEventListener("hashchange", route);
  route().then(() => { if (document.getElementById("login").hidden) connect(); });
});
