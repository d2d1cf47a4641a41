/**
 * The Argus side panel: the store the active notebook's kernel writes (followed as notebooks change), its runs
 * and regions, plan-and-run of `%%argus_region` cells in the notebook's kernel; a run or a region opens in the
 * details view (details.ts), a main-area tab.
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
import { ArgusDetails } from './details';
import { clear, el, IColumn, NARROW_ONLY, pathNode, section, table } from './dom';
import {
  composeScope,
  formatNs,
  formatSeconds,
  formatShare,
  formatTime,
  formatWhen,
  IRegionCell,
  isProgress,
  relativeTo,
  storeLabels
} from './model';
import { ReportWidget } from './report';

/** What the panel needs from the open notebook (given by the plugin; faked in tests). */
export interface INotebookHooks {
  /** The name of the notebook. */
  name: string;
  /** The notebook's path relative to the Jupyter root (stored with the runs it measures). */
  path?: string;
  /** The `%%argus_region` cells of the notebook, in order. */
  regionCells(): IRegionCell[];
  /** Run `code` in the notebook's kernel; `onOutput` gets text and MIME bundles as they come. */
  execute(code: string, onOutput: (output: IKernelOutput) => void): Promise<{ status: string; error?: string }>;
  /** Interrupt the kernel (stops the measurement; the runs already finished stay in the store). */
  interrupt(): Promise<void>;
  /** Evaluate `expression` silently in the kernel: its JSON value, or null when the kernel cannot answer now. */
  evaluate?(expression: string): Promise<unknown>;
}

export interface IKernelOutput {
  text?: string;
  data?: Record<string, unknown>;
  /** An error the kernel reported (`ename: evalue`): shown with the progress. */
  error?: string;
}

/** The store the active notebook's kernel writes, as the panel follows it. */
export interface IKernelStore {
  notebook: string;
  abs: string;
  /** Relative to the Jupyter root; null when outside it (the panel cannot read it then). */
  rel: string | null;
  /** How the kernel chose it: `%argus store`, `ARGUS_STORE`, `default` (argus.duckdb in its folder). */
  source: string;
  /** Whether the kernel itself said so (else the server's answer: the notebook's folder and $ARGUS_STORE). */
  asked?: boolean;
}

export const REPORT_MIME = 'application/vnd.argus.report+json';
export const PROGRESS_MIME = 'application/vnd.argus.progress+json';
const DEFAULT_SIGNALS = 'host.wall,host.cpu';
const PROBE_TIMEOUT_MS = 4000;
/** From this width on (px) the panel shows its wide layout: more columns in the run and region tables. */
export const WIDE_PX = 520;

/** A run's title: what it measured (the server's `title`), else its id. */
export function runTitle(run: IRunInfo): string {
  return run.title || run.run_id;
}

/** Text that wraps between words and else only after `_`, `/` or `-`, or before a `.`: a file name such as
 * `panel_walkthrough.ipynb` breaks as `panel_` / `walkthrough.ipynb`, never inside a word. */
function breakable(text: string): DocumentFragment {
  const frag = document.createDocumentFragment();
  for (const part of text.split(/(?<=[_/-])|(?=\.)/)) {
    if (frag.childNodes.length) {
      frag.appendChild(document.createElement('wbr'));
    }
    frag.appendChild(document.createTextNode(part));
  }
  return frag;
}

/** The report's and the text tables' name of the column of warm-up instances (kept apart from the statistics). */
export const WARMUP_TITLE = 'warm-up (apart)';

/** A region's warm-up instances as a narrow panel shows them beside n: ` (+1 warm-up)`, or '' without any. */
export function warmupText(warmup: unknown): string {
  const n = Number(warmup) || 0;
  return n > 0 ? ` (+${n} warm-up)` : '';
}

/** What a region's n cell says at the default width: `5 (+1 warm-up)` (a wide panel has a column for warm-up). */
function instancesText(r: Row): string {
  return `${r.instances}${warmupText(r.warmup)}`;
}

/** The n cell: the measured instances, and (narrow panel only) the warm-up instances kept apart beside them. */
function instancesNode(r: Row): Node {
  const cell = el('span', '', String(r.instances));
  const warm = warmupText(r.warmup);
  if (warm) {
    const part = el('span', `jp-ArgusPanel-warm ${NARROW_ONLY}`, warm);
    part.title =
      `${r.warmup} warm-up instance(s) ran before the ${r.instances} measured one(s) and are kept apart: not in ` +
      `the share, median or n (the report's "${WARMUP_TITLE}" column)`;
    cell.appendChild(part);
  }
  return cell;
}

