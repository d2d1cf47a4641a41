import {
  composeScope,
  flatten,
  formatNs,
  formatSeconds,
  formatShare,
  formatValue,
  formatWhen,
  isProgress,
  regionCells,
  regionName,
  relativeTo,
  sharesByName
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
    expect(m.get('attn')).toMatchObject({ path: 'attn', share: 0.9, signal: 'gpu.time' });
    expect(m.get('step')?.share).toBe(1);
  });
});

describe('narrow-column and key/value formatting', () => {
  it('flattens nested settings into dotted keys, JSON text included', () => {
    expect(flatten({ cupti: { buffer_mb: 64, kinds: ['kernel', 'memcpy'] }, empty: {} })).toEqual([
      ['cupti.buffer_mb', '64'],
      ['cupti.kinds', 'kernel, memcpy'],
      ['empty', '(none)']
    ]);
    expect(flatten('{"a": {"b": 1}}', 'settings')).toEqual([['settings.a.b', '1']]);
    expect(flatten(null)).toEqual([]);
  });

  it('places a store under the Jupyter root, or says it is outside', () => {
    expect(relativeTo('/repo', '/repo/argus.duckdb')).toBe('argus.duckdb');
    expect(relativeTo('/repo/', '/repo/notebooks/a.duckdb')).toBe('notebooks/a.duckdb');
    expect(relativeTo('/repo', '/repository/a.duckdb')).toBeNull();
    expect(relativeTo('/repo/notebooks', '/repo/argus.duckdb')).toBeNull();
  });

  it('writes times and durations short', () => {
    const now = new Date(2026, 10, 30, 15, 0, 0).getTime();
    expect(formatWhen(new Date(2026, 10, 30, 14, 3, 27).getTime() * 1e6, now)).toBe('14:03:27');
    expect(formatWhen(new Date(2026, 10, 29, 9, 5, 0).getTime() * 1e6, now)).toBe('11-29 09:05');
    expect(formatSeconds(0.3612)).toBe('0.36 s');
    expect(formatSeconds(185)).toBe('3 min 5 s');
    expect(formatSeconds(null)).toBe('-');
  });

  it("tells the measurement's progress from the cells' own output", () => {
    expect(isProgress('argus: run 1/2 [host] ok')).toBe(true);
    expect(isProgress('UsageError: the measured cell raised ZeroDivisionError')).toBe(true);
    expect(isProgress('loss 0.25')).toBe(false);
  });
});

describe('values with their units', () => {
  it('scales bytes as the report does, never printing 1.057e+6 byte', () => {
    expect(formatValue(1.057e6, 'byte')).toBe('1.06 MB');
    expect(formatValue(2.5e9, 'byte')).toBe('2.5 GB');
    expect(formatValue(4096, 'byte')).toBe('4.1 kB');
    expect(formatValue(512, 'byte')).toBe('512 B');
    expect(formatValue(0, 'byte')).toBe('0 B');
  });

  it('prints large counts with an SI prefix, small ones as they are', () => {
    expect(formatValue(1.057e6, 'count')).toBe('1.06 M');
    expect(formatValue(3.2e9, '')).toBe('3.2 G');
    expect(formatValue(123456, 'count')).toBe('123500');
    expect(formatValue(87.33, 'register/thread')).toBe('87.33 register/thread');
    expect(formatValue(2e6, 'word/thread')).toBe('2 M word/thread');
  });

  it('prints percentages as the report does (four significant digits), and times scaled', () => {
    expect(formatValue(7.3541, '%')).toBe('7.354 %');
    expect(formatValue(100, '%')).toBe('100 %');
    expect(formatValue(2.51e6, 'ns')).toBe('2.51 ms');
  });

  it('prints nothing measured as a dash', () => {
    expect(formatValue(null, 'byte')).toBe('-');
    expect(formatValue(undefined, 'count')).toBe('-');
    expect(formatValue(NaN, '%')).toBe('-');
  });
});
