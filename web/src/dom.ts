// The page's two DOM helpers: an element by id, and an element built with its attributes and children.

export const $ = <T extends HTMLElement = HTMLElement>(id: string) => document.getElementById(id) as T;

export function h<K extends keyof HTMLElementTagNameMap>(
  tag: K, attrs: Record<string, string> = {}, ...children: (Node | string)[]
): HTMLElementTagNameMap[K] {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) k === "text" ? (el.textContent = v) : el.setAttribute(k, v);
  el.append(...children);
  return el;
}

/** A short reference for a UUID (its first eight characters); the full id stays in data-round. */
export const shortRef = (id: string) => id.slice(0, 8);
