// The Strand console: read-only pages over /ui/api/, with the token kept in this tab's session
// storage (never in a URL). Every value from the cluster goes in through textContent, so agent
// text is never markup. A page whose data calls fail shows that it is unavailable and none of
// its figures; a page on a namespace follows the namespace's live feed, and says when the node
// it talks to changes leader or goes away.
"use strict";

const POLL_MS = 2000;
const NAMESPACE_POLL_MS = 5000;
const EVENTS_KEPT_MAX = 500;

const view = { route: null, leader: undefined, timer: null, reloading: null, failed: false, events: [], held: [], heldCount: 0, paused: false, filter: "" };

// ---- helpers --------------------------------------------------------------------------------

function token() {
  return sessionStorage.getItem("strand-token");
}

function el(tag, options, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(options || {})) {
    if (key === "class") node.className = value;
    else if (key === "href") node.href = value;
    else node.setAttribute(key, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.appendChild(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function segment(text) {
  return encodeURIComponent(text);
}

function pagePath(namespace, ...rest) {
  return "/ui/ns/" + [namespace, ...rest].map(segment).join("/");
}

function dataPath(namespace, ...rest) {
  return "/ui/api/ns/" + [namespace, ...rest].map(segment).join("/");
}

function beadLink(namespace, id) {
  return el("a", { href: pagePath(namespace, "beads", id) }, id);
}

function table(id, headings, rows) {
  const body = el("tbody", id ? { id } : {});
  for (const row of rows) {
    const cells = row.cells || row;
    const tr = el("tr", row.id ? { id: row.id } : {});
    if (row.alarm) tr.className = "alarm";
    for (const value of cells) tr.appendChild(el("td", {}, value === "" ? "—" : value));
    body.appendChild(tr);
  }
  if (rows.length === 0) body.appendChild(el("tr", { class: "none" }, el("td", { colspan: headings.length }, "none")));
  const head = el("tr", {}, ...headings.map((heading) => el("th", {}, heading)));
  return el("div", { class: "scroll" }, el("table", {}, el("thead", {}, head), body));
}

function span(ms) {
  if (ms === null || ms === undefined) return "—";
  const negative = ms < 0;
  let seconds = Math.floor(Math.abs(ms) / 1000);
  const parts = [];
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60]]) {
    if (seconds >= size) {
      parts.push(Math.floor(seconds / size) + unit);
      seconds %= size;
    }
  }
  if (seconds > 0 || parts.length === 0) parts.push(seconds + "s");
  return (negative ? "-" : "") + parts.slice(0, 2).join(" ");
}

