import { IArgusClient, IExportFile, IRunInfo } from '../api';
import { ArgusPanel } from '../panel';

const RUN: IRunInfo = {
  run_id: 'r-1',
  session_id: 's-1',
  request_id: 'q-1',
  plan_id: 'p-1',
  plan_index: 0,
  backends: ['cupti'],
  signals: ['gpu.time'],
  status: 'ok',
  cause: '',
  repetitions: 1,
  warmup: 0,
  reps_done: 1,
  started_ns: 1,
  seconds: 0.1,
  reason: 'imported from torch.profiler (Kineto): trace.json',
  request: 'import kineto trace.json'
};

/** A client with only what showing a run and exporting it need. */
class ExportClient implements IArgusClient {
  exports: string[] = [];
  fail = false;
  async stores() {
    return { root_dir: '/root', stores: [{ path: 'a.duckdb', abs_path: '/root/a.duckdb', size: 1, mtime_ns: 1 }] };
  }
  async sessions() {
    return [];
  }
  async runs() {
    return [RUN];
  }
  async run(store: string, runId: string) {
    return {
      run: { ...RUN, run_id: runId, settings: {}, workload: 'trace.json', command: 'argus-lab import', env: {} },
      provenance: [],
      plan: null,
      request: null,
      plan_runs: [],
      artifacts: []
    } as unknown as Awaited<ReturnType<IArgusClient['run']>>;
  }
  async regions() {
    return [];
  }
  async region(): Promise<never> {
    throw new Error('not used');
  }
  async signals() {
    return [];
  }
  async plan(): Promise<never> {
    throw new Error('not used');
  }
  async measureCode(): Promise<never> {
    throw new Error('not used');
  }
  async exportRun(store: string, runId: string, format = 'perfetto'): Promise<IExportFile> {
    this.exports.push(`${store} ${runId} ${format}`);
    if (this.fail) {
      throw new Error("argus-lab/export: no run 'r-1' in a.duckdb");
    }
    return { name: `argus-${runId}.json`, blob: new Blob(['{"traceEvents": []}'], { type: 'application/json' }) };
  }
}

describe('the export button of a run', () => {
  const created: string[] = [];
  let clicked: string[] = [];
  beforeEach(() => {
    clicked = [];
    (URL as unknown as { createObjectURL: (b: Blob) => string }).createObjectURL = () => {
      created.push('blob:1');
      return 'blob:1';
    };
    (URL as unknown as { revokeObjectURL: (u: string) => void }).revokeObjectURL = () => undefined;
    jest.spyOn(HTMLAnchorElement.prototype, 'click').mockImplementation(function (this: HTMLAnchorElement) {
      clicked.push(`${this.download} ${this.href}`);
    });
  });
  afterEach(() => jest.restoreAllMocks());

  it('downloads the run as a Perfetto trace from the server', async () => {
    const client = new ExportClient();
    const panel = new ArgusPanel(client, () => null);
    await panel.refresh();
    await panel.showRun('r-1');
    const button = panel.node.querySelector('.jp-ArgusPanel-runDetail .jp-ArgusPanel-exportButton') as HTMLElement;
    expect(button.textContent).toBe('Export trace (Perfetto)');
    button.click();
    await new Promise(r => setTimeout(r, 0));
    expect(client.exports).toEqual(['a.duckdb r-1 perfetto']);
    expect(clicked).toEqual(['argus-r-1.json blob:1']);
    expect(panel.node.querySelector('.jp-ArgusPanel-status')?.textContent).toBe('exported run r-1 as argus-r-1.json');
  });

  it("shows the server's message when the export fails", async () => {
    const client = new ExportClient();
    client.fail = true;
    const panel = new ArgusPanel(client, () => null);
    await panel.refresh();
    expect(await panel.exportRun('r-1')).toBeNull();
    const status = panel.node.querySelector('.jp-ArgusPanel-status');
    expect(status?.textContent).toContain("exporting run r-1: argus-lab/export: no run 'r-1' in a.duckdb");
    expect(status?.classList.contains('jp-ArgusPanel-error')).toBe(true);
    expect(clicked).toEqual([]);
  });

  it('has no export button when the client cannot export', async () => {
    const client = new ExportClient() as Partial<ExportClient>;
    delete (client as { exportRun?: unknown }).exportRun;
    Object.defineProperty(client, 'exportRun', { value: undefined });
    const panel = new ArgusPanel(client as IArgusClient, () => null);
    await panel.refresh();
    await panel.showRun('r-1');
    expect(panel.node.querySelector('.jp-ArgusPanel-exportButton')).toBeNull();
  });
});
