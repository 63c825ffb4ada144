// The console's shell: hash routing between views, the live refresh loop, the health pills and
// the login. A view is `mount(root, params) -> {refresh()}`: it builds its page once and its
// refresh() re-reads the broker and redraws the data parts in place, so typing in a search box
// or reading an open dialog is never interrupted by the next refresh.

import { api, onUnauthorized, setToken, token } from "./api.js";
import { fill, toast } from "./dom.js";
import * as groups from "./views/groups.js";
import * as overview from "./views/overview.js";
import * as queue from "./views/queue.js";
import * as traces from "./views/traces.js";

const REFRESH_MS = 3000;
const ROUTES = [
  [/^\/?$/, overview, "overview", () => ({})],
  [/^\/queues\/([^/]+)(?:\/([a-z]+))?$/, queue, "overview", (m) => ({ queue: decodeURIComponent(m[1]), tab: m[2] })],
  [/^\/groups$/, groups, "groups", () => ({})],
  [/^\/traces(?:\/([^/]+)\/(.+))?$/, traces, "traces",
    (m) => ({ partitionId: m[1] && decodeURIComponent(m[1]), transactionId: m[2] && decodeURIComponent(m[2]) })],
];

let current = null;
let busy = false;
let again = false;

function route() {
  const path = location.hash.replace(/^#/, "") || "/";
  for (const [pattern, view, nav, params] of ROUTES) {
    const match = path.match(pattern);
    if (match) return { view, nav, params: params(match) };
  }
  return { view: overview, nav: "overview", params: {} };
}

function mount() {
  const { view, nav, params } = route();
  document.querySelectorAll("[data-nav]").forEach((a) => a.classList.toggle("active", a.dataset.nav === nav));
  const root = fill(document.getElementById("view"));
  current = view.mount(root, params);
  refresh(true);
}

// One refresh at a time: a slow answer delays the next refresh instead of piling requests up.
// `soon`: a new view was mounted; it refreshes as soon as the one in flight is done.
async function refresh(soon = false) {
  if (document.hidden || document.getElementById("login").open) return;
  if (busy) {
    again ||= soon;
    return;
  }
  busy = true;
  const live = document.getElementById("live");
  try {
    await Promise.all([health(), current.refresh()]);
    live.classList.remove("stale");
    live.title = `Updated ${new Date().toLocaleTimeString()}; refreshes every ${REFRESH_MS / 1000} s`;
  } catch (error) {
    live.classList.add("stale");
    if (error.status !== 401) toast(error.message, "error");
  } finally {
    busy = false;
    if (again) {
      again = false;
      refresh();
    }
  }
}

async function health() {
  const broker = document.getElementById("health-broker");
  const database = document.getElementById("health-db");
  try {
    const answer = await fetch("/health").then((r) => r.json());
    fill(broker, `broker ${answer.version}`).className = "pill ok";
    const up = answer.database === "connected";
    fill(database, `PostgreSQL ${up ? "connected" : "unreachable"}`).className = `pill ${up ? "ok" : "bad"}`;
  } catch {
    fill(broker, "broker unreachable").className = "pill bad";
    fill(database, "PostgreSQL unknown").className = "pill";
  }
}

function showLogin(message) {
  const dialog = document.getElementById("login");
  document.getElementById("login-error").textContent = message || "";
  if (!dialog.open) dialog.showModal();
}

function setupLogin() {
  const dialog = document.getElementById("login");
  const signOut = document.getElementById("sign-out");
  signOut.hidden = !token();
  onUnauthorized(() => showLogin(token() ? "The broker refused this token (expired or not valid)." : ""));
  dialog.addEventListener("cancel", (event) => event.preventDefault());
  document.getElementById("login-form").addEventListener("submit", () => {
    const field = document.getElementById("login-token");
    setToken(field.value.trim().replace(/^Bearer\s+/i, ""));
    field.value = "";
    signOut.hidden = false;
    mount();
  });
  signOut.addEventListener("click", () => {
    setToken(null);
    signOut.hidden = true;
    api("/api/v1/status").then(() => toast("Signed out; this broker does not require a token."),
      () => showLogin());
  });
}

setupLogin();
window.addEventListener("hashchange", mount);
document.addEventListener("visibilitychange", () => refresh());
setInterval(() => refresh(), REFRESH_MS);
mount();
