// The broker's JSON API as the console calls it: one place that adds the bearer token, turns
// error bodies into exceptions with the broker's own message, and notices a 401 (the token is
// missing, expired or refused), which brings the login back.

const TOKEN_KEY = "reginamq.token";

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const unauthorizedListeners = [];

export function onUnauthorized(listener) {
  unauthorizedListeners.push(listener);
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(value) {
  if (value) sessionStorage.setItem(TOKEN_KEY, value);
  else sessionStorage.removeItem(TOKEN_KEY);
}

// path: "/api/v1/..." with an optional query object (undefined/null/"" values are left out).
function url(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== undefined && value !== null && value !== "") params.set(key, String(value));
  }
  const text = params.toString();
  return text ? `${path}?${text}` : path;
}

// Path segments are encoded one by one, so a name holding '?' or '#' stays one segment.
export function seg(name) {
  return encodeURIComponent(name);
}

export async function api(path, { method = "GET", query, body } = {}) {
  const headers = {};
  const bearer = token();
  if (bearer) headers.Authorization = `Bearer ${bearer}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(url(path, query), {
    method, headers, body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (response.status === 401) {
    unauthorizedListeners.forEach((listener) => listener());
    throw new ApiError(401, "sign in to continue");
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let value = null;
  try {
    value = text ? JSON.parse(text) : null;
  } catch {
    value = { error: text.slice(0, 200) };
  }
  if (!response.ok) throw new ApiError(response.status, (value && value.error) || `HTTP ${response.status}`);
  return value;
}
