import { IRenderMime } from '@jupyterlab/rendermime-interfaces';
import extension, { MIME_TYPE, rendererFactory } from '../index';
import { drawReport } from '../report';
import bundle from './fixtures/report-bundle.json';

/** A MIME model holding `data` (any value, the renderer must cope with what is not a report). */
function model(data: unknown): IRenderMime.IMimeModel {
  const mimeData = { [MIME_TYPE]: data } as IRenderMime.IMimeModel['data'];
  return { data: mimeData, metadata: {}, trusted: false, setData: () => undefined };
}

/** The renderer options the tests need (only the MIME type is read). */
const OPTIONS = { mimeType: MIME_TYPE } as IRenderMime.IRendererOptions;

function clone<T>(x: T): T {
  return JSON.parse(JSON.stringify(x));
}

describe('the MIME renderer', () => {
  it('is a safe renderer of the argus report type', () => {
    expect(extension.id).toBe('argus-lab:report');
    expect(rendererFactory.safe).toBe(true);
    expect(rendererFactory.mimeTypes).toEqual(['application/vnd.argus.report+json']);
  });

  it('draws a recorded report bundle with the shared renderer', async () => {
    const r = rendererFactory.createRenderer(OPTIONS);
    await r.renderModel(model(bundle));
    const text = r.node.textContent ?? '';
    expect(text).toContain('nested step');
    expect(text).toContain('step/attn');
    expect(text).toContain('step/mlp');
    expect(r.node.querySelector('.argus-report')).not.toBeNull();
    expect(r.node.querySelectorAll('.argus-table').length).toBeGreaterThan(0);
  });

  it('prints large counts with an SI prefix and bytes scaled, never in e-notation (synthetic values)', async () => {
    const b = clone(bundle);
    Object.assign(b.regions[0], { median: 1.057e6, p25: 1.05e6, p75: 2.2e6, unit: 'count' });
    Object.assign(b.regions[1], { median: 1.057e6, p25: 1e6, p75: 1.1e6, unit: 'byte' });
    const r = rendererFactory.createRenderer(OPTIONS);
    await r.renderModel(model(b));
    const text = r.node.textContent ?? '';
    expect(text).toContain('1.06 M');
    expect(text).toContain('2.2 M');
    expect(text).toContain('1.06 MB');
    expect(text).not.toMatch(/\d\.\d+e\+\d/);
  });

  it('shows hostile region names as text (synthetic name injected into the recorded bundle)', async () => {
    const evil = '<img src=x onerror="window.__pwned=1">';
    const b = clone(bundle);
    b.regions[0].path = evil;
    b.title = `<script>window.__pwned=2</script>`;
    const r = rendererFactory.createRenderer(OPTIONS);
    await r.renderModel(model(b));
    expect(r.node.querySelector('img')).toBeNull();
    expect(r.node.querySelector('script')).toBeNull();
    expect(r.node.textContent).toContain(evil);
    expect((window as Window & { __pwned?: unknown }).__pwned).toBeUndefined();
  });

  it('says so when the output is not a report object', async () => {
    const r = rendererFactory.createRenderer(OPTIONS);
    await r.renderModel(model('not an object'));
    expect(r.node.textContent).toMatch(/cannot draw this report/);
  });

  it('opens a region drill-down through the shared renderer handle', async () => {
    const host = document.createElement('div');
    document.body.appendChild(host);
    const handle = await drawReport(host, bundle, null);
    handle.drill('step/attn');
    expect(host.textContent).toContain('step/attn');
    handle.destroy();
  });

  it('draws nested regions as a flame view whose boxes drill down', async () => {
    const host = document.createElement('div');
    document.body.appendChild(host);
    const handle = await drawReport(host, bundle, null);
    const tab = Array.from(host.querySelectorAll('.argus-tab')).find(t => t.textContent === 'Flame') as HTMLElement;
    tab.click();
    const boxes = Array.from(host.querySelectorAll('.argus-flame-box')) as HTMLElement[];
    expect(boxes.map(b => b.getAttribute('data-path')).sort()).toEqual(['step', 'step/attn', 'step/mlp']);
    const byPath = (p: string): HTMLElement => boxes.find(b => b.getAttribute('data-path') === p) as HTMLElement;
    // children sit below their parent, inside its width; the parent's darker part is its exclusive time
    expect(byPath('step/attn').style.top).toBe('24px');
    expect(parseFloat(byPath('step/attn').style.width.replace('calc(', ''))).toBeLessThan(
      parseFloat(byPath('step').style.width.replace('calc(', ''))
    );
    expect(byPath('step').querySelector('.argus-flame-self')).not.toBeNull();
    expect(byPath('step').title).toMatch(/inclusive .* \(100% of all\)\nexclusive /);
    byPath('step/mlp').click();
    expect(host.querySelector('.argus-drill-title')?.textContent).toBe('region step/mlp');
    handle.destroy();
  });
});
