/**
 * The Argus details view: a run (status, workload, provenance, plan) or a region's drill-down (signals,
 * instances, kernels, counters, compiler facts, attribution).  It opens as a main-area tab next to the notebook,
 * so that wide tables are read at the width of the main area; outside JupyterLab (tests) the panel shows it in
 * its own Details section.  Every text reaches the page through textContent (names from the store are untrusted).
 */
import { Widget } from '@lumino/widgets';

import { IRegionDetail, IRegionInfo, IRunDetail, IRunOrigin, Row } from './api';
import { clear, el, IColumn, kvList, linkButton, pathNode, table } from './dom';
import { flatten, formatNs, formatValue } from './model';

/** What the details view asks of its surroundings. */
export interface IDetailHooks {
  /** Open run `runId` in this view (a click on a run of the same plan). */
  openRun(runId: string): void;
  /** Reveal cell `cellId` of notebook `path` (relative to the Jupyter root); null when not possible here. */
  openCell: ((path: string, cellId: string) => void) | null;
  /** Download run `runId` as a Perfetto trace; null when the server cannot export. */
  exportRun?: ((runId: string) => void) | null;
}

export class ArgusDetails extends Widget {
  private _body = el('div', 'jp-ArgusDetails-body');

  constructor(private readonly hooks: IDetailHooks) {
    super();
    this.id = 'argus-lab-details';
    this.addClass('jp-ArgusDetails');
    this.title.label = 'Argus details';
    this.title.caption = 'Argus: a run or a region of the evidence store';
    this.title.closable = true;
    this.node.appendChild(this._body);
  }

  /** Show one run: status, cause, what ran, provenance as key/value lists, and the plan it belonged to. */
  showRun(d: IRunDetail): void {
    clear(this._body);
    this.title.label = `Argus: run ${d.run.run_id}`;
    const box = el('div', 'jp-ArgusPanel-runDetail');
    box.appendChild(el('h3', 'jp-ArgusPanel-detailTitle', `run ${d.run.run_id}: ${d.run.status}`));
    const exportRun = this.hooks.exportRun;
    if (exportRun) {
      const button = el('button', 'jp-ArgusPanel-exportButton jp-mod-styled', 'Export trace (Perfetto)');
      button.title = 'Download this run as a Chrome-trace JSON file that ui.perfetto.dev opens';
      button.addEventListener('click', () => exportRun(d.run.run_id));
      box.appendChild(button);
    }
    if (d.run.cause) {
      box.appendChild(el('pre', 'jp-ArgusPanel-cause', d.run.cause));
    }
    const versions = Object.entries(d.run.versions || {})
      .map(([a, b]) => `${a} ${b}`)
      .join(', ');
    const facts: Array<[string, string | Node]> = [
      ['workload', this.workload(d.run.workload, d.run.origin ?? null)],
      ['signals', (d.run.signals || []).join(', ')],
      ['backends', (d.run.backends || []).join(', ')],
      [
        'repetitions',
        `${d.run.reps_done} of ${Number(d.run.repetitions) + Number(d.run.warmup)} (${d.run.warmup} warm-up)`
      ],
      ['why a separate run', d.run.reason || ''],
      ['request', d.request?.text ?? ''],
      ['command', d.run.command || ''],
      ['host', `${d.run.host} (pid ${d.run.pid})`],
      ['versions', versions]
    ];
    box.appendChild(kvList(facts, 'jp-ArgusPanel-runFacts'));
    box.appendChild(el('h4', '', 'Settings'));
    box.appendChild(kvList(flatten(d.run.settings), 'jp-ArgusPanel-settings'));
    box.appendChild(el('h4', '', 'Provenance'));
    const prov = el('div', 'jp-ArgusPanel-provenance');
    for (const p of d.provenance) {
      const block = el('div', 'jp-ArgusPanel-provBlock');
      const version = p.backend_version ? ` · ${String(p.backend_version)}` : '';
      block.appendChild(el('h5', 'jp-ArgusPanel-provTitle', `${String(p.backend)}${version}`));
      const pairs: Array<[string, string]> = [['timestamps', String(p.timestamps ?? '')]];
      pairs.push(...flatten(p.clocks, 'clocks'), ...flatten(p.settings, 'settings'));
      block.appendChild(kvList(pairs.filter(([, v]) => v !== '')));
      prov.appendChild(block);
    }
    if (!d.provenance.length) {
      prov.appendChild(el('div', 'jp-ArgusPanel-note', '(no provenance recorded)'));
    }
    box.appendChild(prov);
    box.appendChild(el('h4', '', 'Plan'));
    box.appendChild(el('pre', 'jp-ArgusPanel-planText', d.plan?.text ?? '(no plan recorded)'));
    box.appendChild(
      table(
        [
          { title: '#', value: r => String(r.plan_index), numeric: true },
          { title: 'run', value: r => String(r.run_id), nowrap: true },
          { title: 'status', value: r => String(r.status) },
          { title: 'backends', value: r => ((r.backends as string[]) || []).join(', ') }
        ],
        d.plan_runs as unknown as Row[],
        'jp-ArgusPanel-planRuns',
        row => this.hooks.openRun(String(row.run_id))
      )
    );
    this._body.appendChild(box);
  }

