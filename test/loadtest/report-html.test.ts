/**
 * The HTML report as a string: self-contained (nothing to fetch), escaped,
 * and with the sections and charts the report's data calls for.
 */
import { describe, expect, it } from 'vitest';
import { METRIC_NAMES } from '../../loadtest/lib/recorder.js';
import { escapeHtml, formatMs, renderHtmlReport } from '../../loadtest/report/html.js';
import type { LoadtestReport, PhaseMetrics } from '../../loadtest/report/model.js';
import { distribution, emptyDistribution, logNormalSamples, sampleReport } from './fixtures.js';

/** The markup of one `<section id="…">`. */
function sectionOf(html: string, id: string): string {
  const start = html.indexOf(`<section id="${id}">`);
  expect(start, `section ${id}`).toBeGreaterThanOrEqual(0);
  return html.slice(start, html.indexOf('</section>', start));
}

/** The markup of one metric's block in the distributions section. */
function metricBlockOf(html: string, key: keyof PhaseMetrics): string {
  const start = html.indexOf(`<div class="metric" data-metric="${key}">`);
  expect(start, `metric ${key}`).toBeGreaterThanOrEqual(0);
  const next = html.indexOf('<div class="metric"', start + 1);
  return html.slice(start, next < 0 ? html.indexOf('</section>', start) : next);
}

function count(html: string, needle: string | RegExp): number {
  return typeof needle === 'string'
    ? html.split(needle).length - 1
    : [...html.matchAll(new RegExp(needle, 'g'))].length;
}

