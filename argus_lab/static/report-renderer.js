/*
 * argus report renderer: one plain JavaScript file (no build step) that draws an argus report bundle.
 *
 * API
 *   ArgusReport.render(el, reportJson, options) -> {drill(path), destroy()}
 *     el          a DOM element; its children are replaced.
 *     reportJson  the `application/vnd.argus.report+json` object (format "argus.report/1", written by
 *                 argus_lab/views/bundle.py: title, summary, regions, runs, tables{name: {columns, rows, total,
 *                 shown}}, timelines[], device_timelines[]).
 *     options     {Plotly?: the plotly.js module (default: window.Plotly), maxRows?: rows shown per table
 *                 (default 200), document?: the Document to build nodes in (default el.ownerDocument)}.
 *   ArgusReport.version  the bundle format this renderer reads.
 *
 * Loading: as a classic <script> it defines window.ArgusReport; under CommonJS / a bundler
 * (`import {render} from '.../report-renderer.js'`) it exports {render, version}.  Users: the exported
 * standalone HTML and the notebook text/html fallback (argus_lab/views/html.py), and the JupyterLab MIME
 * renderer of the argus extension.
 *
 * Safety: region names, kernel names, causes and commands are untrusted.  Every value reaches the page through
 * textContent / createTextNode, and every label given to plotly is HTML-escaped first (plotly reads a few tags
 * in labels).  Nothing here uses innerHTML or requests the network.
 *
 * Drill-down: clicking a region in any view (region table row, timeline bar, counter row, attribution bar)
 * fills the drill-down panel with that region's instances, values, kernels, counters, compiler facts and the
 * provenance of the runs they came from, all from rows embedded in the bundle (no kernel, no server).  A region
 * whose kernels ran instrumented launches lists their device regions (dev.* values) and links to the per-SM lane
 * timeline of each embedded launch (the Device tab).
 */