  /** The workload: `cell [5] of quickstart.ipynb` with links that reveal the cells, or its description. */
  workload(text: string, origin: IRunOrigin | null): Node {
    const span = el('span', 'jp-ArgusPanel-workload');
    const cells = origin?.cells?.filter(c => c.id) ?? [];
    if (!origin || !cells.length || !this.hooks.openCell) {
      span.textContent = text || '';
      return span;
    }
    const open = this.hooks.openCell;
    const nb = origin.notebook.split('/').pop() ?? origin.notebook;
    if (cells.length === 1) {
      const c = cells[0];
      const label = text || `cell of ${nb}`;
      span.appendChild(
        linkButton(
          label,
          `reveal this cell in ${origin.notebook}`,
          () => open(origin.notebook, String(c.id)),
          'jp-ArgusPanel-cellLink'
        )
      );
      return span;
    }
    span.appendChild(el('span', '', 'cells '));
    cells.forEach((c, i) => {
      if (i) {
        span.appendChild(el('span', '', ', '));
      }
      const name = c.name || (c.index !== null && c.index !== undefined ? `[${c.index + 1}]` : `#${i + 1}`);
      span.appendChild(
        linkButton(
          name,
          `reveal this cell in ${origin.notebook}`,
          () => open(origin.notebook, String(c.id)),
          'jp-ArgusPanel-cellLink'
        )
      );
    });
    span.appendChild(el('span', '', ` of ${nb}`));
    return span;
  }

