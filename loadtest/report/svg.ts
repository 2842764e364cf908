/**
 * The report's charts, drawn as inline SVG strings (no chart library):
 * scales, ticks and axes, and the histogram and CDF of a metric.
 */
import type { Distribution } from './model.js';
import { escapeHtml as esc, formatInt, formatMs, isNum } from './format.js';

/** How a phase's series is drawn: its colour and dash pattern. */
export interface SeriesStyle {
  color: string;
  dash: string;
}

type Scale = (value: number) => number;

export interface Frame {
  width: number;
  height: number;
  top: number;
  right: number;
  bottom: number;
  left: number;
}

/** Rounded to 0.1 px: plenty for the screen, and keeps the page small. */
export function px(value: number): string {
  return String(Math.round(value * 10) / 10);
}

export function linearScale([d0, d1]: [number, number], [r0, r1]: [number, number]): Scale {
  const span = d1 - d0 || 1;
  return (value) => r0 + ((value - d0) / span) * (r1 - r0);
}

/** Values outside the domain (including ≤ 0, which a log axis cannot show) pin to its ends. */
function logScale([d0, d1]: [number, number], [r0, r1]: [number, number]): Scale {
  const l0 = Math.log10(d0);
  const span = Math.log10(d1) - l0 || 1;
  return (value) => {
    const clamped = Math.min(Math.max(isNum(value) ? value : d0, d0), d1);
    return r0 + ((Math.log10(clamped) - l0) / span) * (r1 - r0);
  };
}

/** Largest of 1, 2, 5 × 10^k at or below `value` (or the smallest at or above, with `up`). */
function niceLog(value: number, up: boolean): number {
  const k = Math.floor(Math.log10(value));
  const steps = up ? [1, 2, 5, 10] : [10, 5, 2, 1];
  for (const m of steps) {
    const candidate = Number((m * 10 ** k).toPrecision(12));
    if (up ? candidate >= value * (1 - 1e-9) : candidate <= value * (1 + 1e-9)) return candidate;
  }
  return value;
}

/** A log axis domain covering the positive values, widened to round numbers so the ends carry ticks. */
export function logDomain(values: number[]): [number, number] | null {
  const positive = values.filter((v) => isNum(v) && v > 0);
  if (positive.length === 0) return null;
  let lo = Math.min(...positive);
  let hi = Math.max(...positive);
  if (lo === hi) [lo, hi] = [lo / 2, hi * 2];
  return [niceLog(lo, false), niceLog(hi, true)];
}

/** Log ticks: as many of 1, 2, 3, 5 per decade as fit without the labels touching. */
function logTicks([lo, hi]: [number, number], widthPx: number): number[] {
  const perDecade = widthPx / Math.max(Math.log10(hi / lo), 1e-9);
  const mantissas =
    perDecade >= 240 ? [1, 2, 3, 5] : perDecade >= 130 ? [1, 2, 5] : perDecade >= 80 ? [1, 3] : [1];
  const stride = perDecade >= 36 ? 1 : Math.ceil(36 / perDecade);
  const ticks: number[] = [];
  for (let k = Math.floor(Math.log10(lo)); k <= Math.ceil(Math.log10(hi)); k++) {
    if (k % stride !== 0) continue;
    for (const m of mantissas) {
      const v = Number((m * 10 ** k).toPrecision(12));
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push(v);
    }
  }
  return ticks.length >= 2 ? ticks : [lo, hi];
}

export function tickLabel(value: number): string {
  if (value >= 1000) return `${Number((value / 1000).toPrecision(6))}k`;
  return String(Number(value.toPrecision(6)));
}

/** Linear ticks from 0 at a round step; counts never get fractional steps. */
export function linearTicks(
  max: number,
  count: number,
  integer = false,
): { ticks: number[]; top: number } {
  const raw = (max > 0 ? max : 1) / count;
  const magnitude = 10 ** Math.floor(Math.log10(raw));
  let step = [1, 2, 5, 10].map((m) => m * magnitude).find((s) => s >= raw) ?? raw;
  if (integer) step = Math.max(1, Math.round(step));
  const top = Math.max(step, Math.ceil((max > 0 ? max : 1) / step - 1e-9) * step);
  const ticks: number[] = [];
  for (let v = 0; v <= top + step / 2; v += step) ticks.push(Number(v.toPrecision(12)));
  return { ticks, top };
}

export function svgOpen(frame: Frame, className: string, label: string, extra = ''): string {
  return `<svg class="chart ${className}" viewBox="0 0 ${frame.width} ${frame.height}" width="${frame.width}" height="${frame.height}" role="img" aria-label="${esc(label)}"${extra}><title>${esc(label)}</title>`;
}

export function xAxis(
  frame: Frame,
  ticks: number[],
  x: Scale,
  label: (v: number) => string,
  title: string,
): string {
  const y0 = frame.height - frame.bottom;
  const parts = ticks.map((t) => {
    const xp = px(x(t));
    return `<line class="grid" x1="${xp}" y1="${frame.top}" x2="${xp}" y2="${y0}"/><line class="tick" x1="${xp}" y1="${y0}" x2="${xp}" y2="${y0 + 4}"/><text x="${xp}" y="${y0 + 16}" text-anchor="middle">${esc(label(t))}</text>`;
  });
  const mid = px((frame.left + frame.width - frame.right) / 2);
  return `<g class="axis x">${parts.join('')}<line class="domain" x1="${frame.left}" y1="${y0}" x2="${frame.width - frame.right}" y2="${y0}"/><text class="axis-title" x="${mid}" y="${frame.height - 6}" text-anchor="middle">${esc(title)}</text></g>`;
}

