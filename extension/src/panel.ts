/**
 * The Argus side panel: stores, sessions, runs (status, provenance, plan) and regions of an evidence store,
 * a region's drill-down, and plan-and-run of `%%argus_region` cells in the open notebook's kernel.
 */
import { Widget } from '@lumino/widgets';

import {
  IArgusClient,
  IRegionDetail,
  IRegionInfo,
  IRunDetail,
  IRunInfo,
  ISessionInfo,
  ISignalInfo,
  IStores,
  Row
} from './api';
import { clear, el, IColumn, section, table } from './dom';
import { composeScope, formatDict, formatNs, formatShare, formatTime, formatValue, IRegionCell } from './model';
import { ReportWidget } from './report';

/** What the panel needs from the open notebook (given by the plugin; faked in tests). */
export interface INotebookHooks {
  /** The name of the notebook. */
  name: string;
  /** The `%%argus_region` cells of the notebook, in order. */
  regionCells(): IRegionCell[];
  /** Run `code` in the notebook's kernel; `onOutput` gets text and MIME bundles as they come. */
  execute(code: string, onOutput: (output: IKernelOutput) => void): Promise<{ status: string; error?: string }>;
  /** Interrupt the kernel (stops the measurement; the runs already finished stay in the store). */
  interrupt(): Promise<void>;
}

export interface IKernelOutput {
  text?: string;
  data?: Record<string, unknown>;
}

export const REPORT_MIME = 'application/vnd.argus.report+json';
const DEFAULT_SIGNALS = 'host.wall,host.cpu';

export class ArgusPanel extends Widget {
  store = '';
  session = '';
  stores: IStores | null = null;
  regions: IRegionInfo[] = [];
  runs: IRunInfo[] = [];
  signalsCatalog: ISignalInfo[] = [];
  /** Called after every refresh of the regions (the plugin updates the cell badges). */
  onRegions: (regions: IRegionInfo[], store: string) => void = () => undefined;

  private _storeSelect = el('select', 'jp-ArgusPanel-store');
  private _sessionSelect = el('select', 'jp-ArgusPanel-session');
  private _status = el('div', 'jp-ArgusPanel-status');
  private _runs = section('Runs', 'jp-ArgusPanel-runs');
  private _regions = section('Regions', 'jp-ArgusPanel-regions');
  private _detail = section('Details', 'jp-ArgusPanel-detail');
  private _planner = section('Plan and run', 'jp-ArgusPanel-planner');
  private _pickList = el('div', 'jp-ArgusPanel-picks');
  private _signals = el('input', 'jp-ArgusPanel-signals');
  private _addSignal = el('select', 'jp-ArgusPanel-addSignal');
  private _scope = el('input', 'jp-ArgusPanel-scope');
  private _repeat = el('input', 'jp-ArgusPanel-repeat');
  private _warmup = el('input', 'jp-ArgusPanel-warmup');
  private _preview = el('pre', 'jp-ArgusPanel-preview');
  private _progress = el('pre', 'jp-ArgusPanel-progress');
  private _runButton = el('button', 'jp-ArgusPanel-runButton jp-mod-styled jp-mod-accept', 'Run in kernel');
  private _stopButton = el('button', 'jp-ArgusPanel-stopButton jp-mod-styled jp-mod-warn', 'Stop');
  private _running: INotebookHooks | null = null;
  private _result = new ReportWidget();
  private _busy = false;

  constructor(
    private readonly client: IArgusClient,
    private readonly notebook: () => INotebookHooks | null
  ) {
    super();
    this.id = 'argus-lab-panel';
    this.addClass('jp-ArgusPanel');
    this.title.caption = 'Argus: evidence stores, runs, regions';
    this._build();
  }

  // -- layout -----------------------------------------------------------------------------------------------
  private _build(): void {
    const head = el('div', 'jp-ArgusPanel-head');
    head.appendChild(el('span', 'jp-ArgusPanel-title', 'Argus'));
    const refresh = el('button', 'jp-ArgusPanel-refresh jp-mod-styled', 'Refresh');
    refresh.addEventListener('click', () => void this.refresh());
    head.appendChild(refresh);
    this.node.appendChild(head);

    const pick = el('div', 'jp-ArgusPanel-pickers');
    pick.appendChild(el('label', '', 'Store '));
    pick.appendChild(this._storeSelect);
    pick.appendChild(el('label', '', ' Session '));
    pick.appendChild(this._sessionSelect);
    this._storeSelect.addEventListener('change', () => {
      this.store = this._storeSelect.value;
      this.session = '';
      void this.refresh();
    });
    this._sessionSelect.addEventListener('change', () => {
      this.session = this._sessionSelect.value;
      void this.refreshStore();
    });
    this.node.appendChild(pick);
    this.node.appendChild(this._status);
    this._buildPlanner();
    for (const s of [this._planner, this._runs, this._regions, this._detail]) {
      this.node.appendChild(s.root);
    }
  }