function when(ms) {
  return ms === null || ms === undefined ? "—" : new Date(ms).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

function named(name, empty) {
  return name === "" ? empty : name;
}

function setConnection(text, healthy) {
  const state = document.getElementById("connection");
  state.textContent = text;
  state.className = healthy ? "state" : "state unavailable";
}

function setNotice(text) {
  const notice = document.getElementById("notice");
  notice.textContent = text || "";
  notice.hidden = !text;
}

class DataError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function data(path) {
  const headers = {};
  if (token()) headers["Authorization"] = "Bearer " + token();
  let answer;
  try {
    answer = await fetch(path, { headers, cache: "no-store" });
  } catch (error) {
    throw new DataError(0, "the node cannot be reached (" + error.message + ")");
  }
  const body = await answer.json().catch(() => ({}));
  if (!answer.ok) throw new DataError(answer.status, body.error || "the node answered " + answer.status);
  return body;
}

// ---- page frame ---------------------------------------------------------------------------

function showLogin(message) {
  document.getElementById("page").replaceChildren();
  document.getElementById("login").hidden = false;
  document.getElementById("sign-out").hidden = true;
  document.getElementById("login-error").textContent = message || "";
  setConnection("signed out", false);
}

function show(nodes, connection) {
  view.failed = false;
  document.getElementById("login").hidden = true;
  document.getElementById("sign-out").hidden = !token();
  document.getElementById("page").replaceChildren(...nodes);
  setConnection(connection || "live", true);
}

// A failed read replaces every figure of the page: nothing stale stays on it.
function failed(error) {
  view.failed = true;
  if (error.status === 401) {
    showLogin(token() ? error.message : "");
    return;
  }
  document.getElementById("login").hidden = true;
  if (error.status === 404) {
    document.title = "Not found · Strand console";
    show([el("h2", {}, "Not found"), el("p", { id: "not-found", class: "alarm" }, error.message)], "not found");
    setConnection("not found", false);
    return;
  }
  if (error.status === 403) {
    show([el("h2", {}, "Not allowed"), el("p", { class: "alarm" }, error.message)], "not allowed");
    setConnection("not allowed", false);
    return;
  }
  document.getElementById("page").replaceChildren(
    el("h2", {}, "Unavailable"),
    el("p", { id: "unavailable", class: "alarm" }, "This page's data is unavailable: " + error.message + ". Retrying."),
  );
  setConnection("unavailable", false);
}

function subnav(namespace, current) {
  const links = [["Queues", pagePath(namespace)], ["Events", pagePath(namespace, "events")], ["Orders", pagePath(namespace, "orders")]];
  return el("p", { class: "subnav" }, ...links.flatMap(([name, href]) =>
    [name === current ? el("strong", {}, name) : el("a", { href }, name), " "]));
}

function attentionList(items, calm) {
  const list = el("ul", { id: "attention" });
  for (const item of items) list.appendChild(el("li", { class: item.unavailable ? "alarm unavailable" : "alarm" }, item.text || item));
  if (items.length === 0 && calm) list.appendChild(el("li", { class: "calm" }, calm));
  return list;
}

// ---- pages ----------------------------------------------------------------------------------

async function homePage() {
  const [cluster, namespaces] = await Promise.allSettled([data("/ui/api/cluster"), data("/ui/api/namespaces")]);
  const refusals = [cluster, namespaces].filter((read) => read.status === "rejected").map((read) => read.reason);
  const signIn = refusals.find((error) => error.status === 401);
  if (signIn) throw signIn;
  if (refusals.length === 2) throw refusals[0];
  const items = [];
  if (cluster.status === "fulfilled") items.push(...cluster.value.attention);
  else items.push({ text: "Cluster status is unavailable: " + cluster.reason.message, unavailable: true });
  if (namespaces.status === "fulfilled") items.push(...namespaces.value.attention);
  else items.push({ text: "The namespaces' figures are unavailable: " + namespaces.reason.message, unavailable: true });
  const nodes = [el("h2", {}, "Needs attention"),
    attentionList(items, "Nothing: every member answers and keeps up, and no queue needs a hand.")];
  if (namespaces.status === "fulfilled") {
    const listed = namespaces.value.namespaces;
    const links = el("ul", { id: "namespaces", class: "links" });
    for (const namespace of listed) links.appendChild(el("li", {}, el("a", { href: pagePath(namespace.name) }, namespace.name)));
    nodes.push(el("h2", {}, "Namespaces"));
    nodes.push(listed.length === 0 ? el("p", {}, "None yet: the first write creates one.") : links);
    if (namespaces.value.total > listed.length) nodes.push(el("p", {}, (namespaces.value.total - listed.length) + " more not shown."));
  }
  return { nodes, connection: refusals.length > 0 ? "degraded" : "live" };
}

async function clusterPage() {
  const cluster = await data("/ui/api/cluster");
  const leader = cluster.leader_id === 0 ? "none" : cluster.leader_id;
  const rows = cluster.nodes.map((node) => {
    const notes = [node.error, node.fatal_error, node.divergence, node.note].filter((note) => note);
    const unwell = node.state === "unreachable" || node.fatal_error !== "" || node.divergence !== "";
    return {
      id: "member-" + node.id,
      alarm: unwell,
      cells: [node.id, node.client_address || "?", node.peer_address, node.state, node.health, node.term,
        node.last_log_index, node.applied_index, node.lag, node.lease_count, node.apply_version || "?",
        node.build || "?", notes.join("; ")],
    };
  });
  const controller = cluster.nodes.find((node) => node.id === cluster.controller);
  const duties = controller ? controller.duties.map((duty) => [duty.name,
    duty.ago_ms === null ? (duty.interval_ms === 0 ? "off" : "not yet") : span(duty.ago_ms) + " ago",
    duty.interval_ms === 0 ? "off" : "every " + span(duty.interval_ms)]) : [];
  return {
    nodes: [
      el("h2", {}, "Cluster"),
      el("p", { id: "summary" }, "This page talks to node " + cluster.node_id + ". Leader " + leader + ", term " +
        cluster.term + ", voters " + cluster.voters.join(", ") + ", apply version " +
        (cluster.apply_version === null ? "?" : cluster.apply_version) + "."),
      table("members", ["id", "client", "peer", "state", "health", "term", "last log", "applied", "lag", "leases",
        "apply", "build", "notes"], rows),
      el("h2", {}, "Controller"),
      el("p", { id: "controller", class: cluster.controller === null ? "alarm" : "" }, cluster.controller === null
        ? "No controller runs (no leader, or its controller has not begun)."
        : "The controller runs on node " + cluster.controller + "."),
      duties.length > 0 ? table("duties", ["duty", "last ran", "interval"], duties) : null,
    ],
  };
}

async function namespacePage(namespace) {
  const shown = await data(dataPath(namespace));
  const queues = shown.queues;
  const counts = shown.counts.map((entry) => [entry.name, entry.count]);
  const oldest = queues.oldest_ready;
  const expiringRows = queues.leases.map((lease) => ({
    alarm: lease.expires_in_ms <= queues.window_ms,
    cells: [beadLink(namespace, lease.bead_id), lease.holder, lease.lease_id,
      lease.expires_in_ms < 0 ? "lapsed " + span(-lease.expires_in_ms) + " ago" : "in " + span(lease.expires_in_ms)],
  }));
  const countRows = (list, empty) => list.map((entry) => [named(entry.name, empty), entry.count]);
  return {
    nodes: [
      el("h2", {}, "Namespace ", el("span", { id: "namespace-name" }, namespace)),
      subnav(namespace, "Queues"),
      shown.attention.length > 0 ? attentionList(shown.attention) : null,
      el("h3", {}, "Beads by status"),
      table("counts", counts.map(([name]) => name), [counts.map(([, count]) => count)]),
      el("h3", {}, "Ready work"),
      el("p", { id: "ready-summary" }, queues.ready + " ready", oldest ? "; the oldest, " : "",
        oldest ? beadLink(namespace, oldest.id) : "", oldest ? ", has waited " + span(oldest.age_ms) : "", "."),
      table("next", ["next up", "title", "priority", "pool", "assignee", "waiting"], shown.next.map((bead) =>
        [beadLink(namespace, bead.id), bead.title, bead.priority === null ? "" : "P" + bead.priority,
          bead.pool || "", bead.assignee, span(bead.age_ms)])),
      el("div", { class: "pair" },
        el("div", {}, el("h3", {}, "Ready by pool"), table("by-pool", ["pool", "ready"], countRows(queues.ready_by_pool, "(no pool)"))),
        el("div", {}, el("h3", {}, "Ready by assignee"),
          table("by-assignee", ["assignee", "ready"], countRows(queues.ready_by_assignee, "(unassigned)")))),
      el("h3", {}, "Who holds what"),
      table("holders", ["assignee", "in progress"], countRows(queues.in_progress_by_assignee, "(nobody)")),
      el("h3", {}, "Leases"),
      el("p", { id: "lease-summary", class: queues.expiring > 0 ? "alarm" : "" }, queues.leased + " held, " +
        queues.expiring + " lapse within " + span(queues.window_ms) + "."),
      table("leases", ["bead", "holder", "lease", "lapses"], expiringRows),
      el("h3", {}, "Dead-lettered"),
      el("p", { id: "dead-summary", class: queues.dead_lettered > 0 ? "alarm" : "" }, queues.dead_lettered +
        " dead-lettered (blocked after " + shown.namespace.max_deliveries +
        (shown.namespace.max_deliveries === 1 ? " lease expiry" : " lease expiries") + "; reopen to retry)."),
      el("ul", { id: "dead-letters", class: "links" },
        ...queues.dead_letter_ids.map((id) => el("li", {}, beadLink(namespace, id)))),
    ],
    feed: { namespace, after: shown.namespace.last_event_seq, onEvent: scheduleReload },
  };
}

async function beadPage(namespace, id) {
  const shown = await data(dataPath(namespace, "beads", id));
  const bead = shown.bead;
  const first = ["id", "title", "status", "priority", "bead_type", "assignee", "labels", "parent_id", "description",
    "notes", "metadata", "created_at", "updated_at", "started_at", "closed_at", "close_reason", "defer_until"];
  const names = first.filter((name) => name in bead).concat(Object.keys(bead).filter((name) => !first.includes(name)));
  const fields = names.map((name) => {
    const value = bead[name];
    const time = name.endsWith("_at") || name === "defer_until";
    return [name, value === null ? "" : time ? when(value) : typeof value === "object" ? JSON.stringify(value) : String(value)];
  });
  const edgeRows = (edges) => edges.map((edge) => [beadLink(namespace, edge.id), edge.type, edge.title || "(missing)", edge.status || ""]);
  const lease = bead.lease;
  const now = Date.now();
  document.title = bead.id + " · Strand console";
  return {
    nodes: [
      el("h2", {}, "Bead ", el("span", { id: "bead-id" }, bead.id), ": ", el("span", { id: "bead-title" }, bead.title)),
      subnav(namespace, ""),
      shown.parent ? el("p", {}, "Parent: ", beadLink(namespace, shown.parent.id), " ", shown.parent.title || "") : null,
      el("h3", {}, "Lease"),
      el("p", { id: "lease" }, lease ? "Held by " + lease.holder + " (lease " + lease.id + "), lapses at " +
        when(lease.expires_at) + " (in about " + span(lease.expires_at - now) + ")." : "No lease."),
      el("h3", {}, "Depends on"),
      table("dependencies", ["bead", "type", "title", "status"], edgeRows(shown.dependencies)),
      el("h3", {}, "Dependents"),
      table("dependents", ["bead", "type", "title", "status"], edgeRows(shown.dependents)),
      el("h3", {}, "Fields"),
      table("fields", ["field", "value"], fields),
      el("h3", {}, "Events"),
      el("p", {}, "Its events among the namespace's latest " + shown.events_scanned + "."),
      table("bead-events", ["seq", "time", "type", "actor", "message"], shown.events.slice().reverse().map((event) =>
        [event.seq, when(event.timestamp), event.event_type, event.actor, event.message])),
    ],
    feed: { namespace, after: shown.last_seq, onEvent: (event) => { if (event.subject === bead.id) scheduleReload(); } },
  };
}

function eventRows() {
  const shown = view.events.filter((event) => view.filter === "" || event.event_type === view.filter);
  return shown.slice().reverse().map((event) => [event.seq, when(event.timestamp), event.event_type,
    event.actor, el("a", { href: pagePath(view.route.namespace, "beads", event.subject) }, event.subject), event.message]);
}

function renderEvents() {
  const holder = document.getElementById("events-table");
  if (!holder) return;
  holder.replaceChildren(table("events", ["seq", "time", "type", "actor", "bead", "message"], eventRows()));
  const dropped = view.heldCount - view.held.length;
  document.getElementById("held").textContent = view.paused ? "Paused: " + view.heldCount + " new events held" +
    (dropped > 0 ? " (the oldest " + dropped + " will not be shown)." : ".") : "";
}

async function eventsPage(namespace) {
  const shown = await data(dataPath(namespace, "events"));
  view.events = shown.events;
  view.held = [];
  view.heldCount = 0;
  const filter = el("select", { id: "filter", "aria-label": "event type" }, el("option", { value: "" }, "every type"),
    ...shown.types.map((type) => el("option", { value: type }, type)));
  filter.value = view.filter;
  filter.addEventListener("change", () => { view.filter = filter.value; renderEvents(); });
  const pause = el("button", { id: "pause", type: "button" }, view.paused ? "Resume" : "Pause");
  pause.addEventListener("click", () => {
    view.paused = !view.paused;
    pause.textContent = view.paused ? "Resume" : "Pause";
    if (!view.paused) {
      view.events.push(...view.held);
      view.events.splice(0, Math.max(0, view.events.length - EVENTS_KEPT_MAX));
      view.held = [];
      view.heldCount = 0;
    }
    renderEvents();
  });
  const onEvent = (event) => {
    const kept = view.held.length > 0 ? view.held : view.events;
    if (kept.length > 0 && event.seq <= kept[kept.length - 1].seq) return;
    if (view.paused) view.heldCount += 1;
    // Both lists keep the newest EVENTS_KEPT_MAX: a long pause holds no more than a page shows.
    const list = view.paused ? view.held : view.events;
    list.push(event);
    if (list.length > EVENTS_KEPT_MAX) list.splice(0, list.length - EVENTS_KEPT_MAX);
    renderEvents();
  };
  return {
    nodes: [
      el("h2", {}, "Events of ", el("span", { id: "namespace-name" }, namespace)),
      subnav(namespace, "Events"),
      el("p", { class: "controls" }, filter, " ", pause, " ", el("span", { id: "held" })),
      el("div", { id: "events-table" }, table("events", ["seq", "time", "type", "actor", "bead", "message"], [])),
    ],
    after: renderEvents,
    feed: { namespace, after: shown.last_seq, onEvent },
  };
}

async function ordersPage(namespace) {
  const shown = await data(dataPath(namespace, "orders"));
  // A window past 10^12 is a time in ms (a cooldown's); a cron minute or an event seq is smaller.
  const windowOf = (order) => order.last_window === 0 ? "" : order.last_window > 1e12 ? when(order.last_window) : order.last_window;
  const rows = shown.orders.map((order) => ({
    id: "order-" + order.name,
    alarm: order.error !== "",
    cells: [order.name, order.trigger, order.target, order.enabled ? "yes" : "no", order.fired,
      windowOf(order), when(order.last_fired_at), order.next_due_ms === null ? "" : when(order.next_due_ms), order.error],
  }));
  const runs = shown.orders.flatMap((order) => order.history.map((run) => [order.name, beadLink(namespace, run.id),
    run.status, when(run.created_at_ms), when(run.closed_at_ms)]));
  return {
    nodes: [
      el("h2", {}, "Orders of ", el("span", { id: "namespace-name" }, namespace)),
      subnav(namespace, "Orders"),
      shown.orders.length === 0 ? el("p", {}, "No orders are stored in this namespace.") : null,
      table("orders", ["order", "trigger", "target", "enabled", "fired", "last window", "last fired", "next due",
        "error"], rows),
      el("h3", {}, "Latest runs"),
      table("runs", ["order", "bead", "status", "fired", "closed"], runs),
    ],
    feed: { namespace, after: shown.last_seq, onEvent: scheduleReload },
  };
}

// ---- live feed ----------------------------------------------------------------------------

function scheduleReload() {
  if (view.reloading) return;
  view.reloading = setTimeout(() => { view.reloading = null; load(); }, 250);
}

function onNodeBeat(beat) {
  if (view.leader !== undefined && beat.leader_id !== view.leader) {
    setNotice(beat.leader_id === null
      ? "Node " + beat.id + " lost its leader: figures wait for an election."
      : "Leadership moved: node " + beat.leader_id + " leads now" + (view.leader === null ? "." : " (was node " + view.leader + ")."));
  }
  view.leader = beat.leader_id;
}

// Follows a namespace's feed for as long as the page is open, reconnecting when it ends.
async function follow(feed) {
  let after = feed.after;
  let pause = 1000;
  for (;;) {
    let reason = "it ended";
    try {
      const headers = {};
      if (token()) headers["Authorization"] = "Bearer " + token();
      const answer = await fetch(dataPath(feed.namespace, "watch") + "?after=" + after, { headers, cache: "no-store" });
      if (!answer.ok) {
        const body = await answer.json().catch(() => ({}));
        throw new Error(body.error || "the node answered " + answer.status);
      }
      const reader = answer.body.getReader();
      const decoder = new TextDecoder();
      let buffer = "";
      let first = true;
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buffer += decoder.decode(value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const message = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const kind = (message.match(/^event: (.*)$/m) || [])[1];
          const body = JSON.parse((message.match(/^data: (.*)$/m) || [, "null"])[1]);
          if (first) {
            first = false;
            pause = 1000;
            if (document.getElementById("notice").textContent.startsWith("The live feed")) setNotice("Reconnected to the live feed.");
            if (!view.failed) setConnection("live", true);
          }
          if (kind === "node") onNodeBeat(body);
          else if (kind === "error") throw new Error(body.error);
          else if (body) {
            after = Math.max(after, body.seq);
            feed.onEvent(body);
          }
        }
      }
    } catch (error) {
      reason = error.message;
    }
    setNotice("The live feed from this node stopped (" + reason + "); reconnecting in " + pause / 1000 + "s.");
    setConnection("reconnecting", false);
    await new Promise((resolve) => setTimeout(resolve, pause));
    pause = Math.min(pause * 2, 8000);
  }
}

