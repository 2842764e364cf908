import { z } from 'zod';
import { defineTool } from '../../src/tools/index.js';

/**
 * A tool that runs until its signal aborts, then rejects with the signal's
 * reason; `started` resolves once a call is running, so a test can cancel
 * at that moment instead of sleeping.
 */
export function toolThatWaits(name: string) {
  let markStarted!: () => void;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  const tool = defineTool({
    name,
    description: 'Waits until it is cancelled',
    parameters: z.object({}),
    timeoutMs: 10_000,
    handler: (_args, ctx) =>
      new Promise((_resolve, reject) => {
        markStarted();
        ctx.signal.addEventListener('abort', () => reject(ctx.signal.reason));
      }),
  });
  return { tool, started };
}
