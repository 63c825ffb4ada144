// One queue: its numbers and charts, partitions (searched by name prefix and paged by the
// broker, so a million of them never come to the page), consumer groups, a message browser
// with push, dead letters, and settings (options with merge semantics, delete).

import { api, seg } from "../api.js";
import { Chart, series } from "../chart.js";
import {
  ago, badge, compact, confirmByName, fill, h, inspect, modal, num, pager, pretty, rate, snippet, table, time, toast,
} from "../dom.js";
import { groupActions, partitionsPanel } from "./groups.js";
import { kpi } from "./overview.js";

const TABS = [["overview", "Overview"], ["partitions", "Partitions"], ["groups", "Consumer groups"],
  ["messages", "Messages"], ["dlq", "Dead letters"], ["settings", "Settings"]];
const PAGE = 25;
// Units and meaning of the options whose name does not say it (docs/protocol.md has them all).
const OPTION_HINTS = {
  leaseTime: "seconds a pop leases its messages", retryLimit: "failures before dead-lettering",
  delayedProcessing: "seconds before a message is deliverable", windowBuffer: "quiet seconds before delivery",
  retentionSeconds: "drop messages older than this (s)", completedRetentionSeconds: "drop consumed after (s)",
  dedupWindowSeconds: "seconds a transactionId dedups", maxWaitTimeSeconds: "seconds", minPopWaitTime: "seconds",
  ttl: "seconds; older messages are skipped (0 = no expiry)", retryDelay: "milliseconds",
  maxSize: "messages (0 = unlimited)", priority: "higher first",
};
// Filters survive switching tabs and the live refresh (per queue, for this page's lifetime).
const remembered = new Map();

export function mount(root, { queue, tab = "overview" }) {
  if (!remembered.has(queue)) {
    remembered.set(queue, { search: "", partitionsOffset: 0, partition: "", status: "", group: "",
      messagesOffset: 0, dlqOffset: 0 });
  }
  const state = remembered.get(queue);
  const base = `#/queues/${seg(queue)}`;
  const kpis = h("div", { class: "kpis" });
  const body = h("div", { class: "tab-body" });
  const ctx = { queue, state, base, stats: null, refreshAll: null };
  const pane = (TABS.some(([key]) => key === tab) ? PANES[tab] : PANES.overview)(ctx);
  fill(root,
    h("div", { class: "page-head" },
      h("div", {}, h("div", { class: "crumbs" }, h("a", { href: "#/" }, "Queues"), " / "), h("h1", {}, queue)),
      h("div", { class: "head-actions" },
        h("button", { class: "primary", onclick: () => pushDialog(queue, {}, refresh) }, "Push message"))),
    kpis,
    h("nav", { class: "tabs" }, TABS.map(([key, label]) =>
      h("a", { href: `${base}/${key}`, class: key === tab ? "active" : undefined }, label))),
    fill(body, pane.element));

  async function refresh() {
    let stats;
    try {
      stats = await api(`/api/v1/status/queues/${seg(queue)}`);
    } catch (error) {
      if (error.status !== 404) throw error;
      fill(root, h("div", { class: "card empty-state" }, h("h2", {}, `No queue named ${queue}`),
        h("p", {}, "It may have been deleted. "), h("a", { href: "#/" }, "Back to the overview")));
      return;
    }
    ctx.stats = stats;
    const t = stats.throughput;
    fill(kpis,
      kpi("Partitions", compact(stats.partitions)),
      kpi("Depth", compact(stats.depth), "unconsumed (queue mode)"),
      kpi("Max lag", compact(stats.lag), "largest group backlog", stats.lag > 0 ? "warn" : ""),
      kpi("Dead letters", compact(stats.dlqDepth), null, stats.dlqDepth > 0 ? "bad" : ""),
      kpi("In", rate(t.pushedPerSecond), `last ${t.windowSeconds} s`),
      kpi("Out", rate(t.ackedPerSecond), `delivered ${rate(t.poppedPerSecond)}`),
      kpi("Pushed", compact(stats.totals.pushed), "since created"));
    await pane.refresh(stats);
  }
  ctx.refreshAll = refresh;
  return { refresh };
}

