/**
 * Client secrets: a backend mints a short-lived key with the server's token
 * (the `openai` package's `client.realtime.clientSecrets.create`, as against
 * OpenAI's API), and a page opens sessions with it, never holding the token.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkClientSecret, mintClientSecret, secretKey } from '../../src/server/client-secrets.js';
import { request } from '../helpers/http.js';
import { connect, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { within } from '../helpers/wait.js';

const TOKEN = 'client-secret-test-token';

let t: TestServer;
let backend: OpenAI;
beforeAll(async () => {
  t = await startTestServer({ env: { AUTH_TOKEN: TOKEN } });
  backend = new OpenAI({ apiKey: TOKEN, baseURL: `${t.url}/v1` });
});
afterAll(() => t?.close());

/** A page's connection with `key` as its key (the subprotocol the SDKs send in a browser). */
function asPage(key: string, query = ''): Promise<TestClient> {
  return connect(`${t.wsUrl}${query}`, {
    protocols: ['realtime', `openai-insecure-api-key.${key}`],
  });
}

/** The character a session.created names. */
function characterOf(created: Record<string, unknown>): string {
  return (created.session as { troupe: { character: { id: string } } }).troupe.character.id;
}

describe('POST /v1/realtime/client_secrets', () => {
  it("mints a key with the openai package that opens sessions, the key's model picking the character", async () => {
    const before = Math.floor(Date.now() / 1000);
    const minted = await backend.realtime.clientSecrets.create({
      expires_after: { anchor: 'created_at', seconds: 60 },
      session: { type: 'realtime', model: 'weather' },
    });
    expect(minted.value).toMatch(/^ek_/);
    expect(minted.expires_at).toBeGreaterThanOrEqual(before + 60);
    expect(minted.expires_at).toBeLessThanOrEqual(Math.ceil(Date.now() / 1000) + 60);
    expect(minted.session).toMatchObject({ type: 'realtime', model: 'weather' });

    const page = await asPage(minted.value);
    expect(characterOf(await page.next('session.created'))).toBe('weather');
    await page.close();
    // The URL's ?character= still says, and the key opens any number of sessions.
    const other = await asPage(minted.value, '?character=plain');
    expect(characterOf(await other.next('session.created'))).toBe('plain');
    await other.close();
  });

  it("mints only with the server's token, and says what is wrong with a body", async () => {
    const minted = await backend.realtime.clientSecrets.create({});
    const asKey = new OpenAI({ apiKey: minted.value, baseURL: `${t.url}/v1` });
    await expect(asKey.realtime.clientSecrets.create({})).rejects.toMatchObject({
      status: 401,
      code: 'invalid_api_key',
    });
    const bare = await request(`${t.url}/v1/realtime/client_secrets`, { method: 'POST' });
    expect(bare.status).toBe(401);
    await expect(
      backend.realtime.clientSecrets.create({
        session: { type: 'realtime', instructions: 'Be brief.' },
      }),
    ).rejects.toMatchObject({
      status: 400,
      param: 'session.instructions',
      message: expect.stringMatching(/keeps no session settings .* session\.update/),
    });
    await expect(
      backend.realtime.clientSecrets.create({
        expires_after: { anchor: 'created_at', seconds: 5 },
      }),
    ).rejects.toMatchObject({ status: 400, param: 'expires_after.seconds' });
  });

  it('refuses an expired or forged key with an error saying which, and never the token', async () => {
    const expired = mintClientSecret(secretKey(TOKEN), {}, Date.now() - 3_600_000);
    const forged = mintClientSecret(secretKey('another server'), {});
    for (const [minted, pattern] of [
      [expired, /^The client secret given \(the subprotocol\) expired at .*; mint another/],
      [forged, /neither this server's token \(AUTH_TOKEN\) nor a client secret it minted/],
    ] as const) {
      if ('error' in minted) throw new Error(minted.error);
      const page = await asPage(minted.value);
      expect((await within(page.closed, 'the refusal')).code).toBe(1008);
      const error = page.events.find((e) => e.type === 'error')?.error as { message: string };
      expect(error).toMatchObject({ code: 'invalid_api_key', message: pattern });
      expect(error.message).not.toContain(TOKEN);
    }
  });

  it('resumes a conversation with a fresh key', async () => {
    const first = await backend.realtime.clientSecrets.create({});
    const page = await asPage(first.value, '?character=plain');
    const created = await page.next('session.created');
    const token = (created.session as { troupe: { resume_token: string } }).troupe.resume_token;
    await page.close();
    const second = await backend.realtime.clientSecrets.create({});
    const again = await asPage(second.value, `?resume=${token}`);
    await again.next('session.created');
    expect(again.events.filter((e) => e.type === 'error')).toEqual([]);
    await again.close();
  });
});

describe('a client secret', () => {
  it('holds while it lasts, and is checked by its signature before its time', () => {
    const key = secretKey(TOKEN);
    const minted = mintClientSecret(key, { expires_after: { seconds: 10 } }, 1_000_000);
    if ('error' in minted) throw new Error(minted.error);
    expect(minted.expires_at).toBe(1_010);
    expect(checkClientSecret(key, minted.value, 1_009_999)).toEqual({ ok: true });
    expect(checkClientSecret(key, minted.value, 1_010_000)).toEqual({
      ok: false,
      why: 'expired',
      expiredAt: 1_010,
    });
    const tampered = minted.value.replace(/^ek_./, (s) => (s.endsWith('A') ? 'ek_B' : 'ek_A'));
    expect(checkClientSecret(key, tampered, 1_000_000)).toEqual({ ok: false, why: 'invalid' });
    expect(checkClientSecret(key, 'ek_nodot', 1_000_000)).toEqual({ ok: false, why: 'invalid' });
  });
});