export function yAxis(
  frame: Frame,
  ticks: number[],
  y: Scale,
  label: (v: number) => string,
  title: string,
): string {
  const parts = ticks.map((t) => {
    const yp = px(y(t));
    return `<line class="grid" x1="${frame.left}" y1="${yp}" x2="${frame.width - frame.right}" y2="${yp}"/><text x="${frame.left - 6}" y="${yp}" dy="0.32em" text-anchor="end">${esc(label(t))}</text>`;
  });
  const mid = px((frame.top + frame.height - frame.bottom) / 2);
  return `<g class="axis y">${parts.join('')}<line class="domain" x1="${frame.left}" y1="${frame.top}" x2="${frame.left}" y2="${frame.height - frame.bottom}"/><text class="axis-title" transform="translate(12 ${mid}) rotate(-90)" text-anchor="middle">${esc(title)}</text></g>`;
}

// ---------------------------------------------------------------- charts

/** One phase's histogram; the x domain is shared by all phases of the metric so they line up. */
export function histogramSvg(
  d: Distribution,
  domain: [number, number],
  style: SeriesStyle,
  metricTitle: string,
  phaseName: string,
): string {
  const frame: Frame = { width: 380, height: 210, top: 10, right: 14, bottom: 40, left: 56 };
  const plotWidth = frame.width - frame.left - frame.right;
  const x = logScale(domain, [frame.left, frame.width - frame.right]);
  const { edges, counts } = d.histogram;
  const maxCount = Math.max(0, ...counts.filter(isNum));
  const { ticks, top } = linearTicks(maxCount, 4, true);
  const y = linearScale([0, top], [frame.height - frame.bottom, frame.top]);
  const bars = counts.map((count, i) => {
    const lo = edges[i];
    const hi = edges[i + 1];
    if (!isNum(count) || count <= 0 || !isNum(lo) || !isNum(hi)) return '';
    const x0 = x(lo);
    // A 1 px gap between bins keeps them apart without hiding narrow ones.
    const width = Math.max(1, x(hi) - x0 - 1);
    const yTop = y(count);
    return `<rect class="bar" x="${px(x0)}" y="${px(yTop)}" width="${px(width)}" height="${px(y(0) - yTop)}" fill="${style.color}"><title>${formatMs(lo)}–${formatMs(hi)} ms: ${formatInt(count)}</title></rect>`;
  });
  return `${svgOpen(frame, 'histogram', `${metricTitle}, ${phaseName}: histogram`, ` data-phase="${esc(phaseName)}"`)}
${yAxis(frame, ticks, y, (v) => formatInt(v), 'count')}
${xAxis(frame, logTicks(domain, plotWidth), x, tickLabel, 'ms (log scale)')}
<g class="bars">${bars.join('')}</g></svg>`;
}

/** The percentile lines every CDF marks, labelled in the right margin. */
const CDF_MARKS = [0.5, 0.9, 0.95, 0.99];

/** All phases' CDFs of one metric overlaid, as steps (an empirical CDF is a step function). */
export function cdfSvg(
  metricTitle: string,
  series: Array<{ name: string; d: Distribution; style: SeriesStyle }>,
): string {
  const frame: Frame = { width: 760, height: 330, top: 12, right: 44, bottom: 42, left: 52 };
  const domain = logDomain(series.flatMap((s) => s.d.cdf.map(([v]) => v))) ?? [1, 10];
  const x = logScale(domain, [frame.left, frame.width - frame.right]);
  const y = linearScale([0, 1], [frame.height - frame.bottom, frame.top]);
  const right = frame.width - frame.right;
  // 0.95 and 0.99 sit a few px apart on a linear axis: push labels down until they no longer touch.
  let lastLabelY = -Infinity;
  const marks = CDF_MARKS.slice()
    .reverse()
    .map((f) => {
      const yp = y(f);
      const labelY = Math.max(yp, lastLabelY + 11);
      lastLabelY = labelY;
      return `<line class="mark" x1="${frame.left}" y1="${px(yp)}" x2="${right}" y2="${px(yp)}"/><text class="mark-label" x="${right + 4}" y="${px(labelY)}" dy="0.32em">p${Math.round(f * 100)}</text>`;
    });
  const paths = series.map(({ name, d, style }) => {
    const points = d.cdf.filter(([v, f]) => isNum(v) && isNum(f)).sort((a, b) => a[0] - b[0]);
    const first = points[0]!;
    let path = `M${px(x(first[0]))} ${px(y(0))}`;
    for (const [v, f] of points) path += `H${px(x(v))}V${px(y(f))}`;
    path += `H${px(right)}`;
    return `<path class="cdf-line" d="${path}" stroke="${style.color}" stroke-dasharray="${style.dash}" data-phase="${esc(name)}"><title>${esc(name)}</title></path>`;
  });
  return `${svgOpen(frame, 'cdf', `${metricTitle}: cumulative distribution`)}
${yAxis(frame, [0, 0.25, 0.5, 0.75, 1], y, (v) => String(v), 'fraction ≤ x')}
${xAxis(frame, logTicks(domain, right - frame.left), x, tickLabel, 'ms (log scale)')}
<g class="marks">${marks.join('')}</g>
<g class="lines">${paths.join('')}</g></svg>`;
}