describe('renderHtmlReport', () => {
  it('references nothing outside the page', () => {
    const html = renderHtmlReport(sampleReport());

    expect(html.startsWith('<!doctype html>')).toBe(true);
    expect(html).not.toMatch(/https?:\/\//i);
    expect(html).not.toMatch(/\/\/[a-z0-9.-]+\.[a-z]{2,}/i); // protocol-relative URLs
    expect(html).not.toMatch(/\ssrc\s*=/i);
    // Only in-page anchors may be linked.
    for (const match of html.matchAll(/\shref\s*=\s*["']?([^"'\s>]*)/gi)) {
      expect(match[1]).toMatch(/^#/);
    }
    expect(html).not.toMatch(/@import/i);
    expect(html).not.toMatch(/url\(/i);
    expect(html).not.toMatch(/<(script|link|img|iframe|object|embed)\b/i);
  });

  it('shows the header: title, time, command, machine, target and simulator', () => {
    const report = sampleReport();
    const html = renderHtmlReport(report);

    expect(html).toContain('<h1>Troupe load test</h1>');
    expect(html).toContain(report.generatedAt);
    expect(html).toContain(escapeHtml(report.command));
    expect(html).toContain('AMD EPYC 7B13');
    expect(html).toContain('ws://127.0.0.1:8787/v1/realtime');
    expect(html).toContain('profile <b>steady</b>: TTFT 200 ms, 60 tokens/s, jitter ±20 ms');

    const anyLlm = renderHtmlReport({ ...report, target: { url: report.target.url, sim: null } });
    expect(anyLlm).toContain('any LLM');
  });

  it('escapes every text that comes from the report', () => {
    const report = sampleReport();
    const evil = '<script>alert("x")</script>';
    report.phases[0]!.name = evil;
    report.phases[0]!.errors = { '<img src=x onerror=alert(1)>': 2 };
    report.command = 'npm run loadtest -- --url "ws://a?b=1&c=<2>"';
    report.targets[0]!.name = 'p95 <b>bold</b>';
    report.comparisons[0]!.subject = evil;

    const html = renderHtmlReport(report);

    expect(html).not.toContain('<script');
    expect(html).not.toContain('<img');
    expect(html).not.toContain('<b>bold</b>');
    expect(html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;');
    expect(html).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(html).toContain('ws://a?b=1&amp;c=&lt;2&gt;');
    // In attributes too (the phase's charts carry its name).
    expect(html).toContain('data-phase="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"');
  });

  it('draws one CDF per metric with samples and one histogram per phase that has them', () => {
    const report = sampleReport();
    const html = renderHtmlReport(report);

    const withSamples = (key: keyof PhaseMetrics) =>
      report.phases.filter((p) => (p.metrics[key]?.n ?? 0) > 0).length;
    const keys: Array<keyof PhaseMetrics> = [...METRIC_NAMES];
    for (const key of keys) {
      const block = metricBlockOf(html, key);
      expect(count(block, '<svg class="chart cdf"'), key).toBe(1);
      expect(count(block, 'class="cdf-line"'), key).toBe(withSamples(key));
      expect(count(block, '<svg class="chart histogram"'), key).toBe(withSamples(key));
      expect(count(block, '<rect class="bar"'), key).toBeGreaterThan(0);
    }
    expect(count(html, '<svg class="chart cdf"')).toBe(keys.length);
    expect(html).toContain('Time to first token');
    expect(html).toContain('TTFT without the model’s tool-round time');

    // The direct phase measured no added latency: said so, not drawn.
    const added = metricBlockOf(html, 'addedPerDelta');
    expect(added).toContain('no samples in direct');
    expect(added).not.toContain('data-phase="direct"');
  });

  it('says "no samples" for a metric no phase has samples of, and draws nothing for it', () => {
    const report = sampleReport();
    report.phases[2]!.metrics.firstAudio = emptyDistribution();
    const html = renderHtmlReport(report);

    const block = metricBlockOf(html, 'firstAudio');
    expect(block).toContain('no samples');
    expect(block).not.toContain('<svg class="chart');
    expect(count(html, '<svg class="chart cdf"')).toBe(8);
    // The latency table says it too.
    expect(sectionOf(html, 'phases')).toMatch(/Time to first audio.*no samples/);
  });

  it('omits metrics no phase measured', () => {
    const report = sampleReport();
    for (const phase of report.phases) delete phase.metrics.ttftExModel;
    const html = renderHtmlReport(report);

    expect(html).not.toContain('data-metric="ttftExModel"');
    expect(html).not.toContain('TTFT without the model’s tool-round time');
  });

  it('shows capacity and the engine bench only when the report has them', () => {
    const full = renderHtmlReport(sampleReport());
    const capacity = sectionOf(full, 'capacity');
    expect(capacity).toContain('p95 added latency 63.2 ms exceeded the 50 ms limit');
    expect(capacity).toContain('<svg class="chart capacity"');
    expect(capacity).toContain('class="limit"');
    expect(count(capacity, '<tr>')).toBe(1 + 5);
    const bench = sectionOf(full, 'engine-bench');
    expect(bench).toContain('<svg class="chart cpu-bars"');
    expect(bench).toContain('openai-node runTools');
    expect(bench).toContain('0.452×');

    const bare = sampleReport();
    delete bare.capacity;
    delete bare.engineBench;
    const html = renderHtmlReport(bare);
    expect(html).not.toContain('id="capacity"');
    expect(html).not.toContain('id="engine-bench"');
    expect(html).not.toContain('chart capacity');
    expect(html).not.toContain('chart cpu-bars');
  });

  it('badges targets PASS or FAIL', () => {
    const html = renderHtmlReport(sampleReport());
    const targets = sectionOf(html, 'targets');

    expect(count(targets, '<span class="badge pass">PASS</span>')).toBe(2);
    expect(count(targets, '<span class="badge fail">FAIL</span>')).toBe(2);
    // Overall verdict: not every target met.
    expect(html).toContain('2 of 4 targets met');
  });

  it('prints "—" for missing values and never NaN, Infinity or undefined', () => {
    const report = sampleReport();
    const phase = report.phases[0]!;
    phase.deltasPerSec = Number.NaN;
    phase.clientLagMs = { p50: Number.NaN, p99: Infinity, max: -Infinity };
    phase.metrics.ttft = { ...phase.metrics.ttft, p90: Number.NaN };
    report.targets[0]!.value = Number.NaN;
    report.capacity!.steps[1]!.p95AddedMs = null;
    report.capacity!.sessions = null;
    report.engineBench!.headToHead.vsBetter = Number.NaN;
    const html = renderHtmlReport(report);

    expect(html).not.toMatch(/NaN|Infinity|undefined|null/);
    expect(html).toContain('No step passed.');
    expect(html).toContain('—');
  });

  it('renders a report without phases, targets or comparisons', () => {
    const report: LoadtestReport = {
      ...sampleReport(),
      phases: [],
      targets: [],
      comparisons: [],
    };
    delete report.capacity;
    delete report.engineBench;
    const html = renderHtmlReport(report);

    expect(html).toContain('No phases ran.');
    expect(html).toContain('No targets checked.');
    expect(html).not.toContain('<svg class="chart');
    expect(html).not.toMatch(/NaN|undefined/);
  });

  it('draws a phase whose samples all share one value', () => {
    const report = sampleReport();
    report.phases = [report.phases[0]!];
    report.phases[0]!.metrics = {
      ttft: distribution([5, 5, 5]),
      turnDuration: distribution(logNormalSamples(3, 50, 900, 0.2)),
    };
    const html = renderHtmlReport(report);

    expect(count(metricBlockOf(html, 'ttft'), '<rect class="bar"')).toBe(1);
    expect(html).not.toMatch(/NaN|Infinity/);
  });
});

describe('formatMs', () => {
  it('fits the precision to the size', () => {
    expect(formatMs(0.12345)).toBe('0.123');
    expect(formatMs(12.3456)).toBe('12.35');
    expect(formatMs(123.46)).toBe('123.5');
    expect(formatMs(12_345.6)).toBe('12,346');
    expect(formatMs(0)).toBe('0.000');
  });

  it('prints a dash for missing values', () => {
    expect(formatMs(null)).toBe('—');
    expect(formatMs(undefined)).toBe('—');
    expect(formatMs(Number.NaN)).toBe('—');
    expect(formatMs(Infinity)).toBe('—');
  });
});