/** Repetitions done of all (warm-up included), e.g. `4/4`. */
function repetitions(run: IRunInfo): string {
  return `${run.reps_done}/${Number(run.repetitions) + Number(run.warmup)}`;
}

/** The title of a run and, in a narrow panel, its signals under it (a wide panel has a column for them). */
function runTitleNode(run: IRunInfo): HTMLElement {
  const node = el('div', 'jp-ArgusPanel-runTitle');
  const name = el('div', 'jp-ArgusPanel-runName');
  const title = runTitle(run);
  const cell = /^(cells? .+?)( of .+)$/.exec(title); // `cell [3]` first, its notebook after it, muted
  name.appendChild(breakable(cell ? cell[1] : title));
  if (cell) {
    name.appendChild(el('span', 'jp-ArgusPanel-runWhere', '')).appendChild(breakable(cell[2]));
  }
  node.appendChild(name);
  node.appendChild(el('div', `jp-ArgusPanel-runSignals ${NARROW_ONLY}`, (run.signals || []).join(', ')));
  return node;
}

export class ArgusPanel extends Widget {
  store = '';
  session = '';
  stores: IStores | null = null;
  regions: IRegionInfo[] = [];
  runs: IRunInfo[] = [];
  signalsCatalog: ISignalInfo[] = [];
  /** The store of the active notebook's kernel (null without a notebook). */
  kernelStore: IKernelStore | null = null;
  /** Called after every refresh of the regions (the plugin updates the cell badges). */
  onRegions: (regions: IRegionInfo[], store: string) => void = () => undefined;
  /** Shows the details view (the plugin opens it as a main-area tab); null: in the panel's Details section. */
  openDetails: ((details: ArgusDetails) => void) | null = null;
  /** Reveals a notebook cell (set by the plugin); a run's workload links to its cells through it. */
  openCell: ((path: string, cellId: string) => void) | null = null;
  readonly details: ArgusDetails;

  private _storeSelect = el('select', 'jp-ArgusPanel-store');
  private _sessionSelect = el('select', 'jp-ArgusPanel-session');
  private _kernelNote = el('div', 'jp-ArgusPanel-kernelStore');
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
  private _output = el('details', 'jp-ArgusPanel-output');
  private _runButton = el('button', 'jp-ArgusPanel-runButton jp-mod-styled jp-mod-accept', 'Run in kernel');
  private _stopButton = el('button', 'jp-ArgusPanel-stopButton jp-mod-styled jp-mod-warn', 'Stop');
  private _runHint = el('div', 'jp-ArgusPanel-note jp-ArgusPanel-runHint');
  private _running: INotebookHooks | null = null;
  private _result = new ReportWidget();
  private _busy = false;
  /** The notebook whose kernel store the user overrode by picking another store ('' = follow the kernel). */
  private _pickedFor = '';
  private _resize: ResizeObserver | null = null;

  constructor(
    private readonly client: IArgusClient,
    private readonly notebook: () => INotebookHooks | null
  ) {
    super();
    this.id = 'argus-lab-panel';
    this.addClass('jp-ArgusPanel');
    this.title.caption = 'Argus: evidence stores, runs, regions';
    this.details = new ArgusDetails({
      openRun: runId => void this.showRun(runId),
      // a kernel names its notebook by its absolute path: the notebook is opened by its path under the root
      openCell: (path, cellId) => {
        const root = this.stores?.root_dir ?? '';
        const rel = path.startsWith('/') ? relativeTo(root, path) : path;
        if (rel === null) {
          this.setStatus(`${path} is outside the Jupyter root ${root}: open it from a server rooted above it`, true);
          return;
        }
        this.openCell?.(rel, cellId);
      },
      exportRun: this.client.exportRun ? runId => void this.exportRun(runId) : null
    });
    this._build();
  }

