// Overview: totals, throughput and backlog over time, the queues with their depth, rates,
// lag, dead letters and messages expired by a ttl, and the databases that hold them. Everything here comes from the stats tables
// (/api/v1/status*), which the broker's elected stats loop keeps current, so the page costs the
// same with a million partitions as with ten.

import { api, seg } from "../api.js";
import { Chart, series } from "../chart.js";
import { compact, duration, fill, h, modal, num, pager, rate, table, time, toast } from "../dom.js";

const PAGE = 50;

export function kpi(label, value, hint, kind) {
  return h("div", { class: `kpi ${kind || ""}` }, h("div", { class: "kpi-label" }, label),
    h("div", { class: "kpi-value" }, value), hint ? h("div", { class: "kpi-hint" }, hint) : null);
}

export function queueLink(name) {
  return h("a", { href: `#/queues/${seg(name)}` }, name);
}

export function mount(root) {
  let offset = 0;
  const kpis = h("div", { class: "kpis" });
  const throughput = new Chart("Throughput (all queues)", ["pushed", "popped", "acked"], { perSecond: true });
  const backlog = new Chart("Backlog (all queues)", ["depth", "lag", "dlqDepth"], { perSecond: false });
  const queues = h("div", {});
  const databases = h("div", {});
  const paging = h("div", {});
  const footer = h("p", { class: "muted small" });

  fill(root,
    h("div", { class: "page-head" }, h("h1", {}, "Overview"),
      h("button", { class: "primary", onclick: createQueue }, "+ New queue")),
    kpis,
    h("div", { class: "charts" }, throughput.element, backlog.element),
    h("section", { class: "card" }, h("div", { class: "card-head" }, h("h2", {}, "Queues"), paging), queues),
    h("section", { class: "card", id: "databases" }, h("div", { class: "card-head" }, h("h2", {}, "Databases")),
      databases),
    footer);

  async function refresh() {
    const [status, page, points] = await Promise.all([
      api("/api/v1/status"),
      api("/api/v1/status/queues", { query: { limit: PAGE, offset } }),
      series(null),
    ]);
    const t = status.throughput;
    fill(kpis,
      kpi("Queues", num(status.queues)),
      kpi("Partitions", compact(status.partitions)),
      kpi("Depth", compact(status.depth), "unconsumed messages"),
      kpi("Max lag", compact(status.lag), "largest group backlog", status.lag > 0 ? "warn" : ""),
      kpi("Dead letters", compact(status.dlqDepth), null, status.dlqDepth > 0 ? "bad" : ""),
      kpi("In", rate(t.pushedPerSecond), `last ${t.windowSeconds} s`),
      kpi("Out", rate(t.ackedPerSecond), `delivered ${rate(t.poppedPerSecond)}`));
    throughput.update(points);
    backlog.update(points);
    fill(queues, table([
      { label: "Queue", cell: (q) => queueLink(q.queue) },
      { label: "Namespace / task", cell: (q) => [q.namespace, q.task].filter(Boolean).join(" / ") || "—", class: "muted" },
      { label: "Partitions", cell: (q) => compact(q.partitions), class: "num" },
      { label: "Depth", cell: (q) => compact(q.depth), class: "num" },
      { label: "In", cell: (q) => rate(q.throughput.pushedPerSecond), class: "num" },
      { label: "Out", cell: (q) => rate(q.throughput.ackedPerSecond), class: "num" },
      { label: "Max lag", cell: (q) => compact(q.lag), class: "num" },
      { label: "DLQ", cell: (q) => (q.dlqDepth ? h("span", { class: "bad-text" }, compact(q.dlqDepth)) : "0"),
        class: "num" },
      { label: "Expired", class: "num",
        cell: (q) => (q.totals.expired ? h("span", { class: "bad-text" }, compact(q.totals.expired)) : "0") },
      { label: "Pushed", cell: (q) => compact(q.totals.pushed), class: "num muted" },
    ], page.queues, {
      empty: "No queues yet: push a message or create one.",
      onRow: (q) => { location.hash = `#/queues/${seg(q.queue)}`; },
      rowKey: (q) => q.queue,
    }));
    fill(databases, table([
      { label: "Database", cell: (d) => d.id, class: "mono" },
      { label: "Role", cell: (d) => (d.catalog ? "catalog" : `member ${d.ordinal}`) },
      { label: "Health", cell: (d) => (d.healthy ? "healthy" : h("span", { class: "bad-text" }, "unreachable")) },
      { label: "Size", cell: (d) => `${compact(Math.round(d.sizeBytes / 1e6))} MB`, class: "num" },
      { label: "Partitions", cell: (d) => compact(d.partitions), class: "num" },
      { label: "Connections", cell: (d) => num(d.connections), class: "num" },
      { label: "Commits", cell: (d) => compact(d.transactionsCommitted), class: "num muted" },
    ], status.databases, { empty: "No database reported.", rowKey: (d) => d.id }));
    fill(paging, page.total > PAGE ? pager(page, (next) => { offset = next; refresh(); }) : null);
    fill(footer, "Broker up ", duration(status.uptimeSeconds), " · statistics refreshed ",
      status.statsRefreshedAt ? time(status.statsRefreshedAt) : "not yet", " · version ", status.version);
  }

  return { refresh };
}

async function createQueue() {
  const values = await modal("New queue", [
    h("label", {}, "Name", h("input", { name: "queue", required: true, autocomplete: "off",
      placeholder: "orders or billing.invoices.create" })),
    h("p", { class: "muted small" }, "Options can be changed afterwards on the queue's Settings tab."),
  ], { submit: "Create" });
  if (!values) return;
  try {
    await api("/api/v1/configure", { method: "POST", body: { queue: values.queue, options: {} } });
    toast(`Queue ${values.queue} created`);
    location.hash = `#/queues/${seg(values.queue)}`;
  } catch (error) {
    toast(error.message, "error");
  }
}
