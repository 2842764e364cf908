/**
 * Speech engines with workers: each worker sizes its engine's threads by its
 * share of the cores, so the machine runs one set of threads, not one per
 * worker per core.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usableCores } from '../../src/config/cores.js';
import { request } from '../helpers/http.js';
import { startInstance, type Instance } from '../deploy/processes.js';

describe('npm start with WORKERS=2 and a speech engine', () => {
  let instance: Instance;
  beforeAll(async () => {
    // flite runs as WebAssembly (no package to install) and names its threads in /health.
    instance = await startInstance({
      WORKERS: '2',
      LLM_BASE_URL: 'http://127.0.0.1:9/v1',
      TTS_PROVIDER: 'flite',
    });
  });
  afterAll(() => instance?.stop());

  it("gives each worker's engine its share of the cores", async () => {
    const share = Math.ceil(usableCores() / 2);
    const health = (await request(`${instance.url}/health`)).json<{ tts: { detail: string } }>();
    expect(health.tts.detail).toMatch(new RegExp(`, ${share} worker threads?$`));
  });
});