  // -- layout -----------------------------------------------------------------------------------------------
  private _build(): void {
    const head = el('div', 'jp-ArgusPanel-head');
    head.appendChild(el('span', 'jp-ArgusPanel-title', 'Argus'));
    const refresh = el('button', 'jp-ArgusPanel-refresh jp-mod-styled', 'Refresh');
    refresh.title = 'read the store again (the panel also refreshes after each cell you run)';
    refresh.addEventListener('click', () => void this.refresh());
    head.appendChild(refresh);
    this.node.appendChild(head);

    const pick = el('div', 'jp-ArgusPanel-pickers');
    const storeLabel = el('label', 'jp-ArgusPanel-pickerRow');
    storeLabel.appendChild(el('span', '', 'Store'));
    storeLabel.appendChild(this._storeSelect);
    const sessionLabel = el('label', 'jp-ArgusPanel-pickerRow');
    sessionLabel.appendChild(el('span', '', 'Session'));
    sessionLabel.appendChild(this._sessionSelect);
    pick.appendChild(storeLabel);
    pick.appendChild(sessionLabel);
    this._storeSelect.title = "the evidence store shown (it follows the store of the active notebook's kernel)";
    this._storeSelect.addEventListener('change', () => {
      this.store = this._storeSelect.value;
      this._storeSelect.title = this._storeSelect.selectedOptions[0]?.title ?? this.store;
      const nb = this.notebook();
      this._pickedFor = nb && this.store !== this.kernelStore?.rel ? (nb.path ?? nb.name) : '';
      this.session = '';
      void this.refreshStore();
    });
    this._sessionSelect.addEventListener('change', () => {
      this.session = this._sessionSelect.value;
      void this.refreshStore();
    });
    this.node.appendChild(pick);
    this.node.appendChild(this._kernelNote);
    this.node.appendChild(this._status);
    this._buildPlanner();
    this._detail.root.hidden = true;
    // what was measured first (runs, regions), then planning a new measurement
    for (const s of [this._runs, this._regions, this._planner, this._detail]) {
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
    preview.title = 'show how the request is split into runs, without running anything';
    preview.addEventListener('click', () => void this.previewPlan());
    this._runButton.addEventListener('click', () => void this.runInKernel());
    buttons.appendChild(preview);
    buttons.appendChild(this._runButton);
    this._stopButton.disabled = true;
    this._stopButton.hidden = true;
    this._stopButton.title = 'interrupt the kernel: the runs already finished stay in the store';
    this._stopButton.addEventListener('click', () => void this.stop());
    buttons.appendChild(this._stopButton);
    body.appendChild(buttons);
    body.appendChild(this._runHint);
    body.appendChild(this._preview);
    body.appendChild(this._progress);
    this._output.appendChild(el('summary', '', 'output of the measured cells'));
    this._output.appendChild(el('pre', 'jp-ArgusPanel-outputText'));
    this._output.hidden = true;
    body.appendChild(this._output);
    this._result.addClass('jp-ArgusPanel-result');
    body.appendChild(this._result.node);
    this.updateRunButton();
  }

  protected onAfterAttach(): void {
    if (!this.stores) {
      void this.refresh();
    }
    if (!this._resize && typeof ResizeObserver !== 'undefined') {
      this._resize = new ResizeObserver(entries => {
        for (const entry of entries) {
          this.layoutFor(entry.contentRect.width);
        }
      });
      this._resize.observe(this.node);
    }
  }

  protected onResize(msg: Widget.ResizeMessage): void {
    if (msg.width >= 0) {
      this.layoutFor(msg.width);
    }
  }

  /**
   * Show the wide layout (more columns: a run's signals, repetitions, backends and id; a region's quartiles,
   * share of its parent, warm-up, runs and signal) when the panel is at least WIDE_PX wide; true when wide.
   */
  layoutFor(width: number): boolean {
    const wide = width >= WIDE_PX;
    this.node.classList.toggle('jp-mod-wide', wide);
    return wide;
  }

  /** Enable the Run button only when it can run, and say why not in its tooltip and under it. */
  updateRunButton(): void {
    const nb = this.notebook();
    let why = '';
    if (this._busy) {
      why = 'a measurement is running in the kernel: wait for it, or press Stop';
    } else if (!nb) {
      why = 'open a notebook with %%argus_region cells: the panel runs them in its kernel';
    } else if (!nb.regionCells().length) {
      why = `${nb.name} has no %%argus_region cells: mark a cell with %%argus_region NAME first`;
    }
    this._runButton.disabled = why !== '';
    this._runButton.title =
      why || `plan, then run the picked region cells of ${nb?.name ?? 'the notebook'} in its kernel`;
    this._runHint.textContent = this._busy ? '' : why;
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

  /** The active notebook changed: follow its kernel's store again (a store picked by hand was for the old one). */
  notebookChanged(): void {
    const nb = this.notebook();
    if ((nb?.path ?? nb?.name ?? '') !== this._pickedFor) {
      this._pickedFor = '';
    }
    this.updateRunButton();
    void this.refresh();
  }

  /** Ask the active notebook's kernel which store it writes (else the server: its folder and $ARGUS_STORE). */
  async followKernel(stores: IStores): Promise<IKernelStore | null> {
    const nb = this.notebook();
    if (!nb) {
      this.kernelStore = null;
      return null;
    }
    let abs = '';
    let source = '';
    if (nb.evaluate && stores.probe) {
      const answer = await Promise.race([
        nb.evaluate(stores.probe).catch(() => null),
        new Promise<null>(resolve => setTimeout(() => resolve(null), PROBE_TIMEOUT_MS))
      ]);
      const v = answer as { store?: unknown; source?: unknown } | null;
      if (v && typeof v.store === 'string') {
        abs = v.store;
        source = typeof v.source === 'string' ? v.source : '';
      }
    }
    const before = this.kernelStore;
    if (!abs && before?.asked && before.notebook === nb.name) {
      return before; // the kernel is busy now (a long cell runs): keep what it said when it was idle
    }
    const asked = abs !== '';
    if (!abs && stores.notebook_store) {
      abs = stores.notebook_store.abs_path;
      source = stores.notebook_store.source ?? 'default';
    }
    if (!abs) {
      this.kernelStore = null;
      return null;
    }
    this.kernelStore = { notebook: nb.name, abs, rel: relativeTo(stores.root_dir, abs), source, asked };
    return this.kernelStore;
  }

  /** Reload the list of stores, follow the active notebook's kernel, and reload the chosen store. */
  async refresh(): Promise<void> {
    const nb = this.notebook();
    const stores = await this._guard('listing stores', () => this.client.stores(nb?.path));
    if (!stores) {
      return;
    }
    this.stores = stores;
    const kernel = await this.followKernel(stores);
    const known = (path: string): boolean => stores.stores.some(s => s.path === path);
    if (kernel?.rel && !this._pickedFor) {
      this.store = kernel.rel;
    } else if (!this.store || (!known(this.store) && this.store !== kernel?.rel)) {
      this.store = stores.stores[0]?.path ?? '';
    }
    this._showKernelNote(kernel, stores);
    clear(this._storeSelect);
    const options = stores.stores.map(s => s.path);
    if (kernel?.rel && !known(kernel.rel)) {
      options.unshift(kernel.rel);
    }
    if (!options.length) {
      const none = el('option', '', '(none yet)');
      none.value = '';
      this._storeSelect.appendChild(none);
    }
    const labels = storeLabels(options);
    for (const path of options) {
      const mine = path === kernel?.rel;
      const kernelMark = known(path) ? ' (kernel)' : ' (kernel, new)';
      const opt = el('option', '', `${labels.get(path) ?? path}${mine ? kernelMark : ''}`);
      opt.value = path;
      opt.title = mine
        ? `${path}: the store the kernel of ${kernel.notebook} writes${known(path) ? '' : ' (not written yet)'}`
        : path;
      opt.selected = path === this.store;
      this._storeSelect.appendChild(opt);
    }
    this._storeSelect.title =
      (this._storeSelect.selectedOptions[0]?.title ?? '') +
      " (the store shown; it follows the store of the active notebook's kernel)";
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

  private _showKernelNote(kernel: IKernelStore | null, stores: IStores): void {
    this._kernelNote.classList.remove('jp-ArgusPanel-error');
    if (!kernel) {
      this._kernelNote.textContent = '';
      return;
    }
    const how =
      kernel.source === '%argus store'
        ? 'set by %argus store'
        : kernel.source === 'ARGUS_STORE'
          ? 'from $ARGUS_STORE'
          : 'argus.duckdb in its folder';
    if (kernel.rel === null) {
      this._kernelNote.textContent =
        `The kernel of ${kernel.notebook} writes ${kernel.abs} (${how}), outside the Jupyter root ` +
        `${stores.root_dir}: the panel cannot read it. Start Jupyter in a folder that contains it ` +
        '(`make demo` does), or choose a store under the root with %argus store PATH.';
      this._kernelNote.classList.add('jp-ArgusPanel-error');
      return;
    }
    this._kernelNote.textContent = `Kernel of ${kernel.notebook}: ${kernel.rel} (${how})`;
  }

  /** Reload sessions, runs and regions of the chosen store. */
  async refreshStore(): Promise<void> {
    const exists = this.stores?.stores.some(s => s.path === this.store) ?? false;
    if (!this.store || !exists) {
      const k = this.kernelStore;
      this.setStatus(
        this.store && k?.rel === this.store
          ? `nothing measured in ${this.store} yet: run a %%argus cell, or plan and run below`
          : 'no evidence store under the Jupyter root yet: plan and run a measurement below'
      );
      this.runs = [];
      this.regions = [];
      clear(this._sessionSelect);
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
    const run = (r: Row): IRunInfo => r as unknown as IRunInfo;
    const cols: IColumn[] = [
      { title: 'run', value: r => runTitle(run(r)), node: r => runTitleNode(run(r)) },
      { title: 'status', value: r => String(r.status), nowrap: true },
      { title: 'time', value: r => formatSeconds(r.seconds), numeric: true },
      { title: 'started', value: r => formatWhen(r.started_ns), numeric: true },
      { title: 'signals', value: r => (run(r).signals || []).join(', '), wide: true },
      { title: 'reps', value: r => repetitions(run(r)), numeric: true, wide: true },
      { title: 'backends', value: r => (run(r).backends || []).join(', '), wide: true },
      { title: 'id', value: r => String(r.run_id), nowrap: true, wide: true }
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
        (tr as HTMLElement).title =
          `${run.run_id}: ${run.workload || runTitle(run)}; run ${run.plan_index + 1} of its plan: ` +
          `${(run.backends || []).join(', ')} measuring ` +
          `${(run.signals || []).join(', ')}; ${run.reps_done} of ${Number(run.repetitions) + Number(run.warmup)} ` +
          `repetitions done; started ${formatTime(run.started_ns)} UTC; click for its details`;
      }
    });
    this._runs.body.appendChild(t);
  }

  private _showRegions(): void {
    clear(this._regions.body);
    const cols: IColumn[] = [
      { title: 'region', value: r => String(r.path), node: r => pathNode(String(r.path)) },
      { title: 'share', value: r => formatShare(r.share as number | null), numeric: true },
      { title: 'median', value: r => formatNs((r.median ?? r.mean) as number | null), numeric: true },
      { title: 'n', value: r => instancesText(r), node: r => instancesNode(r), numeric: true },
      { title: 'p25..p75', value: r => `${formatNs(r.p25)}..${formatNs(r.p75)}`, numeric: true, wide: true },
      {
        title: 'of parent',
        value: r => (r.parent ? `${formatShare(r.parent_share as number | null)} of ${r.parent}` : 'top level'),
        wide: true
      },
      { title: WARMUP_TITLE, value: r => String(r.warmup ?? 0), numeric: true, wide: true },
      { title: 'runs', value: r => String(r.runs), numeric: true, wide: true },
      { title: 'signal', value: r => String(r.share_signal ?? '-'), nowrap: true, wide: true }
    ];
    const t = table(
      cols,
      this.regions as unknown as Row[],
      'jp-ArgusPanel-regionTable',
      row => void this.showRegion(String(row.path))
    );
    t.querySelectorAll('tbody tr').forEach((tr, i) => {
      const r = this.regions[i];
      if (r) {
        tr.classList.add('jp-ArgusPanel-region');
        tr.setAttribute('data-path', r.path);
        const where = r.file ? `declared in ${r.file}${r.line ? `, line ${r.line}` : ''}; ` : '';
        const warm = r.warmup ? ` (+${r.warmup} warm-up, apart)` : '';
        (tr as HTMLElement).title =
          `${where}${r.instances} measured instance(s)${warm} in its latest run ${r.share_run ?? ''}, whose ` +
          `${r.share_signal ?? 'time'} the share, median and n are; ${r.all_instances ?? r.instances} ` +
          `instance(s) in ${r.runs} run(s) of the store (never pooled); click for its drill-down`;
      }
    });
    this._regions.body.appendChild(t);
  }

  // -- details ----------------------------------------------------------------------------------------------
  /** Show one run (status, workload, provenance, plan) in the details view. */
  async showRun(runId: string): Promise<IRunDetail | null> {
    const store = this.store;
    const d = await this._guard(`reading run ${runId}`, () => this.client.run(store, runId));
    if (!d) {
      return null;
    }
    this.details.showRun(d);
    this._openDetails();
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

  /** Show a region's drill-down (summary per signal, instances, kernels, counters, facts) in the details view. */
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
    this.details.showRegion(
      d,
      this.regions.find(r => r.path === path)
    );
    this._openDetails();
    return d;
  }

  private _openDetails(): void {
    if (this.openDetails) {
      this.openDetails(this.details);
      return;
    }
    if (this.details.node.parentNode !== this._detail.body) {
      this._detail.body.appendChild(this.details.node);
    }
    this._detail.root.hidden = false;
    this._detail.root.scrollIntoView?.({ block: 'nearest' });
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
    this.updateRunButton();
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

  /** The store the kernel should write: the one shown (the kernel's own when the panel follows it). */
  storeForKernel(): { rel: string; abs: string } {
    const k = this.kernelStore;
    if (k?.rel !== null && k?.rel !== undefined && (this.store === k.rel || !this.store)) {
      return { rel: k.rel, abs: k.abs };
    }
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
        ...(nb.path ? { notebook: nb.path } : {}),
        cells: cells.map(c => ({
          name: c.name,
          body: c.body,
          ...(c.id ? { id: c.id, index: c.index } : {})
        }))
      });
      code = made.code;
    } catch (err) {
      this._progress.textContent = (err as Error).message;
      return false;
    }
    this._setRunning(nb);
    this._progress.classList.remove('jp-ArgusPanel-error');
    const log: string[] = [`running ${cells.map(c => c.name).join(', ')} in the kernel of ${nb.name}...`];
    const byRun = new Map<number, number>(); // run index -> its line in the log (updated in place)
    const output: string[] = [];
    const show = (): void => {
      this._progress.textContent = log.join('\n');
      const pre = this._output.querySelector('pre');
      if (pre) {
        pre.textContent = output.join('\n');
      }
      this._output.hidden = output.length === 0;
      const summary = this._output.querySelector('summary');
      if (summary) {
        summary.textContent = `output of the measured cells (${output.length} distinct line(s), once each)`;
      }
    };
    const progress = (line: string, run?: number): void => {
      if (run !== undefined && byRun.has(run)) {
        log[byRun.get(run) as number] = line;
      } else {
        if (run !== undefined) {
          byRun.set(run, log.length);
        }
        log.push(line);
      }
    };
    const cellText = (text: string): void => {
      for (const line of text.replace(/\n$/, '').split('\n')) {
        if (isProgress(line)) {
          progress(line);
        } else if (!output.includes(line)) {
          output.push(line); // the cells run once per repetition: each line of their output is kept once
        }
      }
    };
    show();
    let report: unknown = null;
    let outcome: { status: string; error?: string };
    try {
      outcome = await nb.execute(code, out => {
        const data = out.data ?? {};
        const mark = data[PROGRESS_MIME] as { text?: unknown; run?: unknown } | undefined;
        if (out.error) {
          progress(out.error);
        } else if (data[REPORT_MIME]) {
          report = data[REPORT_MIME];
        } else if (mark && typeof mark.text === 'string') {
          progress(mark.text, typeof mark.run === 'number' ? mark.run : undefined);
        } else if (out.text !== undefined) {
          cellText(out.text);
        } else if (typeof data['text/plain'] === 'string') {
          cellText(data['text/plain'] as string);
        }
        show();
      });
    } catch (err) {
      outcome = { status: 'error', error: (err as Error).message };
    } finally {
      this._setRunning(null);
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

  private _setRunning(nb: INotebookHooks | null): void {
    this._busy = nb !== null;
    this._running = nb;
    this._stopButton.disabled = nb === null;
    this._stopButton.hidden = nb === null;
    this.updateRunButton();
  }

  /** Interrupt the measurement that is running, if any. */
  async stop(): Promise<void> {
    if (this._running) {
      this._progress.textContent += '\ninterrupting the kernel...';
      await this._running.interrupt();
    }
  }

  dispose(): void {
    this._resize?.disconnect();
    this._result.dispose();
    super.dispose();
  }
}
