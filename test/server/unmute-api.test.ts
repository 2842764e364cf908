/**
 * Unmute's production frontend calls its backend under `/api/` on its own
 * origin (`/api/v1/health`, `/api/v1/voices`, `/api/v1/realtime`): Troupe
 * answers those paths itself, so the frontend needs no proxy in front.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { request } from '../helpers/http.js';
import { connect, type TestClient } from '../helpers/realtime-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { unknownToUnmute } from '../helpers/unmute.js';

describe("Unmute's /api/ paths", () => {
  let t: TestServer;
  const clients: TestClient[] = [];

  beforeAll(async () => {
    t = await startTestServer();
  });
  afterAll(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await t?.close();
  });

  it('answers /api/v1/health and /api/v1/voices as their /v1/ twins', async () => {
    for (const path of ['/v1/health', '/v1/voices']) {
      const [direct, api] = await Promise.all([
        request(`${t.url}${path}`),
        request(`${t.url}/api${path}`),
      ]);
      expect(api.status).toBe(200);
      expect(api.json()).toEqual(direct.json());
    }
    expect((await request(`${t.url}/api/v1/voices`)).json()).toContainEqual(
      expect.objectContaining({ source: expect.objectContaining({ path_on_server: 'weather' }) }),
    );
  });

  it('still answers 404 for an /api/ path with no /v1/ twin', async () => {
    expect((await request(`${t.url}/api/health`)).status).toBe(404);
    expect((await request(`${t.url}/api/v1/nothing`)).status).toBe(404);
  });

  it('speaks the unmute dialect on /api/v1/realtime from the first event: no session.created', async () => {
    const c = await connect(`${t.wsUrl.replace('/v1/realtime', '/api/v1/realtime')}`, {
      protocols: ['realtime'],
    });
    clients.push(c);
    c.send({
      type: 'session.update',
      session: {
        instructions: { type: 'constant', text: 'x', character: 'weather' },
        voice: 'weather',
        allow_recording: false,
      },
    });
    const updated = await c.next('session.updated');
    expect(updated.session).toMatchObject({ voice: 'weather', allow_recording: false });
    expect(c.events[0]!.type).toBe('session.updated');
    expect(unknownToUnmute(c.events)).toEqual([]);
  });
});
