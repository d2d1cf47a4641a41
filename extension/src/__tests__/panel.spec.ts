import { IArgusClient, IMeasureCodeRequest, IPlanRequest, IRegionInfo, IRunInfo } from '../api';
import { BADGE_CLASS, updateBadges } from '../badges';
import { NARROW_ONLY, WIDE_ONLY } from '../dom';
import { regionCells, storeLabels } from '../model';
import { ArgusDetails } from '../details';
import { ArgusPanel, IKernelOutput, INotebookHooks, PROGRESS_MIME, REPORT_MIME, WARMUP_TITLE, WIDE_PX } from '../panel';
import bundle from './fixtures/report-bundle.json';

const run = (id: string, status: string, started: number): IRunInfo => ({
  run_id: id,
  session_id: 's-1',
  request_id: 'q-1',
  plan_id: 'p-1',
  plan_index: 0,
  backends: ['host'],
  signals: ['host.wall'],
  status,
  cause: status === 'failed' ? 'boom' : '',
  repetitions: 3,
  warmup: 1,
  reps_done: 4,
  started_ns: started,
  seconds: 0.5,
  reason: 'first run',
  request: 'signals=host.wall'
});

const region = (path: string, share: number | null): IRegionInfo => ({
  path,
  parent: path.includes('/') ? path.slice(0, path.lastIndexOf('/')) : null,
  parent_share: path.includes('/') ? 0.5 : null,
  p25: 1.9e6,
  p75: 2.2e6,
  name: path.split('/').pop() ?? path,
  kind: 'host',
  instances: 4,
  runs: 1,
  share,
  share_signal: 'host.wall',
  share_run: 'r-1',
  mean: 2e6
});

class FakeClient implements IArgusClient {
  calls: string[] = [];
  runList: IRunInfo[] = [run('r-1', 'ok', 1.7e18)];
  plans: IPlanRequest[] = [];
  measures: IMeasureCodeRequest[] = [];
  origin: unknown = null;
  async stores(notebook?: string) {
    this.calls.push(`stores ${notebook ?? ''}`);
    return {
      root_dir: '/root',
      stores: [{ path: 'work/argus.duckdb', abs_path: '/root/work/argus.duckdb', size: 1, mtime_ns: 1 }],
      probe: 'kernel_store()',
      ...(notebook
        ? { notebook_store: { abs_path: '/root/nb/argus.duckdb', path: 'nb/argus.duckdb', exists: false } }
        : {})
    };
  }
  async sessions(store: string) {
    this.calls.push(`sessions ${store}`);
    return [{ session_id: 's-1', created_ns: 1, host: 'h', user_name: 'u', label: '', runs: 1 }];
  }
  async runs(store: string, session?: string) {
    this.calls.push(`runs ${store} ${session ?? ''}`);
    return this.runList;
  }
  async run(store: string, runId: string) {
    this.calls.push(`run ${runId}`);
    return {
      run: {
        ...run(runId, 'ok', 1),
        settings: { host: { cpu_clock: 'thread', buffer: { mb: 64 } } },
        workload: this.origin ? 'cell [5] of quickstart.ipynb' : 'callable',
        command: 'in-process',
        env: {},
        versions: { argus_lab: '0.1.0' },
        host: 'h',
        pid: 7,
        origin: this.origin as never
      },
      provenance: [
        {
          backend: 'host',
          backend_version: 'time.time_ns',
          timestamps: 'measured',
          clocks: { host_clock: 'CLOCK_REALTIME' },
          settings: '{"level_units": {"W": "W"}, "runs_joined": ["r-1"]}'
        }
      ],
      plan: { plan_id: 'p-1', text: 'plan: 1 run(s) for 1 signal(s)', spec: {} },
      request: { request_id: 'q-1', text: 'signals=host.wall', spec: {} },
      plan_runs: [{ run_id: runId, plan_index: 0, status: 'ok', backends: ['host'], reason: 'first run' }],
      artifacts: []
    };
  }
  async regions(store: string) {
    this.calls.push(`regions ${store}`);
    return [region('attn', 0.6), region('attn/<b>inner</b>', 0.2)];
  }
  async region(store: string, path: string, runId?: string) {
    this.calls.push(`region ${path} ${runId ?? ''}`);
    if (path === 'missing') {
      throw new Error('argus-lab/region: nothing of that name in the store; refresh the panel');
    }
    return {
      path,
      run_id: null,
      summary: [{ run_id: 'r-1', signal: 'host.wall', n: 3, median: 2.1e6, p25: 2e6, p75: 2.2e6, unit: 'ns' }],
      instances: [
        { run_id: 'r-1', instance_id: 2, instance_index: 0, repetition: 0, warmup: true, duration_ns: 3e6, values: {} },
        {
          run_id: 'r-1',
          instance_id: 5,
          instance_index: 1,
          repetition: 1,
          warmup: false,
          duration_ns: 2.1e6,
          values: { 'host.wall': 2.1e6 }
        }
      ],
      kernels: [{ name: 'gemm<float>', launches: 2, total_ns: 300, mean_ns: 150, registers: 64 }],
      counters: [],
      facts: [],
      attributions: [{ class: 'exact', evidence: 'instance', n: 2, reason: 'own id' }],
      truncated: false
    };
  }
  async signals() {
    return [
      {
        name: 'host.wall',
        unit: 'ns',
        backend: 'host',
        description: 'wall',
        needs_gpu: false,
        perturbation: 'light'
      },
      {
        name: 'gpu.time',
        unit: 'ns',
        backend: 'cupti',
        description: 'kernel time',
        needs_gpu: true,
        perturbation: 'light'
      }
    ];
  }
  async plan(req: IPlanRequest) {
    this.plans.push(req);
    if (req.signals === 'bogus') {
      throw new Error("argus-lab/plan: unknown signal 'bogus'");
    }
    return { explain: `plan: 1 run(s) for ${req.signals}`, plan: { runs: [] } };
  }
  // the server makes the %%argus line and the kernel code in Python (argus_lab.app.cell_code)
  async measureCode(req: IMeasureCodeRequest) {
    this.measures.push(req);
    if (req.cells.length === 0) {
      throw new Error(
        'argus-lab/measure-code: no %%argus_region cells to run: mark a cell with `%%argus_region NAME` first'
      );
    }
    return { line: `%%argus -s ${req.signals}`, code: `# measure ${req.cells.map(c => c.name).join(',')}` };
  }
}

