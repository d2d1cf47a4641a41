import {
  composeScope,
  formatNs,
  formatShare,
  measureCode,
  measureLine,
  regionCells,
  regionName,
  sharesByName,
  shellQuote
} from '../model';

describe('region cells', () => {
  it('reads the region name of the first line', () => {
    expect(regionName('%%argus_region attn\nx = 1')).toBe('attn');
    expect(regionName('\n%%argus_region  decode step \nx')).toBe('decode step');
    expect(regionName('%%argus_region\nx')).toBeNull();
    expect(regionName('x = 1\n%%argus_region attn')).toBeNull();
    expect(regionName('%%argus -s host.wall\nx')).toBeNull();
    expect(regionName('%%argus_regions attn\nx')).toBeNull();
  });

  it('lists region cells with their bodies and indexes', () => {
    const cells = regionCells(['import time', '%%argus_region attn\ntime.sleep(0.01)\nx = 2', '%%argus_region mlp']);
    expect(cells).toEqual([
      { index: 1, name: 'attn', body: 'time.sleep(0.01)\nx = 2' },
      { index: 2, name: 'mlp', body: '' }
    ]);
  });
});

describe('kernel code', () => {
  it('quotes words like shlex.quote', () => {
    expect(shellQuote('host.wall,host.cpu')).toBe('host.wall,host.cpu');
    expect(shellQuote('step/*; instances=2:')).toBe("'step/*; instances=2:'");
    expect(shellQuote("it's")).toBe("'it'\"'\"'s'");
    expect(shellQuote('')).toBe("''");
  });

  it('builds the %%argus line', () => {
    const line = measureLine({ signals: 'host.wall', scope: 'a/*', repeat: 5, warmup: 0, store: '/r/x y.duckdb' });
    expect(line).toBe("-s host.wall --scope 'a/*' -n 5 -w 0 --store '/r/x y.duckdb'");
  });

  it('runs each region cell through %%argus_region inside one %%argus measurement', () => {
    const cells = regionCells(['%%argus_region attn\nprint("hi \\"there\\"")', '%%argus_region mlp\ny = 1']);
    const code = measureCode(cells, { signals: 'host.wall', scope: '', repeat: 3, warmup: 1, store: 's.duckdb' });
    const lines = code.split('\n');
    expect(lines[0]).toBe('import argus_lab.faces.magics as __argus_magics');
    const last = lines[lines.length - 1];
    expect(last.startsWith(`get_ipython().run_cell_magic('argus', "-s host.wall -n 3 -w 1 --store s.duckdb", `)).toBe(
      true
    );
    // the body is one Python string literal (JSON syntax) holding one %%argus_region call per cell
    const body = JSON.parse(last.slice(last.indexOf('", "') + 3, -1));
    expect(body.split('\n')).toEqual([
      `get_ipython().run_cell_magic('argus_region', "attn", ${JSON.stringify('print("hi \\"there\\"")')})`,
      `get_ipython().run_cell_magic('argus_region', "mlp", "y = 1")`
    ]);
  });

  it('refuses an empty selection with a hint', () => {
    expect(() => measureCode([], { signals: 'host.wall', scope: '', repeat: 1, warmup: 0, store: '' })).toThrow(
      /%%argus_region NAME/
    );
  });
});

describe('formatting and scopes', () => {
  it('composes scopes without duplicates', () => {
    expect(composeScope(['step/attn', 'step/mlp'], ' instances=1: ; step/attn')).toBe(
      'step/attn; step/mlp; instances=1:'
    );
    expect(composeScope([], '')).toBe('');
  });

  it('formats shares and durations', () => {
    expect(formatShare(0.423)).toBe('42%');
    expect(formatShare(0.004)).toBe('<1%');
    expect(formatShare(0)).toBe('0%');
    expect(formatShare(null)).toBe('-');
    expect(formatNs(2_097_950)).toBe('2.1 ms');
    expect(formatNs(950)).toBe('950 ns');
    expect(formatNs(undefined)).toBe('-');
  });

  it('picks the shortest path per region name for badges', () => {
    const m = sharesByName([
      { path: 'step/attn', share: 0.6, share_signal: 'host.wall' },
      { path: 'attn', share: 0.9, share_signal: 'gpu.time' },
      { path: 'step', share: 1, share_signal: 'host.wall' }
    ]);
    expect(m.get('attn')).toEqual({ path: 'attn', share: 0.9, signal: 'gpu.time' });
    expect(m.get('step')?.share).toBe(1);
  });
});
