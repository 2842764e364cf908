/**
 * The load-test report as one HTML page: inline CSS, charts as inline SVG
 * drawn here (no chart library), no scripts and no fetches, so the file can be
 * mailed, archived and opened offline. Hover tooltips come from SVG `<title>`
 * elements, which browsers show without JS.
 */
import type {
  CapacityResult,
  Comparison,
  Distribution,
  EngineBenchSection,
  LoadtestReport,
  PhaseReport,
  TargetCheck,
} from './model.js';
import { DASH, METRICS, escapeHtml, fixed, formatInt, formatMs, isNum } from './format.js';
import {
  cdfSvg,
  histogramSvg,
  linearScale,
  linearTicks,
  logDomain,
  px,
  svgOpen,
  tickLabel,
  xAxis,
  yAxis,
  type Frame,
  type SeriesStyle,
} from './svg.js';

export { escapeHtml, formatMs };

/** Okabe–Ito: stays distinguishable with the common colour-vision deficiencies (its yellow is too pale on white). */
const PALETTE = ['#0072B2', '#E69F00', '#009E73', '#D55E00', '#CC79A7', '#56B4E9', '#000000'];
/** After the palette runs out, phases repeat its colours with dashed lines. */
const DASHES = ['', '6 3', '2 2'];
/** Client event-loop p99 above this makes the latency numbers suspect, so the page flags it. */
const CLIENT_LAG_WARN_MS = 50;