function fakeNotebook(sources: string[], outputs: IKernelOutput[], status = 'ok', extra: Partial<INotebookHooks> = {}) {
  const executed: string[] = [];
  const hooks: INotebookHooks = {
    name: 'demo.ipynb',
    ...extra,
    regionCells: () =>
      regionCells(
        sources,
        sources.map((_, i) => `id-${i}`)
      ),
    execute: async (code, onOutput) => {
      executed.push(code);
      outputs.forEach(onOutput);
      return { status };
    },
    interrupt: async () => undefined
  };
  return { hooks, executed };
}

function rows(panel: ArgusPanel, cls: string): string[] {
  return Array.from(panel.node.querySelectorAll(`.${cls}`)).map(r => r.textContent ?? '');
}

describe('the Argus panel', () => {
  it('lists the store, its runs and regions (names as text)', async () => {
    const client = new FakeClient();
    const panel = new ArgusPanel(client, () => null);
    await panel.refresh();
    expect(panel.store).toBe('work/argus.duckdb');
    expect(rows(panel, 'jp-ArgusPanel-run')[0]).toContain('r-1');
    const regions = rows(panel, 'jp-ArgusPanel-region');
    expect(regions).toHaveLength(2);
    expect(regions[0]).toContain('60%');
    expect(regions[1]).toContain('attn/<b>inner</b>');
    expect(panel.node.querySelector('b')).toBeNull();
    expect(panel.node.querySelector('.jp-ArgusPanel-status')?.textContent).toContain('1 run(s), 2 region(s)');
  });

  it('opens a region drill-down when a region row is clicked', async () => {
    const client = new FakeClient();
    const panel = new ArgusPanel(client, () => null);
    await panel.refresh();
    (panel.node.querySelector('.jp-ArgusPanel-region') as HTMLElement).click();
    await new Promise(r => setTimeout(r, 0));
    expect(client.calls).toContain('region attn ');
    const drill = panel.node.querySelector('.jp-ArgusPanel-drill');
    expect(drill?.getAttribute('data-path')).toBe('attn');
    expect(drill?.textContent).toContain('gemm<float>');
    expect(drill?.textContent).toContain('(warm-up)');
    expect(drill?.textContent).toContain('2.1 ms');
    expect(drill?.textContent).toContain('exact');
  });

  it('shows a run with its provenance and plan', async () => {
    const client = new FakeClient();
    const panel = new ArgusPanel(client, () => null);
    await panel.refresh();
    (panel.node.querySelector('.jp-ArgusPanel-run') as HTMLElement).click();
    await new Promise(r => setTimeout(r, 0));
    const text = panel.node.querySelector('.jp-ArgusPanel-runDetail')?.textContent ?? '';
    expect(text).toContain('run r-1: ok');
    expect(text).toContain('CLOCK_REALTIME');
    expect(text).toContain('plan: 1 run(s)');
  });

  it('reports a failed look-up in its status line', async () => {
    const panel = new ArgusPanel(new FakeClient(), () => null);
    await panel.refresh();
    expect(await panel.showRegion('missing')).toBeNull();
    const status = panel.node.querySelector('.jp-ArgusPanel-status');
    expect(status?.textContent).toContain('refresh the panel');
    expect(status?.classList.contains('jp-ArgusPanel-error')).toBe(true);
  });

  it('offers notebook region cells and store regions, and previews the plan', async () => {
    const client = new FakeClient();
    const nb = fakeNotebook(['%%argus_region attn\nx = 1', 'y = 2', '%%argus_region mlp\nz = 3'], []);
    const panel = new ArgusPanel(client, () => nb.hooks);
    await panel.refresh();
    const picks = rows(panel, 'jp-ArgusPanel-pick');
    expect(picks).toEqual([
      'attn (cell 1 of demo.ipynb)',
      'mlp (cell 3 of demo.ipynb)',
      'attn/<b>inner</b> (seen in the store)'
    ]);
    const store = panel.node.querySelector('.jp-ArgusPanel-pick-store input') as HTMLInputElement;
    store.checked = true;
    (panel.node.querySelector('.jp-ArgusPanel-scope') as HTMLInputElement).value = 'instances=1:';
    expect(await panel.previewPlan()).toBe('plan: 1 run(s) for host.wall,host.cpu');
    expect(client.plans[0]).toEqual({
      signals: 'host.wall,host.cpu',
      scope: 'attn/<b>inner</b>; instances=1:',
      repeat: 3,
      warmup: 1
    });
    (panel.node.querySelector('.jp-ArgusPanel-signals') as HTMLInputElement).value = 'bogus';
    expect(await panel.previewPlan()).toBeNull();
    expect(panel.node.querySelector('.jp-ArgusPanel-preview')?.textContent).toContain("unknown signal 'bogus'");
  });

  it('adds signals from the catalog to the request', async () => {
    const panel = new ArgusPanel(new FakeClient(), () => null);
    await panel.refresh();
    const select = panel.node.querySelector('.jp-ArgusPanel-addSignal') as HTMLSelectElement;
    expect(Array.from(select.options).map(o => o.textContent)).toContain('gpu.time (ns, needs a GPU)');
    select.value = 'gpu.time';
    select.dispatchEvent(new Event('change'));
    select.value = 'host.wall';
    select.dispatchEvent(new Event('change'));
    expect(panel.request().signals).toBe('host.wall,host.cpu,gpu.time');
  });

  it('runs the picked cells in the kernel, follows progress and shows the report', async () => {
    const client = new FakeClient();
    const nb = fakeNotebook(
      ['%%argus_region attn\nx = 1', '%%argus_region mlp\nz = 3'],
      [{ data: { 'text/plain': 'argus: run 1/1 [host] ok' } }, { data: { [REPORT_MIME]: bundle } }]
    );
    const panel = new ArgusPanel(client, () => nb.hooks);
    let badgeRegions: IRegionInfo[] = [];
    panel.onRegions = r => {
      badgeRegions = r;
    };
    await panel.refresh();
    (panel.node.querySelector('.jp-ArgusPanel-pick-cell input[value=mlp]') as HTMLInputElement).checked = true;
    client.runList = [run('r-2', 'ok', 1.8e18), ...client.runList];
    expect(await panel.runInKernel()).toBe(true);
    expect(client.measures).toHaveLength(1);
    expect(client.measures[0].cells).toEqual([{ name: 'mlp', body: 'z = 3', id: 'id-1', index: 1 }]);
    expect(client.measures[0].store).toBe('/root/work/argus.duckdb');
    expect(client.measures[0].signals).toBe('host.wall,host.cpu');
    expect(nb.executed).toEqual(['# measure mlp']); // exactly the code the server made
    const progress = panel.node.querySelector('.jp-ArgusPanel-progress')?.textContent ?? '';
    expect(progress).toContain('argus: run 1/1 [host] ok');
    expect(progress).toContain('done: the result is in the store');
    expect(rows(panel, 'jp-ArgusPanel-run')[0]).toContain('r-2');
    expect(panel.node.querySelector('.jp-ArgusPanel-result')?.textContent).toContain('nested step');
    expect(badgeRegions.map(r => r.path)).toEqual(['attn', 'attn/<b>inner</b>']);
  });

  it('says what failed when the kernel run fails', async () => {
    const nb = fakeNotebook(['%%argus_region attn\nx = 1'], [{ text: 'UsageError: no GPU' }], 'error');
    const panel = new ArgusPanel(new FakeClient(), () => nb.hooks);
    await panel.refresh();
    expect(await panel.runInKernel()).toBe(false);
    const progress = panel.node.querySelector('.jp-ArgusPanel-progress');
    expect(progress?.textContent).toContain('UsageError: no GPU');
    expect(progress?.classList.contains('jp-ArgusPanel-error')).toBe(true);
  });

  it('stops a running measurement by interrupting the kernel', async () => {
    let finish: (v: { status: string; error?: string }) => void = () => undefined;
    let interrupted = 0;
    const hooks: INotebookHooks = {
      name: 'demo.ipynb',
      regionCells: () => regionCells(['%%argus_region attn\nx = 1']),
      execute: (_code, onOutput) => {
        onOutput({ data: { 'text/plain': 'argus: run 1/2 [host] running...' } });
        return new Promise(resolve => {
          finish = resolve;
        });
      },
      interrupt: async () => {
        interrupted++;
        finish({ status: 'error', error: 'KeyboardInterrupt: ' });
      }
    };
    const panel = new ArgusPanel(new FakeClient(), () => hooks);
    await panel.refresh();
    const stop = panel.node.querySelector('.jp-ArgusPanel-stopButton') as HTMLButtonElement;
    const runButton = panel.node.querySelector('.jp-ArgusPanel-runButton') as HTMLButtonElement;
    expect(stop.disabled).toBe(true);
    expect(stop.hidden).toBe(true); // the Stop button is shown only while something runs
    const running = panel.runInKernel();
    await new Promise(r => setTimeout(r, 0));
    expect(stop.disabled).toBe(false);
    expect(stop.hidden).toBe(false);
    expect(runButton.disabled).toBe(true);
    expect(runButton.title).toContain('a measurement is running');
    expect(await panel.runInKernel()).toBe(false); // one measurement at a time
    await panel.stop();
    expect(await running).toBe(false);
    expect(interrupted).toBe(1);
    expect(stop.disabled).toBe(true);
    expect(stop.hidden).toBe(true);
    expect(panel.node.querySelector('.jp-ArgusPanel-progress')?.textContent).toContain('failed: KeyboardInterrupt');
  });

  it('asks for a notebook or region cells before running', async () => {
    const panel = new ArgusPanel(new FakeClient(), () => null);
    expect(await panel.runInKernel()).toBe(false);
    expect(panel.node.querySelector('.jp-ArgusPanel-progress')?.textContent).toContain('open a notebook');
    const empty = fakeNotebook(['x = 1'], []);
    const panel2 = new ArgusPanel(new FakeClient(), () => empty.hooks);
    await panel2.refresh();
    expect(await panel2.runInKernel()).toBe(false);
    expect(empty.executed).toHaveLength(0);
    expect(panel2.node.querySelector('.jp-ArgusPanel-progress')?.textContent).toContain('%%argus_region NAME');
  });
});