const PANES = { overview: overviewPane, partitions: partitionsPane, groups: groupsPane,
  messages: messagesPane, dlq: dlqPane, settings: settingsPane };

function overviewPane({ queue }) {
  const throughput = new Chart("Throughput", ["pushed", "popped", "acked", "failed"], { perSecond: true });
  const backlog = new Chart("Backlog", ["depth", "lag", "dlqDepth"], { perSecond: false });
  const facts = h("dl", { class: "facts" });
  const element = h("div", {}, h("div", { class: "charts" }, throughput.element, backlog.element),
    h("section", { class: "card" }, h("h2", {}, "Totals"), facts));
  async function refresh(stats) {
    const points = await series(queue);
    throughput.update(points);
    backlog.update(points);
    const totals = stats.totals;
    fill(facts,
      fact("Namespace", stats.namespace || "—"), fact("Task", stats.task || "—"),
      fact("Pushed", num(totals.pushed)), fact("Delivered", num(totals.popped)),
      fact("Consumed", num(totals.acked)), fact("Failed deliveries", num(totals.failed)),
      fact("Dead-lettered", num(totals.deadLettered)),
      fact("Expired (ttl)", totals.expired ? h("span", { class: "bad-text" }, num(totals.expired)) : "0"),
      fact("Statistics from", time(stats.refreshedAt)));
  }
  return { element, refresh };
}

function fact(label, value) {
  return [h("dt", {}, label), h("dd", {}, value)];
}

function partitionsPane({ queue, state, base }) {
  const list = h("div", {});
  const head = h("div", { class: "pager-slot" });
  let timer = null;
  const search = h("input", {
    type: "search", placeholder: "Search partitions by name prefix…", value: state.search, autocomplete: "off",
    "aria-label": "Search partitions", class: "search",
    oninput: () => {
      clearTimeout(timer);
      timer = setTimeout(() => { state.search = search.value; state.partitionsOffset = 0; refresh(); }, 250);
    },
  });
  const element = h("section", { class: "card" }, h("div", { class: "card-head" }, search, head), list);
  async function refresh() {
    const answer = await api("/api/v1/resources/partitions", {
      query: { queue, search: state.search, limit: PAGE, offset: state.partitionsOffset },
    });
    fill(head, pager(answer, (offset) => { state.partitionsOffset = offset; refresh(); }));
    fill(list, table([
      { label: "Partition", cell: (p) => h("code", {}, p.name) },
      { label: "Messages", cell: (p) => num(p.messages), class: "num" },
      { label: "Unconsumed", cell: (p) => num(p.pending), class: "num" },
      { label: "Oldest unconsumed", cell: (p) => ago(p.oldestPendingAt), class: "num" },
      { label: "Readers", cell: (p) => num(p.cursors), class: "num" },
      { label: "Last write", cell: (p) => ago(p.lastWriteAt), class: "num" },
      { label: "Offsets", class: "num muted",
        cell: (p) => (p.lastOffset < p.logStart ? "empty" : `${num(p.logStart)}…${num(p.lastOffset)}`) },
    ], answer.partitions, {
      empty: state.search ? `No partition name starts with “${state.search}”.` : "No partitions yet.",
      onRow: (p) => {
        state.partition = p.name;
        state.messagesOffset = 0;
        location.hash = `${base}/messages`;
      },
      rowKey: (p) => p.name,
    }));
  }
  return { element, refresh };
}

