/**
 * A client that pings within the rate but never reads: each pong waits in
 * the server's memory. Past `MAX_BUFFERED_BYTES` unsent it is cut off as a
 * slow consumer, as for events (with `WS_PING_INTERVAL_S=0` nothing else
 * would ever end it: a worker grew to 1.2 GB under 50 such clients).
 */
import { EventEmitter } from 'node:events';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { loadConfig } from '../../src/config/index.js';
import { createMetrics } from '../../src/metrics/index.js';
import { createSocketLink } from '../../src/server/socket-link.js';

/** A socket whose peer never reads: every pong stays buffered. */
class UnreadSocket extends EventEmitter {
  readonly OPEN = 1;
  readyState = 1;
  bufferedAmount = 0;
  closedWith: { code?: number; reason?: string } | undefined;
  pong(data: Buffer): void {
    this.bufferedAmount += data.length + 2;
  }
  send(frame: string): void {
    this.bufferedAmount += frame.length + 4;
  }
  close(code?: number, reason?: string): void {
    this.closedWith = { code, reason };
    this.readyState = 2;
  }
  terminate(): void {
    this.readyState = 3;
  }
  pause(): void {}
}

describe('pings from a client that never reads', () => {
  it('cuts it off as a slow consumer once its pongs pass MAX_BUFFERED_BYTES', () => {
    const config = loadConfig({ MAX_BUFFERED_BYTES: '1024', WS_PING_INTERVAL_S: '0' });
    const metrics = createMetrics({ processMetrics: false });
    const ws = new UnreadSocket();
    const link = createSocketLink({
      ws: ws as unknown as WebSocket,
      limits: config.server,
      imageUrlHosts: config.sessions.imageUrlHosts,
      metrics,
      connections: new Map(),
      log: pino({ level: 'silent' }),
      dialect: 'openai',
      detecting: false,
    });
    const payload = Buffer.alloc(125, 1);
    // Well within the ping rate (100 a second): 127 bytes of pong each.
    let pings = 0;
    while (ws.closedWith === undefined && pings < 20) {
      ws.emit('ping', payload);
      pings++;
    }
    expect(pings).toBe(9);
    expect(ws.closedWith).toMatchObject({ code: 1013 });
    expect(ws.closedWith?.reason).toContain('slow consumer');
    expect(link.cutOff).toBe(true);
  });
});