  private _buildPlanner(): void {
    const body = this._planner.body;
    body.appendChild(el('div', 'jp-ArgusPanel-note', 'Regions to measure'));
    body.appendChild(this._pickList);
    const form = el('div', 'jp-ArgusPanel-form');
    const field = (label: string, input: HTMLInputElement, value: string): void => {
      const row = el('label', 'jp-ArgusPanel-field');
      row.appendChild(el('span', '', label));
      input.value = value;
      row.appendChild(input);
      form.appendChild(row);
    };
    this._signals.setAttribute('list', 'argus-lab-signal-list');
    field('Signals', this._signals, DEFAULT_SIGNALS);
    this._addSignal.addEventListener('change', () => {
      const name = this._addSignal.value;
      const have = this._signals.value
        .split(',')
        .map(x => x.trim())
        .filter(x => x);
      if (name && !have.includes(name)) {
        this._signals.value = [...have, name].join(',');
      }
      this._addSignal.value = '';
    });
    const adder = el('label', 'jp-ArgusPanel-field jp-ArgusPanel-wide');
    adder.appendChild(el('span', '', 'Add a signal'));
    adder.appendChild(this._addSignal);
    form.appendChild(adder);
    field('Scope', this._scope, '');
    this._scope.placeholder = 'e.g. step/*; instances=2:';
    this._repeat.type = 'number';
    this._repeat.min = '1';
    this._warmup.type = 'number';
    this._warmup.min = '0';
    field('Repeat', this._repeat, '3');
    field('Warm-up', this._warmup, '1');
    body.appendChild(form);
    const buttons = el('div', 'jp-ArgusPanel-buttons');
    const preview = el('button', 'jp-ArgusPanel-previewButton jp-mod-styled', 'Preview plan');
    preview.addEventListener('click', () => void this.previewPlan());
    this._runButton.addEventListener('click', () => void this.runInKernel());
    buttons.appendChild(preview);
    buttons.appendChild(this._runButton);
    this._stopButton.disabled = true;
    this._stopButton.title = 'interrupt the kernel: the runs already finished stay in the store';
    this._stopButton.addEventListener('click', () => void this.stop());
    buttons.appendChild(this._stopButton);
    body.appendChild(buttons);
    body.appendChild(this._preview);
    body.appendChild(this._progress);
    this._result.addClass('jp-ArgusPanel-result');
    body.appendChild(this._result.node);
  }

  protected onAfterAttach(): void {
    if (!this.stores) {
      void this.refresh();
    }
  }

  // -- loading ----------------------------------------------------------------------------------------------
  private async _guard<T>(what: string, fn: () => Promise<T>): Promise<T | null> {
    try {
      return await fn();
    } catch (err) {
      this.setStatus(`${what}: ${(err as Error).message}`, true);
      return null;
    }
  }

  setStatus(text: string, error = false): void {
    this._status.textContent = text;
    this._status.classList.toggle('jp-ArgusPanel-error', error);
  }