/** Renders a report as one self-contained HTML page (inline CSS and SVG, no scripts or fetches needed; opens offline). */
export function renderHtmlReport(report: LoadtestReport): string {
  // One colour per phase for the whole page, so a phase reads the same in every chart.
  const styles = new Map<string, SeriesStyle>(
    report.phases.map((phase, i) => [
      phase.name,
      {
        color: PALETTE[i % PALETTE.length]!,
        dash: DASHES[Math.floor(i / PALETTE.length) % DASHES.length]!,
      },
    ]),
  );
  const body = [
    headerSection(report),
    targetsSection(report.targets),
    comparisonsSection(report.comparisons),
    phasesSection(report.phases),
    distributionsSection(report.phases, styles),
    report.capacity ? capacitySection(report.capacity) : '',
    report.engineBench ? engineBenchSection(report.engineBench) : '',
  ];
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Troupe load test — ${escapeHtml(report.generatedAt)}</title>
<style>${CSS}</style>
</head>
<body>
<main>
${body.filter(Boolean).join('\n')}
</main>
</body>
</html>
`;
}

const esc = escapeHtml;

// ---------------------------------------------------------------- formatting

/** Same precision rule as ms, for any measured value. */
const formatValue = formatMs;

function formatRatio(value: number | null | undefined): string {
  return isNum(value) ? `${fixed(value, 3)}×` : DASH;
}

function formatPct(value: number | null | undefined): string {
  return isNum(value) ? `${value > 0 ? '+' : ''}${fixed(value, 1)}%` : DASH;
}

/** A configured number (a goal, a limit): as written, no padding zeros. */
function formatPlain(value: number | null | undefined): string {
  return isNum(value) ? value.toLocaleString('en-US', { maximumFractionDigits: 6 }) : DASH;
}

function badge(pass: boolean): string {
  return pass ? '<span class="badge pass">PASS</span>' : '<span class="badge fail">FAIL</span>';
}

// ---------------------------------------------------------------- HTML pieces

/** A header; numeric columns are right-aligned with tabular digits, header included. */
type Column = string | { label: string; numeric: true };
/** Cell HTML, or cell HTML spanning several columns. */
type Cell = string | { html: string; span: number };

function right(label: string): Column {
  return { label, numeric: true };
}

function table(columns: Column[], rows: Cell[][]): string {
  const numeric = columns.map((c) => typeof c !== 'string');
  const th = columns
    .map((c) => (typeof c === 'string' ? `<th>${c}</th>` : `<th class="r">${c.label}</th>`))
    .join('');
  const tr = rows.map((row) => {
    let column = 0;
    const cells = row.map((cell) => {
      const { html, span } = typeof cell === 'string' ? { html: cell, span: 1 } : cell;
      const cls = numeric[column] ? ' class="r"' : '';
      column += span;
      return `<td${cls}${span > 1 ? ` colspan="${span}"` : ''}>${html}</td>`;
    });
    return `<tr>${cells.join('')}</tr>`;
  });
  return `<div class="scroll"><table><thead><tr>${th}</tr></thead><tbody>${tr.join('')}</tbody></table></div>`;
}

function section(id: string, title: string, content: string): string {
  return `<section id="${id}"><h2>${title}</h2>\n${content}\n</section>`;
}

function headerSection(report: LoadtestReport): string {
  const { machine, target } = report;
  const sim = target.sim
    ? `simulator, profile <b>${esc(target.sim.profile)}</b>: TTFT ${formatPlain(target.sim.ttftMs)} ms, ` +
      `${formatPlain(target.sim.tokensPerSec)} tokens/s, jitter ±${formatPlain(target.sim.jitterMs)} ms`
    : 'any LLM (no simulator: the numbers include the model’s own latency)';
  const passed = report.targets.filter((t) => t.pass).length;
  const total = report.targets.length;
  const verdict =
    total === 0
      ? ''
      : `<p class="verdict">${badge(passed === total)} ${passed} of ${total} targets met</p>`;
  return `<header>
<h1>Troupe load test</h1>
${verdict}
<dl class="meta">
<dt>Generated</dt><dd>${esc(report.generatedAt)}</dd>
<dt>Command</dt><dd><code>${esc(report.command)}</code></dd>
<dt>Machine</dt><dd>${esc(machine.cpuModel)} · ${formatInt(machine.cpus)} CPUs · ${formatPlain(machine.memGiB)} GiB · Node ${esc(machine.node)} · ${esc(machine.platform)}</dd>
<dt>Target</dt><dd><code>${esc(target.url)}</code></dd>
<dt>LLM</dt><dd>${sim}</dd>
</dl>
</header>`;
}

function targetsSection(targets: TargetCheck[]): string {
  if (targets.length === 0) {
    return section('targets', 'Targets', '<p class="muted">No targets checked.</p>');
  }
  const rows = targets.map((t) => [
    esc(t.name),
    // Counts (errors, sessions) are whole numbers; latencies and ratios are measured.
    t.unit === '' || t.unit === 'sessions' ? formatInt(t.value) : formatValue(t.value),
    `${esc(t.op)} ${formatPlain(t.target)}`,
    esc(t.unit),
    badge(t.pass),
  ]);
  const columns = ['Target', right('Value'), right('Goal'), 'Unit', 'Result'];
  return section('targets', 'Targets', table(columns, rows));
}

function comparisonsSection(comparisons: Comparison[]): string {
  if (comparisons.length === 0) return '';
  const rows = comparisons.map((c) => [
    esc(c.name),
    esc(c.metric),
    esc(c.subject),
    formatValue(c.subjectValue),
    esc(c.baseline),
    formatValue(c.baselineValue),
    formatRatio(c.ratio),
    formatPct(c.increasePct),
  ]);
  const columns = [
    'Comparison',
    'Metric',
    'Subject',
    right('Value'),
    'Baseline',
    right('Value'),
    right('Ratio'),
    right('Increase'),
  ];
  return section('comparisons', 'Comparisons', table(columns, rows));
}

function errorsText(errors: Record<string, number>): string {
  const entries = Object.entries(errors).filter(([, count]) => count > 0);
  if (entries.length === 0) return '<span class="muted">none</span>';
  return entries
    .sort((a, b) => b[1] - a[1])
    .map(([kind, count]) => `<code>${esc(kind)}</code> ${formatInt(count)}`)
    .join(', ');
}

function slashed(values: string[]): string {
  return values.join(' / ');
}

function loadTable(phases: PhaseReport[]): string {
  const rows = phases.map((p) => [
    `<b>${esc(p.name)}</b>`,
    esc(p.scenario),
    p.character === null ? DASH : esc(p.character),
    isNum(p.durationS) ? fixed(p.durationS, 1) : DASH,
    slashed(
      [p.sessions.target, p.sessions.reached, p.sessions.peak, p.sessions.failed].map(formatInt),
    ),
    slashed([p.turns.completed, p.turns.failed].map(formatInt)),
    slashed([fixed(p.activeTurns.mean, 1), formatInt(p.activeTurns.peak)]),
    formatValue(p.deltasPerSec),
  ]);
  const columns = [
    'Phase',
    'Scenario',
    'Character',
    right('Duration s'),
    right('Sessions target / reached / peak / failed'),
    right('Turns done / failed'),
    right('In flight mean / peak'),
    right('Deltas/s'),
  ];
  return table(columns, rows);
}

function healthTable(phases: PhaseReport[]): string {
  const rows = phases.map((p) => {
    const lag = p.clientLagMs;
    const lagCell = slashed([lag.p50, lag.p99, lag.max].map(formatMs));
    const suspect = isNum(lag.p99) && lag.p99 > CLIENT_LAG_WARN_MS;
    const server = p.server;
    return [
      `<b>${esc(p.name)}</b>`,
      errorsText(p.errors),
      suspect
        ? `<span class="warn" title="the load-test client was overloaded: its latencies are suspect">⚠ ${lagCell}</span>`
        : lagCell,
      server && isNum(server.cpuPercent) ? `${fixed(server.cpuPercent, 1)}%` : DASH,
      server ? slashed([server.lagP99Ms, server.lagMaxMs].map(formatMs)) : DASH,
      server && isNum(server.rssMiB) ? fixed(server.rssMiB, 1) : DASH,
      p.machineCpu
        ? esc(
            `${p.machineCpu.parts.map((c) => `${c.name} ${c.percent}%`).join(', ')} · ` +
              `${p.machineCpu.totalPercent}% of ${p.machineCpu.cores * 100}%`,
          )
        : DASH,
    ];
  });
  const columns = [
    'Phase',
    'Errors',
    right('Client lag p50 / p99 / max ms'),
    right('Server CPU'),
    right('Server lag p99 / max ms'),
    right('Server RSS MiB'),
    'Machine CPU by process',
  ];
  return table(columns, rows);
}

function latencyTable(phases: PhaseReport[]): string {
  const rows = phases.flatMap((p) =>
    METRICS.filter((m) => p.metrics[m.key]).map((m, i): Cell[] => {
      const d = p.metrics[m.key]!;
      const phaseCell = i === 0 ? `<b>${esc(p.name)}</b>` : '';
      if (d.n === 0) {
        return [
          phaseCell,
          esc(m.title),
          '0',
          { html: '<span class="no-samples">no samples</span>', span: 5 },
        ];
      }
      const stats = [d.p50, d.p90, d.p95, d.p99, d.max].map(formatMs);
      return [phaseCell, esc(m.title), formatInt(d.n), ...stats];
    }),
  );
  const columns = [
    'Phase',
    'Metric',
    right('n'),
    ...['p50', 'p90', 'p95', 'p99', 'max'].map(right),
  ];
  return table(columns, rows);
}

function phasesSection(phases: PhaseReport[]): string {
  if (phases.length === 0) {
    return section('phases', 'Phases', '<p class="muted">No phases ran.</p>');
  }
  return section(
    'phases',
    'Phases',
    `<h3>Load</h3>
${loadTable(phases)}
<h3>Errors and lag</h3>
${healthTable(phases)}
<h3>Latency (ms)</h3>
${latencyTable(phases)}`,
  );
}

// ---------------------------------------------------------------- distributions

function hasSamples(d: Distribution): boolean {
  return d.n > 0 && d.cdf.some(([v, f]) => isNum(v) && isNum(f));
}

function distributionsSection(phases: PhaseReport[], styles: Map<string, SeriesStyle>): string {
  const parts = METRICS.map((metric) => metricBlock(metric, phases, styles)).filter(Boolean);
  if (parts.length === 0) return '';
  return section('distributions', 'Latency distributions', parts.join('\n'));
}

function metricBlock(
  metric: (typeof METRICS)[number],
  phases: PhaseReport[],
  styles: Map<string, SeriesStyle>,
): string {
  const entries = phases.flatMap((phase) => {
    const d = phase.metrics[metric.key];
    return d ? [{ phase, d, style: styles.get(phase.name)! }] : [];
  });
  if (entries.length === 0) return ''; // not measurable in any phase
  const head = `<h3>${esc(metric.title)}</h3><p class="muted">${esc(metric.what)}; ms, log scale.</p>`;
  const sampled = entries.filter((e) => hasSamples(e.d));
  if (sampled.length === 0) {
    return `<div class="metric" data-metric="${metric.key}">${head}<p class="no-samples">no samples</p></div>`;
  }
  const empty = entries.filter((e) => !hasSamples(e.d)).map((e) => esc(e.phase.name));
  const legend = sampled
    .map(
      ({ phase, d, style }) =>
        `<li>${swatch(style)} <b>${esc(phase.name)}</b> <span class="muted">n ${formatInt(d.n)} · p50 ${formatMs(d.p50)} · p95 ${formatMs(d.p95)} · p99 ${formatMs(d.p99)} ms</span></li>`,
    )
    .join('');
  const histDomain = logDomain(sampled.flatMap((e) => e.d.histogram.edges));
  const histograms = entries
    .map(({ phase, d, style }) => {
      const chart =
        hasSamples(d) && histDomain
          ? histogramSvg(d, histDomain, style, metric.title, phase.name)
          : '<p class="no-samples">no samples</p>';
      return `<figure class="small">${chart}<figcaption>${swatch(style)} ${esc(phase.name)}</figcaption></figure>`;
    })
    .join('');
  return `<div class="metric" data-metric="${metric.key}">${head}
<figure class="wide">${cdfSvg(
    metric.title,
    sampled.map((e) => ({ name: e.phase.name, d: e.d, style: e.style })),
  )}
<ul class="legend">${legend}</ul>${empty.length ? `<p class="muted">no samples in ${empty.join(', ')}</p>` : ''}</figure>
<div class="multiples">${histograms}</div>
</div>`;
}

function swatch(style: SeriesStyle): string {
  return `<svg class="swatch" width="22" height="10" aria-hidden="true"><line x1="1" y1="5" x2="21" y2="5" stroke="${style.color}" stroke-width="3" stroke-dasharray="${style.dash}"/></svg>`;
}

// ---------------------------------------------------------------- capacity

function capacitySection(capacity: CapacityResult): string {
  const found =
    capacity.sessions === null
      ? 'No step passed.'
      : `Capacity: <b>${formatInt(capacity.sessions)} sessions</b> (last passing step).`;
  const rows = capacity.steps.map((s) => [
    formatInt(s.sessions),
    formatMs(s.p95AddedMs),
    formatInt(s.errors),
    badge(s.pass),
  ]);
  const steps =
    capacity.steps.length === 0
      ? '<p class="muted">No steps ran.</p>'
      : `<figure class="wide">${capacitySvg(capacity)}<ul class="legend"><li><span class="dot pass"></span> passing step</li><li><span class="dot fail"></span> failing step</li><li>${swatch({ color: '#D55E00', dash: '6 4' })} limit ${formatPlain(capacity.limitP95AddedMs)} ms</li></ul></figure>
${table([right('Sessions'), right('p95 added ms'), right('Errors'), 'Result'], rows)}`;
  return section(
    'capacity',
    'Capacity',
    `<p>${found} Stopped because: ${esc(capacity.stoppedBecause)}.</p>\n${steps}`,
  );
}

function capacitySvg(capacity: CapacityResult): string {
  const frame: Frame = { width: 760, height: 300, top: 14, right: 20, bottom: 42, left: 56 };
  const steps = capacity.steps.slice().sort((a, b) => a.sessions - b.sessions);
  const xTicks = linearTicks(Math.max(...steps.map((s) => s.sessions)), 8, true);
  const values = steps.map((s) => s.p95AddedMs).filter(isNum);
  const yTicks = linearTicks(Math.max(capacity.limitP95AddedMs, ...values) * 1.05, 5);
  const x = linearScale([0, xTicks.top], [frame.left, frame.width - frame.right]);
  const y = linearScale([0, yTicks.top], [frame.height - frame.bottom, frame.top]);
  // A step without a p95 breaks the line rather than joining its neighbours across the gap.
  let path = '';
  let pen = false;
  for (const s of steps) {
    if (!isNum(s.p95AddedMs)) {
      pen = false;
      continue;
    }
    path += `${pen ? 'L' : 'M'}${px(x(s.sessions))} ${px(y(s.p95AddedMs))}`;
    pen = true;
  }
  const points = steps
    .filter((s) => isNum(s.p95AddedMs))
    .map((s) => {
      const cx = px(x(s.sessions));
      const cy = px(y(s.p95AddedMs!));
      const tip = `<title>${formatInt(s.sessions)} sessions: p95 ${formatMs(s.p95AddedMs)} ms, ${formatInt(s.errors)} errors, ${s.pass ? 'pass' : 'fail'}</title>`;
      // Shape as well as colour tells pass from fail.
      return s.pass
        ? `<circle class="point pass" cx="${cx}" cy="${cy}" r="4.5">${tip}</circle>`
        : `<rect class="point fail" x="${px(Number(cx) - 4.5)}" y="${px(Number(cy) - 4.5)}" width="9" height="9">${tip}</rect>`;
    });
  const limitY = px(y(capacity.limitP95AddedMs));
  const right = frame.width - frame.right;
  return `${svgOpen(frame, 'capacity', 'p95 added latency per delta vs sessions')}
${yAxis(frame, yTicks.ticks, y, tickLabel, 'p95 added latency (ms)')}
${xAxis(frame, xTicks.ticks, x, (v) => formatInt(v), 'sessions')}
<line class="limit" x1="${frame.left}" y1="${limitY}" x2="${right}" y2="${limitY}"/>
<text class="limit-label" x="${frame.left + 6}" y="${Number(limitY) - 5}">limit ${formatPlain(capacity.limitP95AddedMs)} ms</text>
<path class="capacity-line" d="${path}"/>${points.join('')}</svg>`;
}

// ---------------------------------------------------------------- engine bench

function engineBenchSection(bench: EngineBenchSection): string {
  const assembler = table(
    ['Chunk shape', right('Chunks / pass'), right('M chunks/s')],
    bench.assembler.map((a) => [
      esc(a.shape),
      formatInt(a.chunksPerPass),
      formatValue(a.mChunksPerSec),
    ]),
  );
  const target = bench.overhead.targetP99Ms;
  const overhead = table(
    [
      'Measured as',
      ...['p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'Failures'].map(right),
      `p99 ≤ ${formatPlain(target)} ms`,
    ],
    bench.overhead.rows.map((r) => [
      esc(r.label),
      ...[r.ms.p50, r.ms.p90, r.ms.p99, r.ms.max].map(formatMs),
      formatInt(r.failures),
      badge(isNum(r.ms.p99) && r.ms.p99 <= target),
    ]),
  );
  const h2h = bench.headToHead;
  const results = table(
    [
      'Engine',
      ...['CPU µs p50', 'CPU µs mean', 'CPU µs p90', 'Wall ms p50', 'Wall ms mean', 'Wall ms p90'],
      'Failures',
    ].map((label, i) => (i === 0 ? label : right(label))),
    h2h.results.map((r) => [
      esc(r.label),
      ...[r.cpuUs.p50, r.cpuUs.mean, r.cpuUs.p90].map(formatInt),
      ...[r.wallMs.p50, r.wallMs.mean, r.wallMs.p90].map(formatMs),
      formatInt(r.failures),
    ]),
  );
  const ratioPass = isNum(h2h.vsBetter) && h2h.vsBetter <= h2h.targetRatio;
  const ratio = `<p class="verdict">${badge(ratioPass)} Troupe’s mean CPU per turn is <b>${formatRatio(h2h.vsBetter)}</b> that of the better other engine (${esc(h2h.betterEngine)}); target ≤ ${formatPlain(h2h.targetRatio)}×.</p>`;
  const chart = h2h.results.length
    ? `<figure class="wide">${cpuBarsSvg(h2h.results)}</figure>`
    : '';
  return section(
    'engine-bench',
    'Engine bench',
    `<p class="muted">Run ${esc(bench.generatedAt)}.</p>
<h3>Stream assembler throughput</h3>
${assembler}
<h3>Tool round overhead</h3>
${overhead}
<h3>CPU per two-round tool turn</h3>
${ratio}
${chart}
${results}`,
  );
}

function cpuBarsSvg(results: EngineBenchSection['headToHead']['results']): string {
  const longest = Math.max(...results.map((r) => r.label.length));
  // Labels sit left of the bars; ~7 px per character at 12 px keeps them clear of the axis.
  const left = Math.min(260, Math.max(80, longest * 7 + 14));
  const rowHeight = 30;
  const frame: Frame = {
    width: 760,
    height: 14 + results.length * rowHeight + 42,
    top: 14,
    right: 90,
    bottom: 42,
    left,
  };
  const { ticks, top } = linearTicks(
    Math.max(...results.map((r) => r.cpuUs.mean).filter(isNum)),
    6,
  );
  const x = linearScale([0, top], [frame.left, frame.width - frame.right]);
  const bars = results.map((r, i) => {
    const yMid = frame.top + i * rowHeight + rowHeight / 2;
    const mean = isNum(r.cpuUs.mean) ? r.cpuUs.mean : 0;
    const color = /troupe/i.test(r.label) ? PALETTE[0] : PALETTE[1];
    const end = x(mean);
    return `<text class="bar-label" x="${frame.left - 8}" y="${px(yMid)}" dy="0.32em" text-anchor="end">${esc(r.label)}</text><rect class="bar" x="${frame.left}" y="${px(yMid - 10)}" width="${px(Math.max(0, end - frame.left))}" height="20" fill="${color}"><title>${esc(r.label)}: mean ${formatInt(r.cpuUs.mean)} µs, p50 ${formatInt(r.cpuUs.p50)} µs, p90 ${formatInt(r.cpuUs.p90)} µs</title></rect><text class="bar-value" x="${px(end + 6)}" y="${px(yMid)}" dy="0.32em">${formatInt(r.cpuUs.mean)} µs</text>`;
  });
  const y0 = frame.height - frame.bottom;
  const grid = ticks
    .map((t) => {
      const xp = px(x(t));
      return `<line class="grid" x1="${xp}" y1="${frame.top}" x2="${xp}" y2="${y0}"/><text x="${xp}" y="${y0 + 16}" text-anchor="middle">${formatInt(t)}</text>`;
    })
    .join('');
  return `${svgOpen(frame, 'cpu-bars', 'Mean CPU µs per turn by engine')}
<g class="axis x">${grid}<line class="domain" x1="${frame.left}" y1="${y0}" x2="${frame.width - frame.right}" y2="${y0}"/><text class="axis-title" x="${px((frame.left + frame.width - frame.right) / 2)}" y="${frame.height - 6}" text-anchor="middle">mean CPU µs per turn (the ratio’s basis)</text></g>
${bars.join('')}</svg>`;
}

// ---------------------------------------------------------------- style

const CSS = `
:root { color-scheme: light; --fg: #1b1f24; --muted: #5f6b76; --line: #d8dee4; --bg-alt: #f6f8fa; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color: var(--fg); background: #fff; }
main { max-width: 1120px; margin: 0 auto; padding: 24px 20px 60px; }
h1 { font-size: 26px; margin: 0 0 8px; }
h2 { font-size: 20px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 2px solid var(--line); }
h3 { font-size: 16px; margin: 22px 0 6px; }
code { font: 12.5px/1.4 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: var(--bg-alt); padding: 1px 4px; border-radius: 3px; word-break: break-all; }
.meta { display: grid; grid-template-columns: max-content 1fr; gap: 4px 14px; margin: 12px 0 0; }
.meta dt { color: var(--muted); }
.meta dd { margin: 0; }
.muted { color: var(--muted); }
.verdict { margin: 8px 0; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { padding: 5px 10px; border-bottom: 1px solid var(--line); text-align: left; vertical-align: top; }
th { background: var(--bg-alt); font-weight: 600; }
tbody tr:nth-child(even) td { background: #fbfcfd; }
th.r, td.r { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 11.5px; font-weight: 700; letter-spacing: 0.04em; }
.badge.pass { background: #dff3e4; color: #116329; border: 1px solid #9fd7ad; }
.badge.fail { background: #fde2e1; color: #a40e26; border: 1px solid #f4a9a7; }
.warn { color: #9a6700; font-weight: 600; }
.no-samples { color: var(--muted); font-style: italic; }
.metric { margin-bottom: 28px; }
figure { margin: 8px 0; }
figure.wide { max-width: 760px; overflow-x: auto; }
/* Below these widths the 11 px chart text would shrink past reading: scroll instead. */
svg.chart.cdf, svg.chart.capacity, svg.chart.cpu-bars { min-width: 560px; }
svg.chart.histogram { min-width: 280px; }
.multiples { display: grid; grid-template-columns: repeat(auto-fill, minmax(300px, 1fr)); gap: 10px 18px; }
figure.small { margin: 0; }
figure.small .no-samples { height: 120px; display: flex; align-items: center; justify-content: center; border: 1px dashed var(--line); margin: 0; }
figcaption { font-size: 12.5px; text-align: center; }
.legend { list-style: none; padding: 0; margin: 4px 0 0; display: flex; flex-wrap: wrap; gap: 4px 18px; font-size: 12.5px; }
.swatch { vertical-align: middle; }
.dot { display: inline-block; width: 9px; height: 9px; vertical-align: middle; }
.dot.pass { background: #0072B2; border-radius: 50%; }
.dot.fail { border: 2px solid #D55E00; }
svg.chart { display: block; width: 100%; height: auto; overflow: visible; }
svg.chart text { font-size: 11px; fill: #3d4650; font-family: system-ui, -apple-system, "Segoe UI", Roboto, Arial, sans-serif; }
svg.chart .axis-title { fill: var(--muted); }
svg.chart .grid { stroke: #eef1f4; }
svg.chart .tick, svg.chart .domain { stroke: #8c959f; }
svg.chart .mark { stroke: #8c959f; stroke-dasharray: 3 3; }
svg.chart .mark-label { fill: var(--muted); font-size: 10.5px; }
svg.chart .cdf-line { fill: none; stroke-width: 2; }
svg.chart .limit { stroke: #D55E00; stroke-width: 1.5; stroke-dasharray: 6 4; }
svg.chart .limit-label { fill: #D55E00; }
svg.chart .capacity-line { fill: none; stroke: #0072B2; stroke-width: 2; }
svg.chart .point.pass { fill: #0072B2; }
svg.chart .point.fail { fill: #fff; stroke: #D55E00; stroke-width: 2; }
svg.chart .bar-label { font-size: 12px; fill: var(--fg); }
@media print { h2 { break-after: avoid; } figure, table { break-inside: avoid; } }
`;