function groupsPane(ctx) {
  const { queue } = ctx;
  const list = h("div", {});
  const detail = h("div", {});
  const element = h("div", {}, h("section", { class: "card" }, list), detail);
  async function refresh(stats) {
    fill(list, table([
      { label: "Group", cell: (g) => h("strong", {}, g.consumerGroup) },
      { label: "Lag", cell: (g) => compact(g.backlog), class: "num" },
      { label: "Partitions behind", cell: (g) => compact(g.partitionsBehind), class: "num" },
      { label: "", cell: (g) => groupActions(g.consumerGroup, queue, () => ctx.refreshAll()), class: "row-end" },
    ], stats.consumerGroups, {
      empty: "No consumer group reads this queue yet.",
      onRow: (g) => fill(detail, partitionsPanel(g.consumerGroup, queue)),
      rowKey: (g) => g.consumerGroup,
    }));
  }
  return { element, refresh };
}

function messagesPane({ queue, state }) {
  const list = h("div", {});
  const head = h("div", { class: "pager-slot" });
  const field = (name, attrs) => h("input", {
    ...attrs, value: state[name], autocomplete: "off",
    onchange: (event) => { state[name] = event.target.value.trim(); state.messagesOffset = 0; refresh(); },
  });
  const statusSelect = h("select", {
    "aria-label": "Status", onchange: (event) => { state.status = event.target.value; state.messagesOffset = 0; refresh(); },
  }, ["", "pending", "leased", "completed", "dead"].map((s) =>
    h("option", { value: s, selected: s === state.status }, s || "any status")));
  const element = h("section", { class: "card" },
    h("div", { class: "card-head" },
      h("div", { class: "filters" },
        field("partition", { placeholder: "Partition (exact name)", "aria-label": "Partition", type: "search" }),
        statusSelect,
        field("group", { placeholder: "Status for group (default: queue mode)", "aria-label": "Consumer group",
          type: "search" })),
      head),
    list);
  async function refresh() {
    const answer = await api("/api/v1/messages", { query: {
      queue, partition: state.partition, status: state.status, consumerGroup: state.group,
      limit: PAGE, offset: state.messagesOffset,
    } });
    fill(head, pager(answer, (offset) => { state.messagesOffset = offset; refresh(); }));
    fill(list, table([
      { label: "Pushed", cell: (m) => time(m.createdAt) },
      { label: "Partition", cell: (m) => h("code", {}, m.partition) },
      { label: "Transaction id", cell: (m) => h("code", { class: "clip" }, m.transactionId) },
      { label: "Status", cell: (m) => badge(m.status) },
      { label: "Payload", cell: (m) => h("code", { class: "payload" }, snippet(m.data)) },
      { label: "", class: "row-end", cell: (m) => h("div", { class: "row-actions" },
        h("button", { class: "ghost small", onclick: () => inspectMessage(m) }, "Inspect"),
        h("button", { class: "ghost small", title: "Append an exact copy to the same partition",
          onclick: () => pushCopy(m, refresh) }, "Push copy"),
        h("button", { class: "ghost small", title: "Push a new message starting from this one",
          onclick: () => pushDialog(queue, { partition: m.partition, payload: m.data }, refresh) }, "Edit & push"),
        h("a", { class: "button ghost small", href: traceHref(m.partitionId, m.transactionId) }, "Trace")) },
    ], answer.messages, {
      empty: "No messages match.", onRow: inspectMessage, rowKey: (m) => m.transactionId,
    }));
  }
  return { element, refresh };
}

function traceHref(partitionId, transactionId) {
  return `#/traces/${seg(partitionId)}/${seg(transactionId)}`;
}

async function inspectMessage(message) {
  let full = message;
  try {
    full = await api(`/api/v1/messages/${seg(message.partitionId)}/${seg(message.transactionId)}`,
      { query: { consumerGroup: message.consumerGroup } });
  } catch (error) {
    toast(error.message, "error");
  }
  inspect(`Message ${full.transactionId}`, [
    h("dl", { class: "facts" },
      fact("Queue / partition", `${full.queue} / ${full.partition}`), fact("Message id", h("code", {}, full.id)),
      fact("Transaction id", h("code", {}, full.transactionId)), fact("Trace id", full.traceId || "—"),
      fact("Pushed", time(full.createdAt)), fact("Status", badge(full.status)),
      fact("Producer", full.producerSub || "—"),
      full.deadLetteredFor?.length ? fact("Dead for", full.deadLetteredFor.map((g) => g || "queue mode").join(", "))
        : null),
    h("h3", {}, "Payload"),
    h("pre", { class: "json" }, pretty(full.data)),
    h("p", {}, h("a", { href: traceHref(full.partitionId, full.transactionId),
      onclick: (event) => event.target.closest("dialog").close() }, "Open its trace timeline →")),
  ]);
}