// ---- routing ------------------------------------------------------------------------------

function parseRoute() {
  const parts = location.pathname.replace(/^\/ui\/?/, "").split("/").filter((part) => part !== "").map(decodeURIComponent);
  if (parts.length === 0 || parts[0] === "index.html") return { page: homePage, args: [], poll: POLL_MS };
  if (parts[0] === "cluster") return { page: clusterPage, args: [], poll: POLL_MS };
  const namespace = parts[1];
  if (parts.length === 2) return { page: namespacePage, args: [namespace], namespace, poll: NAMESPACE_POLL_MS };
  if (parts[2] === "events") return { page: eventsPage, args: [namespace], namespace, poll: 0 };
  if (parts[2] === "orders") return { page: ordersPage, args: [namespace], namespace, poll: NAMESPACE_POLL_MS };
  return { page: beadPage, args: [namespace, parts[3]], namespace, poll: NAMESPACE_POLL_MS };
}

let following = false;

// Loads the page, then schedules the next load: after a failure, in POLL_MS; after a success, in
// the page's own interval (none for a page the live feed keeps current).
async function load() {
  clearTimeout(view.timer);
  let next = view.route.poll;
  try {
    const shown = await view.route.page(...view.route.args);
    show(shown.nodes.filter((node) => node !== null), shown.connection);
    if (shown.after) shown.after();
    if (shown.feed && !following) {
      following = true;
      follow(shown.feed);
    }
  } catch (error) {
    failed(error);
    next = error.status === 401 ? 0 : POLL_MS;
  }
  if (next > 0) view.timer = setTimeout(load, next);
}

document.addEventListener("DOMContentLoaded", () => {
  view.route = parseRoute();
  document.getElementById("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("strand-token", document.getElementById("token").value.trim());
    load();
  });
  document.getElementById("sign-out").addEventListener("click", () => {
    sessionStorage.removeItem("strand-token");
    clearTimeout(view.timer);
    showLogin("");
  });
  load();
});
