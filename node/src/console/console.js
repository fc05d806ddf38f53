// The Strand console: read-only, data from /ui/api/ with the token kept in this tab's session
// storage (never in a URL). Every value from the cluster goes in through textContent, so agent
// text is never markup. A failed read clears the figures and says the data is unavailable.
"use strict";

const REFRESH_MS = 2000;

function token() {
  return sessionStorage.getItem("strand-token");
}

function cell(row, text, alarm) {
  const td = document.createElement("td");
  td.textContent = String(text);
  if (alarm) td.className = "alarm";
  row.appendChild(td);
}

function setConnection(text, healthy) {
  const state = document.getElementById("connection");
  state.textContent = text;
  state.className = healthy ? "state" : "state unavailable";
}

function clearFigures() {
  document.getElementById("members").replaceChildren();
  document.getElementById("summary").textContent = "";
  document.getElementById("controller").textContent = "";
  document.getElementById("attention").replaceChildren();
}

function showLogin(message) {
  clearFigures();
  document.getElementById("login").hidden = false;
  document.getElementById("home").hidden = true;
  document.getElementById("cluster").hidden = true;
  document.getElementById("login-error").textContent = message || "";
  setConnection("signed out", false);
}

function render(cluster) {
  document.getElementById("login").hidden = true;
  document.getElementById("home").hidden = false;
  document.getElementById("cluster").hidden = false;
  const leader = cluster.leader_id === 0 ? "none" : cluster.leader_id;
  document.getElementById("summary").textContent =
    "leader " + leader + ", term " + cluster.term + ", voters " + cluster.voters.join(", ") +
    ", apply version " + (cluster.apply_version === null ? "?" : cluster.apply_version);
  const rows = cluster.nodes.map((node) => {
    const row = document.createElement("tr");
    row.id = "member-" + node.id;
    const notes = [node.error, node.fatal_error, node.divergence, node.note].filter((note) => note);
    const unwell = node.state === "unreachable" || node.fatal_error !== "" || node.divergence !== "";
    for (const value of [node.id, node.client_address || "?", node.peer_address, node.state, node.term,
      node.last_log_index, node.applied_index, node.lag, node.lease_count]) {
      cell(row, value, unwell && value === node.state);
    }
    cell(row, notes.join("; "), notes.length > 0);
    return row;
  });
  document.getElementById("members").replaceChildren(...rows);
  // What needs attention is judged by the node (api::status::attention), as strand top judges it.
  const list = cluster.attention.map((text) => {
    const item = document.createElement("li");
    item.className = "alarm";
    item.textContent = text;
    return item;
  });
  if (list.length === 0) {
    const calm = document.createElement("li");
    calm.className = "calm";
    calm.textContent = "Nothing: every member answers and keeps up.";
    list.push(calm);
  }
  document.getElementById("attention").replaceChildren(...list);
  document.getElementById("controller").textContent = cluster.controller === null
    ? "No controller runs yet (no leader, or its controller has not begun)."
    : "The controller runs on node " + cluster.controller + ".";
  setConnection("live", true);
}

async function refresh() {
  const headers = {};
  if (token()) headers["Authorization"] = "Bearer " + token();
  try {
    const answer = await fetch("/ui/api/cluster", { headers, cache: "no-store" });
    if (answer.status === 401) {
      const body = await answer.json().catch(() => ({}));
      showLogin(token() ? (body.error || "the token was refused") : "");
      return;
    }
    if (!answer.ok) throw new Error("the node answered " + answer.status);
    render(await answer.json());
  } catch (error) {
    clearFigures();
    setConnection("unavailable: " + error.message + "; retrying", false);
    const item = document.createElement("li");
    item.className = "alarm";
    item.textContent = "Cluster status is unavailable: " + error.message;
    document.getElementById("attention").replaceChildren(item);
  }
}

document.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login-form").addEventListener("submit", (event) => {
    event.preventDefault();
    sessionStorage.setItem("strand-token", document.getElementById("token").value.trim());
    refresh();
  });
  refresh();
  setInterval(() => { if (document.getElementById("login").hidden) refresh(); }, REFRESH_MS);
});
