/** Small DOM helpers: every text reaches the page through textContent (names from the store are untrusted). */
import { Row } from './api';

export function el<K extends keyof HTMLElementTagNameMap>(tag: K, cls = '', text?: string): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (cls) {
    node.className = cls;
  }
  if (text !== undefined) {
    node.textContent = text;
  }
  return node;
}

export function clear(node: HTMLElement): void {
  while (node.firstChild) {
    node.removeChild(node.firstChild);
  }
}

export interface IColumn {
  title: string;
  value: (row: Row) => string;
  numeric?: boolean;
  /** Keep the cell on one line (ids, short codes). */
  nowrap?: boolean;
}

/** A table of `rows`; a row gets `onClick` when given. */
export function table(
  columns: IColumn[],
  rows: Row[],
  cls: string,
  onClick?: (row: Row, tr: HTMLTableRowElement) => void
): HTMLTableElement {
  const t = el('table', `jp-ArgusPanel-table ${cls}`);
  const head = t.createTHead().insertRow();
  for (const c of columns) {
    head.appendChild(el('th', '', c.title));
  }
  const body = t.createTBody();
  for (const row of rows) {
    const tr = body.insertRow();
    for (const c of columns) {
      const cls = [c.numeric ? 'jp-ArgusPanel-num' : '', c.nowrap ? 'jp-ArgusPanel-nowrap' : ''].join(' ').trim();
      const td = el('td', cls, c.value(row));
      tr.appendChild(td);
    }
    if (onClick) {
      tr.classList.add('jp-ArgusPanel-click');
      tr.tabIndex = 0;
      tr.addEventListener('click', () => onClick(row, tr));
      tr.addEventListener('keydown', ev => {
        if (ev.key === 'Enter') {
          onClick(row, tr);
        }
      });
    }
  }
  if (rows.length === 0) {
    const tr = body.insertRow();
    const td = el('td', 'jp-ArgusPanel-empty', '(none)');
    td.colSpan = columns.length;
    tr.appendChild(td);
  }
  return t;
}

export function section(title: string, cls: string): { root: HTMLElement; body: HTMLElement } {
  const root = el('section', `jp-ArgusPanel-section ${cls}`);
  root.appendChild(el('h3', 'jp-ArgusPanel-h', title));
  const body = el('div', 'jp-ArgusPanel-body');
  root.appendChild(body);
  return { root, body };
}
