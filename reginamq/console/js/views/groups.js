// Consumer groups: lag and state per (group, queue), seek to the end or to an instant, delete,
// and a group's lag per partition, a page at a time. The queue page reuses the actions and the
// partition panel for the groups of one queue.

import { api, seg } from "../api.js";
import { badge, compact, duration, fill, h, modal, num, pager, table, time, toast } from "../dom.js";
import { queueLink } from "./overview.js";

const PARTITION_PAGE = 25;

export function mount(root) {
  const list = h("div", {});
  const detail = h("div", {});
  let open = null;
  fill(root,
    h("div", { class: "page-head" }, h("h1", {}, "Consumer groups")),
    h("p", { class: "muted" }, "Every group sees every message. Lag is what a group has not consumed yet; ",
      "a group is Lagging when its oldest unconsumed message is over a minute old, Dead when it holds no cursor."),
    h("section", { class: "card" }, list),
    detail);

  async function refresh() {
    const groups = await api("/api/v1/consumer-groups");
    fill(list, table([
      { label: "Group", cell: (g) => h("strong", {}, g.name) },
      { label: "Queue", cell: (g) => queueLink(g.queueName) },
      { label: "State", cell: (g) => badge(g.state) },
      { label: "Lag", cell: (g) => compact(g.totalLag), class: "num" },
      { label: "Oldest unconsumed", cell: (g) => (g.totalLag ? duration(g.maxTimeLag) : "—"), class: "num" },
      { label: "Partitions behind", cell: (g) => `${compact(g.partitionsWithLag)} / ${compact(g.partitions)}`,
        class: "num" },
      { label: "Leased", cell: (g) => compact(g.members), class: "num" },
      { label: "Subscription", cell: (g) => (g.subscriptionMode || "—") + (g.conflation ? ", last value" : ""),
        class: "muted" },
      { label: "", cell: (g) => groupActions(g.name, g.queueName, refresh), class: "row-end" },
    ], groups, {
      empty: "No consumer groups yet: a group appears with its first pop.",
      onRow: (g) => {
        open = { group: g.name, queue: g.queueName };
        fill(detail, partitionsPanel(open.group, open.queue));
      },
      rowKey: (g) => `${g.name}@${g.queueName}`,
    }));
  }

  return { refresh };
}

// Buttons that move or forget a group's cursors on one queue; `after` runs once one succeeded.
export function groupActions(group, queue, after) {
  const path = `/api/v1/consumer-groups/${seg(group)}/queues/${seg(queue)}`;
  async function seek(body, what) {
    try {
      const answer = await api(`${path}/seek`, { method: "POST", body });
      const moved = answer.partitionsUpdated + answer.cursorsCreated;
      toast(`${group} on ${queue} moved ${what}: ${num(moved)} partition${moved === 1 ? "" : "s"}`);
      after();
    } catch (error) {
      toast(error.message, "error");
    }
  }
  return h("div", { class: "row-actions" },
    h("button", { class: "ghost small", title: "Skip everything not consumed yet", onclick: async () => {
      const ok = await modal(`Seek ${group} to the end of ${queue}?`,
        h("p", {}, "Every message the group has not consumed on this queue is skipped."), { submit: "Seek to end" });
      if (ok) seek({ toEnd: true }, "to the end");
    } }, "Seek to end"),
    h("button", { class: "ghost small", title: "Re-read or skip up to an instant", onclick: async () => {
      const values = await modal(`Seek ${group} on ${queue} to a time`, [
        h("p", {}, "The group will next read the first message pushed at or after this instant (your local time)."),
        h("label", {}, "Instant", h("input", { type: "datetime-local", name: "at", step: 1, required: true })),
      ], { submit: "Seek" });
      if (values) seek({ timestamp: new Date(values.at).toISOString() }, `to ${values.at}`);
    } }, "Seek to time…"),
    h("button", { class: "ghost small danger-text", onclick: async () => {
      const ok = await modal(`Delete ${group} on ${queue}?`,
        h("p", {}, "Its cursors and subscription on this queue are deleted; a later pop starts it afresh."),
        { submit: "Delete", danger: true });
      if (!ok) return;
      try {
        await api(path, { method: "DELETE" });
        toast(`${group} deleted from ${queue}`);
        after();
      } catch (error) {
        toast(error.message, "error");
      }
    } }, "Delete"));
}

// A group's position and lag on each partition of a queue, paged by the broker. The detail is
// keyed by queue name (Queen's shape); asked for one queue, it holds that queue or nothing.
export function partitionsPanel(group, queue) {
  const body = h("div", {}, h("p", { class: "muted" }, "Loading…"));
  const head = h("div", { class: "card-head" }, h("h2", {}, `${group} on ${queue}: lag per partition`));
  const panel = h("section", { class: "card", id: "group-partitions" }, head, body);
  async function load(offset) {
    try {
      const answer = await api(`/api/v1/consumer-groups/${seg(group)}`,
        { query: { queue, limit: PARTITION_PAGE, offset } });
      const entry = Object.hasOwn(answer, queue) ? answer[queue] : null;
      if (!entry) {
        fill(head, h("h2", {}, `${group} on ${queue}: lag per partition`));
        fill(body, h("p", { class: "empty" }, `${group} does not read ${queue} (any more).`));
        return;
      }
      const paging = { total: entry.partitionCount, limit: entry.limit, offset: entry.offset };
      fill(head, h("h2", {}, `${group} on ${queue}: lag per partition`), pager(paging, load));
      fill(body, table([
        { label: "Partition", cell: (p) => h("code", {}, p.partition) },
        { label: "Position", cell: (p) => (p.committed === null ? "not read yet" : num(p.committed)), class: "num" },
        { label: "Last offset", cell: (p) => num(p.lastOffset), class: "num" },
        { label: "Lag", cell: (p) => (p.offsetLag ? h("strong", {}, num(p.offsetLag)) : "0"), class: "num" },
        { label: "Oldest unconsumed", cell: (p) => (p.offsetLag ? duration(p.timeLagSeconds) : "—"), class: "num" },
        { label: "Lease", cell: (p) => (p.leaseActive
          ? [badge("leased"), " ", num(p.leasedFrom), "–", num(p.leasedTo), " until ", time(p.leaseExpiresAt)]
          : "—") },
      ], entry.partitions, { empty: "This queue has no partitions yet." }));
    } catch (error) {
      fill(body, h("p", { class: "error" }, error.message));
    }
  }
  load(0);
  return panel;
}