async function pushCopy(message, after) {
  try {
    const answer = await api(`/api/v1/messages/${seg(message.partitionId)}/${seg(message.transactionId)}/retry`,
      { method: "POST" });
    toast(`Copy pushed to ${answer.partition} as ${answer.messageId}`);
    after();
  } catch (error) {
    toast(error.message, "error");
  }
}

async function pushDialog(queue, { partition = "", payload }, after) {
  const values = await modal(`Push to ${queue}`, [
    h("label", {}, "Partition", h("input", { name: "partition", value: partition, placeholder: "Default",
      autocomplete: "off" })),
    h("label", {}, "Payload (JSON)", h("textarea", { name: "payload", rows: 8, required: true, spellcheck: false,
      class: "mono", value: payload === undefined ? '{\n  "hello": "world"\n}' : pretty(payload) })),
    h("label", {}, "Transaction id (optional: deduplicates within the queue's window)",
      h("input", { name: "transactionId", autocomplete: "off" })),
  ], { submit: "Push", wide: true });
  if (!values) return;
  let data;
  try {
    data = JSON.parse(values.payload);
  } catch (error) {
    toast(`The payload is not valid JSON: ${error.message}`, "error");
    return;
  }
  const item = { queue, partition: values.partition || "Default", payload: data };
  if (values.transactionId) item.transactionId = values.transactionId;
  try {
    const [result] = await api("/api/v1/push", { method: "POST", body: { items: [item] } });
    toast(result.status === "duplicate" ? `Duplicate of ${result.message_id}: nothing pushed`
      : `Pushed ${result.message_id} to ${item.partition}`, result.status === "duplicate" ? "warn" : "ok");
    after();
  } catch (error) {
    toast(error.message, "error");
  }
}

function dlqPane({ queue, state }) {
  const list = h("div", {});
  const head = h("div", { class: "pager-slot" });
  const element = h("section", { class: "card" },
    h("div", { class: "card-head" },
      h("button", { class: "ghost danger-text", onclick: purge }, "Purge all dead letters…"), head),
    list);
  async function refresh() {
    const answer = await api("/api/v1/dlq", { query: { queue, limit: PAGE, offset: state.dlqOffset } });
    fill(head, pager(answer, (offset) => { state.dlqOffset = offset; refresh(); }));
    fill(list, table([
      { label: "Failed", cell: (d) => time(d.failedAt) },
      { label: "Partition", cell: (d) => h("code", {}, d.partition) },
      { label: "Group", cell: (d) => d.consumerGroup || h("span", { class: "muted" }, "queue mode") },
      { label: "Error", cell: (d) => h("span", { class: "error-text clip" }, d.errorMessage || "—") },
      { label: "Retries", cell: (d) => num(d.retryCount), class: "num" },
      { label: "Payload", cell: (d) => h("code", { class: "payload" }, snippet(d.data, 60)) },
      { label: "", class: "row-end", cell: (d) => h("div", { class: "row-actions" },
        h("button", { class: "ghost small", onclick: () => inspectDead(d) }, "Inspect"),
        h("button", { class: "primary small", onclick: () => replay(d) }, "Replay")) },
    ], answer.messages, { empty: "No dead letters.", onRow: inspectDead, rowKey: (d) => d.id }));
  }
  async function replay(entry) {
    try {
      const answer = await api(`/api/v1/dlq/${seg(entry.id)}/replay`, { method: "POST" });
      toast(`Replayed to ${answer.partition} as ${answer.messageId}`);
      refresh();
    } catch (error) {
      toast(error.message, "error");
    }
  }
  async function purge() {
    const ok = await confirmByName(`Purge the dead letters of ${queue}?`,
      "Every dead letter of this queue is deleted for good; nothing is replayed.", queue, "Purge");
    if (!ok) return;
    try {
      const answer = await api("/api/v1/dlq", { method: "DELETE", query: { queue } });
      toast(`${num(answer.deleted)} dead letters purged`);
      refresh();
    } catch (error) {
      toast(error.message, "error");
    }
  }
  function inspectDead(entry) {
    inspect("Dead letter", [
      h("dl", { class: "facts" },
        fact("Partition", entry.partition), fact("Group", entry.consumerGroup || "queue mode"),
        fact("Transaction id", h("code", {}, entry.transactionId)), fact("Retries", num(entry.retryCount)),
        fact("Pushed", time(entry.createdAt)), fact("Failed", time(entry.failedAt))),
      h("h3", {}, "Error"), h("pre", { class: "json error-text" }, entry.errorMessage || "—"),
      h("h3", {}, "Payload"), h("pre", { class: "json" }, pretty(entry.data)),
    ]);
  }
  return { element, refresh };
}

