/**
 * Pure logic of the panel and the badges: region cells of a notebook, scopes, and number formatting.  No DOM and
 * no JupyterLab here, so that it is unit-tested directly.  The `%%argus` line and the kernel code of a measurement
 * are made in Python (argus_lab.app.cell_code) and fetched from the server (`POST argus-lab/measure-code`).
 */

/** A notebook cell marked with `%%argus_region NAME`. */
export interface IRegionCell {
  index: number;
  name: string;
  body: string;
  /** The cell's id in the notebook model ('' when unknown). */
  id?: string;
}

const REGION_LINE = /^%%argus_region[ \t]+(\S(?:.*\S)?)[ \t]*$/;

/** The region name of a cell whose first line is `%%argus_region NAME`, else null. */
export function regionName(source: string): string | null {
  const first = source.replace(/^\s*\n/, '').split('\n', 1)[0] ?? '';
  const m = REGION_LINE.exec(first.replace(/\r$/, ''));
  return m ? m[1] : null;
}

/** The `%%argus_region` cells among `sources` (code cells in notebook order; `ids` their model ids). */
export function regionCells(sources: string[], ids: string[] = []): IRegionCell[] {
  const out: IRegionCell[] = [];
  sources.forEach((source, index) => {
    const name = regionName(source);
    if (name !== null) {
      const lines = source.replace(/^\s*\n/, '').split('\n');
      const cell: IRegionCell = { index, name, body: lines.slice(1).join('\n') };
      if (ids[index]) {
        cell.id = ids[index];
      }
      out.push(cell);
    }
  });
  return out;
}

/** A scope from region paths picked in the store plus free scope text (clauses separated by `; `). */
export function composeScope(paths: string[], extra: string): string {
  const clauses = [...paths, ...extra.split(';')].map(s => s.trim()).filter(s => s.length > 0);
  return Array.from(new Set(clauses)).join('; ');
}

/** A share of time as a percentage for a badge: "42%", "<1%", or "-" when unknown. */
export function formatShare(share: number | null | undefined): string {
  if (share === null || share === undefined || !isFinite(share)) {
    return '-';
  }
  const pct = share * 100;
  if (pct > 0 && pct < 1) {
    return '<1%';
  }
  return `${Math.round(pct)}%`;
}

/** A duration in nanoseconds for humans. */
export function formatNs(ns: unknown): string {
  if (typeof ns !== 'number' || !isFinite(ns)) {
    return '-';
  }
  const abs = Math.abs(ns);
  const [unit, scale] = abs >= 1e9 ? ['s', 1e9] : abs >= 1e6 ? ['ms', 1e6] : abs >= 1e3 ? ['µs', 1e3] : ['ns', 1];
  return `${Number((ns / scale).toPrecision(3))} ${unit}`;
}

/** The scales of bytes, as the report prints them (argus_lab/units.py): 1.06 MB, 512 B. */
const BYTES: Array<[string, number]> = [
  ['GB', 1e9],
  ['MB', 1e6],
  ['kB', 1e3],
  ['B', 1]
];
/** The scales of large counts and other plain numbers: 1.06 M instead of 1.057e+6. */
const LARGE: Array<[string, number]> = [
  ['T', 1e12],
  ['G', 1e9],
  ['M', 1e6]
];

/** `value` in the first of `scales` it reaches (the last one below), with three significant digits. */
function scaled(value: number, scales: Array<[string, number]>): [string, string] {
  const abs = Math.abs(value);
  const [name, scale] = scales.find(([, s]) => abs >= s) ?? scales[scales.length - 1];
  return [String(Number((value / scale).toPrecision(3))), name];
}

/**
 * A value with its unit for tables, scaled as the report scales it: time in s/ms/µs/ns, bytes in GB/MB/kB/B
 * (`1.06 MB`, never `1.057e+6 byte`), counts and other numbers of a million or more with an SI prefix (`1.06 M`,
 * `2 M word/thread`), smaller ones (percentages included) with four significant digits (`7.354 %`): the rules of
 * argus_lab/units.py (`fmt`) and of the HTML report.
 */
