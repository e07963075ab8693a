// guardian's operator console. It reads the admin API with a token the
// operator pastes, kept in this tab's sessionStorage only: never in a URL,
// a cookie or the page. Every value from the API reaches the page through
// textContent, never as markup.
"use strict";

(function () {
  const TOKEN_KEY = "guardian.console.admin-token";
  const REFRESH_MS = 5000;
  const CHART_POINTS = 60; // 5 minutes of samples

  const $ = (id) => document.getElementById(id);
  let timer = null;
  let samples = []; // {t, total}: every shadow rule's trips, fleet-wide
  let samplesPartial = null; // whether samples are this instance's alone

  function token() { return sessionStorage.getItem(TOKEN_KEY); }

  // el builds an element with text children; attrs sets attributes.
  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    for (const c of children) e.append(c instanceof Node ? c : String(c));
    return e;
  }

  function rows(tbody, list) {
    tbody.replaceChildren(...list);
  }

  function ago(iso) {
    const s = Math.round((Date.now() - Date.parse(iso)) / 1000);
    if (!isFinite(s)) return "–";
    if (s < 60) return Math.max(s, 0) + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    return new Date(iso).toLocaleString();
  }

  function duration(ms) {
    if (ms <= 0) return "now";
    const s = Math.ceil(ms / 1000);
    if (s < 120) return s + " s";
    if (s < 7200) return Math.round(s / 60) + " min";
    return Math.round(s / 3600) + " h";
  }

  class APIError extends Error {
    constructor(status, code, message) { super(message); this.status = status; this.code = code; }
  }

  // api calls the admin API with the tab's token. Paths are relative, so
  // the console works behind a proxy that mounts guardian under a prefix.
  async function api(path, body) {
    const opts = {
      method: body === undefined ? "GET" : "POST",
      headers: { "Authorization": "Bearer " + token() },
      credentials: "omit",
      cache: "no-store",
      referrerPolicy: "no-referrer",
    };
    if (body !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(body);
    }
    const res = await fetch(path, opts);
    let data = null;
    try { data = await res.json(); } catch (e) { /* not JSON */ }
    if (!res.ok) {
      const err = (data && data.error) || {};
      throw new APIError(res.status, err.code || "http_" + res.status, path + ": " + (err.message || res.statusText));
    }
    return data;
  }

  function showLogin(message) {
    sessionStorage.removeItem(TOKEN_KEY);
    clearInterval(timer);
    timer = null;
    $("main").hidden = true;
    $("forget").hidden = true;
    $("login").hidden = false;
    $("login-error").textContent = message || "";
    $("token").value = "";
    $("token").focus();
  }

  function showMain() {
    $("login").hidden = true;
    $("main").hidden = false;
    $("forget").hidden = false;
    refresh();
    if (!timer) timer = setInterval(refresh, REFRESH_MS);
  }

  // failed shows an error, or sends the operator back to the token form
  // when the token is refused.
  function failed(err) {
    if (err.status === 401 || err.status === 403) {
      showLogin(err.status === 401 ? "The token was refused: " + err.message : "That token is not of scope admin.");
      return;
    }
    $("error").textContent = err.message;
  }

  async function refresh() {
    if (!token()) return;
    $("error").textContent = "";
    const [fleet, set, explain, shadow, incident, lists] = await Promise.allSettled([
      api("v1/fleet"), api("v1/rules"), api("v1/rules/explain"), api("v1/shadow"), api("v1/incident"), api("v1/lists"),
    ]);
    // A guardian without lists answers 404 for them: not an error.
    const noLists = lists.status === "rejected" && lists.reason.status === 404;
    const errs = [fleet, set, explain, shadow, incident, lists].filter((r) => r.status === "rejected" && !(r === lists && noLists)).map((r) => r.reason);
    if (errs.length) failed(errs.find((e) => e.status === 401 || e.status === 403) || errs[0]);
    if (!token()) return;
    if (fleet.status === "fulfilled") renderFleet(fleet.value);
    if (incident.status === "fulfilled") renderIncident(incident.value);
    if (lists.status === "fulfilled") renderLists(lists.value);
    else if (noLists) renderLists(null);
    if (set.status === "fulfilled") renderRules(set.value, explain.status === "fulfilled" ? explain.value : { rules: [] });
    if (shadow.status === "fulfilled") renderShadow(shadow.value);
    refreshProxies();
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
  }

  // refreshProxies lists the gateway's proxies (guardian serve --proxy)
  // and their routes; the section stays hidden when none runs.
  async function refreshProxies() {
    let v;
    try {
      v = await api("v1/proxies");
    } catch (err) {
      return; // an older instance without GET /v1/proxies
    }
    const list = v.proxies || [];
    $("proxies-card").hidden = list.length === 0;
    rows($("proxies").tBodies[0], list.flatMap((p) => (p.routes || []).map((r) => el("tr", {},
      el("td", { class: "hash" }, p.addr || p.listen),
      el("td", { class: "hash" }, p.upstream),
      el("td", {}, el("span", { class: "badge " + (p.mode === "observe" ? "shadow" : "") }, p.mode)),
      el("td", {}, el("code", {}, r.name)),
      el("td", {}, (r.match.methods || []).join(" ") + " " + (r.match.path || (r.match.path_prefix || "") + "*")),
      el("td", {}, r.flow),
      el("td", {}, Object.entries(r.account).map(([k, x]) => k + ": " + x).join("")),
      el("td", {}, r.challenge.type + (r.challenge.difficulty ? " " + r.challenge.difficulty : "") + (r.challenge.status ? " " + r.challenge.status : "")),
    ))));
  }

  function tile(id, value, state) {
    $("n-" + id).textContent = value;
    $("tile-" + id).className = "tile " + state;
  }

  function renderFleet(f) {
    const list = f.instances || [];
    const degraded = list.filter((i) => i.store !== "ok").length;
    $("outage").hidden = !f.unavailable;
    if (f.unavailable) {
      // Nothing is claimed of instances this one cannot see.
      tile("degraded", "this one: " + (degraded > 0 ? "degraded" : "ok"), degraded > 0 ? "bad" : "warn");
      tile("consistent", "unknown", "warn");
      tile("instances", "unavailable", "warn");
    } else {
      tile("degraded", degraded + " of " + list.length, degraded > 0 ? "bad" : "");
      tile("consistent", f.rules_consistent ? "yes" : "NO", f.rules_consistent ? "" : "bad");
      tile("instances", list.length, f.partial ? "warn" : "neutral");
    }
    $("partial").hidden = !f.partial;
    rows($("fleet").tBodies[0], list.map((i) => el("tr", {},
      el("td", { class: "hash" }, i.id),
      el("td", {}, i.version || ""),
      el("td", {}, el("span", { class: "badge " + (i.store === "ok" ? "" : "bad") }, i.store)),
      el("td", { class: "hash" }, (i.rules_hash || "").slice(0, 12)),
      el("td", {}, ago(i.rules_loaded_at)),
      el("td", {}, ago(i.last_seen)),
    )));
  }

  // rate shows a rate per second with the digits a small one needs.
  function rate(x) {
    if (x === 0) return "0";
    return x >= 10 ? x.toFixed(0) : x >= 0.1 ? x.toFixed(2) : x.toFixed(3);
  }

  function renderIncident(v) {
    const alone = !v.fleet.available;
    if (alone) $("outage").hidden = false;
    $("incident-scope").textContent = alone ? "this instance alone: the fleet view is unavailable" : (v.fleet.shared ? "fleet-wide, " + v.fleet.instances + " instances" : "this instance, the whole fleet");
    const decisions = v.decisions || [];
    const recent = decisions.reduce((n, d) => n + d.last_minute_per_second, 0);
    tile("checks", rate(v.checks_per_second), "neutral");
    tile("enforced", rate(recent), recent > 0 ? "warn" : "neutral");
    const on = (v.global_challenge || []).filter((g) => g.in_force);
    tile("global", on.length ? "ON" : "off", on.length ? "bad" : "");
    const stopped = (v.hard_stops || []).filter((h) => !h.ended_at);
    tile("stops", stopped.length, stopped.length ? "warn" : "neutral");
    $("decisions-empty").hidden = decisions.length > 0;
    rows($("decisions").tBodies[0], decisions.map((d) => el("tr", { "data-rule": d.rule, "data-decision": d.decision },
      el("td", {}, el("code", {}, d.rule)),
      el("td", {}, d.decision),
      el("td", { class: "num total" }, d.total),
      el("td", { class: "num" }, rate(d.per_second)),
      el("td", { class: "num" }, rate(d.last_minute_per_second)),
    )));
    rows($("top-keys").tBodies[0], (v.top_keys || []).map((t) => el("tr", { "data-rule": t.rule },
      el("td", {}, el("code", {}, t.rule)),
      el("td", {}, t.decision),
      el("td", {}, ...t.keys.flatMap((k) => [el("span", { class: "hash" }, k.key + " " + k.hits), " "])),
    )));
    rows($("hard-stops").tBodies[0], (v.hard_stops || []).map((h) => el("tr", { "data-account": h.account },
      el("td", { class: "hash" }, h.account),
      el("td", {}, ago(h.started_at)),
      el("td", {}, h.ended_at ? "reset " + ago(h.ended_at) : el("span", { class: "badge bad" }, "blocked")),
    )));
    rows($("global").tBodies[0], (v.global_challenge || []).map((g) => el("tr", { "data-rule": g.rule },
      el("td", {}, el("code", {}, g.rule)),
      el("td", {}, el("span", { class: "badge " + (g.in_force ? "bad" : "") }, g.in_force ? "in force" : "off")),
      el("td", {}, ago(g.since)),
      el("td", { class: "num" }, g.instances),
    )));
    rows($("incident-instances").tBodies[0], (v.instances || []).map((i) => el("tr", {},
      el("td", { class: "hash" }, i.id),
      el("td", { class: "num" }, i.checks),
      el("td", { class: "num" }, i.enforced),
    )));
  }

  // renderLists shows the deny and allow lists, or that this guardian has
  // none (lists null: GET /v1/lists answered 404).
  function renderLists(lists) {
    $("lists-unavailable").hidden = lists !== null;
    $("lists").hidden = lists === null;
    if (lists === null) return;
    const entries = [].concat(
      (lists.deny || []).map((e) => ["deny", e]),
      (lists.allow || []).map((e) => ["allow", e]));
    rows($("lists").tBodies[0], entries.map(([kind, e]) => el("tr", {},
      el("td", {}, el("span", { class: "badge " + (kind === "deny" ? "bad" : "") }, kind)),
      el("td", { class: "hash" }, e.network || e.account || ""),
      el("td", {}, (e.exempt || []).join(", ")),
      el("td", {}, e.reason || ""),
      el("td", {}, e.expires_at ? new Date(e.expires_at).toLocaleString() : "never"),
    )));
  }

  function renderRules(set, explain) {
    const bounds = new Map((explain.rules || []).map((b) => [b.rule, b]));
    $("rules-source").textContent = "from " + set.source + ", loaded " + ago(set.loaded_at);
    rows($("rules").tBodies[0], (set.rules || []).map((r) => {
      const b = bounds.get(r.name);
      return el("tr", {},
        el("td", {}, el("code", {}, r.name)),
        el("td", {}, (r.flows || []).join(", ")),
        el("td", {}, r.key),
        el("td", {}, r.type),
        el("td", {}, el("span", { class: "badge " + (r.mode === "shadow" ? "shadow" : "") }, r.mode)),
        el("td", { class: "num" }, b ? b.bound.toLocaleString("en") + " " + b.window : "–"),
        el("td", {}, b ? b.what : "–"),
      );
    }));
  }

  function renderShadow(rep) {
    const list = rep.rules || [];
    // The fleet's counts and this instance's alone are not one series: a
    // change of basis (the store lost or back) starts the chart afresh, so
    // no stale total stands beside a fresh one.
    const partial = !!rep.partial;
    if (partial !== samplesPartial) samples = [];
    samplesPartial = partial;
    $("trips-scope").textContent = partial ? "shadow trips, last 5 min (this instance)" : "shadow trips, last 5 min";
    $("shadow-empty").hidden = list.length > 0;
    let total = 0;
    rows($("shadow").tBodies[0], list.map((r) => {
      total += r.would_slow + r.would_block + r.would_challenge;
      return el("tr", { "data-rule": r.rule },
        el("td", {}, el("code", {}, r.rule)),
        el("td", {}, r.promoted_at ? "promoted " + ago(r.promoted_at) : (r.since ? ago(r.since) : "–")),
        el("td", { class: "num" }, r.evaluated),
        el("td", { class: "num would-slow" }, r.would_slow),
        el("td", { class: "num would-block" }, r.would_block),
        el("td", { class: "num would-challenge" }, r.would_challenge),
        el("td", {}, ...(r.top_keys || []).slice(0, 5).flatMap((k) => [el("span", { class: "hash" }, k.key + " " + k.hits), " "])),
      );
    }));
    samples.push({ t: Date.now(), total: total });
    if (samples.length > CHART_POINTS + 1) samples = samples.slice(-CHART_POINTS - 1);
    const recent = samples.filter((s) => s.t >= Date.now() - 5 * 60 * 1000);
    tile("trips", recent.length > 1 ? Math.max(0, total - recent[0].total) : 0, "neutral");
    drawChart();
  }

  // drawChart draws the trips between successive samples as bars: a
  // reload that resets a rule's counts shows as zero, never negative.
  function drawChart() {
    const svg = $("chart");
    const NS = "http://www.w3.org/2000/svg";
    const W = 600, H = 120, PAD = 16;
    const deltas = [];
    for (let i = 1; i < samples.length; i++) deltas.push(Math.max(0, samples[i].total - samples[i - 1].total));
    const max = Math.max(1, ...deltas);
    const w = (W - PAD) / CHART_POINTS;
    const parts = [];
    const line = document.createElementNS(NS, "line");
    line.setAttribute("class", "axis");
    line.setAttribute("x1", PAD); line.setAttribute("x2", W);
    line.setAttribute("y1", H - PAD); line.setAttribute("y2", H - PAD);
    parts.push(line);
    const label = document.createElementNS(NS, "text");
    label.setAttribute("x", 2); label.setAttribute("y", 12);
    label.textContent = "max " + max;
    parts.push(label);
    deltas.forEach((d, i) => {
      const h = (H - 2 * PAD) * d / max;
      const r = document.createElementNS(NS, "rect");
      r.setAttribute("class", "bar");
      r.setAttribute("x", PAD + (CHART_POINTS - deltas.length + i) * w + 1);
      r.setAttribute("y", H - PAD - h);
      r.setAttribute("width", Math.max(1, w - 2));
      r.setAttribute("height", h);
      const title = document.createElementNS(NS, "title");
      title.textContent = d + " trips";
      r.append(title);
      parts.push(r);
    });
    svg.replaceChildren(...parts);
  }

  let shownAccount = "";

  async function showStatus(account) {
    // In a body, never the URL: an account must not reach an access log.
    const [st, ps] = await Promise.all([
      api("v1/accounts/status", { account: account }),
      api("v1/pseudonyms", { account: account }),
    ]);
    shownAccount = account;
    const facts = [
      ["pseudonym", ps.pseudonym],
      ["hard stop", st.blocked ? "BLOCKED until reset" : "no"],
      ["consecutive failures", st.consecutive_failures],
      ["next allowed in", duration(st.next_allowed_ms)],
    ];
    // Whatever else the status reports (remembered guesses, for one).
    for (const [k, v] of Object.entries(st)) {
      if (["blocked", "consecutive_failures", "next_allowed_ms", "limits", "networks"].includes(k)) continue;
      if (typeof v !== "object") facts.push([k.replaceAll("_", " "), v]);
    }
    $("account-facts").replaceChildren(...facts.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-fact": k }, v)]));
    rows($("account-limits").tBodies[0], (st.limits || []).map((l) => el("tr", {},
      el("td", {}, el("code", {}, l.rule)),
      el("td", { class: "num" }, l.remaining),
      el("td", {}, duration(l.reset_ms)),
    )));
    // Each familiar network counts apart: a check from there without a
    // device finds its own failures and hard stop.
    const networks = st.networks || [];
    rows($("account-networks").tBodies[0], networks.map((n) => el("tr", { "data-network": n.network },
      el("td", { class: "hash" }, n.network),
      el("td", { class: "num" }, n.consecutive_failures),
      el("td", {}, n.blocked ? "BLOCKED until reset" : "no"),
    )));
    $("account-networks").hidden = networks.length === 0;
    $("account-networks-empty").hidden = networks.length !== 0;
    $("account-status").hidden = false;
    $("confirm").hidden = true;
  }

  function init() {
    $("token-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      const t = $("token").value.trim();
      $("token").value = "";
      if (!t) return;
      sessionStorage.setItem(TOKEN_KEY, t);
      try {
        await api("v1/rules");
        showMain();
      } catch (err) {
        failed(err);
      }
    });
    $("forget").addEventListener("click", () => showLogin(""));
    $("account-form").addEventListener("submit", async (ev) => {
      ev.preventDefault();
      $("reset-done").textContent = "";
      try { await showStatus($("account").value); } catch (err) { failed(err); }
    });
    $("reset").addEventListener("click", () => {
      $("confirm-account").textContent = shownAccount;
      $("confirm").hidden = false;
      $("confirm-yes").focus();
    });
    $("confirm-no").addEventListener("click", () => { $("confirm").hidden = true; });
    $("confirm-yes").addEventListener("click", async () => {
      try {
        await api("v1/accounts/reset", { account: shownAccount });
        await showStatus(shownAccount);
        $("reset-done").textContent = "Reset done.";
      } catch (err) { failed(err); }
    });
    if (token()) showMain(); else showLogin("");
  }

  document.addEventListener("DOMContentLoaded", init);
})();
