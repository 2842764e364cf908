import { afterEach, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/errors.js';
import { createLlmClient } from '../../src/llm/client.js';
import { startSimulator, type Simulator } from '../../src/testing/simulator/index.js';

let sim: Simulator | undefined;
afterEach(async () => {
  await sim?.close();
  sim = undefined;
});

describe('LLM client', () => {
  it('uses the configured model without asking the server', async () => {
    sim = await startSimulator({ models: ['a', 'b'] });
    const llm = await createLlmClient({ baseURL: sim.url, model: 'b' });
    expect(llm.model).toBe('b');
    expect(sim.requests).toHaveLength(0);
  });

  it('picks the only model the server lists', async () => {
    sim = await startSimulator({ models: ['qwen3-8b'] });
    const llm = await createLlmClient({ baseURL: sim.url });
    expect(llm.model).toBe('qwen3-8b');
    expect(sim.requests[0]).toMatchObject({ method: 'GET', path: '/v1/models' });
  });

  it('refuses to guess between several models and lists them', async () => {
    sim = await startSimulator({ models: ['llama', 'qwen'] });
    const attempt = createLlmClient({ baseURL: sim.url });
    await expect(attempt).rejects.toThrow(ConfigError);
    await expect(createLlmClient({ baseURL: sim.url })).rejects.toThrow(
      /serves 2 models \(llama, qwen\); set LLM_MODEL to one of them/,
    );
  });

  it('says when the server cannot be reached', async () => {
    sim = await startSimulator();
    const url = sim.url;
    await sim.close();
    sim = undefined;
    await expect(createLlmClient({ baseURL: url, maxRetries: 0 })).rejects.toThrow(
      /could not list models/,
    );
  });

  it('sends the model, stream flag and include_usage', async () => {
    sim = await startSimulator({ script: { rules: [{ reply: { parts: [{ text: 'hi' }] } }] } });
    const llm = await createLlmClient({ baseURL: sim.url, model: 'sim-model' });
    const chunks = [];
    for await (const c of llm.stream(
      { messages: [{ role: 'user', content: 'x' }] },
      new AbortController().signal,
    )) {
      chunks.push(c);
    }
    expect(chunks.at(-1)?.usage).toBeDefined();
    expect(sim.requests[0]!.body).toMatchObject({
      model: 'sim-model',
      stream: true,
      stream_options: { include_usage: true },
    });
  });
});
