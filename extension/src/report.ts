/**
 * The report widget: the shared renderer (argus_lab/static/report-renderer.js) mounted in a Lumino widget.
 *
 * plotly.js is loaded once per page through one dynamic import (a separate chunk of the labextension, no
 * CDN); until it has loaded, or if it cannot load, the renderer draws tables only.
 */
import { Widget } from '@lumino/widgets';
import { render, IRendered } from 'argus-static/report-renderer.js';

export const MIME_TYPE = 'application/vnd.argus.report+json';

let plotlyPromise: Promise<unknown> | null = null;

/** plotly.js, loaded once (null when it cannot be loaded). */
export function loadPlotly(): Promise<unknown> {
  if (!plotlyPromise) {
    plotlyPromise = import('plotly.js-dist-min').then(
      m => {
        const P = (m as { default?: unknown }).default ?? m;
        return P && typeof (P as { newPlot?: unknown }).newPlot === 'function' ? P : null;
      },
      () => null
    );
  }
  return plotlyPromise;
}

/** Draw `report` into `host` with the shared renderer; returns its handle (drill, destroy). */
export async function drawReport(
  host: HTMLElement,
  report: unknown,
  plotly: Promise<unknown> | null = loadPlotly()
): Promise<IRendered> {
  if (!report || typeof report !== 'object') {
    throw new Error('the argus report output is not a JSON object; re-run the cell that made it');
  }
  const Plotly = plotly ? await plotly : null;
  return render(host, report, Plotly ? { Plotly } : {});
}

/** A Lumino widget showing one report. */
export class ReportWidget extends Widget {
  private _handle: IRendered | null = null;

  constructor() {
    super();
    this.addClass('jp-ArgusReport');
  }

  async setReport(report: unknown, plotly: Promise<unknown> | null = loadPlotly()): Promise<void> {
    this._handle?.destroy();
    this._handle = null;
    try {
      this._handle = await drawReport(this.node, report, plotly);
    } catch (err) {
      this.node.textContent = '';
      const div = document.createElement('div');
      div.className = 'argus-warn';
      div.textContent = `argus: cannot draw this report: ${(err as Error).message}`;
      this.node.appendChild(div);
    }
  }

  /** Open the drill-down of a region path inside the report. */
  drill(path: string): void {
    this._handle?.drill(path);
  }

  dispose(): void {
    this._handle?.destroy();
    this._handle = null;
    super.dispose();
  }
}