(function (root, factory) {
  var api = factory();
  if (typeof module === 'object' && module && module.exports) {
    module.exports = api;
  } else {
    root.ArgusReport = api;
  }
})(typeof self !== 'undefined' ? self : this, function () {
  'use strict';

  var VERSION = 'argus.report/1';
  // how a signal's values combine (plan/catalog.py AGGREGATION_TEXT)
  var AGG_TEXT = {sum: 'sum', mean: 'mean (weighted by time)', max: 'max', min: 'min', fact: 'largest per kernel',
    span: 'span'};

  // -- small helpers ----------------------------------------------------------------------------------------
  function esc(s) {
    return String(s == null ? '' : s).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
  }

  function fmt(v, unit) {
    if (v == null || (typeof v === 'number' && isNaN(v))) return '-';
    if (typeof v !== 'number') return String(v);
    var scales = unit === 'ns' ? [['s', 1e9], ['ms', 1e6], ['\u00b5s', 1e3], ['ns', 1]]
      : unit === 'byte' ? [['GB', 1e9], ['MB', 1e6], ['kB', 1e3], ['B', 1]] : null;
    if (!scales) {  // counts and other numbers: a million or more with an SI prefix (1.06 M), as units.py prints them
      var suffix = unit && unit !== 'count' ? ' ' + unit : '';
      if (!isFinite(v) || Math.abs(v) < 1e6) return String(Number(v.toPrecision(4))) + suffix;
      var big = Math.abs(v) >= 1e12 ? ['T', 1e12] : Math.abs(v) >= 1e9 ? ['G', 1e9] : ['M', 1e6];
      return String(Number((v / big[1]).toPrecision(3))) + ' ' + big[0] + suffix;
    }
    for (var i = 0; i < scales.length; i++) {
      if (Math.abs(v) >= scales[i][1] || scales[i][1] === 1) {
        return String(Number((v / scales[i][1]).toPrecision(3))) + ' ' + scales[i][0];
      }
    }
    return String(v);
  }

  function shares(v) {
    // {class: fraction} -> "exact 67%, ordinal 33%"
    if (!v || typeof v !== 'object') return v == null ? '' : String(v);
    return Object.keys(v).map(function (k) { return k + ' ' + Math.round(100 * v[k]) + '%'; }).join(', ');
  }

  function kernelCounters(v) {
    // {signal: [value, unit]} -> "hw:x 1.2 MB; hw:y 3 %"
    if (!v || typeof v !== 'object') return '';
    return Object.keys(v).map(function (k) {
      var x = v[k];
      return k + ' ' + (Array.isArray(x) ? fmt(x[0], x[1]) : String(x));
    }).join('; ');
  }

  function kv(v) {
    // {a: 1, b: {c: 2}} (or its JSON text) -> "a: 1 · b.c: 2"; settings and clocks read as key/value pairs
    if (typeof v === 'string') {
      var t = v.trim();
      if (t.charAt(0) !== '{') return v;
      try { v = JSON.parse(t); } catch (e) { return v; }
    }
    if (v == null || typeof v !== 'object') return v == null ? '' : String(v);
    var out = [];
    (function walk(o, prefix) {
      Object.keys(o).forEach(function (k) {
        var x = o[k], key = prefix ? prefix + '.' + k : k;
        if (x && typeof x === 'object' && !Array.isArray(x) && Object.keys(x).length) walk(x, key);
        else out.push(key + ': ' + (Array.isArray(x) ? x.join(', ') : x && typeof x === 'object' ? '-' : String(x)));
      });
    })(v, '');
    return out.length ? out.join(' \u00b7 ') : '(none)';
  }

  function declared(d) {
    // where a region is declared: a notebook cell ("cell [3] of quickstart.ipynb, line 5") or module (file:line)
    var file = String(d.file || '');
    if (/^(cell |a cell)/.test(file)) return file + (d.line ? ', line ' + d.line : '');
    return (d.module || '?') + ' (' + (file || '?') + ':' + (d.line || '?') + ')';
  }

  function rowsOf(table) {
    // {columns, rows} -> array of objects
    if (!table || !table.rows) return [];
    var cols = table.columns;
    return table.rows.map(function (r) {
      var o = {};
      for (var i = 0; i < cols.length; i++) o[cols[i]] = r[i];
      return o;
    });
  }

  function Builder(doc) {
    this.doc = doc;
  }
  Builder.prototype.el = function (tag, cls, text) {
    var e = this.doc.createElement(tag);
    if (cls) e.className = cls;
    if (text != null) e.textContent = String(text);
    return e;
  };

  // -- sortable table ----------------------------------------------------------------------------------------
  // cols: [{key, label, unit?: string | (row) => unit, fmt?: (v, row) => string, title?: (row) => string,
  //         nowrap?: true, prose?: true | 'clamp'}]: a prose column (a sentence per row) is never squeezed to a
  //         sliver a word wide; 'clamp' also shows only its first lines (all of it on hover).
  // opts: {maxRows, sortKey, sortDir, onRowClick, empty, total, reasons?: {key, label, one, many}: the distinct
  //         values of that column listed once under the table}
  function table(b, cols, rows, opts) {
    opts = opts || {};
    var max = opts.maxRows || 200;
    var wrap = b.el('div', 'argus-table-wrap');
    var tbl = b.el('table', 'argus-table');
    var thead = b.el('thead');
    var htr = b.el('tr');
    var tbody = b.el('tbody');
    var state = {key: opts.sortKey || null, dir: opts.sortDir || 1};
    cols.forEach(function (c) {
      var th = b.el('th', null, c.label);
      th.title = 'sort by ' + c.label;
      th.addEventListener('click', function () {
        state.dir = state.key === c.key ? -state.dir : 1;
        state.key = c.key;
        fill();
      });
      htr.appendChild(th);
    });
    thead.appendChild(htr);
    tbl.appendChild(thead);
    tbl.appendChild(tbody);
    var note = b.el('div', 'argus-note');
    function fill() {
      var data = rows.slice();
      if (state.key) {
        var k = state.key;
        data.sort(function (x, y) {
          var a = x[k], c = y[k];
          if (a == null) return 1;
          if (c == null) return -1;
          if (typeof a === 'number' && typeof c === 'number') return state.dir * (a - c);
          return state.dir * String(a).localeCompare(String(c));
        });
      }
      while (tbody.firstChild) tbody.removeChild(tbody.firstChild);
      Array.prototype.forEach.call(htr.children, function (th, i) {
        th.className = cols[i].key === state.key ? (state.dir > 0 ? 'argus-asc' : 'argus-desc') : '';
      });
      data.slice(0, max).forEach(function (r) {
        var tr = b.el('tr');
        cols.forEach(function (c) {
          var unit = typeof c.unit === 'function' ? c.unit(r) : c.unit;
          var v = r[c.key];
          var text = c.fmt ? c.fmt(v, r) : unit !== undefined ? fmt(v, unit) : v == null ? '' : String(v);
          var td = b.el('td', typeof v === 'number' ? 'argus-num'
            : c.key === 'run_id' || c.key === 'runs' || c.key === 'ref_run_id' || c.nowrap ? 'argus-nowrap'
              : c.key === 'cause' ? 'argus-pre' : c.prose ? 'argus-prose' : null, c.prose === 'clamp' ? null : text);
          // a clamped sentence shows its first lines (the whole of it on hover, and once under the table)
          if (c.prose === 'clamp') td.appendChild(b.el('div', 'argus-clamp', text));
          var hover = c.title ? c.title(r) : c.prose === 'clamp' ? text : '';
          if (hover) td.title = hover;
          tr.appendChild(td);
        });
        if (opts.onRowClick) {
          tr.className = 'argus-click';
          tr.addEventListener('click', function () { opts.onRowClick(r); });
        }
        tbody.appendChild(tr);
      });
      var total = opts.total != null ? opts.total : rows.length;
      note.textContent = rows.length === 0 ? (opts.empty || 'no rows')
        : 'showing ' + Math.min(max, data.length) + ' of ' + total + ' row(s)'
          + (total > rows.length ? ' (the rest stays in the store)' : '');
    }
    fill();
    wrap.appendChild(tbl);
    wrap.appendChild(note);
    if (!opts.reasons) return wrap;
    var outer = b.el('div');  // the reasons under the scroll box, never inside it
    outer.appendChild(wrap);
    outer.appendChild(reasonList(b, rows, opts.reasons));
    return outer;
  }

  // the distinct sentences of one column, each once with the rows that share it (e.g. why compiler facts are
  // missing: one reason repeated for every library kernel is read once here, not in every row)
  var REASONS_MAX = 12;
  function reasonList(b, rows, spec) {
    var count = {}, order = [];
    rows.forEach(function (r) {
      var t = r[spec.key] == null ? '' : String(r[spec.key]);
      if (!t) return;
      if (!count[t]) order.push(t);
      count[t] = (count[t] || 0) + 1;
    });
    var box = b.el('div', 'argus-reasons');
    if (!order.length) return box;
    box.appendChild(b.el('div', 'argus-note', spec.label));
    var list = b.el('ul');
    order.slice(0, REASONS_MAX).forEach(function (t) {
      list.appendChild(b.el('li', null, count[t] + ' ' + (count[t] === 1 ? spec.one : spec.many) + ': ' + t));
    });
    if (order.length > REASONS_MAX) {
      list.appendChild(b.el('li', null, (order.length - REASONS_MAX) + ' other reason(s): hover a row to read it'));
    }
    box.appendChild(list);
    return box;
  }

  // -- bidi controls ---------------------------------------------------------------------------------------
  // A bidi control in a name (U+202E and the other embeddings, overrides, isolates, marks) would reverse the text
  // shown after it: every string of the bundle shows them as a visible escape, as the terminal and the server do
  // (argus_lab/views/escape.py bidi_safe).  The bundle itself is left as given (copies where a string changes).
  var BIDI_ONE = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/;
  var BIDI_ALL = /[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;
  function bidiSafe(s) {
    return BIDI_ONE.test(s) ? s.replace(BIDI_ALL, function (c) {
      return '\\u' + ('000' + c.charCodeAt(0).toString(16)).slice(-4);
    }) : s;
  }
  function bidiSafeAll(v) {
    if (typeof v === 'string') return bidiSafe(v);
    if (!v || typeof v !== 'object') return v;
    var changed = false, out, i, k, x;
    if (Array.isArray(v)) {
      out = new Array(v.length);
      for (i = 0; i < v.length; i++) {
        x = v[i];
        out[i] = (typeof x === 'number' || x == null) ? x : bidiSafeAll(x);
        if (out[i] !== x) changed = true;
      }
      return changed ? out : v;
    }
    out = {};
    for (k in v) {
      if (!Object.prototype.hasOwnProperty.call(v, k)) continue;
      x = bidiSafeAll(v[k]);
      out[bidiSafe(k)] = x;
      if (x !== v[k] || bidiSafe(k) !== k) changed = true;
    }
    return changed ? out : v;
  }

  // -- the report ------------------------------------------------------------------------------------------
  function render(el, bundle, options) {
    options = options || {};
    bundle = bidiSafeAll(bundle);
    var doc = options.document || el.ownerDocument || document;
    var b = new Builder(doc);
    var win = doc.defaultView || {};
    var P = null;
    function plotly() {  // looked up when a plot is drawn: plotly.js may come later in the page than the report
      P = options.Plotly || win.Plotly || win._Plotly || null;
      return P;
    }
    var maxRows = options.maxRows || 200;
    var plots = [];
    var J = bundle.joined || {};
    // colours come with the bundle (argus_lab/views/palette.py: the plotly figures in Python use the same); a bundle
    // written before it had them leaves the colours to plotly and the stylesheet
    var PAL = bundle.palette || {};
    function depthColor(i) { var p = PAL.regions || []; return p.length ? p[i % p.length] : ''; }
    function classColor(c) { return (PAL.classes || {})[c] || PAL.other_class; }
    var DT = bundle.device_timelines || [];
    var device = {pick: null, draw: null};
    var T = {};
    Object.keys(bundle.tables || {}).forEach(function (k) { T[k] = rowsOf(bundle.tables[k]); });
    // A thread without a recorded name: 'main thread' for the thread that opened a run's first instance, then
    // 'thread 2', 'thread 3', ... in the order their first instance started (the instances table is in start order),
    // never the raw OS thread id.
    var THREAD_ORDER = {};
    (T.instances || []).forEach(function (r) {
      var key = String(r.run_id) + ':' + String(r.rank || 0), ids = THREAD_ORDER[key] = THREAD_ORDER[key] || [];
      if (r.thread_id != null && ids.indexOf(String(r.thread_id)) < 0) ids.push(String(r.thread_id));
    });
    function threadLabel(r) {
      if (r.thread_id == null) return '';
      var ids = THREAD_ORDER[String(r.run_id) + ':' + String(r.rank || 0)] || [];
      var at = ids.indexOf(String(r.thread_id));
      return at === 0 ? 'main thread' : 'thread ' + (at < 0 ? '?' : at + 1);
    }
    function total(name) { return bundle.tables && bundle.tables[name] ? bundle.tables[name].total : 0; }

    while (el.firstChild) el.removeChild(el.firstChild);
    var rootEl = b.el('div', 'argus-report');
    el.appendChild(rootEl);
    if (bundle.format && bundle.format !== VERSION) {
      rootEl.appendChild(b.el('div', 'argus-warn', 'this renderer reads ' + VERSION + ', the bundle is '
        + bundle.format + '; some parts may be missing'));
    }

    // header
    var s = bundle.summary || {};
    rootEl.appendChild(b.el('div', 'argus-title', bundle.title || 'argus report'));
    var st = Object.keys(s.status || {}).map(function (k) { return s.status[k] + ' ' + k; }).join(', ');
    rootEl.appendChild(b.el('div', 'argus-summary', (s.runs || 0) + ' run(s) (' + st + ') \u00b7 '
      + (s.regions || 0) + ' region(s) \u00b7 ' + (s.instances || 0) + ' instance(s) \u00b7 '
      + (s.kernels || 0) + ' kernel record(s) \u00b7 store ' + (bundle.store || '?')));
    (s.warnings || []).forEach(function (c) { rootEl.appendChild(b.el('div', 'argus-warn argus-warning', c)); });
    (s.coverage || []).forEach(function (c) { rootEl.appendChild(b.el('div', 'argus-warn', c)); });
    (s.heterogeneity || []).forEach(function (c) { rootEl.appendChild(b.el('div', 'argus-note argus-hetero', c)); });

    // tabs
    var tabs = b.el('div', 'argus-tabs');
    var body = b.el('div', 'argus-body');
    var drillEl = b.el('div', 'argus-drill');
    drillEl.appendChild(b.el('div', 'argus-note', 'Click a region in any view to drill down into its instances, '
      + 'kernels, counters, compiler facts and provenance.'));
    rootEl.appendChild(tabs);
    rootEl.appendChild(body);
    rootEl.appendChild(drillEl);
    var panes = {};
    var shown = {};
    function tab(name, build) {
      var btn = b.el('button', 'argus-tab', name);
      btn.type = 'button';
      var pane = b.el('div', 'argus-pane');
      pane.style.display = 'none';
      body.appendChild(pane);
      panes[name] = {btn: btn, pane: pane, build: build};
      btn.addEventListener('click', function () { select(name); });
      tabs.appendChild(btn);
    }
    function select(name) {
      Object.keys(panes).forEach(function (k) {
        panes[k].pane.style.display = k === name ? '' : 'none';
        panes[k].btn.className = 'argus-tab' + (k === name ? ' argus-active' : '');
      });
      if (!shown[name]) {
        shown[name] = true;
        panes[name].build(panes[name].pane);
      }
    }

    // -- drill-down ---------------------------------------------------------------------------------------
    function section(parent, title, node) {
      parent.appendChild(b.el('h4', 'argus-h', title));
      parent.appendChild(node);
    }
    function drill(path, instance) {
      while (drillEl.firstChild) drillEl.removeChild(drillEl.firstChild);
      drillEl.appendChild(b.el('div', 'argus-drill-title', 'region ' + path
        + (instance != null ? ' \u00b7 instance ' + instance : '')));
      var inst = T.instances ? T.instances.filter(function (r) { return r.path === path; }) : [];
      var decl = inst.length ? inst[0] : null;
      if (decl) {
        drillEl.appendChild(b.el('div', 'argus-note', 'declared in ' + declared(decl) + ', kind '
          + (decl.kind || 'host')));
      }
      var summ = (bundle.regions || []).filter(function (r) { return r.path === path; });
      if (WARM[path]) {
        drillEl.appendChild(b.el('div', 'argus-note argus-warmup-line', warmupText(path)
          + ' instance(s), warm-up not in the statistics'));
      }
      section(drillEl, 'summary', table(b, [
        {key: 'signal', label: 'signal'}, {key: 'instances', label: 'instances'},
        {key: 'median', label: 'median', unit: function (r) { return r.unit; }},
        {key: 'p25', label: 'p25', unit: function (r) { return r.unit; }},
        {key: 'p75', label: 'p75', unit: function (r) { return r.unit; }},
        {key: 'attribution', label: 'attribution'}, {key: 'runs', label: 'origin run'}], summ,
      {maxRows: maxRows, empty: 'no summarised values for this region'}));
      var sel = instance != null ? inst.filter(function (r) { return r.instance_id === instance; }) : inst;
      section(drillEl, 'instances (' + inst.length + ' embedded)', table(b, [
        {key: 'instance_index', label: '#'}, {key: 'instance_id', label: 'instance id'},
        {key: 'run_id', label: 'run'}, {key: 'repetition', label: 'rep'}, {key: 'warmup', label: 'warm-up'},
        {key: 'thread_name', label: 'thread', fmt: function (v, r) {
          return (r.rank != null && r.rank !== 0 ? 'rank ' + r.rank + ' \u00b7 ' : '') + (v || threadLabel(r));
        }}, {key: 'wall_ns', label: 'wall', unit: 'ns'},
        {key: 'cpu_ns', label: 'cpu', unit: 'ns'}, {key: 'error', label: 'error'}], sel, {maxRows: maxRows}));
      var vals = (T.values || []).filter(function (r) {
        return r.path === path && (instance == null || r.instance_id === instance);
      });
      section(drillEl, 'values per instance', table(b, [
        {key: 'instance_index', label: '#'}, {key: 'warmup', label: 'warm-up'}, {key: 'signal', label: 'signal'},
        {key: 'value', label: 'value', unit: function (r) { return r.unit; }},
        {key: 'attribution', label: 'attribution'}, {key: 'backend', label: 'backend'},
        {key: 'run_id', label: 'origin run'}], vals, {maxRows: maxRows}));
      var hasDevice = total('kernels') > 0 || total('counters') > 0 || (J.counters || []).length > 0
        || (J.compiler || []).length > 0;
      if (!hasDevice) {
        drillEl.appendChild(b.el('div', 'argus-note', 'no kernels, counters or compiler facts in these runs '
          + '(host signals only)'));
      } else {
        if (instance != null) {
          var own = (T.kernels || []).filter(function (r) { return r.instance_id === instance && r.path === path; });
          section(drillEl, 'kernels of this instance', table(b, [kernelCol(),
            {key: 'start_ns', label: 'start (ns, CLOCK_REALTIME)'}, {key: 'duration_ns', label: 'duration', unit: 'ns'},
            {key: 'stream_id', label: 'stream'}, {key: 'registers', label: 'registers'},
            {key: 'correlation_id', label: 'correlation id'}, {key: 'run_id', label: 'run'}], own,
          {maxRows: maxRows, empty: 'none embedded (the bundle carries the first ' + (bundle.tables && bundle.tables.kernels
            ? bundle.tables.kernels.shown : 0) + ' kernel records; the rest stay in the store)'}));
        }
        var groups = (J.groups || []).filter(function (r) { return r.path === path; });
        if (groups.length) {
          section(drillEl, 'instance groups (instances that ran different kernel sequences)', table(b, [
            {key: 'group', label: 'group'}, {key: 'indexes', label: 'instances'}, {key: 'kernels', label: 'kernels'},
            {key: 'values', label: 'medians', fmt: groupValues}, {key: 'note', label: 'what differs', prose: true},
            {key: 'run_id', label: 'run'}], groups, {maxRows: maxRows}));
        }
        var kg = (T.kernel_groups || []).filter(function (r) { return r.path === path; });
        var kgBox = b.el('div');
        mainGroupTable(kgBox, [
          kernelCol(), {key: 'kind', label: 'kind'}, {key: 'count', label: 'launches'},
          {key: 'warmup', label: 'warm-up launches (apart)'},
          {key: 'total_ns', label: 'total', unit: 'ns'}, {key: 'mean_ns', label: 'mean', unit: 'ns'},
          {key: 'registers', label: 'registers'}, {key: 'grid', label: 'grid'}, {key: 'block', label: 'block'},
          {key: 'runs', label: 'origin run'}], kg, {maxRows: maxRows, sortKey: 'total_ns', sortDir: -1,
          empty: 'no kernel records for this region'});
        section(drillEl, 'kernels', kgBox);
        var names = {};
        kg.forEach(function (r) { names[r.name] = true; });
        var rc = (J.counters || []).filter(function (r) { return r.path === path; });
        section(drillEl, 'counters', table(b, regionCounterCols(), rc, {maxRows: maxRows,
          empty: 'no hardware counters for this region'}));
        var ko = (J.kernels || []).filter(function (r) { return r.path === path; });
        var koBox = b.el('div');
        mainGroupTable(koBox, kernelOrdinalCols(), ko, {maxRows: maxRows, empty: 'no kernels joined for this region'});
        section(drillEl, 'kernels by ordinal, with their counters', koBox);
        var ctr = (T.counters || []).filter(function (r) {
          return r.path === path && !/^compile\./.test(r.signal);
        });
        section(drillEl, 'per-kernel values', table(b, counterCols(), ctr, {maxRows: maxRows,
          empty: 'no per-kernel values for this region'}));
        var cf = (J.compiler || []).filter(function (r) {
          return String(r.paths || '').split(/,\s*/).indexOf(path) >= 0 || names[r.name];
        });
        var facts = (T.counters || []).filter(function (r) {
          if (!/^compile\./.test(r.signal)) return false;
          if (r.path === path) return true;
          var key = String(r.kernel_key || '');
          return Object.keys(names).some(function (n) { return n && key.indexOf(n) >= 0; });
        });
        section(drillEl, 'compiler facts', cf.length || !facts.length
          ? table(b, compilerCols(), cf, {maxRows: maxRows, reasons: MISSING,
            empty: 'no compiler facts for the kernels of this region'})
          : table(b, counterCols(), facts, {maxRows: maxRows}));
      }
      var devRows = (J.device || []).filter(function (r) { return r.path === path; });
      var devLaunches = [];
      DT.forEach(function (t, i) {
        if (t.path === path && (instance == null || t.instance_id === instance)) devLaunches.push(i);
      });
      if (devRows.length || devLaunches.length) {
        section(drillEl, 'device regions (instrumented launches; GPU ns)', table(b, deviceCols(), devRows,
          {maxRows: maxRows, empty: 'no dev.* values for this region'}));
        var links = b.el('div', 'argus-note');
        links.appendChild(doc.createTextNode(devLaunches.length ? 'per-SM timeline: ' : 'no launch of this region '
          + 'is embedded in the bundle (the rows stay in the store)'));
        devLaunches.forEach(function (i) {
          var btn = b.el('button', 'argus-tab', DT[i].kernel + ' \u00b7 launch ' + DT[i].launch
            + (DT[i].instance_index != null ? ' (#' + DT[i].instance_index + ')' : ''));
          btn.type = 'button';
          btn.addEventListener('click', function () { showLaunch(i); });
          links.appendChild(btn);
        });
        drillEl.appendChild(links);
      }
      var runIds = {};
      inst.forEach(function (r) { runIds[r.run_id] = true; });
      summ.forEach(function (r) { String(r.runs || '').split(',').forEach(function (x) { if (x) runIds[x] = true; }); });
      var prov = (T.provenance || []).filter(function (r) { return runIds[r.run_id]; });
      section(drillEl, 'provenance', table(b, provenanceCols(), prov, {maxRows: maxRows}));
      var runs = (bundle.runs || []).filter(function (r) { return runIds[r.run_id]; });
      section(drillEl, 'runs', table(b, runCols(), runs, {maxRows: maxRows}));
      if (drillEl.scrollIntoView) drillEl.scrollIntoView({block: 'nearest'});
    }

    // A table of kernel rows: the main kernel-sequence group's rows (the statistics' own), then, collapsed, one
    // <details> per region path with the launches of its instances of another kernel sequence (Report.groups).
    function mainGroupTable(parent, cols, rows, opts) {
      var main = rows.filter(function (r) { return r.main_group !== false; });
      parent.appendChild(table(b, cols, main, opts));
      var other = {};
      rows.forEach(function (r) { if (r.main_group === false) (other[r.path] = other[r.path] || []).push(r); });
      Object.keys(other).forEach(function (path) {
        var ks = other[path], launches = 0, names = {};
        ks.forEach(function (r) { launches += Number(r.launches != null ? r.launches : r.count) || 0; names[r.name] = 1; });
        // every table states the group as Report.kernels counts it (its rows may be embedded only in part)
        var full = (bundle.other_groups || {})[path], kernels = full ? full.kernels : Object.keys(names).length;
        if (full) launches = full.launches;
        var notes = (J.groups || []).filter(function (g) { return g.path === path && !g.majority; })
          .map(function (g) { return g.note; });
        var box = b.el('details', 'argus-other-group');
        box.setAttribute('data-path', path);
        box.appendChild(b.el('summary', null, path + ': another kernel sequence (' + launches + ' launch(es) of '
          + kernels + ' kernel(s)' + (notes.length ? '; ' + notes.join('; ') : '')
          + '), not in the statistics: click to show'));
        box.appendChild(table(b, cols, ks, {maxRows: opts.maxRows, onRowClick: opts.onRowClick}));
        parent.appendChild(box);
      });
    }
    // "n measured + w warm-up instances, warm-up not in the statistics", per region path (every run's finished
    // instances), the words the text report and the panel use
    var WARM = {};
    Object.keys(s.warmup || {}).forEach(function (p) { WARM[p] = {measured: 0, warmup: s.warmup[p]}; });
    (bundle.regions || []).forEach(function (r) {
      var w = WARM[r.path] = WARM[r.path] || {measured: 0, warmup: 0};
      w.measured = Math.max(w.measured, r.instances || 0);
    });
    function warmupText(path) {
      var w = WARM[path];
      return w ? w.measured + ' measured + ' + w.warmup + ' warm-up' : '';
    }

    function provenanceCols() {
      return [{key: 'run_id', label: 'run'}, {key: 'backend', label: 'backend'},
        {key: 'backend_version', label: 'version'}, {key: 'settings', label: 'settings', fmt: kv},
        {key: 'clocks', label: 'clocks', fmt: kv}, {key: 'timestamps', label: 'timestamps'}];
    }
    function deviceCols() {
      return [{key: 'path', label: 'region'}, {key: 'kernel', label: 'kernel'},
        {key: 'region', label: 'device region'}, {key: 'signal', label: 'signal'},
        {key: 'launches', label: 'launches'},
        {key: 'median', label: 'median', unit: function (r) { return r.unit; }},
        {key: 'p25', label: 'p25', unit: function (r) { return r.unit; }},
        {key: 'p75', label: 'p75', unit: function (r) { return r.unit; }},
        {key: 'spread_p10', label: 'p10 over CTAs/SMs', unit: function (r) { return r.unit; }},
        {key: 'spread_p90', label: 'p90 over CTAs/SMs', unit: function (r) { return r.unit; }},
        {key: 'attribution', label: 'attribution'}, {key: 'run_id', label: 'run'}];
    }
    function regionCounterCols() {
      return [{key: 'path', label: 'region'}, {key: 'signal', label: 'counter'},
        {key: 'agg', label: 'combined as', fmt: function (v) { return AGG_TEXT[v] || v || 'sum'; }},
        {key: 'instances', label: 'instances'},
        {key: 'median', label: 'median', fmt: function (v, r) {
          // a per-kernel fact reads as its range over the region's kernels, never as a sum or a mean
          if (r.kernel_range && r.kernel_range.length === 2) {
            var lo = r.kernel_range[0], hi = r.kernel_range[1];
            var scaled = r.unit === 'ns' || r.unit === 'byte';  // scaled units print their scale on each side
            return (lo === hi ? fmt(hi, r.unit) : fmt(lo, scaled ? r.unit : '') + '..' + fmt(hi, r.unit))
              + ' per kernel';
          }
          return fmt(v, r.unit);
        }},
        {key: 'exclusive_median', label: 'exclusive', unit: function (r) { return r.unit; }},
        {key: 'shares', label: 'attribution', fmt: shares}, {key: 'settings', label: 'measured with'},
        {key: 'runs', label: 'origin run'}];
    }
    function kernelOrdinalCols() {
      return [{key: 'path', label: 'region'}, {key: 'ordinal', label: '#'}, kernelCol(),
        {key: 'launches', label: 'launches'}, {key: 'median_ns', label: 'median', unit: 'ns'},
        {key: 'total_ns', label: 'total', unit: 'ns'}, {key: 'registers', label: 'registers'},
        {key: 'grid', label: 'grid'}, {key: 'block', label: 'block'}, {key: 'classes', label: 'class'},
        {key: 'counters', label: 'counters (joined by ordinal)', fmt: kernelCounters}, {key: 'run_id', label: 'run'}];
    }
    function compilerCols() {
      return [kernelCol(), {key: 'config', label: 'config', fmt: configText},
        {key: 'registers', label: 'registers'},
        {key: 'spill_words', label: 'local mem words'}, {key: 'shared_bytes', label: 'shared', unit: 'byte'},
        {key: 'num_warps', label: 'warps'}, {key: 'num_stages', label: 'stages'},
        {key: 'sass_instructions', label: 'SASS'}, {key: 'sass_mix', label: 'SASS mix', fmt: sassMix},
        {key: 'ran_in', label: 'ran in', fmt: function (v, r) { return v || r.paths || ''; }},
        {key: 'origin', label: 'found by', nowrap: true, fmt: function (v, r) { return v || r.source || ''; }},
        {key: 'unavailable', label: 'missing', prose: 'clamp'}, {key: 'run_id', label: 'run'}];
    }
    // under a compiler-facts table: each reason for missing facts once
    var MISSING = {key: 'unavailable', label: 'why facts are missing (each reason once):', one: 'kernel',
      many: 'kernels'};
    // a kernel name as recorded (mangled) is shown demangled and shortened (display_name); hover shows both
    function kernelCol() {
      return {key: 'name', label: 'kernel', fmt: function (v, r) { return r.display_name || (v == null ? '' : String(v)); },
        title: function (r) {
          var full = r.name == null ? '' : String(r.name);
          return r.display_name && r.display_name !== full ? r.display_name + '\n' + full : full;
        }};
    }
    function configText(v) {
      if (!v || typeof v !== 'object') return '';
      return Object.keys(v).map(function (k) { return k + '=' + v[k]; }).join(' ');
    }
    function sassMix(v) {
      if (!v || typeof v !== 'object') return '';
      var keys = Object.keys(v), tot = 0;
      keys.forEach(function (k) { tot += Number(v[k]) || 0; });
      keys.sort(function (a, c) { return v[c] - v[a]; });
      return keys.map(function (k) { return k + ' ' + (tot ? Math.round(1000 * v[k] / tot) / 10 : 0) + '%'; }).join(', ');
    }
    function groupValues(v) {
      if (!v || typeof v !== 'object') return '';
      return Object.keys(v).map(function (k) {
        var x = v[k];
        return k + ' ' + (Array.isArray(x) ? fmt(x[0], x[1]) : String(x));
      }).join(', ');
    }
    function counterCols() {
      return [{key: 'path', label: 'region'}, {key: 'instance_index', label: 'instance'},
        {key: 'ordinal', label: 'ordinal'}, kernelCol(), {key: 'signal', label: 'signal'},
        {key: 'value', label: 'value', unit: function (r) { return r.unit; }},
        {key: 'warmup', label: 'warm-up', fmt: function (v) { return v ? 'warm-up' : ''; }},
        {key: 'attribution', label: 'attribution'}, {key: 'backend', label: 'backend'},
        {key: 'run_id', label: 'origin run'}];
    }
    function runCols() {
      return [{key: 'plan_index', label: '#'}, {key: 'run_id', label: 'run'}, {key: 'status', label: 'status'},
        {key: 'backends', label: 'backends', fmt: function (v) { return (v || []).join(', '); }},
        {key: 'signals', label: 'signals', fmt: function (v) { return (v || []).join(', '); }},
        {key: 'reps_done', label: 'reps'}, {key: 'seconds', label: 'seconds',
          fmt: function (v) { return v == null ? '-' : v.toFixed(2); }},
        {key: 'reason', label: 'why a separate run', prose: true}, {key: 'cause', label: 'cause'},
        {key: 'workload', label: 'workload'}, {key: 'command', label: 'command'}];
    }

    // -- regions --------------------------------------------------------------------------------------------
    tab('Regions', function (pane) {
      var warmTotal = 0;
      Object.keys(WARM).forEach(function (p) { warmTotal += WARM[p].warmup; });
      if (warmTotal) {
        pane.appendChild(b.el('div', 'argus-note argus-warmup-line', 'instances: the measured ones; '
          + warmTotal + ' warm-up instance(s) ran before them (column warm-up), kept apart: warm-up is not in the '
          + 'statistics'));
      }
      // every value is printed with its own unit (scaled: ms, us, MB), so there is no separate unit column to disagree
      pane.appendChild(table(b, [
        {key: 'path', label: 'region'}, {key: 'signal', label: 'signal'},
        {key: 'agg', label: 'combined as', fmt: function (v) { return AGG_TEXT[v] || v || 'sum'; }},
        {key: 'instances', label: 'instances'},
        {key: 'warmup_instances', label: 'warm-up (apart)'},
        {key: 'median', label: 'median', unit: function (r) { return r.unit; }},
        {key: 'p25', label: 'p25', unit: function (r) { return r.unit; }},
        {key: 'p75', label: 'p75', unit: function (r) { return r.unit; }},
        {key: 'attribution', label: 'attribution'},
        {key: 'runs', label: 'origin run'}], bundle.regions || [],
      {maxRows: maxRows, onRowClick: function (r) { drill(r.path); },
        empty: (J.counters || []).length ? 'these runs measured hardware counters only: see the counters below'
          : (bundle.finished || []).length ? 'no measured repetition finished (see below)'
            : 'no region instances were recorded'}));
      if (!(bundle.regions || []).length && !(J.counters || []).length && (bundle.finished || []).length) {
        pane.appendChild(b.el('h4', 'argus-h', 'instances that finished before the run ended (warm-up, or before '
          + 'the workload failed): they stay in the store'));
        pane.appendChild(table(b, [{key: 'path', label: 'region'}, {key: 'instances', label: 'finished instances'},
          {key: 'warmup', label: 'of them warm-up'}, {key: 'wall_ns', label: 'median wall', unit: 'ns'},
          {key: 'raised', label: 'raised'}], bundle.finished, {maxRows: maxRows,
          onRowClick: function (r) { drill(r.path); }}));
      }
      if ((J.counters || []).length) {
        pane.appendChild(b.el('h4', 'argus-h', 'hardware counters per region'));
        pane.appendChild(table(b, regionCounterCols(), J.counters, {maxRows: maxRows,
          onRowClick: function (r) { drill(r.path); }}));
      }
    });

    // -- flame (icicle) of nested regions ------------------------------------------------------------------
    tab('Flame', function (pane) {
      var rows = bundle.flame || [];
      if (!rows.length) {
        pane.appendChild(b.el('div', 'argus-note', 'no time values to draw (the runs measured no time signal, or '
          + 'their join is pending)'));
        return;
      }
      var sigs = [];
      rows.forEach(function (r) { if (sigs.indexOf(r.signal) < 0) sigs.push(r.signal); });
      var prefer = ['gpu.time', 'host.wall', 'host.cpu'];
      sigs.sort(function (x, y) {
        var a = prefer.indexOf(x), c = prefer.indexOf(y);
        return (a < 0 ? 99 : a) - (c < 0 ? 99 : c) || x.localeCompare(y);
      });
      pane.appendChild(b.el('div', 'argus-note', 'Each box is a region: its width is the region\u2019s inclusive '
        + 'time (summed over the measured instances), the darker part its exclusive time (not spent in a '
        + 'child region). Children sit below their parent. Click a box to drill down.'));
      var pick = b.el('select', 'argus-select argus-flame-signal');
      sigs.forEach(function (sg) {
        var o = b.el('option', null, sg);
        o.value = sg;
        pick.appendChild(o);
      });
      pane.appendChild(pick);
      var graph = b.el('div', 'argus-flame');
      pane.appendChild(graph);
      var holder = b.el('div');
      pane.appendChild(holder);
      function draw() { drawFlame(graph, holder, rows.filter(function (r) { return r.signal === pick.value; })); }
      pick.addEventListener('change', draw);
      draw();
    });

    function drawFlame(graph, holder, rows) {
      while (graph.firstChild) graph.removeChild(graph.firstChild);
      while (holder.firstChild) holder.removeChild(holder.firstChild);
      var byPath = {}, kids = {}, tops = [];
      rows.forEach(function (r) { byPath[r.path] = r; });
      rows.forEach(function (r) {
        var cut = r.path.lastIndexOf('/');
        var parent = cut < 0 ? null : r.path.slice(0, cut);
        while (parent != null && !byPath[parent]) {  // a parent without values: attach to the nearest ancestor
          cut = parent.lastIndexOf('/');
          parent = cut < 0 ? null : parent.slice(0, cut);
        }
        if (parent == null) tops.push(r); else (kids[parent] = kids[parent] || []).push(r);
      });
      function bigFirst(x, y) { return (y.inclusive || 0) - (x.inclusive || 0); }
      tops.sort(bigFirst);
      var totalAll = tops.reduce(function (a, r) { return a + (r.inclusive || 0); }, 0) || 1;
      var unit = rows.length ? rows[0].unit : 'ns';
      var depthMax = 0, table_rows = [];
      function place(r, left, depth) {
        depthMax = Math.max(depthMax, depth);
        var w = (r.inclusive || 0) / totalAll;
        var box = b.el('div', 'argus-flame-box');
        box.style.left = (100 * left) + '%';
        box.style.width = 'calc(' + (100 * w) + '% - 1px)';
        box.style.top = (depth * 24) + 'px';
        box.style.background = depthColor(depth);
        if (r.exclusive != null && r.inclusive) {
          var self = b.el('div', 'argus-flame-self');
          self.style.width = Math.max(0, Math.min(100, 100 * r.exclusive / r.inclusive)) + '%';
          box.appendChild(self);
        }
        var name = r.path.slice(r.path.lastIndexOf('/') + 1);
        box.appendChild(b.el('span', 'argus-flame-label', name + ' ' + fmt(r.inclusive, unit)));
        box.title = r.path + '\ninclusive ' + fmt(r.inclusive, unit) + ' (' + Math.round(100 * w) + '% of all)'
          + (r.exclusive != null ? '\nexclusive ' + fmt(r.exclusive, unit) : '') + '\n' + r.instances
          + ' measured instance(s), mean ' + fmt((r.inclusive || 0) / (r.instances || 1), unit) + '\nrun ' + r.run_id;
        box.setAttribute('data-path', r.path);
        box.addEventListener('click', function () { drill(r.path); });
        graph.appendChild(box);
        table_rows.push({path: r.path, inclusive: r.inclusive, exclusive: r.exclusive, instances: r.instances,
          share: w, unit: unit});
        var x = left;
        (kids[r.path] || []).sort(bigFirst).forEach(function (c) {
          place(c, x, depth + 1);
          x += (c.inclusive || 0) / totalAll;
        });
      }
      var x0 = 0;
      tops.forEach(function (r) { place(r, x0, 0); x0 += (r.inclusive || 0) / totalAll; });
      graph.style.height = ((depthMax + 1) * 24) + 'px';
      holder.appendChild(table(b, [{key: 'path', label: 'region'},
        {key: 'inclusive', label: 'inclusive', unit: unit}, {key: 'exclusive', label: 'exclusive', unit: unit},
        {key: 'instances', label: 'instances'},
        {key: 'share', label: 'share of all', fmt: function (v) { return Math.round(100 * v) + '%'; }}],
      table_rows, {maxRows: maxRows, onRowClick: function (r) { drill(r.path); }}));
    }

    // -- timeline -------------------------------------------------------------------------------------------
    tab('Timeline', function (pane) {
      var tls = bundle.timelines || [];
      if (!tls.length) {
        pane.appendChild(b.el('div', 'argus-note', 'no region instances or kernels to draw'));
        return;
      }
      var pick = b.el('select', 'argus-select');
      tls.forEach(function (t, i) {
        var o = b.el('option', null, (t.label || t.run_id) + ' \u00b7 ' + t.run_id);
        o.value = String(i);
        pick.appendChild(o);
      });
      pane.appendChild(pick);
      // kernels are coloured by the attribution class the region tables use (exact, ordinal, temporal, ...), their
      // region named on hover and drawn above them on the host lanes; "region" colours them by region instead
      var by = b.el('select', 'argus-select argus-colour-by');
      [['class', 'colour kernels by: class'], ['region', 'colour kernels by: region']].forEach(function (o) {
        var opt = b.el('option', null, o[1]);
        opt.value = o[0];
        by.appendChild(opt);
      });
      pane.appendChild(by);
      var info = b.el('div', 'argus-note');
      pane.appendChild(info);
      var plot = b.el('div', 'argus-plot argus-timeline');
      pane.appendChild(plot);
      function draw() { colourBy = by.value; drawTimeline(plot, info, tls[Number(pick.value)]); }
      pick.addEventListener('change', draw);
      by.addEventListener('change', draw);
      draw();
    });

    // More host instances than this in the visible window are drawn aggregated: per lane, one bar per
    // pixel-wide bin, coloured by the region that covers most of it (zooming in draws them exactly again).
    var HOST_EXACT_MAX = 2000, HOST_BINS = 800;
    var colourBy = 'class';  // how the timeline colours kernels drawn one by one: 'class' or 'region'

    function hostTraces(tl, range) {
      var h = tl.host, byRegion = {};
      var lo = range ? range[0] * 1e6 : -Infinity, hi = range ? range[1] * 1e6 : Infinity;
      var shown = [];
      for (var i = 0; i < h.start.length; i++) {
        if (!(h.end[i] < lo || h.start[i] > hi)) shown.push(i);
      }
      function trace(r) {
        return byRegion[r] || (byRegion[r] = {type: 'bar', orientation: 'h', y: [], base: [], x: [],
          hovertext: [], customdata: [], hoverinfo: 'text', name: esc(tl.regions[r]), legendgroup: 'r' + r,
          marker: {color: (tl.colors || [])[r], line: {width: 0}}, width: 0.8});
      }
      if (shown.length <= HOST_EXACT_MAX) {
        shown.forEach(function (i) {
          var r = h.region[i], t = trace(r);
          t.y.push(h.lane[i]);
          t.base.push(h.start[i] / 1e6);
          t.x.push(Math.max((h.end[i] - h.start[i]) / 1e6, 1e-6));
          t.hovertext.push(esc(tl.regions[r]) + ' #' + h.index[i] + '<br>instance ' + h.iid[i] + ', '
            + fmt(h.end[i] - h.start[i], 'ns') + (h.warmup[i] ? ' (warm-up)' : '')
            + (h.error[i] ? '<br>raised: ' + esc(h.error[i]) : '') + '<br>'
            + esc((tl.lanes[h.lane[i]] || {}).thread || (tl.lanes[h.lane[i]] || {}).label || '?') + ', run '
            + esc(tl.run_id)
            + (tl.clock ? ', host clock (CLOCK_REALTIME) put on rank 0\u2019s clock, measured'
              : ', host clock (CLOCK_REALTIME), measured'));
          t.customdata.push([tl.regions[r], h.iid[i]]);
        });
        return {traces: values(byRegion), aggregated: false, shown: shown.length};
      }
      var a = range ? lo : 0, span = (range ? hi : tl.span) - a, w = Math.max(1, span / HOST_BINS);
      var bins = {};
      shown.forEach(function (i) {
        var s = Math.max(h.start[i], a), e = Math.min(h.end[i], a + span);
        for (var k = Math.floor((s - a) / w); k <= Math.floor((Math.max(e, s) - a) / w); k++) {
          var b0 = a + k * w, ov = Math.min(e, b0 + w) - Math.max(s, b0);
          var key = h.lane[i] + ':' + k, bin = bins[key] || (bins[key] = {lane: h.lane[i], k: k, n: 0, by: {}});
          bin.n++;
          bin.by[h.region[i]] = (bin.by[h.region[i]] || 0) + Math.max(ov, 0);
        }
      });
      Object.keys(bins).forEach(function (key) {
        var bin = bins[key], best = -1, most = -1, busy = 0;
        Object.keys(bin.by).forEach(function (r) {
          busy += bin.by[r];
          if (bin.by[r] > most) { most = bin.by[r]; best = Number(r); }
        });
        var t = trace(best);
        t.y.push(bin.lane);
        t.base.push((a + bin.k * w) / 1e6);
        t.x.push(w / 1e6);
        t.hovertext.push(bin.n + ' region instance(s), busy ' + fmt(busy, 'ns') + ' in ' + fmt(w, 'ns')
          + '<br>longest: ' + esc(tl.regions[best]) + '<br>aggregated, run ' + esc(tl.run_id) + '; zoom in to see each');
        t.customdata.push([tl.regions[best], null]);
      });
      return {traces: values(byRegion), aggregated: true, shown: shown.length, bin: w};
    }

    function deviceTraces(tl, range) {
      var d = tl.device;
      if (!d || !d.total) return {traces: [], note: ''};
      var byRegion = {};
      function trace(r, label) {
        var key = String(r);
        return byRegion[key] || (byRegion[key] = {type: 'bar', orientation: 'h', y: [], base: [], x: [],
          hovertext: [], customdata: [], hoverinfo: 'text', name: label, showlegend: r < 0,
          legendgroup: 'r' + r, width: 0.8,
          marker: {color: r < 0 ? PAL.outside : (tl.colors || [])[r], line: {width: 0},
            opacity: d.exact ? [] : 1}});
      }
      var lo = range ? range[0] * 1e6 : -Infinity, hi = range ? range[1] * 1e6 : Infinity;
      function classTrace(cls) {
        var key = 'class:' + cls;
        return byRegion[key] || (byRegion[key] = {type: 'bar', orientation: 'h', y: [], base: [], x: [],
          hovertext: [], customdata: [], hoverinfo: 'text', name: 'kernels: ' + esc(cls), showlegend: true,
          legendgroup: 'c' + cls, width: 0.8,
          marker: {color: classColor(cls), opacity: [], line: {width: 0}}});
      }
      if (d.exact) {
        for (var i = 0; i < d.start.length; i++) {
          if (d.end[i] < lo || d.start[i] > hi) continue;
          var r = d.region[i];
          var cls = d['class'] ? d['class'][i] : 'exact';
          var t = colourBy === 'class' ? classTrace(cls)
            : trace(r, r < 0 ? 'kernels outside regions' : esc(tl.regions[r]));
          t.y.push(d.lane[i]);
          t.base.push(d.start[i] / 1e6);
          t.x.push(Math.max((d.end[i] - d.start[i]) / 1e6, 1e-6));
          t.hovertext.push(esc(d.names[d.name[i]]) + '<br>' + fmt(d.end[i] - d.start[i], 'ns') + ' \u00b7 '
            + (r < 0 ? 'outside every region' : 'region ' + esc(tl.regions[r])) + ' (' + esc(cls) + ')<br>'
            + esc((tl.lanes[d.lane[i]] || {}).label || '') + ', run ' + esc(tl.run_id)
            + ', CUPTI activity record, measured; click for this kernel');
          // by region: placed by time, not by identity, reads lighter; by class the colour says it
          t.marker.opacity.push(colourBy === 'class' || cls === 'exact' ? 1 : 0.55);
          t.customdata.push([r < 0 ? null : tl.regions[r], d.iid ? d.iid[i] : null, i]);
        }
        return {traces: values(byRegion), note: d.total + ' kernel record(s), every one drawn, '
          + (colourBy === 'class' ? 'coloured by attribution class (the region: on hover, and above on the host lanes)'
            : 'coloured by region (lighter: placed by time)')};
      }
      var visible = range ? (hi - lo) : tl.span;
      var target = visible / 800;  // about one bin per pixel of the plot
      var lvl = d.levels[d.levels.length - 1], li = d.levels.length - 1;
      for (var j = 0; j < d.levels.length; j++) {
        if (d.levels[j].bin_ns <= target) { lvl = d.levels[j]; li = j; break; }
      }
      var w = lvl.bin_ns, shownBins = 0;
      for (var k = 0; k < lvl.bin.length; k++) {
        var s0 = lvl.bin[k] * w;
        if (s0 + w < lo || s0 > hi) continue;
        var rr = lvl.region[k];
        var tt = trace(rr, rr < 0 ? 'kernels outside regions' : esc(tl.regions[rr]));
        tt.y.push(lvl.lane[k]);
        tt.base.push(s0 / 1e6);
        tt.x.push(w / 1e6);
        tt.hovertext.push(lvl.count[k] + ' kernel(s), busy ' + fmt(lvl.busy[k], 'ns') + ' in '
          + fmt(w, 'ns') + '<br>longest in region ' + (rr < 0 ? '(none)' : esc(tl.regions[rr]))
          + '<br>aggregated level ' + li + ', run ' + esc(tl.run_id));
        tt.customdata.push([rr < 0 ? null : tl.regions[rr], null]);
        shownBins++;
      }
      return {traces: values(byRegion), note: d.total + ' kernel record(s) aggregated into bins of '
        + fmt(w, 'ns') + ' (level ' + (li + 1) + ' of ' + d.levels.length + ', ' + shownBins
        + ' bins drawn); zoom in to refine'
        + (li === d.levels.length - 1 && w > 1 ? '; this is the finest level embedded, the rest stays in the store' : '')};
    }

    function values(o) { return Object.keys(o).map(function (k) { return o[k]; }); }

    // the kernel clicked in a timeline, from what the timeline itself embeds (every kernel it draws one by one)
    function showKernel(tl, k, alone) {
      var d = tl.device;
      if (alone) {
        while (drillEl.firstChild) drillEl.removeChild(drillEl.firstChild);
        drillEl.appendChild(b.el('div', 'argus-drill-title', 'a kernel outside every region'));
      }
      var region = d.region[k] < 0 ? '(outside every region)' : tl.regions[d.region[k]];
      var row = {name: d.names[d.name[k]], display_name: d.names[d.name[k]], region: region,
        'class': d['class'] ? d['class'][k] : 'exact', start_us: d.start[k] / 1e3,
        duration_ns: d.end[k] - d.start[k], lane: (tl.lanes[d.lane[k]] || {}).label || '', run_id: tl.run_id};
      var node = table(b, [kernelCol(), {key: 'region', label: 'region'}, {key: 'class', label: 'class'},
        {key: 'start_us', label: 'start (\u00b5s after the run\u2019s first event)',
          fmt: function (v) { return Number(v).toFixed(1); }},
        {key: 'duration_ns', label: 'duration', unit: 'ns'}, {key: 'lane', label: 'stream'},
        {key: 'run_id', label: 'run'}], [row], {maxRows: 1});
      var title = b.el('h4', 'argus-h argus-clicked-kernel', 'the kernel clicked');
      drillEl.insertBefore(node, drillEl.children[1] || null);
      drillEl.insertBefore(title, node);
    }

    function drawTimeline(plot, info, tl) {
      if (!plotly()) {
        info.textContent = 'the timeline needs plotly.js, which is not on this page (open the exported HTML '
          + 'report, or JupyterLab with the argus extension); the tables and drill-down work without it';
        return;
      }
      var lanes = tl.lanes || [];
      // open on the measured repetitions: warm-up instances (often a slow first call) stay left of the view
      var initial = null, h = tl.host, firstMeasured = Infinity;
      for (var i = 0; i < h.start.length; i++) {
        if (!h.warmup[i] && h.start[i] < firstMeasured) firstMeasured = h.start[i];
      }
      if (firstMeasured !== Infinity && firstMeasured > 0) {
        initial = [(firstMeasured - 0.02 * (tl.span - firstMeasured)) / 1e6, tl.span / 1e6];
      }
      var host = hostTraces(tl, initial);
      var dev = deviceTraces(tl, initial);
      var hostNote = tl.host.total > tl.host.shown ? tl.host.shown + ' of ' + tl.host.total
        + ' region instances embedded; ' : tl.host.total + ' region instance(s); ';
      if (initial) hostNote += 'opened on the measured repetitions (double-click the plot to see the warm-up too); ';
      if (tl.clock) {
        hostNote += (tl.ranks || []).length + ' ranks, each on rank 0\u2019s clock (offsets '
          + Object.keys(tl.clock.offsets_ns).map(function (r) { return 'rank ' + r + ' ' + fmt(tl.clock.offsets_ns[r], 'ns'); }).join(', ')
          + '); ';
      }
      function hostLine(hh) {
        return hh.aggregated ? hh.shown + ' region instances in view, aggregated into bins of ' + fmt(hh.bin, 'ns')
          + ' (zoom in to draw each); ' : '';
      }
      info.textContent = hostNote + hostLine(host) + (dev.note || 'no device records');
      var xtitle = 'ms since the run\u2019s first timestamp' + (tl.clock ? ' (rank 0\u2019s clock)' : '');
      var layout = {
        barmode: 'overlay', height: Math.max(240, 90 + 24 * lanes.length), margin: {l: 200, r: 10, t: 40, b: 40},
        xaxis: initial ? {title: {text: xtitle}, zeroline: false, range: initial,
          autorange: false} : {title: {text: xtitle}, zeroline: false},
        yaxis: {tickmode: 'array', tickvals: lanes.map(function (l, i) { return i; }),
          ticktext: lanes.map(function (l) { return esc(l.label); }), range: [lanes.length - 0.5, -0.5],
          autorange: false, fixedrange: true},
        legend: {orientation: 'h', x: 0, y: 1.02, yanchor: 'bottom'}, hovermode: 'closest', bargap: 0.1
      };
      P.newPlot(plot, host.traces.concat(dev.traces), layout, {displaylogo: false, responsive: true});
      plots.push(plot);
      var busy = false;
      plot.on('plotly_click', function (ev) {
        var pt = ev && ev.points && ev.points[0];
        if (!pt || !pt.customdata) return;
        var cd = pt.customdata, k = cd.length > 2 ? cd[2] : null;
        if (cd[0] != null) drill(cd[0], cd[1]);
        if (k != null && tl.device && tl.device.exact) showKernel(tl, k, cd[0] == null);
      });
      if ((tl.device && tl.device.total && !tl.device.exact) || tl.host.start.length > HOST_EXACT_MAX) {
        plot.on('plotly_relayout', function (ev) {
          if (busy) return;
          var r = null;
          if (ev && ev['xaxis.range[0]'] != null) r = [ev['xaxis.range[0]'], ev['xaxis.range[1]']];
          else if (ev && ev['xaxis.range']) r = ev['xaxis.range'];
          else if (!(ev && ev['xaxis.autorange'])) return;
          var nextHost = hostTraces(tl, r), next = deviceTraces(tl, r);
          info.textContent = hostNote + hostLine(nextHost) + (next.note || 'no device records');
          busy = true;
          var lay = plot.layout;
          if (r) { lay.xaxis.range = r; lay.xaxis.autorange = false; }
          Promise.resolve(P.react(plot, nextHost.traces.concat(next.traces), lay)).then(function () { busy = false; },
            function () { busy = false; });
        });
      }
    }

    // -- device regions: per-SM lanes of one instrumented launch ---------------------------------------------
    function showLaunch(i) {
      select('Device');
      if (device.pick) {
        device.pick.value = String(i);
        device.draw();
      }
    }

    function deviceBars(t, range) {
      var byRegion = {};
      function trace(r) {
        return byRegion[r] || (byRegion[r] = {type: 'bar', orientation: 'h', y: [], base: [], x: [], width: [],
          hovertext: [], hoverinfo: 'text', name: esc(t.regions[r]), legendgroup: 'd' + r,
          marker: {color: (t.colors || [])[r], line: {width: 0}}});
      }
      var lo = range ? range[0] * 1e3 : -Infinity, hi = range ? range[1] * 1e3 : Infinity;
      if (t.exact) {
        for (var i = 0; i < t.start.length; i++) {
          if (t.end[i] < lo || t.start[i] > hi) continue;
          var tr = trace(t.region[i]);
          tr.y.push(t.lane[i]);
          tr.base.push(t.start[i] / 1e3);
          tr.x.push(Math.max(t.end[i] - t.start[i], 1) / 1e3);
          tr.width.push(0.8 - 0.25 * Math.min(t.depth[i], 2));
          tr.hovertext.push(esc(t.regions[t.region[i]]) + ' \u00b7 CTA ' + t.cta[i] + ' \u00b7 '
            + esc(t.lanes[t.lane[i]]) + '<br>' + fmt(t.end[i] - t.start[i], 'ns') + ' (GPU %globaltimer)');
        }
        return {traces: values(byRegion), note: t.total + ' device region occurrence(s), every one drawn'};
      }
      var visible = range ? (hi - lo) : t.span;
      var target = visible / 1500;
      var lvl = t.levels[t.levels.length - 1], li = t.levels.length - 1;
      for (var j = 0; j < t.levels.length; j++) {
        if (t.levels[j].bin_ns <= target) { lvl = t.levels[j]; li = j; break; }
      }
      var w = lvl.bin_ns;
      for (var k = 0; k < lvl.bin.length; k++) {
        var s0 = lvl.bin[k] * w;
        if (s0 + w < lo || s0 > hi) continue;
        var tt = trace(lvl.region[k]);
        tt.y.push(lvl.lane[k]);
        tt.base.push(s0 / 1e3);
        tt.x.push(w / 1e3);
        tt.width.push(0.8);
        tt.hovertext.push(lvl.count[k] + ' occurrence(s), busy ' + fmt(lvl.busy[k], 'ns') + ' in ' + fmt(w, 'ns')
          + '<br>longest: ' + esc(t.regions[lvl.region[k]]) + ' \u00b7 ' + esc(t.lanes[lvl.lane[k]])
          + '<br>aggregated level ' + (li + 1) + ' of ' + t.levels.length);
      }
      return {traces: values(byRegion), note: t.total + ' device region occurrence(s) aggregated into bins of '
        + fmt(w, 'ns') + ' per SM (level ' + (li + 1) + ' of ' + t.levels.length + '); zoom in to refine'
        + (li === t.levels.length - 1 ? '; this is the finest level embedded, the rest stays in the store' : '')};
    }

    function drawDevice(plot, info, t) {
      var head = t.label + ' \u00b7 run ' + t.run_id + ' \u00b7 ' + t.attribution + ' \u00b7 tail imbalance '
        + fmt(t.tail.imbalance, 'ns') + ' (last SM end ' + fmt(t.tail.last_end, 'ns') + ', median SM end '
        + fmt(t.tail.median_end, 'ns') + '); ';
      if (!plotly()) {
        info.textContent = head + 'the lanes need plotly.js, which is not on this page (open the exported HTML '
          + 'report, or JupyterLab with the argus extension)';
        return;
      }
      var bars = deviceBars(t, null);
      info.textContent = head + bars.note;
      var marks = [[t.tail.median_end, 'median SM end'], [t.tail.last_end, 'last SM end']];
      var every = Math.max(1, Math.ceil(t.lanes.length / 44)), laneTicks = [];  // labels readable, lanes all drawn
      for (var li = 0; li < t.lanes.length; li += every) laneTicks.push(li);
      var layout = {
        barmode: 'overlay', height: Math.max(300, 90 + 7 * t.lanes.length), margin: {l: 70, r: 10, t: 40, b: 40},
        xaxis: {title: {text: '\u00b5s since the launch\u2019s first CTA began (GPU %globaltimer)'}, zeroline: false},
        yaxis: {tickmode: 'array', tickvals: laneTicks, ticktext: laneTicks.map(function (i) { return esc(t.lanes[i]); }),
          range: [t.lanes.length - 0.5, -0.5], autorange: false, fixedrange: true},
        shapes: marks.map(function (m) {
          return {type: 'line', x0: m[0] / 1e3, x1: m[0] / 1e3, yref: 'paper', y0: 0, y1: 1,
            line: {dash: 'dash', color: '#444', width: 1}};
        }),
        annotations: marks.map(function (m, i) {
          return {x: m[0] / 1e3, yref: 'paper', y: 1, yanchor: 'bottom', text: m[1], showarrow: false,
            xanchor: i ? 'left' : 'right', font: {size: 10}};
        }),
        legend: {orientation: 'h', x: 0, y: 1.06, yanchor: 'bottom'}, hovermode: 'closest', bargap: 0.1
      };
      P.newPlot(plot, bars.traces, layout, {displaylogo: false, responsive: true});
      plots.push(plot);
      if (!t.exact) {
        var busy = false;
        plot.on('plotly_relayout', function (ev) {
          if (busy) return;
          var r = null;
          if (ev && ev['xaxis.range[0]'] != null) r = [ev['xaxis.range[0]'], ev['xaxis.range[1]']];
          else if (ev && ev['xaxis.range']) r = ev['xaxis.range'];
          else if (!(ev && ev['xaxis.autorange'])) return;
          var next = deviceBars(t, r);
          info.textContent = head + next.note;
          busy = true;
          var lay = plot.layout;
          if (r) { lay.xaxis.range = r; lay.xaxis.autorange = false; }
          Promise.resolve(P.react(plot, next.traces, lay)).then(function () { busy = false; },
            function () { busy = false; });
        });
      }
    }

    if (DT.length || (J.device || []).length) {
      tab('Device', function (pane) {
        pane.appendChild(b.el('div', 'argus-note', 'Device regions of instrumented launches: one lane per SM '
          + '(the last SMs to finish at the bottom), each bar a region occurrence of one CTA, on the GPU\u2019s '
          + '%globaltimer. The dashed marks are the median and the last SM end: their distance is the tail '
          + 'imbalance (dev.tail). Values come from the instrumented run; gpu.* stay on the clean run.'));
        if (DT.length) {
          var pick = b.el('select', 'argus-select');
          DT.forEach(function (t, i) {
            var o = b.el('option', null, t.label + ' \u00b7 ' + t.run_id + (t.warmup ? ' (warm-up)' : ''));
            o.value = String(i);
            pick.appendChild(o);
          });
          pane.appendChild(pick);
          var info = b.el('div', 'argus-note');
          pane.appendChild(info);
          var plot = b.el('div', 'argus-plot argus-device');
          pane.appendChild(plot);
          var vals = b.el('div');
          pane.appendChild(vals);
          device.pick = pick;
          device.draw = function () {
            var t = DT[Number(pick.value)];
            drawDevice(plot, info, t);
            while (vals.firstChild) vals.removeChild(vals.firstChild);
            vals.appendChild(b.el('h4', 'argus-h', 'values of this launch (join: device_values)'));
            vals.appendChild(table(b, [{key: 'region', label: 'device region'}, {key: 'signal', label: 'signal'},
              {key: 'value', label: 'value', unit: function (r) { return r.unit; }},
              {key: 'p10', label: 'p10', unit: function (r) { return r.unit; }},
              {key: 'p90', label: 'p90', unit: function (r) { return r.unit; }},
              {key: 'min', label: 'min', unit: function (r) { return r.unit; }},
              {key: 'max', label: 'max', unit: function (r) { return r.unit; }},
              {key: 'n', label: 'CTAs / SMs'}], t.values || [], {maxRows: maxRows}));
          };
          pick.addEventListener('change', device.draw);
          device.draw();
        } else {
          pane.appendChild(b.el('div', 'argus-note', 'no instrumented launch is embedded in this bundle'));
        }
        pane.appendChild(b.el('h4', 'argus-h', 'device regions per host region and kernel, over launches'));
        pane.appendChild(table(b, deviceCols(), J.device || [], {maxRows: maxRows,
          onRowClick: function (r) { drill(r.path); }, empty: 'no dev.* values'}));
        if ((J.device_overhead || []).length) {
          pane.appendChild(b.el('h4', 'argus-h', 'overhead of the instrumented variant (kernel time, same launches)'));
          pane.appendChild(table(b, [{key: 'kernel', label: 'kernel'}, {key: 'launches', label: 'launches'},
            {key: 'clean_median_ns', label: 'clean', unit: 'ns'},
            {key: 'instrumented_median_ns', label: 'instrumented', unit: 'ns'},
            {key: 'ratio_median', label: 'ratio', fmt: function (v) { return v == null ? '-' : v.toFixed(3) + 'x'; }},
            {key: 'run_id', label: 'instrumented run'}, {key: 'note', label: 'note', prose: true}], J.device_overhead,
          {maxRows: maxRows}));
        }
      });
    }

    // -- counters -------------------------------------------------------------------------------------------
    tab('Counters', function (pane) {
      if ((J.kernels || []).length) {
        pane.appendChild(b.el('h4', 'argus-h', 'kernels by region and ordinal, with the counters joined to them'));
        mainGroupTable(pane, kernelOrdinalCols(), J.kernels, {maxRows: maxRows,
          onRowClick: function (r) { drill(r.path); }});
      }
      if ((J.compiler || []).length) {
        pane.appendChild(b.el('h4', 'argus-h', 'compiler facts'));
        pane.appendChild(table(b, compilerCols(), J.compiler, {maxRows: maxRows, reasons: MISSING}));
      }
      pane.appendChild(b.el('h4', 'argus-h', 'per-kernel values (filter below)'));
      var filt = b.el('input', 'argus-filter');
      filt.placeholder = 'filter by region, kernel or signal';
      pane.appendChild(filt);
      var holder = b.el('div');
      pane.appendChild(holder);
      function fill() {
        var q = filt.value.toLowerCase();
        var rows = (T.counters || []).filter(function (r) {
          return !q || [r.path, r.display_name || r.name, r.signal].join(' ').toLowerCase().indexOf(q) >= 0;
        });
        while (holder.firstChild) holder.removeChild(holder.firstChild);
        holder.appendChild(table(b, counterCols(), rows, {maxRows: maxRows, total: q ? rows.length : total('counters'),
          onRowClick: function (r) { if (r.path) drill(r.path); },
          empty: 'no per-kernel counters or compiler facts in these runs'}));
      }
      filt.addEventListener('input', fill);
      fill();
      pane.appendChild(b.el('h4', 'argus-h', 'kernels by region'));
      mainGroupTable(pane, [{key: 'path', label: 'region'}, kernelCol(),
        {key: 'count', label: 'launches'}, {key: 'warmup', label: 'warm-up launches (apart)'},
        {key: 'total_ns', label: 'total', unit: 'ns'},
        {key: 'mean_ns', label: 'mean', unit: 'ns'}, {key: 'registers', label: 'registers'},
        {key: 'runs', label: 'origin run'}], T.kernel_groups || [], {maxRows: maxRows,
        total: total('kernel_groups'), onRowClick: function (r) { drill(r.path); }, empty: 'no kernel records'});
    });

    // -- attribution ----------------------------------------------------------------------------------------
    tab('Attribution', function (pane) {
      var rows = T.attribution || [];
      pane.appendChild(b.el('div', 'argus-note', 'For each region and signal: how many values each attribution '
        + 'class holds (exact = carried the instance id, ordinal = matched across runs by position, temporal = '
        + 'by time overlap, ambiguous / mismatch = kept with every candidate).'));
      if (plotly() && rows.length) {
        var paths = [], classes = {}, counts = {};
        rows.forEach(function (r) {
          if (paths.indexOf(r.path) < 0) paths.push(r.path);
          classes[r.class] = true;
          var k = r.path + '\u0000' + r.class;
          counts[k] = (counts[k] || 0) + r.n;
        });
        var traces = Object.keys(classes).map(function (c) {
          return {type: 'bar', name: esc(c || '(none)'), x: paths.map(esc),
            y: paths.map(function (p) { return counts[p + '\u0000' + c] || 0; }),
            customdata: paths, marker: {color: classColor(c)}};
        });
        var plot = b.el('div', 'argus-plot');
        pane.appendChild(plot);
        P.newPlot(plot, traces, {barmode: 'stack', height: 300, margin: {l: 50, r: 10, t: 10, b: 90},
          yaxis: {title: {text: 'values'}}}, {displaylogo: false, responsive: true});
        plots.push(plot);
        plot.on('plotly_click', function (ev) {
          var pt = ev && ev.points && ev.points[0];
          if (pt && pt.customdata) drill(pt.customdata);
        });
      }
      pane.appendChild(table(b, [{key: 'path', label: 'region'}, {key: 'signal', label: 'signal'},
        {key: 'class', label: 'class'}, {key: 'n', label: 'values'},
        {key: 'total', label: 'combined', unit: function (r) { return r.unit; }},
        {key: 'agg', label: 'combined as', fmt: function (v) { return AGG_TEXT[v] || v || 'sum'; }}], rows,
      {maxRows: maxRows, onRowClick: function (r) { drill(r.path); }, empty: 'no attributed values'}));
      if ((J.attribution || []).length) {
        pane.appendChild(b.el('h4', 'argus-h', 'attribution by evidence kind'));
        pane.appendChild(table(b, [{key: 'evidence', label: 'evidence'}, {key: 'signals', label: 'signals'},
          {key: 'items', label: 'items'}, {key: 'shares', label: 'by weight', fmt: shares},
          {key: 'time_shares', label: 'by kernel time', fmt: shares}], J.attribution, {maxRows: maxRows}));
      }
      if ((J.matches || []).length) {
        pane.appendChild(b.el('h4', 'argus-h', 'runs matched to the reference run'));
        pane.appendChild(table(b, [{key: 'run_id', label: 'run'}, {key: 'ref_run_id', label: 'reference'},
          {key: 'status', label: 'status'}, {key: 'instances', label: 'instances'},
          {key: 'example_path', label: 'example'}, {key: 'difference', label: 'difference'}], J.matches,
        {maxRows: maxRows}));
      }
      pane.appendChild(b.el('h4', 'argus-h', 'evidence items by class'));
      pane.appendChild(table(b, [{key: 'path', label: 'region'}, {key: 'evidence', label: 'evidence'},
        {key: 'class', label: 'class'}, {key: 'n', label: 'items'}, {key: 'weight', label: 'weight',
          fmt: function (v) { return v == null ? '' : Number(v).toPrecision(4); }}],
      T.evidence_classes || [], {maxRows: maxRows, onRowClick: function (r) { drill(r.path); },
        empty: 'no attribution records (host-only runs attribute every value exactly)'}));
      pane.appendChild(b.el('h4', 'argus-h', 'what each class means'));
      pane.appendChild(table(b, [{key: 'class', label: 'class'}, {key: 'meaning', label: 'meaning'}],
        T.class_meanings || [], {maxRows: maxRows}));
      pane.appendChild(b.el('h4', 'argus-h', 'ambiguous, mismatched and unattributed items'));
      pane.appendChild(table(b, [{key: 'class', label: 'class'}, {key: 'evidence', label: 'evidence'},
        {key: 'evidence_id', label: 'item'},
        {key: 'candidates', label: 'candidates', fmt: function (v) { return (v || []).join('; '); }},
        {key: 'reason', label: 'reason', prose: true}, {key: 'run_id', label: 'run'}], T.ambiguous || [],
      {maxRows: maxRows, total: total('ambiguous'), empty: 'none: every item has one region instance'}));
    });

    // -- runs -----------------------------------------------------------------------------------------------
    tab('Runs', function (pane) {
      pane.appendChild(table(b, runCols(), bundle.runs || [], {maxRows: maxRows}));
      pane.appendChild(b.el('h4', 'argus-h', 'provenance'));
      pane.appendChild(table(b, provenanceCols(), T.provenance || [], {maxRows: maxRows}));
    });

    select(options.tab || 'Regions');
    return {
      drill: function (path) { return drill(bidiSafe(String(path))); },
      select: select,
      destroy: function () {
        plots.forEach(function (p) { if (P && P.purge) P.purge(p); });
        while (el.firstChild) el.removeChild(el.firstChild);
      }
    };
  }

  return {render: render, version: VERSION};
});