  /** Reload the list of stores (and everything of the chosen one). */
  async refresh(): Promise<void> {
    const stores = await this._guard('listing stores', () => this.client.stores());
    if (!stores) {
      return;
    }
    this.stores = stores;
    if (!this.store || !stores.stores.some(s => s.path === this.store)) {
      this.store = stores.stores[0]?.path ?? '';
    }
    clear(this._storeSelect);
    if (!stores.stores.length) {
      const none = el('option', '', '(none yet)');
      none.value = '';
      this._storeSelect.appendChild(none);
    }
    for (const s of stores.stores) {
      const opt = el('option', '', s.path);
      opt.value = s.path;
      opt.selected = s.path === this.store;
      this._storeSelect.appendChild(opt);
    }
    if (!this.signalsCatalog.length) {
      const catalog = await this._guard('reading the signal catalog', () => this.client.signals());
      this.signalsCatalog = catalog ?? [];
      clear(this._addSignal);
      const first = el('option', '', 'choose from the catalog...');
      first.value = '';
      this._addSignal.appendChild(first);
      for (const s of this.signalsCatalog) {
        const opt = el('option', '', `${s.name} (${s.unit}${s.needs_gpu ? ', needs a GPU' : ''})`);
        opt.value = s.name;
        opt.title = s.description;
        this._addSignal.appendChild(opt);
      }
      const list = el('datalist');
      list.id = 'argus-lab-signal-list';
      for (const s of this.signalsCatalog) {
        const opt = el('option');
        opt.value = s.name;
        opt.label = `${s.unit}, ${s.backend}${s.needs_gpu ? ', needs a GPU' : ''}: ${s.description}`;
        list.appendChild(opt);
      }
      this.node.appendChild(list);
    }
    await this.refreshStore();
  }

  /** Reload sessions, runs and regions of the chosen store. */
  async refreshStore(): Promise<void> {
    if (!this.store) {
      this.setStatus('no evidence store under the Jupyter root yet: plan and run a measurement below');
      this.runs = [];
      this.regions = [];
      this._showRuns();
      this._showRegions();
      this.renderPicks();
      this.onRegions([], '');
      return;
    }
    const store = this.store;
    const [sessions, runs, regions] = await Promise.all([
      this._guard('reading sessions', () => this.client.sessions(store)),
      this._guard('reading runs', () => this.client.runs(store, this.session || undefined)),
      this._guard('reading regions', () => this.client.regions(store, this.session || undefined))
    ]);
    if (!sessions || !runs || !regions) {
      return;
    }
    this._showSessions(sessions);
    this.runs = runs;
    this.regions = regions;
    this._showRuns();
    this._showRegions();
    this.renderPicks();
    this.setStatus(`${store}: ${sessions.length} session(s), ${runs.length} run(s), ${regions.length} region(s)`);
    this.onRegions(regions, store);
  }

  private _showSessions(sessions: ISessionInfo[]): void {
    clear(this._sessionSelect);
    const all = el('option', '', 'all sessions');
    all.value = '';
    this._sessionSelect.appendChild(all);
    for (const s of sessions) {
      const opt = el('option', '', `${s.session_id} (${s.runs} run(s), ${s.user_name}@${s.host})`);
      opt.value = s.session_id;
      opt.selected = s.session_id === this.session;
      this._sessionSelect.appendChild(opt);
    }
  }

  private _showRuns(): void {
    clear(this._runs.body);
    const cols: IColumn[] = [
      { title: 'run', value: r => String(r.run_id), nowrap: true },
      { title: 'status', value: r => String(r.status) },
      { title: 'backends', value: r => ((r.backends as string[]) || []).join(', ') },
      { title: 'reps', value: r => `${r.reps_done}/${Number(r.repetitions) + Number(r.warmup)}`, numeric: true },
      { title: 'seconds', value: r => (typeof r.seconds === 'number' ? r.seconds.toFixed(2) : '-'), numeric: true },
      { title: 'started', value: r => formatTime(r.started_ns) }
    ];
    const t = table(
      cols,
      this.runs as unknown as Row[],
      'jp-ArgusPanel-runTable',
      row => void this.showRun(String(row.run_id))
    );
    t.querySelectorAll('tbody tr').forEach((tr, i) => {
      const run = this.runs[i];
      if (run) {
        tr.classList.add('jp-ArgusPanel-run', `jp-ArgusPanel-status-${run.status.replace(/[^a-z]/g, '')}`);
      }
    });
    this._runs.body.appendChild(t);
  }

  private _showRegions(): void {
    clear(this._regions.body);
    const cols: IColumn[] = [
      { title: 'region', value: r => String(r.path) },
      { title: 'instances', value: r => String(r.instances), numeric: true },
      { title: 'runs', value: r => String(r.runs), numeric: true },
      { title: 'share', value: r => formatShare(r.share as number | null), numeric: true },
      { title: 'mean', value: r => formatNs(r.mean), numeric: true }
    ];
    const t = table(
      cols,
      this.regions as unknown as Row[],
      'jp-ArgusPanel-regionTable',
      row => void this.showRegion(String(row.path))
    );
    t.querySelectorAll('tbody tr').forEach((tr, i) => {
      if (this.regions[i]) {
        tr.classList.add('jp-ArgusPanel-region');
        tr.setAttribute('data-path', this.regions[i].path);
      }
    });
    this._regions.body.appendChild(t);
  }

