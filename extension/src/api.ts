/**
 * The REST client of the argus_lab server extension (`<base_url>/argus-lab/<endpoint>`), and the shapes of its
 * answers.  Requests go through ServerConnection, which adds the token and XSRF headers.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

export interface IStoreInfo {
  path: string;
  abs_path: string;
  size: number;
  mtime_ns: number;
}

/** The store a notebook's kernel writes unless told otherwise, as the server sees it. */
export interface INotebookStore {
  abs_path: string;
  /** Relative to the Jupyter root; null when the store is outside it. */
  path: string | null;
  exists: boolean;
  /** `ARGUS_STORE` (the server's environment, inherited by kernels) or `default`. */
  source?: string;
}

export interface IStores {
  root_dir: string;
  stores: IStoreInfo[];
  /** The expression that asks a kernel which store it writes (evaluated as a silent user expression). */
  probe?: string;
  /** With `?notebook=`: the store that notebook's kernel writes by default. */
  notebook_store?: INotebookStore;
}

/** Where a run's workload came from: the notebook and its cells (ids as in the notebook model). */
export interface IRunOrigin {
  notebook: string;
  cells: Array<{ id?: string; name?: string; index?: number | null; execution_count?: number | null }>;
}

export interface ISessionInfo {
  session_id: string;
  created_ns: number;
  host: string;
  user_name: string;
  label: string;
  runs: number;
}

export interface IRunInfo {
  run_id: string;
  session_id: string;
  request_id: string;
  plan_id: string;
  plan_index: number;
  backends: string[];
  signals: string[];
  status: string;
  cause: string | null;
  repetitions: number;
  warmup: number;
  reps_done: number;
  started_ns: number;
  seconds: number | null;
  reason: string;
  request: string | null;
  /** What the run measured as people name it: `cell [5] of quickstart.ipynb`, `examples/nested.py`, `step()`. */
  title?: string;
  /** The workload as stored (`python /abs/path.py`, `cell [5] of q.ipynb`, `module:function`). */
  workload?: string;
  origin?: IRunOrigin | null;
}

export interface IRunDetail {
  run: IRunInfo & {
    settings: unknown;
    workload: string;
    command: string;
    env: Record<string, string>;
    versions: Record<string, string>;
    host: string;
    pid: number;
    origin?: IRunOrigin | null;
  };
  provenance: Array<Record<string, unknown>>;
  plan: { plan_id: string; text: string; spec: unknown } | null;
  request: { request_id: string; text: string; spec: unknown } | null;
  plan_runs: Array<{ run_id: string; plan_index: number; status: string; backends: string[]; reason: string }>;
  artifacts: Array<Record<string, unknown>>;
}

export interface IRegionInfo {
  path: string;
  name: string | null;
  kind: string | null;
  file?: string | null;
  line?: number | null;
  /** measured instances of the latest run that timed the region (`share_run`) */
  instances: number;
  /** its warm-up instances, kept apart */
  warmup?: number;
  /** instances in every run of the store, warm-up included */
  all_instances?: number;
  runs: number;
  share: number | null;
  share_signal: string | null;
  share_run: string | null;
  /** median time of the measured instances of `share_run`, as the report of that run shows it */
  median?: number | null;
  /** quartiles of the same times */
  p25?: number | null;
  p75?: number | null;
  /** the enclosing path (null at the top level) and this region's summed time over the parent's, same run */
  parent?: string | null;
  parent_share?: number | null;
  mean: number | null;
}

export type Row = Record<string, unknown>;

export interface IRegionDetail {
  path: string;
  run_id: string | null;
  summary: Row[];
  instances: Row[];
  kernels: Row[];
  counters: Row[];
  facts: Row[];
  attributions: Row[];
  /** the path's instance groups where its instances ran different kernel sequences (main group first) */
  groups?: Row[];
  truncated: boolean;
}

export interface ISignalInfo {
  name: string;
  unit: string;
  backend: string;
  description: string;
  needs_gpu: boolean;
  perturbation: string;
}

export interface IPlanRequest {
  signals: string;
  scope: string;
  repeat: number;
  warmup: number;
}

export interface IPlanPreview {
  explain: string;
  plan: { runs: Array<{ index: number; backends: string[]; signals: string[]; reason: string }> };
}

/** A measurement of `%%argus_region` cells in the notebook's kernel, as the panel asks the server for it. */
export interface IMeasureCodeRequest extends IPlanRequest {
  store: string;
  title: string;
  /** The notebook's path relative to the Jupyter root (stored with the runs, so they link back to the cells). */
  notebook?: string;
  cells: Array<{ name: string; body: string; id?: string; index?: number }>;
}