function settingsPane({ queue }) {
  const form = h("form", { class: "options" });
  const element = h("div", {},
    h("section", { class: "card" }, h("h2", {}, "Options"),
      h("p", { class: "muted" }, "Saving sends only the options you changed (merge): the others keep their values."),
      form),
    h("section", { class: "card danger-zone" }, h("h2", {}, "Delete queue"),
      h("p", {}, "Deletes the queue with all its partitions, messages, consumer positions and dead letters."),
      h("button", { class: "danger", onclick: remove }, "Delete this queue…")));
  let loaded = null;
  async function refresh(stats) {
    // The form is drawn once: a live refresh must not overwrite what is being typed.
    if (loaded === null) {
      loaded = stats.options;
      draw();
    }
  }
  function draw() {
    const entries = Object.entries(loaded).sort(([a], [b]) => a.localeCompare(b));
    const switches = entries.filter(([, value]) => typeof value === "boolean");
    const numbers = entries.filter(([, value]) => typeof value !== "boolean");
    fill(form,
      h("div", { class: "option-grid" }, numbers.map(([key, value]) => h("label", { title: OPTION_HINTS[key] },
        key, h("input", { type: "number", name: key, value: String(value), step: 1, min: 0 }),
        h("span", { class: "hint" }, OPTION_HINTS[key] || "")))),
      h("div", { class: "switches" }, switches.map(([key, value]) => h("label", { class: "check" },
        h("input", { type: "checkbox", name: key, checked: value }), " ", key))),
      h("div", { class: "actions" }, h("button", { class: "primary", type: "submit" }, "Save changes")));
  }
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const changed = {};
    for (const [key, old] of Object.entries(loaded)) {
      const input = form.elements[key];
      const value = typeof old === "boolean" ? input.checked : Number(input.value);
      if (value !== old) changed[key] = value;
    }
    if (Object.keys(changed).length === 0) {
      toast("Nothing changed", "warn");
      return;
    }
    try {
      const answer = await api("/api/v1/configure", { method: "POST",
        body: { queue, options: changed, mode: "merge" } });
      loaded = answer.options;
      draw();
      toast(`Saved: ${Object.keys(changed).join(", ")}`);
    } catch (error) {
      toast(error.message, "error");
    }
  });
  async function remove() {
    const ok = await confirmByName(`Delete queue ${queue}?`,
      "This cannot be undone. Producers pushing to it again will create a new, empty queue.", queue, "Delete queue");
    if (!ok) return;
    try {
      await api(`/api/v1/resources/queues/${seg(queue)}`, { method: "DELETE" });
      toast(`Queue ${queue} deleted`);
      location.hash = "#/";
    } catch (error) {
      toast(error.message, "error");
    }
  }
  return { element, refresh };
}
