import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { metricValue, scrape } from '../helpers/http.js';
import { connect } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

async function expectAdmitted(url: string, origin?: string): Promise<void> {
  const c = await connect(url, origin ? { origin } : {});
  await c.next('session.created');
  await c.close();
}

/** The close reason; the `error` sent before it, which says what to do, is checked too. */
async function expectRefused(
  url: string,
  origin: string,
  headers: Record<string, string> = {},
): Promise<string> {
  const c = await connect(url, { origin, headers });
  const { code, reason } = await within(c.closed, `the close of a client from ${origin}`);
  expect(code).toBe(1008);
  expect(c.events.map((e) => e.type)).toEqual(['error']);
  expect(c.events[0]!.error).toMatchObject({
    code: 'origin_not_allowed',
    message:
      origin === 'null'
        ? /serve the page over http/
        : headers.Host !== undefined
          ? /does not answer to the host .*: add it to ALLOWED_HOSTS/
          : /add the origin to ALLOWED_ORIGINS/,
  });
  return reason;
}

describe('origin check with ALLOWED_ORIGINS unset', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t?.close());

  it('admits a client that sends no Origin header (not a browser)', async () => {
    await expectAdmitted(t.wsUrl);
  });

  it('admits a page served by the server itself (Origin matches Host)', async () => {
    await expectAdmitted(t.wsUrl, t.url);
  });

  it('closes a foreign origin with 1008 and counts it', async () => {
    const reason = await expectRefused(t.wsUrl, 'https://evil.example');
    expect(reason).toContain('https://evil.example');
    // Same host, other port: another origin.
    await expectRefused(t.wsUrl, 'http://127.0.0.1:1');
    // Sandboxed frames and file:// pages send the opaque origin `null`.
    await expectRefused(t.wsUrl, 'null');
    // A page served under a host name the server does not answer to (DNS rebinding, or a LAN name).
    await expectRefused(t.wsUrl, 'http://rebound.example:8080', { Host: 'rebound.example:8080' });
    expect(
      metricValue(await scrape(t.url), 'troupe_connections_rejected_total', { reason: 'origin' }),
    ).toBe(4);
  });
});

describe('origin check with a long, non-ASCII origin', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(() => t?.close());

  it('still closes with 1008 and a reason that fits a close frame', async () => {
    // Header bytes above 0x7f read as Latin-1 take two bytes each in a UTF-8
    // close reason, which may not pass 123 bytes.
    const reason = await expectRefused(t.wsUrl, `https://${'é'.repeat(100)}.example`);
    expect(reason).toMatch(/^origin https:\/\//);
    expect(Buffer.byteLength(reason)).toBeLessThanOrEqual(123);
  });
});

describe('origin check with ALLOWED_ORIGINS=https://app.example', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({
      env: { ALLOWED_ORIGINS: 'https://app.example/, https://b.example' },
    });
  });
  afterAll(() => t?.close());

  it('admits the listed origins', async () => {
    await expectAdmitted(t.wsUrl, 'https://app.example');
    await expectAdmitted(t.wsUrl, 'https://b.example');
  });

  it('still admits same-origin pages and clients without an Origin', async () => {
    await expectAdmitted(t.wsUrl, t.url);
    await expectAdmitted(t.wsUrl);
  });

  it('refuses an origin that only looks like a listed one', async () => {
    await expectRefused(t.wsUrl, 'http://app.example');
    await expectRefused(t.wsUrl, 'https://app.example.evil.example');
  });
});

describe('origin check with ALLOWED_ORIGINS=*', () => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer({ env: { ALLOWED_ORIGINS: '*' } });
  });
  afterAll(() => t?.close());

  it('admits any origin', async () => {
    await expectAdmitted(t.wsUrl, 'https://evil.example');
    await expectAdmitted(t.wsUrl, 'null');
  });
});