describe('the Argus panel, as a newcomer reads it', () => {
  it('keeps the runs table to narrow columns and says the rest in the row tooltip', async () => {
    const panel = new ArgusPanel(new FakeClient(), () => null);
    await panel.refresh();
    const heads = (sel: string): string[] =>
      Array.from(panel.node.querySelectorAll(`.jp-ArgusPanel-runTable th${sel}`)).map(th => th.textContent ?? '');
    expect(heads(`:not(.${WIDE_ONLY})`)).toEqual(['run', 'status', 'time', 'started']);
    const row = panel.node.querySelector('.jp-ArgusPanel-run') as HTMLElement;
    expect(row.textContent).toContain('0.5 s');
    expect(row.title).toContain('host measuring host.wall; 4 of 4 repetitions done');
  });

  it('titles each run by what it measured, with its signals under the title', async () => {
    const client = new FakeClient();
    client.runList = [
      {
        ...run('r-db625749ef', 'ok', 1.7e18),
        title: 'cell [3] of quickstart.ipynb',
        signals: ['host.wall', 'host.cpu']
      },
      { ...run('r-2', 'ok', 1.6e18), title: 'examples/nested.py' }
    ];
    const panel = new ArgusPanel(client, () => null);
    await panel.refresh();
    const first = panel.node.querySelector('.jp-ArgusPanel-run') as HTMLElement;
    expect(first.querySelector('.jp-ArgusPanel-runName')?.textContent).toBe('cell [3] of quickstart.ipynb');
    expect(first.querySelector(`.jp-ArgusPanel-runSignals.${NARROW_ONLY}`)?.textContent).toBe('host.wall, host.cpu');
    expect(first.title).toContain('r-db625749ef'); // the id stays in the tooltip and in the wide layout's column
    expect(rows(panel, 'jp-ArgusPanel-runName')).toEqual(['cell [3] of quickstart.ipynb', 'examples/nested.py']);
  });

  it('shows more columns when the panel is widened', async () => {
    const panel = new ArgusPanel(new FakeClient(), () => null);
    await panel.refresh();
    expect(panel.layoutFor(300)).toBe(false);
    expect(panel.node.classList.contains('jp-mod-wide')).toBe(false);
    expect(panel.layoutFor(WIDE_PX + 100)).toBe(true);
    expect(panel.node.classList.contains('jp-mod-wide')).toBe(true);
    const wide = (table: string): string[] =>
      Array.from(panel.node.querySelectorAll(`.${table} th.${WIDE_ONLY}`)).map(th => th.textContent ?? '');
    expect(wide('jp-ArgusPanel-runTable')).toEqual(['signals', 'reps', 'backends', 'id']);
    expect(wide('jp-ArgusPanel-regionTable')).toEqual(['p25..p75', 'of parent', 'warm-up (apart)', 'runs', 'signal']);
    const inner = panel.node.querySelectorAll('.jp-ArgusPanel-region')[1] as HTMLElement;
    expect(inner.textContent).toContain('50% of attn');
  });

  it('shows warm-up instances apart beside n at the default width, named as the report names them', async () => {
    const client = new FakeClient();
    client.regions = async () => [{ ...region('attn', 0.6), warmup: 1 }, region('attn/<b>inner</b>', 0.2)];
    const panel = new ArgusPanel(client, () => null);
    await panel.refresh();
    expect(panel.layoutFor(300)).toBe(false);
    const [attn, inner] = Array.from(panel.node.querySelectorAll('.jp-ArgusPanel-region')) as HTMLElement[];
    const heads = Array.from(panel.node.querySelectorAll('.jp-ArgusPanel-regionTable th')).map(t => t.textContent);
    const n = heads.indexOf('n');
    expect(attn.querySelectorAll('td')[n].textContent).toBe('4 (+1 warm-up)');
    const warm = attn.querySelector(`.jp-ArgusPanel-warm.${NARROW_ONLY}`) as HTMLElement;
    expect(warm.title).toContain('kept apart');
    expect(warm.title).toContain(`"${WARMUP_TITLE}"`);
    expect(inner.querySelectorAll('td')[n].textContent).toBe('4'); // no warm-up: nothing beside n
    expect(WARMUP_TITLE).toBe('warm-up (apart)'); // the report's and the text tables' column
    expect(attn.querySelectorAll('td')[heads.indexOf(WARMUP_TITLE)].textContent).toBe('1'); // the wide column
  });

  it('names stores in the picker by their file name, folders only where two share it', async () => {
    expect(
      Array.from(storeLabels(['argus.duckdb', 'notebooks/argus.duckdb', 'a/deep/folder/other.duckdb']).values())
    ).toEqual(['argus.duckdb', 'notebooks/argus.duckdb', 'other.duckdb']);
    const nb = fakeNotebook(['x = 1'], [], 'ok', {
      path: 'nb/quick_start_notebook.ipynb',
      evaluate: async () => ({ store: '/root/work/argus.duckdb', source: 'default' })
    });
    const panel = new ArgusPanel(new FakeClient(), () => nb.hooks);
    await panel.refresh();
    const select = panel.node.querySelector('.jp-ArgusPanel-store') as HTMLSelectElement;
    expect(select.selectedOptions[0].textContent).toBe('argus.duckdb (kernel)');
    expect(select.selectedOptions[0].title).toContain('work/argus.duckdb: the store the kernel of');
    expect(select.title).toContain('work/argus.duckdb');
  });

  it('breaks region paths only after a slash, never inside a name', async () => {
    const panel = new ArgusPanel(new FakeClient(), () => null);
    await panel.refresh();
    const cell = panel.node.querySelectorAll('.jp-ArgusPanel-region')[1].querySelector('td') as HTMLElement;
    const segs = Array.from(cell.querySelectorAll('.jp-ArgusPanel-seg')).map(x => x.textContent);
    expect(segs).toEqual(['attn/', '<b>inner</', 'b>']); // every '/' separates path levels
    expect(cell.querySelectorAll('wbr')).toHaveLength(2);
    expect(cell.textContent).toBe('attn/<b>inner</b>');
  });

  it('shows settings and provenance as key/value lists, not JSON', async () => {
    const panel = new ArgusPanel(new FakeClient(), () => null);
    await panel.refresh();
    await panel.showRun('r-1');
    const detail = panel.node.querySelector('.jp-ArgusPanel-runDetail') as HTMLElement;
    const keys = Array.from(detail.querySelectorAll('.jp-ArgusPanel-settings dt')).map(x => x.textContent);
    expect(keys).toEqual(['host.cpu_clock', 'host.buffer.mb']);
    const prov = Array.from(detail.querySelectorAll('.jp-ArgusPanel-provenance dt')).map(x => x.textContent);
    expect(prov).toEqual(['timestamps', 'clocks.host_clock', 'settings.level_units.W', 'settings.runs_joined']);
    expect(detail.querySelector('.jp-ArgusPanel-provenance')?.textContent).not.toContain('{');
  });

  it('links a run measured from a notebook cell back to that cell', async () => {
    const client = new FakeClient();
    client.origin = { notebook: 'notebooks/quickstart.ipynb', cells: [{ id: 'c-5', execution_count: 5 }] };
    const panel = new ArgusPanel(client, () => null);
    const opened: string[] = [];
    panel.openCell = (path, id) => opened.push(`${path}#${id}`);
    await panel.refresh();
    await panel.showRun('r-1');
    const link = panel.node.querySelector('.jp-ArgusPanel-cellLink') as HTMLButtonElement;
    expect(link.textContent).toBe('cell [5] of quickstart.ipynb');
    link.click();
    expect(opened).toEqual(['notebooks/quickstart.ipynb#c-5']);
  });

  it('opens details through the plugin hook (a main-area tab) when it is set', async () => {
    const panel = new ArgusPanel(new FakeClient(), () => null);
    const shown: ArgusDetails[] = [];
    panel.openDetails = d => shown.push(d);
    await panel.refresh();
    await panel.showRegion('attn');
    expect(shown).toHaveLength(1);
    expect(shown[0].title.label).toBe('Argus: attn');
    expect(shown[0].node.querySelector('.jp-ArgusPanel-drill')?.getAttribute('data-path')).toBe('attn');
    expect(panel.node.querySelector('.jp-ArgusPanel-drill')).toBeNull(); // not squeezed into the sidebar
  });

  it('says why the Run button is disabled', async () => {
    const none = new ArgusPanel(new FakeClient(), () => null);
    const button = none.node.querySelector('.jp-ArgusPanel-runButton') as HTMLButtonElement;
    expect(button.disabled).toBe(true);
    expect(button.title).toContain('open a notebook');
    const plain = fakeNotebook(['x = 1'], []);
    const panel = new ArgusPanel(new FakeClient(), () => plain.hooks);
    await panel.refresh();
    const b2 = panel.node.querySelector('.jp-ArgusPanel-runButton') as HTMLButtonElement;
    expect(b2.disabled).toBe(true);
    expect(b2.title).toContain('demo.ipynb has no %%argus_region cells');
    expect(panel.node.querySelector('.jp-ArgusPanel-runHint')?.textContent).toBe(b2.title);
    const marked = fakeNotebook(['%%argus_region a\nx = 1'], []);
    const panel3 = new ArgusPanel(new FakeClient(), () => marked.hooks);
    await panel3.refresh();
    expect((panel3.node.querySelector('.jp-ArgusPanel-runButton') as HTMLButtonElement).disabled).toBe(false);
  });

  it("shows a run's progress once per run, updated in place mid-run, and the cells' output once, apart", async () => {
    // the progress lines and fields as argus_lab.run.progress.Tick.to_json() writes them (a host run, 15 + 1 reps)
    const tick = (text: string, event: string, reps: number, left: number | null): IKernelOutput => ({
      data: {
        'text/plain': text,
        [PROGRESS_MIME]: {
          text,
          event,
          run: 0,
          runs: 1,
          backends: ['host'],
          reps_done: reps,
          reps_total: 16,
          left_s: left
        }
      }
    });
    let finish: (v: { status: string }) => void = () => undefined;
    let emit: (out: IKernelOutput) => void = () => undefined;
    const hooks: INotebookHooks = {
      name: 'demo.ipynb',
      regionCells: () => regionCells(['%%argus_region a\nprint("loss 0.25")']),
      execute: (_code, onOutput) => {
        emit = onOutput;
        return new Promise(resolve => {
          finish = resolve;
        });
      },
      interrupt: async () => undefined
    };
    const panel = new ArgusPanel(new FakeClient(), () => hooks);
    await panel.refresh();
    const running = panel.runInKernel();
    await new Promise(r => setTimeout(r, 0));
    const text = (): string[] => (panel.node.querySelector('.jp-ArgusPanel-progress')?.textContent ?? '').split('\n');
    emit(tick('argus: run 1/1 [host] starting - 0.0 s', 'start', 0, null));
    emit({ text: 'loss 0.25\n' });
    emit(tick('argus: run 1/1 [host] repetition 4/16 - 0.4 s, about 1.8 s left', 'repetition', 3, 1.83));
    emit({ text: 'loss 0.25\n' });
    // mid-run: one line for the run (its repetition and the time left), not a growing log
    expect(text()).toEqual([
      'running a in the kernel of demo.ipynb...',
      'argus: run 1/1 [host] repetition 4/16 - 0.4 s, about 1.8 s left'
    ]);
    emit(tick('argus: run 1/1 [host] repetition 9/16 - 1.0 s, about 1.1 s left', 'repetition', 8, 1.1));
    expect(text()[1]).toBe('argus: run 1/1 [host] repetition 9/16 - 1.0 s, about 1.1 s left');
    expect(text()).toHaveLength(2);
    emit(tick('argus: run 1/1 [host] ok after 2.3 s', 'end', 16, null));
    finish({ status: 'ok' });
    expect(await running).toBe(true);
    expect(text()).toEqual([
      'running a in the kernel of demo.ipynb...',
      'argus: run 1/1 [host] ok after 2.3 s',
      'done: the result is in the store'
    ]);
    const out = panel.node.querySelector('.jp-ArgusPanel-output') as HTMLDetailsElement;
    expect(out.hidden).toBe(false);
    expect(out.querySelector('pre')?.textContent).toBe('loss 0.25');
  });

  it("follows the store of the active notebook's kernel, also before it is written", async () => {
    const client = new FakeClient();
    const asked: string[] = [];
    const nb = fakeNotebook(['%%argus_region a\nx = 1'], [], 'ok', {
      path: 'sub/demo.ipynb',
      evaluate: async (expr: string) => {
        asked.push(expr);
        return { store: '/root/sub/k.duckdb', source: '%argus store' };
      }
    });
    const panel = new ArgusPanel(client, () => nb.hooks);
    await panel.refresh();
    expect(client.calls[0]).toBe('stores sub/demo.ipynb');
    expect(asked).toEqual(['kernel_store()']); // the expression the server gave, evaluated in the kernel
    expect(panel.store).toBe('sub/k.duckdb');
    const options = Array.from((panel.node.querySelector('.jp-ArgusPanel-store') as HTMLSelectElement).options);
    // short labels (the picker is narrow), the full path and what it is in each option's tooltip
    expect(options.map(o => o.textContent)).toEqual(['k.duckdb (kernel, new)', 'argus.duckdb']);
    expect(options.map(o => o.title)).toEqual([
      'sub/k.duckdb: the store the kernel of demo.ipynb writes (not written yet)',
      'work/argus.duckdb'
    ]);
    expect(panel.node.querySelector('.jp-ArgusPanel-kernelStore')?.textContent).toContain('set by %argus store');
    expect(panel.node.querySelector('.jp-ArgusPanel-status')?.textContent).toContain(
      'nothing measured in sub/k.duckdb'
    );
    expect(await panel.runInKernel()).toBe(true);
    expect(client.measures[0].store).toBe('/root/sub/k.duckdb'); // "Run in kernel" writes the same store
    expect(client.measures[0].notebook).toBe('sub/demo.ipynb');
  });

  it('says so when the kernel writes a store outside the Jupyter root', async () => {
    const nb = fakeNotebook(['x = 1'], [], 'ok', {
      path: 'demo.ipynb',
      evaluate: async () => ({ store: '/elsewhere/argus.duckdb', source: 'ARGUS_STORE' })
    });
    const panel = new ArgusPanel(new FakeClient(), () => nb.hooks);
    await panel.refresh();
    const note = panel.node.querySelector('.jp-ArgusPanel-kernelStore') as HTMLElement;
    expect(note.textContent).toContain('outside the Jupyter root /root');
    expect(note.classList.contains('jp-ArgusPanel-error')).toBe(true);
    expect(panel.store).toBe('work/argus.duckdb');
  });

  it("uses the server's answer when the kernel cannot say (busy, or no argus_lab in it)", async () => {
    const nb = fakeNotebook(['x = 1'], [], 'ok', { path: 'nb/demo.ipynb', evaluate: async () => null });
    const panel = new ArgusPanel(new FakeClient(), () => nb.hooks);
    await panel.refresh();
    expect(panel.store).toBe('nb/argus.duckdb');
  });
});