export function formatValue(value: unknown, unit: unknown): string {
  if (value === null || value === undefined || (typeof value === 'number' && isNaN(value))) {
    return '-';
  }
  if (typeof value !== 'number') {
    return typeof value === 'object' ? JSON.stringify(value) : String(value);
  }
  if (!isFinite(value)) {
    return String(value);
  }
  if (unit === 'ns') {
    return formatNs(value);
  }
  if (unit === 'byte') {
    const [text, name] = scaled(value, BYTES);
    return `${text} ${name}`;
  }
  const suffix = unit && unit !== 'count' ? ` ${unit}` : '';
  if (Math.abs(value) >= 1e6) {
    const [text, name] = scaled(value, LARGE);
    return `${text} ${name}${suffix}`;
  }
  return `${Number(value.toPrecision(4))}${suffix}`;
}

/** A wall-clock time (ns since the epoch) as local date and time. */
export function formatTime(ns: unknown): string {
  if (typeof ns !== 'number' || !isFinite(ns)) {
    return '-';
  }
  return new Date(ns / 1e6).toISOString().replace('T', ' ').slice(0, 19);
}

/** A wall-clock time for a narrow column, in local time: `14:03:27` today, else `11-29 14:03`. */
export function formatWhen(ns: unknown, now: number = Date.now()): string {
  if (typeof ns !== 'number' || !isFinite(ns)) {
    return '-';
  }
  const d = new Date(ns / 1e6);
  const two = (n: number): string => String(n).padStart(2, '0');
  if (d.toDateString() === new Date(now).toDateString()) {
    return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}`;
  }
  return `${two(d.getMonth() + 1)}-${two(d.getDate())} ${two(d.getHours())}:${two(d.getMinutes())}`;
}

/** Seconds for a narrow column: `0.36 s`, `12.4 s`, `3 min 5 s`. */
export function formatSeconds(s: unknown): string {
  if (typeof s !== 'number' || !isFinite(s)) {
    return '-';
  }
  if (s < 60) {
    return `${Number(s.toPrecision(s < 10 ? 2 : 3))} s`;
  }
  return `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

/**
 * A JSON object as flat `[key, value]` pairs (nested keys joined with `.`), for key/value lists: settings,
 * clocks and versions read as `cupti.buffer_mb  64`, never as JSON wrapped one character per line.
 */
export function flatten(value: unknown, prefix = ''): Array<[string, string]> {
  if (value === null || value === undefined) {
    return [];
  }
  if (typeof value === 'string') {
    const t = value.trim();
    if (t.startsWith('{')) {
      try {
        return flatten(JSON.parse(t), prefix);
      } catch {
        // not JSON: shown as it is
      }
    }
    return prefix ? [[prefix, value]] : [['', value]];
  }
  if (typeof value !== 'object' || Array.isArray(value)) {
    const text = Array.isArray(value) ? value.map(v => String(v)).join(', ') : String(value);
    return [[prefix, text]];
  }
  const out: Array<[string, string]> = [];
  for (const [k, v] of Object.entries(value as Record<string, unknown>)) {
    const key = prefix ? `${prefix}.${k}` : k;
    if (v && typeof v === 'object' && !Array.isArray(v) && Object.keys(v).length) {
      out.push(...flatten(v, key));
    } else if (v && typeof v === 'object' && !Array.isArray(v)) {
      out.push([key, '(none)']);
    } else {
      out.push(...flatten(v, key));
    }
  }
  return out;
}

/**
 * The path of `abs` relative to the Jupyter root `root` (both absolute, `/`-separated), or null when it is
 * outside the root.
 */
export function relativeTo(root: string, abs: string): string | null {
  const norm = (p: string): string => p.replace(/\/+/g, '/').replace(/\/$/, '');
  const r = norm(root);
  const a = norm(abs);
  if (!r || !a.startsWith('/')) {
    return null;
  }
  if (a === r) {
    return '';
  }
  return a.startsWith(`${r}/`) ? a.slice(r.length + 1) : null;
}

/** Whether a kernel output line is the measurement's own progress (shown by the panel) rather than the cells'. */
export function isProgress(text: string): boolean {
  const t = text.trim();
  return /^argus(-lab)?:/.test(t) || /^[A-Za-z_.]*(Error|Exception|Interrupt|Warning)\b:/.test(t);
}

/** What a region's badge needs: its numbers in its latest run (as the server's `regions` answers them). */
export interface IBadgeRegion {
  path: string;
  share: number | null;
  share_signal: string | null;
  median?: number | null;
  parent?: string | null;
  parent_share?: number | null;
  instances?: number;
}

/** The latest numbers per region name (last path segment), for badges of `%%argus_region NAME` cells. */
export function sharesByName(
  regions: IBadgeRegion[]
): Map<string, { path: string; share: number | null; signal: string | null; region: IBadgeRegion }> {
  const out = new Map<string, { path: string; share: number | null; signal: string | null; region: IBadgeRegion }>();
  for (const r of regions) {
    const name = r.path.split('/').pop() ?? r.path;
    const prev = out.get(name);
    // prefer the shortest path (the top-level use of a cell region), then the first seen
    if (!prev || r.path.split('/').length < prev.path.split('/').length) {
      out.set(name, { path: r.path, share: r.share, signal: r.share_signal, region: r });
    }
  }
  return out;
}

/**
 * A badge's text and tooltip: a top-level region says its median time (its share of the run would always read
 * 100%); a nested one its share of its parent's time, with the time in the tooltip.
 */
export function badgeText(name: string, r: IBadgeRegion): { text: string; title: string } {
  const signal = r.share_signal ?? 'time';
  const n = r.instances !== undefined ? ` of ${r.instances} instance(s)` : '';
  const median = r.median === null || r.median === undefined ? null : formatNs(r.median);
  const time = median ? `median ${median}${n}` : 'no time measured yet';
  const open = 'click for its drill-down';
  if (!r.parent) {
    const share = r.share === null ? '' : `; ${formatShare(r.share)} of its run's ${signal}`;
    return { text: `${name} ${median ?? '-'}`, title: `region ${r.path}: ${time} (latest run)${share}; ${open}` };
  }
  const of = formatShare(r.parent_share);
  return {
    text: `${name} ${of}`,
    title: `region ${r.path}: ${of} of its parent ${r.parent}'s ${signal}; ${time} (latest run); ${open}`
  };
}

/** A JSON object as `key: value` lines (nested values as JSON); '' for an empty or missing object. */
export function formatDict(value: unknown): string {
  if (value === null || value === undefined) {
    return '';
  }
  if (typeof value !== 'object' || Array.isArray(value)) {
    return typeof value === 'string' ? value : JSON.stringify(value);
  }
  return Object.entries(value as Record<string, unknown>)
    .map(([k, v]) => `${k}: ${typeof v === 'string' ? v : JSON.stringify(v)}`)
    .join('\n');
}

/**
 * Short names for store paths (root-relative) in a narrow picker: the file name, with as many folders before it
 * as it takes to tell apart stores of the same name (`argus.duckdb`, `notebooks/argus.duckdb`).
 */
export function storeLabels(paths: string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const path of paths) {
    const parts = path.split('/');
    let n = 1;
    const tail = (p: string, k: number): string => p.split('/').slice(-k).join('/');
    while (n < parts.length && paths.some(o => o !== path && tail(o, n) === tail(path, n))) {
      n++;
    }
    out.set(path, tail(path, n));
  }
  return out;
}