  /** Show a region's drill-down: summary per signal, instances, kernels, counters, facts, attributions. */
  showRegion(d: IRegionDetail, info?: IRegionInfo): void {
    clear(this._body);
    this.title.label = `Argus: ${d.path.split('/').pop() ?? d.path}`;
    const box = el('div', 'jp-ArgusPanel-drill');
    box.setAttribute('data-path', d.path);
    const head = el('h3', 'jp-ArgusPanel-detailTitle', 'region ');
    head.appendChild(pathNode(d.path));
    box.appendChild(head);
    if (info?.file) {
      const where = /^(cell |a cell)/.test(info.file)
        ? `${info.file}${info.line ? `, line ${info.line}` : ''}`
        : `${info.file}:${info.line ?? '?'}`;
      box.appendChild(el('div', 'jp-ArgusPanel-note jp-ArgusPanel-declared', `declared in ${where}`));
    }
    const part = (title: string, cols: IColumn[], rows: Row[], cls: string): void => {
      box.appendChild(el('h4', '', `${title} (${rows.length})`));
      const wrap = el('div', 'jp-ArgusPanel-tableWrap');
      wrap.appendChild(table(cols, rows, cls));
      box.appendChild(wrap);
    };
    const signals = Array.from(new Set(d.instances.flatMap(i => Object.keys((i.values as Row) || {})))).sort();
    const runIds = new Set([...d.summary, ...d.instances].map(r => String(r.run_id)));
    const runCol: IColumn[] = runIds.size > 1 ? [{ title: 'run', value: r => String(r.run_id), nowrap: true }] : [];
    const ranks = new Set(d.instances.map(r => String(r.rank ?? 0)));
    const rankCol: IColumn[] =
      ranks.size > 1 ? [{ title: 'rank', value: r => String(r.rank ?? 0), numeric: true }] : [];
    if (runIds.size === 1) {
      box.appendChild(el('div', 'jp-ArgusPanel-note', `from run ${Array.from(runIds)[0]}`));
    }
    box.appendChild(el('div', 'jp-ArgusPanel-note jp-ArgusPanel-warmup', warmupLine(d.instances)));
    const others = (d.groups ?? []).filter(g => !g.majority);
    for (const g of others) {
      box.appendChild(
        el('div', 'jp-ArgusPanel-note jp-ArgusPanel-groupNote', `other kernel sequence: ${String(g.note)}`)
      );
    }
    part(
      'Signals (measured instances of the main group; warm-up apart)',
      [
        ...runCol,
        { title: 'signal', value: r => String(r.signal), nowrap: true },
        { title: 'combined as', value: r => String(r.combined ?? r.agg ?? 'sum'), nowrap: true },
        { title: 'n', value: r => String(r.n), numeric: true },
        { title: 'median', value: r => formatValue(r.median, r.unit), numeric: true },
        { title: 'p25..p75', value: r => `${formatValue(r.p25, r.unit)}..${formatValue(r.p75, r.unit)}`, nowrap: true },
        { title: 'attribution', value: r => String(r.attribution ?? '') }
      ],
      d.summary,
      'jp-ArgusPanel-summary'
    );
    part(
      'Instances',
      [
        ...runCol,
        ...rankCol,
        { title: 'id', value: r => String(r.instance_id), numeric: true },
        { title: 'index', value: r => String(r.instance_index), numeric: true },
        { title: 'rep', value: r => `${r.repetition}${r.warmup ? ' (warm-up)' : ''}`, nowrap: true },
        { title: 'thread', value: r => threadLabel(r), nowrap: true },
        { title: 'host time', value: r => formatNs(r.duration_ns), numeric: true },
        ...signals.map(s => ({
          title: s,
          value: (r: Row) => formatValue(((r.values as Row) || {})[s], s.startsWith('host.') ? 'ns' : ''),
          numeric: true
        })),
        { title: 'error', value: r => String(r.error ?? '') }
      ],
      d.instances,
      'jp-ArgusPanel-instances'
    );
    const kernelCols: IColumn[] = [
      { title: 'kernel', value: r => String(r.display_name ?? r.name) },
      { title: 'launches', value: r => String(r.launches), numeric: true },
      { title: 'total', value: r => formatNs(r.total_ns), numeric: true },
      { title: 'mean', value: r => formatNs(r.mean_ns), numeric: true },
      { title: 'registers', value: r => formatValue(r.registers, '') },
      { title: 'counters (ncu, by ordinal)', value: r => kernelCounters(r) }
    ];
    const mainKernels = d.kernels.filter(k => k.main_group !== false);
    const otherKernels = d.kernels.filter(k => k.main_group === false);
    part('Kernels (main group)', kernelCols, mainKernels, 'jp-ArgusPanel-kernels');
    if (otherKernels.length) {
      const launches = otherKernels.reduce((n, k) => n + Number(k.launches), 0);
      const more = el('details', 'jp-ArgusPanel-otherGroups');
      more.appendChild(
        el(
          'summary',
          '',
          `other kernel-sequence groups: ${launches} launch(es) of ${otherKernels.length} kernel(s), not in the ` +
            'statistics above (click to show)'
        )
      );
      more.appendChild(table(kernelCols, otherKernels, 'jp-ArgusPanel-kernels jp-ArgusPanel-otherKernels'));
      box.appendChild(more);
    }
    part(
      'Counters',
      [
        { title: 'signal', value: r => String(r.signal) },
        { title: 'combined as', value: r => String(r.combined ?? r.agg ?? 'sum'), nowrap: true },
        { title: 'n', value: r => String(r.n), numeric: true },
        { title: 'value', value: r => counterValue(r), numeric: true },
        { title: 'attribution', value: r => String(r.attribution ?? '') }
      ],
      d.counters,
      'jp-ArgusPanel-counters'
    );
    part(
      'Compiler facts',
      [
        { title: 'binary', value: r => String(r.display_name ?? r.kernel_key) },
        { title: 'signal', value: r => String(r.signal) },
        { title: 'value', value: r => formatValue(r.value, r.unit), numeric: true }
      ],
      d.facts,
      'jp-ArgusPanel-facts'
    );
    part(
      'Attribution',
      [
        { title: 'class', value: r => String(r.class) },
        { title: 'evidence', value: r => String(r.evidence) },
        { title: 'n', value: r => String(r.n), numeric: true },
        { title: 'reason', value: r => String(r.reason ?? '') }
      ],
      d.attributions,
      'jp-ArgusPanel-attributions'
    );
    if (d.truncated) {
      box.appendChild(el('div', 'jp-ArgusPanel-note', 'only the first 500 instances are shown'));
    }
    this._body.appendChild(box);
  }
}

/** `n measured + w warm-up instances, warm-up not in the statistics`: the same words as the report's. */
export function warmupLine(instances: Row[]): string {
  const warm = instances.filter(i => i.warmup).length;
  const measured = instances.length - warm;
  return `${measured} measured + ${warm} warm-up instance(s), warm-up not in the statistics`;
}

/** A counter row's value: the median over instances, or for a per-kernel fact its range over the kernels. */
export function counterValue(r: Row): string {
  const range = r.kernel_range as number[] | null | undefined;
  if (range && range.length === 2) {
    const [lo, hi] = range;
    return lo === hi
      ? `${formatValue(hi, r.unit)} per kernel`
      : `${formatValue(lo, '')}..${formatValue(hi, r.unit)} per kernel`;
  }
  return formatValue(r.median, r.unit);
}

/** A kernel's ncu counters (`dram__bytes_read.sum=1.0 KiB, ...`), joined to it by ordinal. */
export function kernelCounters(r: Row): string {
  const counters = (r.counters as Record<string, [number, string]> | undefined) ?? {};
  return Object.entries(counters)
    .map(([signal, [value, unit]]) => `${signal.replace(/^hw:/, '')}=${formatValue(value, unit)}`)
    .join(', ');
}

/** The instance's thread as people know it: its name (`MainThread`), '-' when no name was recorded. */
export function threadLabel(r: Row): string {
  return r.thread_name ? String(r.thread_name) : '-';
}
