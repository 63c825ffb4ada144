// Small DOM and formatting helpers shared by the views: element building, tables, pagers,
// toasts, dialogs and number/time formatting. No framework: the console is a few tables.

export function h(tag, attrs, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) element.addEventListener(key.slice(2), value);
    else if (key === "class") element.className = value;
    else if (key === "dataset") Object.assign(element.dataset, value);
    else if (key === "value") element.value = value;
    else if (key in element && typeof value !== "string") element[key] = value;
    else element.setAttribute(key, value === true ? "" : value);
  }
  append(element, children);
  return element;
}

function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

export function fill(element, ...children) {
  element.replaceChildren();
  append(element, children);
  return element;
}

const NUMBER = new Intl.NumberFormat("en-US");
const COMPACT = new Intl.NumberFormat("en-US", { notation: "compact", maximumFractionDigits: 1 });

export function num(value) {
  return value === null || value === undefined ? "—" : NUMBER.format(value);
}

export function compact(value) {
  return value === null || value === undefined ? "—" : value < 10000 ? NUMBER.format(value) : COMPACT.format(value);
}

export function rate(value) {
  if (value === null || value === undefined) return "—";
  if (value === 0) return "0/s";
  return `${value < 10 ? value.toFixed(1) : compact(Math.round(value))}/s`;
}

export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60) return `${Math.round(seconds)}s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${Math.round(seconds % 60)}s`;
  if (seconds < 86400) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
}

export function ago(stamp) {
  if (!stamp) return "—";
  const seconds = (Date.now() - Date.parse(stamp)) / 1000;
  return seconds < 1 ? "just now" : `${duration(seconds)} ago`;
}

export function time(stamp) {
  if (!stamp) return "—";
  const moment = new Date(stamp);
  return h("time", { datetime: stamp, title: stamp }, moment.toLocaleString(undefined, {
    month: "short", day: "numeric", hour: "2-digit", minute: "2-digit", second: "2-digit",
  }));
}

export function pretty(value) {
  return JSON.stringify(value, null, 2);
}

export function snippet(value, length = 90) {
  const text = JSON.stringify(value);
  return text === undefined ? "" : text.length > length ? `${text.slice(0, length)}…` : text;
}

export function badge(text, kind) {
  return h("span", { class: `badge ${kind || text.toLowerCase()}` }, text);
}

// columns: [{label, cell(row) -> node|string, class?}]; rows: array; empty: text when none.
export function table(columns, rows, { empty = "Nothing here yet.", onRow, rowKey } = {}) {
  const head = h("thead", {}, h("tr", {}, columns.map((c) => h("th", { class: c.class }, c.label || "\u00a0"))));
  const body = h("tbody", {}, rows.length === 0
    ? h("tr", {}, h("td", { class: "empty", colSpan: columns.length }, empty))
    : rows.map((row) => h("tr", {
      class: onRow ? "clickable" : undefined,
      onclick: onRow ? (event) => { if (!event.target.closest("button, a, input")) onRow(row); } : undefined,
      dataset: rowKey ? { key: rowKey(row) } : undefined,
    }, columns.map((c) => h("td", { class: c.class }, c.cell(row))))));
  return h("table", { class: "grid" }, head, body);
}

// A pager for server-side pages: {total, limit, offset} and a callback with the new offset.
export function pager({ total, limit, offset }, go) {
  const last = Math.max(0, Math.floor((Math.max(total, 1) - 1) / limit) * limit);
  const from = total === 0 ? 0 : offset + 1;
  const to = Math.min(offset + limit, total);
  return h("div", { class: "pager" },
    h("span", {}, `${num(from)}–${num(to)} of ${num(total)}`),
    h("button", { class: "ghost", disabled: offset <= 0, onclick: () => go(0), title: "First page" }, "«"),
    h("button", { class: "ghost", disabled: offset <= 0, onclick: () => go(Math.max(0, offset - limit)) }, "‹ Prev"),
    h("button", { class: "ghost", disabled: offset + limit >= total, onclick: () => go(offset + limit) }, "Next ›"),
    h("button", { class: "ghost", disabled: offset >= last, onclick: () => go(last), title: "Last page" }, "»"));
}

export function toast(message, kind = "ok") {
  const element = h("div", { class: `toast ${kind}`, role: kind === "error" ? "alert" : "status" }, message);
  document.getElementById("toasts").append(element);
  setTimeout(() => element.remove(), kind === "error" ? 8000 : 4000);
}

// A modal built on <dialog>: resolves with the form's values, or null when cancelled.
export function modal(title, content, { submit = "OK", danger = false, wide = false } = {}) {
  return new Promise((resolve) => {
    const form = h("form", { method: "dialog" },
      h("h2", {}, title), content,
      h("div", { class: "actions" },
        h("button", { type: "button", class: "ghost", onclick: () => dialog.close("cancel") }, "Cancel"),
        submit ? h("button", { type: "submit", value: "ok", class: danger ? "danger" : "primary" }, submit) : null));
    const dialog = h("dialog", { class: wide ? "wide" : undefined }, form);
    dialog.addEventListener("close", () => {
      const values = Object.fromEntries(new FormData(form).entries());
      dialog.remove();
      resolve(dialog.returnValue === "ok" ? values : null);
    });
    document.body.append(dialog);
    dialog.showModal();
  });
}

// A read-only modal for inspecting something (a payload, an error).
export function inspect(title, content) {
  return modal(title, content, { submit: null, wide: true });
}

// Asks to type a name before something irreversible happens.
export async function confirmByName(title, explanation, name, action) {
  const values = await modal(title, [
    h("p", {}, explanation),
    h("label", {}, "Type ", h("code", {}, name), " to confirm",
      h("input", { name: "confirm", required: true, autocomplete: "off" })),
  ], { submit: action, danger: true });
  return values !== null && values.confirm === name;
}
