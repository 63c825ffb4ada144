// Throughput and backlog charts over time, drawn with the vendored uPlot (a global loaded by
// index.html). The broker books counters into 10-second buckets (see engine/stats.py); the
// analytics route folds them into `interval`-second points, which become per-second rates here.

import { api } from "./api.js";
import { compact, h } from "./dom.js";

const COLORS = { pushed: "#4f46e5", popped: "#0891b2", acked: "#16a34a", failed: "#ea580c",
  deadLettered: "#dc2626", depth: "#7c3aed", lag: "#d97706", dlqDepth: "#dc2626" };
const LABELS = { pushed: "in", popped: "delivered", acked: "out", failed: "failed", deadLettered: "dead-lettered",
  depth: "depth", lag: "lag", dlqDepth: "DLQ" };
const WINDOW_SECONDS = 30 * 60;
const INTERVAL_SECONDS = 10;

// Points of one queue (or all queues) for the last WINDOW_SECONDS.
export async function series(queue) {
  const since = new Date(Date.now() - WINDOW_SECONDS * 1000).toISOString();
  const answer = await api("/api/v1/status/analytics", {
    query: { queue, from: since, interval: INTERVAL_SECONDS },
  });
  return answer.throughput;
}

// A chart card that keeps its uPlot instance and only swaps the data on refresh.
export class Chart {
  constructor(title, keys, { perSecond }) {
    this.keys = keys;
    this.perSecond = perSecond;
    this.plot = null;
    this.body = h("div", { class: "chart-body" });
    this.element = h("section", { class: "card chart" }, h("h3", {}, title), this.body);
  }

  update(points) {
    const end = Math.floor(Date.now() / 1000);
    const start = end - WINDOW_SECONDS;
    // One x value per bucket over the whole window, so gaps show as zeros rather than lines.
    const byTime = new Map(points.map((p) => [Math.floor(Date.parse(p.at) / 1000), p]));
    const xs = [];
    for (let t = start - (start % INTERVAL_SECONDS); t <= end; t += INTERVAL_SECONDS) xs.push(t);
    // A bucket is booked only when something moved: an empty one is a zero rate, and a gauge
    // keeps its last booked value until the next booking.
    const data = [xs, ...this.keys.map((key) => {
      let last = null;
      return xs.map((t) => {
        const point = byTime.get(t);
        if (this.perSecond) return point ? point[key] / INTERVAL_SECONDS : 0;
        if (point) last = point[key];
        return last;
      });
    })];
    if (this.plot) {
      this.plot.setData(data);
      return;
    }
    if (!this.body.isConnected) return;
    this.plot = new uPlot(this.options(), data, this.body);
    new ResizeObserver(() => this.plot.setSize(this.size())).observe(this.body);
  }

  size() {
    return { width: Math.max(this.body.clientWidth, 200), height: 180 };
  }

  options() {
    const unit = this.perSecond ? "/s" : "";
    const css = getComputedStyle(document.documentElement);
    const muted = css.getPropertyValue("--muted").trim();
    const grid = { stroke: css.getPropertyValue("--grid").trim(), width: 1 };
    return {
      ...this.size(),
      legend: { live: true },
      cursor: { drag: { x: false, y: false } },
      scales: { y: { range: (u, min, max) => [0, Math.max(max * 1.1, 1)] } },
      axes: [
        { stroke: muted, grid, ticks: grid },
        { stroke: muted, grid, ticks: grid,
          size: 56, values: (u, values) => values.map((v) => compact(v) + unit) },
      ],
      series: [{}, ...this.keys.map((key) => ({
        label: LABELS[key], stroke: COLORS[key], width: 1.6, points: { show: false },
        fill: `${COLORS[key]}14`,
        value: (u, v) => (v === null ? "—" : compact(this.perSecond ? Math.round(v * 10) / 10 : v) + unit),
      }))],
    };
  }
}