/** The `%%argus` line of a request and the Python code that runs it in the kernel (made by the server, in Python). */
export interface IMeasureCode {
  line: string;
  code: string;
}

/** A file the server exported (`GET export`), ready to be saved by the browser. */
export interface IExportFile {
  name: string;
  blob: Blob;
}

/** What the panel needs from the server (an interface, so that tests can give a fake). */
export interface IArgusClient {
  stores(notebook?: string): Promise<IStores>;
  sessions(store: string): Promise<ISessionInfo[]>;
  runs(store: string, session?: string): Promise<IRunInfo[]>;
  run(store: string, runId: string): Promise<IRunDetail>;
  regions(store: string, session?: string): Promise<IRegionInfo[]>;
  region(store: string, path: string, runId?: string): Promise<IRegionDetail>;
  signals(): Promise<ISignalInfo[]>;
  plan(request: IPlanRequest): Promise<IPlanPreview>;
  measureCode(request: IMeasureCodeRequest): Promise<IMeasureCode>;
  /** A run exported as a file: `perfetto` (Chrome-trace JSON, the default), `html` or `parquet` (a zip). */
  exportRun?(store: string, runId: string, format?: string): Promise<IExportFile>;
}

/** An error answered by the server, with its message (which says how to fix the request). */
export class ArgusRequestError extends Error {
  constructor(
    message: string,
    public readonly status: number
  ) {
    super(message);
  }
}

/** Call `argus-lab/<endpoint>` with query `params`; the parsed JSON answer. */
export async function requestAPI<T>(
  endpoint: string,
  params: Record<string, string | undefined> = {},
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const query = Object.entries(params)
    .filter(([, v]) => v !== undefined && v !== '')
    .map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v as string)}`)
    .join('&');
  const url = URLExt.join(settings.baseUrl, 'argus-lab', endpoint) + (query ? `?${query}` : '');
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let data: unknown = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const reason = typeof data === 'object' && data !== null && 'message' in data ? data.message : undefined;
    const message = reason || `${response.status} ${response.statusText}`;
    throw new ArgusRequestError(`argus-lab/${endpoint}: ${message}`, response.status);
  }
  return data as T;
}

/** The client over the real server. */
export class ArgusClient implements IArgusClient {
  constructor(private readonly settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  private get<T>(endpoint: string, params: Record<string, string | undefined> = {}): Promise<T> {
    return requestAPI<T>(endpoint, params, {}, this.settings);
  }

  stores(notebook?: string): Promise<IStores> {
    return this.get('stores', { notebook });
  }
  sessions(store: string): Promise<ISessionInfo[]> {
    return this.get('sessions', { store });
  }
  runs(store: string, session?: string): Promise<IRunInfo[]> {
    return this.get('runs', { store, session });
  }
  run(store: string, runId: string): Promise<IRunDetail> {
    return this.get('run', { store, run: runId });
  }
  regions(store: string, session?: string): Promise<IRegionInfo[]> {
    return this.get('regions', { store, session });
  }
  region(store: string, path: string, runId?: string): Promise<IRegionDetail> {
    return this.get('region', { store, path, run: runId });
  }
  async signals(): Promise<ISignalInfo[]> {
    return (await this.get<{ signals: ISignalInfo[] }>('signals')).signals;
  }
  plan(request: IPlanRequest): Promise<IPlanPreview> {
    return requestAPI<IPlanPreview>('plan', {}, { method: 'POST', body: JSON.stringify(request) }, this.settings);
  }
  measureCode(request: IMeasureCodeRequest): Promise<IMeasureCode> {
    const init = { method: 'POST', body: JSON.stringify(request) };
    return requestAPI<IMeasureCode>('measure-code', {}, init, this.settings);
  }
  async exportRun(store: string, runId: string, format = 'perfetto'): Promise<IExportFile> {
    const query = [`store=${encodeURIComponent(store)}`, `run=${encodeURIComponent(runId)}`, `format=${format}`];
    const url = URLExt.join(this.settings.baseUrl, 'argus-lab', 'export') + `?${query.join('&')}`;
    const response = await ServerConnection.makeRequest(url, {}, this.settings);
    if (!response.ok) {
      let message = `${response.status} ${response.statusText}`;
      try {
        message = (JSON.parse(await response.text()) as { message?: string }).message || message;
      } catch {
        // not JSON: keep the status line
      }
      throw new ArgusRequestError(`argus-lab/export: ${message}`, response.status);
    }
    const disposition = response.headers.get('Content-Disposition') || '';
    const name = /filename="([^"]+)"/.exec(disposition)?.[1] || `argus-${runId}.json`;
    return { name, blob: await response.blob() };
  }
}