describe('cell badges', () => {
  it('labels region cells with their share and opens the drill-down on click', () => {
    const cells = ['%%argus_region attn\nx', 'y = 1', '%%argus_region never_ran\nz'].map(source => ({
      node: document.createElement('div'),
      source
    }));
    const opened: string[] = [];
    const shown = updateBadges(
      cells,
      [
        {
          path: 'step/attn',
          share: 0.3,
          share_signal: 'host.wall',
          median: 2.51e6,
          parent: 'step',
          parent_share: 0.42
        },
        { path: 'step', share: 1, share_signal: 'host.wall', median: 6e6 }
      ],
      p => opened.push(p)
    );
    expect(shown).toBe(1);
    const badge = cells[0].node.querySelector(`.${BADGE_CLASS}`) as HTMLElement;
    // a nested region: its share of its parent, its time in the tooltip
    expect(badge.textContent).toBe('attn 42%');
    expect(badge.title).toContain("42% of its parent step's host.wall");
    expect(badge.title).toContain('median 2.51 ms');
    badge.click();
    expect(opened).toEqual(['step/attn']);
    expect(cells[1].node.querySelector(`.${BADGE_CLASS}`)).toBeNull();
    expect(cells[2].node.querySelector(`.${BADGE_CLASS}`)).toBeNull();
    // a later refresh without the region removes the badge; one badge per cell at most
    updateBadges(cells, [{ path: 'attn', share: 1, share_signal: 'host.wall', median: 2.51e6 }], () => undefined);
    expect(cells[0].node.querySelectorAll(`.${BADGE_CLASS}`)).toHaveLength(1);
    // a top-level region: its time, never an always-100% share of its own run
    expect(cells[0].node.querySelector(`.${BADGE_CLASS}`)?.textContent).toBe('attn 2.51 ms');
    expect((cells[0].node.querySelector(`.${BADGE_CLASS}`) as HTMLElement).title).toContain("100% of its run's");
    updateBadges(cells, [], () => undefined);
    expect(cells[0].node.querySelector(`.${BADGE_CLASS}`)).toBeNull();
  });
});
