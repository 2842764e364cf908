/**
 * The floor: the least a Node server can do per forwarded delta — read an
 * LLM's event stream with undici's dispatcher (kept-alive connections, the
 * body handed over piece by piece, as Troupe's transport does), parse each
 * chunk, send its text as one Realtime `response.output_text.delta` frame
 * with `ws` — and nothing else (no session, history, prompt, metrics or
 * logs). What Troupe spends per delta above this is Troupe's own; this part
 * is Node's and the machine's. Speaks just enough of the protocol for floor-bench.ts's client.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { StringDecoder } from 'node:string_decoder';
import { Pool } from 'undici';
import { WebSocketServer, type WebSocket } from 'ws';
import { serveChild } from './child-ipc.js';

interface ClientEvent {
  type?: string;
  item?: { content?: { text?: string }[] };
}

await serveChild<{ llmUrl: string }>(async ({ llmUrl }) => {
  const target = new URL('chat/completions', llmUrl.endsWith('/') ? llmUrl : `${llmUrl}/`);
  const pool = new Pool(target.origin, { headersTimeout: 0, bodyTimeout: 0 });
  const headers = { 'content-type': 'application/json' };
  const server = http.createServer();
  const wss = new WebSocketServer({ server });
  let events = 0;

  function stream(ws: WebSocket, text: string, responseId: string): void {
    const payload = JSON.stringify({
      model: 'floor',
      stream: true,
      messages: [{ role: 'user', content: text }],
    });
    const decoder = new StringDecoder('utf8');
    let pending = '';
    pool.dispatch(
      { path: target.pathname, method: 'POST', headers, body: payload },
      {
        onConnect: () => {},
        onHeaders: () => true,
        onComplete: () => {},
        onError: () => ws.close(1011, 'llm failed'),
        onData: (piece: Buffer) => {
          pending += decoder.write(piece);
          for (let end = pending.indexOf('\n\n'); end !== -1; end = pending.indexOf('\n\n')) {
            const line = pending.slice(0, end);
            pending = pending.slice(end + 2);
            if (!line.startsWith('data: ')) continue;
            const data = line.slice(6);
            if (data === '[DONE]') {
              ws.send(JSON.stringify({ type: 'response.done', response: { id: responseId } }));
              continue;
            }
            const chunk = JSON.parse(data) as { choices?: { delta?: { content?: string } }[] };
            const delta = chunk.choices?.[0]?.delta?.content;
            if (!delta) continue;
            ws.send(
              JSON.stringify({
                type: 'response.output_text.delta',
                event_id: `event_${++events}`,
                response_id: responseId,
                item_id: `item_${responseId}`,
                output_index: 0,
                content_index: 0,
                delta,
              }),
            );
          }
          return true;
        },
      },
    );
  }

  wss.on('connection', (ws) => {
    let text = '';
    let responses = 0;
    ws.send(JSON.stringify({ type: 'session.created', session: { id: 'floor' } }));
    ws.on('message', (data) => {
      const event = JSON.parse(String(data)) as ClientEvent;
      if (event.type === 'conversation.item.create') text = event.item?.content?.[0]?.text ?? '';
      else if (event.type === 'response.create') stream(ws, text, `resp_${++responses}`);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `ws://127.0.0.1:${port}/v1/realtime`,
    stop: async () => {
      for (const ws of wss.clients) ws.terminate();
      await new Promise((resolve) => server.close(resolve));
      await pool.destroy();
    },
  };
});
