/** The LLM simulator in a process of its own (started by children.ts). */
import { startSimulator, type SimulatorOptions } from '../../src/testing/simulator/index.js';
import { serveChild } from './child-ipc.js';

await serveChild<{ options: SimulatorOptions }>(async ({ options }) => {
  const sim = await startSimulator(options);
  return { url: sim.url, stop: () => sim.close() };
});
