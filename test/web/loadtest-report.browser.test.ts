/**
 * The load-test HTML report in headless Chromium, opened from disk with the
 * network off: it must ask for nothing but itself, raise no errors, and lay
 * out its charts at a real size.
 */
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium } from 'playwright-core';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { renderHtmlReport } from '../../loadtest/report/html.js';
import { sampleReport } from '../loadtest/fixtures.js';

/** Chromium to drive; Debian's package by default. */
const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

describe('load-test HTML report in Chromium', () => {
  let browser: Browser;
  let context: BrowserContext;
  let page: Page;
  let dir: string;
  let fileUrl: string;
  /** Every request other than the report file, whether routed or only seen. */
  const foreignRequests: string[] = [];
  const consoleErrors: string[] = [];
  const pageErrors: string[] = [];

  beforeAll(async () => {
    dir = await mkdtemp(join(tmpdir(), 'troupe-report-'));
    const file = join(dir, 'report.html');
    await writeFile(file, renderHtmlReport(sampleReport()));
    fileUrl = pathToFileURL(file).href;

    browser = await chromium.launch({
      executablePath: CHROMIUM_PATH,
      headless: true,
      // Tests run as root, where Chromium's sandbox cannot start.
      args: ['--no-sandbox'],
    });
    context = await browser.newContext({ offline: true, viewport: { width: 1200, height: 900 } });
    // Offline alone would let a request fail quietly; routing records it.
    await context.route('**/*', (route) => {
      const url = route.request().url();
      if (url === fileUrl) return route.continue();
      foreignRequests.push(url);
      return route.abort();
    });
    page = await context.newPage();
    page.on('request', (request) => {
      if (request.url() !== fileUrl) foreignRequests.push(request.url());
    });
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => pageErrors.push(error.message));
    await page.goto(fileUrl, { waitUntil: 'load' });
  });

  afterAll(async () => {
    await context?.close();
    await browser?.close();
    if (dir) await rm(dir, { recursive: true, force: true });
  });

  it('requests nothing but the file and raises no errors', async () => {
    // Let any late request (fonts, favicons) surface before judging.
    await page.waitForLoadState('networkidle');
    expect(foreignRequests).toEqual([]);
    expect(consoleErrors).toEqual([]);
    expect(pageErrors).toEqual([]);
  });

  it('shows the title', async () => {
    await expect
      .poll(() => page.getByRole('heading', { level: 1, name: 'Troupe load test' }).isVisible())
      .toBe(true);
    expect(await page.title()).toContain('Troupe load test');
  });

  it('lays out every chart at a non-zero size', async () => {
    const charts = await page.locator('svg.chart').all();
    // Nine CDFs (the tools phase's TTFT split three ways too), their histograms,
    // capacity and the engine bench's bars.
    expect(charts.length).toBeGreaterThanOrEqual(9 + 9 + 2);
    for (const chart of charts) {
      const box = await chart.boundingBox();
      expect(box, (await chart.getAttribute('aria-label')) ?? 'chart').not.toBeNull();
      expect(box!.width).toBeGreaterThan(100);
      expect(box!.height).toBeGreaterThan(50);
    }
  });

  it('draws histogram bars and CDF lines', async () => {
    expect(await page.locator('svg.histogram rect.bar').count()).toBeGreaterThan(0);
    const cdfs = page.locator('svg.cdf');
    expect(await cdfs.count()).toBe(9);
    const lines = page.locator('svg.cdf path.cdf-line');
    expect(await lines.count()).toBeGreaterThanOrEqual(9);
    // Each line spans real width: the path parsed and the scale worked.
    const widths = await lines.evaluateAll((paths) =>
      // No DOM lib in this project's types: describe just what is used.
      paths.map((path) => (path as unknown as { getBBox(): { width: number } }).getBBox().width),
    );
    for (const width of widths) expect(width).toBeGreaterThan(10);
  });

  it('shows the capacity limit and the engine bench bars', async () => {
    // A horizontal line has no height, which Playwright counts as invisible: measure its length.
    const limit = page.locator('svg.capacity line.limit');
    const length = await limit.evaluate(
      (line) => (line as unknown as { getBBox(): { width: number } }).getBBox().width,
    );
    expect(length).toBeGreaterThan(100);
    expect(await page.locator('svg.cpu-bars rect.bar').count()).toBe(3);
  });
});
