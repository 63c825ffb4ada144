// Traces: the timeline of one message (its push, then every trace event consumers recorded for
// it, in order, with the time between them), found by address or through a trace name.

import { api, seg } from "../api.js";
import { badge, duration, fill, h, num, pager, pretty, table, time } from "../dom.js";

const PAGE = 25;
const QUEUE_MODE = "__QUEUE_MODE__";

// The trace routes answer Queen's pages: {total, pagination: {limit, offset}}.
function paging(answer) {
  return { total: answer.total, ...answer.pagination };
}

// Time from the first event: consumers act within milliseconds, so those are worth showing.
function since(milliseconds) {
  return milliseconds < 1000 ? `${milliseconds} ms` : duration(milliseconds / 1000);
}

export function mount(root, { partitionId, transactionId }) {
  const names = { search: "", offset: 0, selected: null, tracesOffset: 0 };
  const timeline = h("div", {});
  const namesList = h("div", {});
  const namesPager = h("div", { class: "pager-slot" });
  const byName = h("div", {});
  const address = h("form", { class: "filters", onsubmit: (event) => {
    event.preventDefault();
    const form = new FormData(address);
    location.hash = `#/traces/${seg(form.get("partitionId").trim())}/${seg(form.get("transactionId").trim())}`;
  } },
  h("input", { name: "partitionId", placeholder: "Partition id (uuid)", required: true, value: partitionId || "",
    "aria-label": "Partition id", class: "mono" }),
  h("input", { name: "transactionId", placeholder: "Transaction id", required: true, value: transactionId || "",
    "aria-label": "Transaction id", class: "mono" }),
  h("button", { class: "primary", type: "submit" }, "Show timeline"));
  let timer = null;
  const search = h("input", { type: "search", placeholder: "Filter trace names by prefix…", class: "search",
    "aria-label": "Search trace names", oninput: () => {
      clearTimeout(timer);
      timer = setTimeout(() => { names.search = search.value; names.offset = 0; refresh(); }, 250);
    } });

  fill(root,
    h("div", { class: "page-head" }, h("h1", {}, "Traces")),
    h("section", { class: "card" }, h("h2", {}, "A message's timeline"), address, timeline),
    h("div", { class: "split" },
      h("section", { class: "card" }, h("div", { class: "card-head" }, search, namesPager), namesList),
      byName));

  async function refresh() {
    const work = [refreshNames()];
    if (partitionId && transactionId) work.push(refreshTimeline());
    if (names.selected) work.push(refreshByName());
    await Promise.all(work);
  }

  async function refreshTimeline() {
    const [message, answer] = await Promise.all([
      api(`/api/v1/messages/${seg(partitionId)}/${seg(transactionId)}`).catch(() => null),
      api(`/api/v1/traces/${seg(partitionId)}/${seg(transactionId)}`),
    ]);
    const events = answer.traces.map((t) => ({ at: t.created_at, type: t.event_type,
      group: t.consumer_group === QUEUE_MODE ? null : t.consumer_group, names: t.trace_names, data: t.data }));
    if (message) events.unshift({ at: message.createdAt, type: "pushed", group: null, names: [], data: message.data });
    events.sort((a, b) => Date.parse(a.at) - Date.parse(b.at));
    const first = events.length ? Date.parse(events[0].at) : 0;
    fill(timeline,
      message ? h("p", { class: "muted" }, `${message.queue} / ${message.partition} · now `, badge(message.status))
        : h("p", { class: "muted" }, "The message itself is no longer stored (deleted or past retention)."),
      events.length === 0 ? h("p", { class: "empty" }, "No trace events recorded for this message.")
        : h("ol", { class: "timeline" }, events.map((e) => h("li", { class: `step ${e.type}` },
          h("div", { class: "when" }, time(e.at), h("span", { class: "delta" },
            Date.parse(e.at) === first ? "start" : `+${since(Date.parse(e.at) - first)}`)),
          h("div", { class: "what" }, badge(e.type, "event"), e.group ? h("span", { class: "muted" }, ` by ${e.group}`) : "",
            e.names.length ? h("span", { class: "muted" }, ` · ${e.names.join(", ")}`) : "",
            h("pre", { class: "json" }, pretty(e.data)))))));
  }

  async function refreshNames() {
    const answer = await api("/api/v1/traces/names", { query: { search: names.search, limit: PAGE, offset: names.offset } });
    fill(namesPager, pager(paging(answer), (offset) => { names.offset = offset; refreshNames(); }));
    fill(namesList, table([
      { label: "Trace name", cell: (n) => h("strong", {}, n.trace_name) },
      { label: "Events", cell: (n) => num(n.trace_count), class: "num" },
      { label: "Messages", cell: (n) => num(n.message_count), class: "num" },
      { label: "Last seen", cell: (n) => time(n.last_seen) },
    ], answer.trace_names, {
      empty: "No named traces yet (consumers name them with msg.trace(..., traceNames)).",
      onRow: (n) => { names.selected = n.trace_name; names.tracesOffset = 0; refreshByName(); },
      rowKey: (n) => n.trace_name,
    }));
  }

  async function refreshByName() {
    const answer = await api(`/api/v1/traces/by-name/${seg(names.selected)}`,
      { query: { limit: PAGE, offset: names.tracesOffset } });
    fill(byName, h("section", { class: "card" },
      h("div", { class: "card-head" }, h("h2", {}, names.selected),
        pager(paging(answer), (offset) => { names.tracesOffset = offset; refreshByName(); })),
      table([
        { label: "At", cell: (t) => time(t.created_at) },
        { label: "Event", cell: (t) => badge(t.event_type, "event") },
        { label: "Queue / partition", cell: (t) => `${t.queue_name ?? "—"} / ${t.partition_name ?? "—"}` },
        { label: "Transaction id", cell: (t) => h("a", { href: `#/traces/${seg(t.partition_id)}/${seg(t.transaction_id)}` },
          h("code", { class: "clip" }, t.transaction_id)) },
      ], answer.traces, { empty: "No traces under this name." })));
  }

  return { refresh };
}
