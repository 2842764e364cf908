import { describe, expect, it } from 'vitest';
import {
  MAX_OUT_OF_BAND_RESPONSES,
  ResponseQueue,
  type ResponseKind,
  type RunningResponse,
} from '../../src/session/response-queue.js';

/** A queue whose runs end when the test says so. */
function setup() {
  let n = 0;
  const queue = new ResponseQueue(() => `resp_${++n}`);
  const ends = new Map<string, () => void>();
  const order: string[] = [];
  const ask = (kind: ResponseKind) =>
    queue.request({
      kind,
      run: (r: RunningResponse) => {
        order.push(`${kind}:${r.id}`);
        return new Promise<void>((resolve) => ends.set(r.id, resolve));
      },
      onError: () => {},
    });
  return { queue, ends, order, ask };
}

describe('ResponseQueue', () => {
  it('starts a response at once when nothing runs', () => {
    const { queue, ask, order } = setup();
    expect(ask('client').outcome).toBe('started');
    expect(order).toEqual(['client:resp_1']);
    expect(queue.busy).toBe(true);
  });

  it('refuses a client response while a client response runs, as OpenAI does', () => {
    const { ask } = setup();
    ask('client');
    expect(ask('client')).toEqual({ outcome: 'refused', activeId: 'resp_1' });
  });

  it('queues a client response behind the greeting and starts it when the greeting ends', async () => {
    const { queue, ask, ends, order } = setup();
    ask('greeting');
    const client = ask('client');
    expect(client.outcome).toBe('queued');
    expect(queue.blocking()).toBe('a queued response');
    expect(ask('client').outcome).toBe('refused');
    ends.get('resp_1')!();
    const started = client.outcome === 'refused' ? undefined : await client.started;
    expect(started?.kind).toBe('client');
    expect(order).toEqual(['greeting:resp_1', 'client:resp_2']);
  });

  it('lets voice turns wait their turn, in order, and idles only when all have run', async () => {
    const { queue, ask, ends, order } = setup();
    ask('client');
    expect(ask('voice').outcome).toBe('queued');
    expect(ask('voice').outcome).toBe('queued');
    let idle = false;
    const idled = queue.idle().then(() => (idle = true));
    ends.get('resp_1')!();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(order).toEqual(['client:resp_1', 'voice:resp_2']);
    ends.get('resp_2')!();
    await new Promise<void>((resolve) => setImmediate(resolve));
    expect(idle).toBe(false);
    ends.get('resp_3')!();
    await idled;
    expect(order).toEqual(['client:resp_1', 'voice:resp_2', 'voice:resp_3']);
    expect(queue.busy).toBe(false);
  });

  it('starts the greeting only when nothing runs or waits', () => {
    const { ask } = setup();
    ask('voice');
    expect(ask('greeting').outcome).toBe('refused');
  });

  it('stops the running response with a reason, once', () => {
    const { queue, ask } = setup();
    ask('client');
    const stopped = queue.stop('client_cancelled');
    expect(stopped?.stoppedBy).toBe('client_cancelled');
    expect(stopped?.controller.signal.aborted).toBe(true);
    expect(queue.stop('turn_detected')).toBeUndefined();
  });

  it('drops what waits when closed, and starts nothing after', async () => {
    const { queue, ask, ends, order } = setup();
    ask('client');
    ask('voice');
    queue.close();
    ends.get('resp_1')!();
    await queue.idle();
    expect(order).toEqual(['client:resp_1']);
    expect(ask('client').outcome).toBe('refused');
  });

  it('runs out-of-band responses beside the conversation response, up to the cap', async () => {
    const { queue, ask, ends, order } = setup();
    ask('client');
    expect(ask('out_of_band').outcome).toBe('started');
    expect(queue.active?.id).toBe('resp_1');
    expect(queue.outOfBand).toBe(1);
    // A client response is still refused: the conversation's response runs.
    expect(ask('client').outcome).toBe('refused');
    for (let i = 1; i < MAX_OUT_OF_BAND_RESPONSES; i++) ask('out_of_band');
    expect(ask('out_of_band').outcome).toBe('refused');
    expect(queue.stop('client_cancelled', 'resp_2')?.kind).toBe('out_of_band');
    expect(queue.active?.controller.signal.aborted).toBe(false);
    ends.get('resp_2')!();
    ends.get('resp_1')!();
    await queue.find('resp_1')?.done;
    expect(queue.busy).toBe(false);
    expect(queue.running).toBe(true);
    for (const [id, end] of ends) if (id !== 'resp_1' && id !== 'resp_2') end();
    await queue.idle();
    expect(queue.running).toBe(false);
    expect(order.slice(0, 2)).toEqual(['client:resp_1', 'out_of_band:resp_2']);
  });
});

describe('ResponseQueue: background responses', () => {
  it('waits for what runs, and lets a client response queue behind it instead of refusing it', async () => {
    const { queue, ask, ends, order } = setup();
    ask('voice');
    expect(ask('background').outcome).toBe('queued');
    ends.get('resp_1')!();
    await queue.active?.done.catch(() => {});
    await Promise.resolve();
    expect(order).toEqual(['voice:resp_1', 'background:resp_2']);
    // A background response is server-started, like the greeting: the client waits behind it.
    const client = ask('client');
    expect(client.outcome).toBe('queued');
    ends.get('resp_2')!();
    const started = client.outcome === 'refused' ? undefined : await client.started;
    expect(started?.kind).toBe('client');
  });

  it('starts what the user asked for before a waiting background response', async () => {
    const { ask, ends, order } = setup();
    ask('client');
    ask('background');
    const voice = ask('voice');
    ends.get('resp_1')!();
    const started = voice.outcome === 'refused' ? undefined : await voice.started;
    expect(started?.kind).toBe('voice');
    expect(order).toEqual(['client:resp_1', 'voice:resp_2']);
  });

  it('holds a background response while told to, and starts it on resume', async () => {
    let n = 0;
    const queue = new ResponseQueue(() => `resp_${++n}`);
    let speaking = true;
    const ran: string[] = [];
    const outcome = queue.request({
      kind: 'background',
      holdWhile: () => speaking,
      run: async (r) => void ran.push(r.id),
      onError: () => {},
    });
    expect(outcome.outcome).toBe('queued');
    queue.resume();
    expect(ran).toEqual([]);
    speaking = false;
    queue.resume();
    const started = outcome.outcome === 'refused' ? undefined : await outcome.started;
    expect(started?.kind).toBe('background');
    expect(ran).toEqual(['resp_1']);
  });
});