  // -- details ----------------------------------------------------------------------------------------------
  /** Show one run: status, cause, provenance, and the plan it belonged to. */
  async showRun(runId: string): Promise<IRunDetail | null> {
    const store = this.store;
    const d = await this._guard(`reading run ${runId}`, () => this.client.run(store, runId));
    if (!d) {
      return null;
    }
    const body = this._detail.body;
    clear(body);
    const box = el('div', 'jp-ArgusPanel-runDetail');
    box.appendChild(el('h4', 'jp-ArgusPanel-detailTitle', `run ${d.run.run_id}: ${d.run.status}`));
    if (this.client.exportRun) {
      const exportButton = el('button', 'jp-ArgusPanel-exportButton jp-mod-styled', 'Export trace (Perfetto)');
      exportButton.title = 'Download this run as a Chrome-trace JSON file that ui.perfetto.dev opens';
      exportButton.addEventListener('click', () => void this.exportRun(d.run.run_id));
      box.appendChild(exportButton);
    }
    if (d.run.cause) {
      box.appendChild(el('pre', 'jp-ArgusPanel-cause', d.run.cause));
    }
    const facts: Row[] = [
      { k: 'signals', v: (d.run.signals || []).join(', ') },
      { k: 'backends', v: (d.run.backends || []).join(', ') },
      { k: 'why a separate run', v: d.run.reason },
      { k: 'request', v: d.request?.text ?? '' },
      { k: 'workload', v: d.run.workload },
      { k: 'command', v: d.run.command },
      { k: 'host', v: `${d.run.host} (pid ${d.run.pid})` },
      {
        k: 'versions',
        v: Object.entries(d.run.versions || {})
          .map(([a, b]) => `${a} ${b}`)
          .join(', ')
      },
      { k: 'settings', v: formatDict(d.run.settings) || '(defaults)' }
    ];
    box.appendChild(
      table(
        [
          { title: 'what', value: r => String(r.k), nowrap: true },
          { title: 'value', value: r => String(r.v ?? '') }
        ],
        facts,
        'jp-ArgusPanel-runFacts'
      )
    );
    box.appendChild(el('h4', '', 'Provenance'));
    box.appendChild(
      table(
        [
          { title: 'backend', value: r => String(r.backend) },
          { title: 'version', value: r => String(r.backend_version ?? '') },
          { title: 'timestamps', value: r => String(r.timestamps ?? '') },
          { title: 'clocks', value: r => formatDict(r.clocks) },
          { title: 'settings', value: r => formatDict(r.settings) }
        ],
        d.provenance,
        'jp-ArgusPanel-provenance'
      )
    );
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
        row => void this.showRun(String(row.run_id))
      )
    );
    body.appendChild(box);
    this._detail.root.scrollIntoView?.({ block: 'nearest' });
    return d;
  }

  /** Download a run exported by the server (a Perfetto trace by default); the file's name, or null on failure. */
  async exportRun(runId: string, format = 'perfetto'): Promise<string | null> {
    const store = this.store;
    const client = this.client;
    if (!client.exportRun) {
      return null;
    }
    const file = await this._guard(`exporting run ${runId}`, () => client.exportRun!(store, runId, format));
    if (!file) {
      return null;
    }
    const url = URL.createObjectURL(file.blob);
    const link = document.createElement('a');
    link.href = url;
    link.download = file.name;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    this.setStatus(`exported run ${runId} as ${file.name}`);
    return file.name;
  }

  /** Show a region's drill-down: summary per signal, instances, kernels, counters, facts, attributions. */
  async showRegion(path: string, runId?: string): Promise<IRegionDetail | null> {
    if (!this.store) {
      this.setStatus('no store chosen', true);
      return null;
    }
    const store = this.store;
    const d = await this._guard(`reading region ${path}`, () => this.client.region(store, path, runId));
    if (!d) {
      return null;
    }
    const body = this._detail.body;
    clear(body);
    const box = el('div', 'jp-ArgusPanel-drill');
    box.setAttribute('data-path', d.path);
    box.appendChild(el('h4', 'jp-ArgusPanel-detailTitle', `region ${d.path}`));
    const part = (title: string, cols: IColumn[], rows: Row[], cls: string): void => {
      box.appendChild(el('h4', '', `${title} (${rows.length})`));
      box.appendChild(table(cols, rows, cls));
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
    part(
      'Signals (non-warm-up instances)',
      [
        ...runCol,
        { title: 'signal', value: r => String(r.signal), nowrap: true },
        { title: 'n', value: r => String(r.n), numeric: true },
        { title: 'median', value: r => formatValue(r.median, r.unit), numeric: true },
        { title: 'p25..p75', value: r => `${formatValue(r.p25, r.unit)}..${formatValue(r.p75, r.unit)}` },
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
    part(
      'Kernels',
      [
        { title: 'kernel', value: r => String(r.display_name ?? r.name) },
        { title: 'launches', value: r => String(r.launches), numeric: true },
        { title: 'total', value: r => formatNs(r.total_ns), numeric: true },
        { title: 'mean', value: r => formatNs(r.mean_ns), numeric: true },
        { title: 'registers', value: r => formatValue(r.registers, '') }
      ],
      d.kernels,
      'jp-ArgusPanel-kernels'
    );
    part(
      'Counters',
      [
        { title: 'signal', value: r => String(r.signal) },
        { title: 'n', value: r => String(r.n), numeric: true },
        { title: 'median', value: r => formatValue(r.median, r.unit), numeric: true },
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
    body.appendChild(box);
    this._detail.root.scrollIntoView?.({ block: 'nearest' });
    return d;
  }

  // -- plan and run -----------------------------------------------------------------------------------------
  /** List the regions that can be picked: the notebook's region cells, then the store's region paths. */
  renderPicks(): void {
    const nb = this.notebook();
    const checked = new Set(this.picked().all);
    clear(this._pickList);
    const cells = nb ? nb.regionCells() : [];
    const add = (kind: 'cell' | 'store', value: string, label: string): void => {
      const row = el('label', `jp-ArgusPanel-pick jp-ArgusPanel-pick-${kind}`);
      const box = el('input');
      box.type = 'checkbox';
      box.value = value;
      box.setAttribute('data-kind', kind);
      box.checked = checked.has(`${kind}:${value}`);
      row.appendChild(box);
      row.appendChild(el('span', '', label));
      this._pickList.appendChild(row);
    };
    for (const c of cells) {
      add('cell', c.name, `${c.name} (cell ${c.index + 1} of ${nb?.name ?? 'the notebook'})`);
    }
    const names = new Set(cells.map(c => c.name));
    for (const r of this.regions) {
      if (!names.has(r.path)) {
        add('store', r.path, `${r.path} (seen in the store)`);
      }
    }
    if (!cells.length && !this.regions.length) {
      this._pickList.appendChild(
        el('div', 'jp-ArgusPanel-note', 'no regions yet: mark a notebook cell with %%argus_region NAME')
      );
    }
  }

  /** The picked cell regions and store regions. */
  picked(): { cells: string[]; paths: string[]; all: string[] } {
    const cells: string[] = [];
    const paths: string[] = [];
    const all: string[] = [];
    this._pickList.querySelectorAll('input[type=checkbox]').forEach(node => {
      const box = node as HTMLInputElement;
      if (box.checked) {
        const kind = box.getAttribute('data-kind');
        (kind === 'cell' ? cells : paths).push(box.value);
        all.push(`${kind}:${box.value}`);
      }
    });
    return { cells, paths, all };
  }

  /** The request of the form (signals, scope built from picked store regions plus the scope field). */
  request(): { signals: string; scope: string; repeat: number; warmup: number } {
    return {
      signals: this._signals.value.trim() || DEFAULT_SIGNALS,
      scope: composeScope(this.picked().paths, this._scope.value),
      repeat: Math.max(1, parseInt(this._repeat.value, 10) || 1),
      warmup: Math.max(0, parseInt(this._warmup.value, 10) || 0)
    };
  }

  /** Ask the server for the plan of the form's request and show its explanation. */
  async previewPlan(): Promise<string | null> {
    const req = this.request();
    this._preview.classList.remove('jp-ArgusPanel-error');
    try {
      const p = await this.client.plan(req);
      this._preview.textContent = p.explain;
      return p.explain;
    } catch (err) {
      this._preview.textContent = (err as Error).message;
      this._preview.classList.add('jp-ArgusPanel-error');
      return null;
    }
  }

  /** The absolute path of the store the kernel should write (the chosen one, or argus.duckdb at the root). */
  storeForKernel(): { rel: string; abs: string } {
    const found = this.stores?.stores.find(s => s.path === this.store);
    if (found) {
      return { rel: found.path, abs: found.abs_path };
    }
    const root = (this.stores?.root_dir ?? '').replace(/\/+$/, '');
    return { rel: 'argus.duckdb', abs: root ? `${root}/argus.duckdb` : 'argus.duckdb' };
  }

  /** Plan, then measure the picked region cells in the notebook's kernel, following progress. */
  async runInKernel(): Promise<boolean> {
    if (this._busy) {
      return false;
    }
    const nb = this.notebook();
    if (!nb) {
      this._progress.textContent = 'open a notebook with %%argus_region cells first';
      return false;
    }
    const all = nb.regionCells();
    const picked = this.picked();
    const cells = picked.cells.length ? all.filter(c => picked.cells.includes(c.name)) : all;
    const explain = await this.previewPlan();
    if (explain === null) {
      this._progress.textContent = 'the plan was refused (see above); fix the request and try again';
      return false;
    }
    const req = this.request();
    const target = this.storeForKernel();
    let code: string;
    try {
      const made = await this.client.measureCode({
        ...req,
        store: target.abs,
        title: `argus panel: ${cells.map(c => c.name).join(', ')}`,
        cells: cells.map(c => ({ name: c.name, body: c.body }))
      });
      code = made.code;
    } catch (err) {
      this._progress.textContent = (err as Error).message;
      return false;
    }
    this._busy = true;
    this._running = nb;
    this._runButton.disabled = true;
    this._stopButton.disabled = false;
    this._progress.classList.remove('jp-ArgusPanel-error');
    const log: string[] = [`running ${cells.map(c => c.name).join(', ')} in the kernel of ${nb.name}...`];
    const show = (): void => {
      this._progress.textContent = log.join('\n');
    };
    show();
    const seen = new Set(this.runs.map(r => r.run_id));
    let report: unknown = null;
    const poll = setInterval(() => void this._pollRuns(target.rel, seen, log, show), 1000);
    let outcome: { status: string; error?: string };
    try {
      outcome = await nb.execute(code, out => {
        if (out.data && out.data[REPORT_MIME]) {
          report = out.data[REPORT_MIME];
        } else if (out.text) {
          log.push(out.text.replace(/\n$/, ''));
          show();
        } else if (out.data && typeof out.data['text/plain'] === 'string') {
          log.push(out.data['text/plain'] as string);
          show();
        }
      });
    } catch (err) {
      outcome = { status: 'error', error: (err as Error).message };
    } finally {
      clearInterval(poll);
      this._busy = false;
      this._running = null;
      this._runButton.disabled = false;
      this._stopButton.disabled = true;
    }
    log.push(
      outcome.status === 'ok' ? 'done: the result is in the store' : `failed: ${outcome.error ?? outcome.status}`
    );
    show();
    this._progress.classList.toggle('jp-ArgusPanel-error', outcome.status !== 'ok');
    if (this.store !== target.rel) {
      this.store = target.rel;
    }
    await this.refresh();
    if (report) {
      await this._result.setReport(report);
    }
    return outcome.status === 'ok';
  }

  /** Interrupt the measurement that is running, if any. */
  async stop(): Promise<void> {
    if (this._running) {
      this._progress.textContent += '\ninterrupting the kernel...';
      await this._running.interrupt();
    }
  }

  private async _pollRuns(store: string, seen: Set<string>, log: string[], show: () => void): Promise<void> {
    let runs: IRunInfo[];
    try {
      runs = await this.client.runs(store);
    } catch {
      return; // the store may not exist until the first run is written
    }
    for (const r of runs.filter(x => !seen.has(x.run_id)).reverse()) {
      const line = `store: run ${r.plan_index} ${r.run_id} [${(r.backends || []).join(', ')}] ${r.status}`;
      if (!log.includes(line)) {
        log.push(line);
      }
      if (r.status !== 'running') {
        seen.add(r.run_id);
      }
    }
    show();
  }

  dispose(): void {
    this._result.dispose();
    super.dispose();
  }
}
