/**
 * The frame writer: frames sent in one tick leave together (the socket is
 * corked for the tick), in order, and none is held past the tick.
 */
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { WebSocket, WebSocketServer } from 'ws';
import { createFrameWriter } from '../../src/server/frame-writer.js';

let wss: WebSocketServer | undefined;
afterEach(async () => {
  for (const c of wss?.clients ?? []) c.terminate();
  await new Promise((r) => (wss ? wss.close(r) : r(undefined)));
  wss = undefined;
});

describe('frame writer', () => {
  it('corks the socket for one tick and delivers every frame in order', async () => {
    wss = new WebSocketServer({ port: 0, host: '127.0.0.1' });
    const observed = new Promise<{ corkedDuring: number; heldDuring: number; after: number }>(
      (resolve) => {
        wss!.on('connection', (ws, req) => {
          const out = createFrameWriter(ws, req.socket);
          for (let i = 0; i < 5; i++) out.write(JSON.stringify({ i }));
          const corkedDuring = req.socket.writableCorked;
          const heldDuring = out.held;
          process.nextTick(() =>
            setImmediate(() => resolve({ corkedDuring, heldDuring, after: out.held })),
          );
        });
      },
    );
    await new Promise<void>((r) => wss!.once('listening', r));
    const { port } = wss.address() as AddressInfo;
    const client = new WebSocket(`ws://127.0.0.1:${port}`);
    const got: number[] = [];
    const all = new Promise<void>((resolve) =>
      client.on('message', (data) => {
        got.push((JSON.parse(String(data)) as { i: number }).i);
        if (got.length === 5) resolve();
      }),
    );
    const o = await observed;
    await all;
    client.close();
    expect(o.corkedDuring).toBeGreaterThan(0);
    expect(o.heldDuring).toBe(5 * JSON.stringify({ i: 0 }).length);
    expect(o.after).toBe(0);
    expect(got).toEqual([0, 1, 2, 3, 4]);
  });

  it('writes frame by frame to a stream that cannot cork', () => {
    const sent: string[] = [];
    const ws = { send: (f: string) => sent.push(f) } as unknown as WebSocket;
    const out = createFrameWriter(ws, undefined);
    out.write('a');
    out.write('b');
    expect(sent).toEqual(['a', 'b']);
    expect(out.held).toBe(0);
  });
});
