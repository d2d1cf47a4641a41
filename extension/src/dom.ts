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
  /** Builds the cell's content instead of `value` (a region path with break points, a link). */
  node?: (row: Row) => Node;
  numeric?: boolean;
  /** Keep the cell on one line (ids, short codes). */
  nowrap?: boolean;
  /** Shown only when the panel is wide (the sidebar was widened): extra columns that a narrow panel leaves out. */
  wide?: boolean;
}

/** The class of a column's cells (its header included). */
function columnClass(c: IColumn): string {
  return [c.numeric ? 'jp-ArgusPanel-num' : '', c.nowrap ? 'jp-ArgusPanel-nowrap' : '', c.wide ? WIDE_ONLY : '']
    .join(' ')
    .replace(/ +/g, ' ')
    .trim();
}

/** Cells of columns shown only in a wide panel (hidden by CSS while the panel lacks `jp-mod-wide`). */
export const WIDE_ONLY = 'jp-ArgusPanel-wideOnly';
/** Parts of a cell shown only in a narrow panel (what a wide one shows in a column of its own). */
export const NARROW_ONLY = 'jp-ArgusPanel-narrowOnly';

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
    head.appendChild(el('th', c.wide ? WIDE_ONLY : '', c.title));
  }
  const body = t.createTBody();
  for (const row of rows) {
    const tr = body.insertRow();
    for (const c of columns) {
      const td = el('td', columnClass(c));
      if (c.node) {
        td.appendChild(c.node(row));
      } else {
        td.textContent = c.value(row);
      }
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

/**
 * A region path that wraps only after a `/` (never inside a name such as `decode`): each segment is kept whole
 * (`white-space: nowrap`) and a line break opportunity (`<wbr>`) follows every separator.
 */
export function pathNode(path: string): HTMLElement {
  const span = el('span', 'jp-ArgusPanel-path');
  const parts = path.split('/');
  parts.forEach((part, i) => {
    span.appendChild(el('span', 'jp-ArgusPanel-seg', i < parts.length - 1 ? `${part}/` : part));
    if (i < parts.length - 1) {
      span.appendChild(document.createElement('wbr'));
    }
  });
  return span;
}

/** A key/value list (`<dl>`): one line per pair, keys in one column; values are text. */
export function kvList(pairs: Array<[string, string | Node]>, cls = ''): HTMLElement {
  const dl = el('dl', `jp-ArgusPanel-kv ${cls}`.trim());
  if (!pairs.length) {
    dl.appendChild(el('dd', 'jp-ArgusPanel-empty', '(none)'));
  }
  for (const [k, v] of pairs) {
    dl.appendChild(el('dt', '', k));
    const dd = el('dd');
    if (typeof v === 'string') {
      dd.textContent = v;
    } else {
      dd.appendChild(v);
    }
    dl.appendChild(dd);
  }
  return dl;
}

/** A link-styled button (keyboard reachable) that calls `onClick`. */
export function linkButton(text: string, title: string, onClick: () => void, cls = ''): HTMLButtonElement {
  const b = el('button', `jp-ArgusPanel-link ${cls}`.trim(), text);
  b.type = 'button';
  b.title = title;
  b.addEventListener('click', ev => {
    ev.preventDefault();
    onClick();
  });
  return b;
}
