// The viewer's small helpers: elements by id and made anew, a role's colour, JSON
// from and to the server.

export const $ = (id) => document.getElementById(id);
export const params = new URLSearchParams(location.search);

export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = String(text);
  return e;
}

export function roleColour(role) {
  let h = 0;
  for (const c of String(role)) h = (h * 31 + c.codePointAt(0)) % 360;
  return `hsl(${h}, 55%, 38%)`;
}

export async function getJson(url) {
  const r = await fetch(url, { credentials: 'same-origin' });
  if (!r.ok) throw new Error(`${url}: ${r.status}`);
  return r.json();
}

export async function post(path, body) {
  const r = await fetch(path, {
    method: 'POST',
    credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body || {}),
  });
  return r.json().catch(() => ({}));
}
