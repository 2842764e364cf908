import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkLlm, startupBanner } from '../../src/cli/banner.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

describe('the startup banner', () => {
  let up: TestServer;
  let down: TestServer;

  beforeAll(async () => {
    up = await startTestServer();
    // Port 9 (discard) on loopback: nothing answers there.
    down = await startTestServer({ env: { LLM_BASE_URL: 'http://127.0.0.1:9/v1' } });
  });
  afterAll(async () => {
    await up?.close();
    await down?.close();
  });

  it('says where the server listens, its characters, the LLM, the model and that it answers', async () => {
    const text = startupBanner(up.server, await checkLlm(up.server));
    expect(text).toContain(`web client   ${up.url}/`);
    expect(text).toContain(`realtime     ${up.wsUrl}`);
    expect(text).toMatch(/characters {3}\d+ in characters: .*weather/);
    expect(text).toMatch(
      new RegExp(
        `LLM {10}${up.simulator.url.replace(/[.]/g, '\\.')} · model sim-model · answers \\(\\d+ ms\\)`,
      ),
    );
  });

  it('says at once when the LLM does not answer, and what to do', async () => {
    const text = startupBanner(down.server, await checkLlm(down.server));
    expect(text).toMatch(/LLM {10}http:\/\/127\.0\.0\.1:9\/v1 · does not answer: /);
    expect(text).toContain('turns fail until it answers; set LLM_BASE_URL');
  });
});
