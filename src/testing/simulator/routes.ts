/**
 * Routes one HTTP request to the simulator and records it: the model list,
 * the request log that other processes read, and chat completions, which are
 * failed by an injected HTTP fault, rejected like vLLM rejects them, or
 * answered.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { performance } from 'node:perf_hooks';
import { answerChat } from './chat-reply.js';
import type { ReplySettings } from './chat-reply.js';
import { badRequestBody, checkChatRequest } from './history-check.js';
import { MAX_BODY_BYTES, readBody, sendJson } from './http-io.js';
import type { Inflight } from './inflight.js';
import type { ChatContext, RecordedRequest, RequestOutcome, SimFault } from './types.js';

/** What the routes read and change; owned by the simulator. */
export interface RouterState {
  readonly models: readonly string[];
  /** The requests received, in order: the latest `keepRequests`. */
  readonly requests: RecordedRequest[];
  readonly keepRequests: number;
  /** One-shot faults for the next chat requests, in order. */
  readonly faults: SimFault[];
  readonly inflight: Inflight;
  readonly settings: ReplySettings;
}

/** The simulator's request handler over `state`. */
export function createRouter(
  state: RouterState,
): (req: IncomingMessage, res: ServerResponse) => Promise<void> {
  const { models, requests, keepRequests, faults, inflight, settings } = state;
  let chatCount = 0;

  return async function handleRequest(req, res) {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const record: RecordedRequest = {
      method: req.method ?? 'GET',
      path,
      body: null,
      headers: req.headers,
      receivedAt: performance.timeOrigin + performance.now(),
      status: 0,
      chunksWritten: 0,
      outcome: 'pending',
    };
    requests.push(record);
    if (requests.length > keepRequests) requests.splice(0, requests.length - keepRequests);
    res.on('error', () => undefined);

    const raw = await readBody(req);
    if (raw.kind === 'aborted') {
      record.outcome = 'client-closed';
      return;
    }
    if (raw.kind === 'too-large') {
      record.outcome = 'rejected';
      sendJson(res, record, 413, {
        error: {
          message: `The request body is larger than ${MAX_BODY_BYTES} bytes.`,
          type: 'invalid_request_error',
          code: 413,
        },
      });
      return;
    }
    let badJson = false;
    if (raw.text.length > 0) {
      try {
        record.body = JSON.parse(raw.text) as unknown;
      } catch {
        badJson = true;
      }
    }

    if (record.method === 'GET' && (path === '/v1/models' || path === '/v1/models/')) {
      answerModels(res, record, models);
      return;
    }
    if (path === '/sim/requests') {
      answerRequestLog(res, record, requests, req.url ?? '/');
      return;
    }
    if (record.method !== 'POST' || path !== '/v1/chat/completions') {
      sendJson(res, record, 404, {
        error: {
          message: `No route for ${record.method} ${path}; the simulator serves GET /v1/models, POST /v1/chat/completions and GET/DELETE /sim/requests.`,
          type: 'invalid_request_error',
          code: 404,
        },
      });
      return;
    }

    const fault = faults.shift();
    if (fault !== undefined) record.fault = fault;
    if (fault?.type === 'http') {
      answerHttpFault(res, record, fault);
      return;
    }
    if (badJson) {
      record.outcome = 'rejected';
      sendJson(res, record, 400, badRequestBody('The request body is not valid JSON.'));
      return;
    }
    const problem = checkChatRequest(record.body);
    if (problem !== null) {
      record.outcome = 'rejected';
      sendJson(res, record, 400, badRequestBody(problem));
      return;
    }

    const controller = inflight.start();
    const onClose = (): void => {
      if (!res.writableFinished) controller.abort('client-closed');
    };
    res.once('close', onClose);
    try {
      const ctx: ChatContext = {
        req,
        res,
        record,
        body: record.body as Record<string, unknown>,
        signal: controller.signal,
        fault,
      };
      await answerChat(ctx, settings, chatCount++);
    } finally {
      res.off('close', onClose);
      if (record.outcome === 'pending') {
        record.outcome = controller.signal.aborted
          ? (controller.signal.reason as RequestOutcome)
          : 'complete';
      }
      inflight.end(controller);
    }
  };
}

/** `GET /v1/models`: the configured models, OpenAI's list shape. */
function answerModels(
  res: ServerResponse,
  record: RecordedRequest,
  models: readonly string[],
): void {
  const created = Math.floor(Date.now() / 1000);
  sendJson(res, record, 200, {
    object: 'list',
    data: models.map((id) => ({ id, object: 'model', created, owned_by: 'troupe-sim' })),
  });
}

/**
 * `GET /sim/requests` lists, and `DELETE` clears, the requests seen. For
 * clients in another process (benchmarks, the load test): when each request
 * arrived, on this process's clock (epoch ms, sub-ms precision). With
 * `?bodies=1` each also carries its body (what the model was sent) and the
 * fault it met; `?last=N` keeps the latest N.
 */
function answerRequestLog(
  res: ServerResponse,
  record: RecordedRequest,
  requests: RecordedRequest[],
  url: string,
): void {
  if (record.method === 'DELETE') {
    requests.length = 0;
    sendJson(res, record, 200, { cleared: true });
    return;
  }
  const query = new URL(url, 'http://sim').searchParams;
  const bodiesAsked = query.get('bodies') ?? '0';
  const lastAsked = query.get('last');
  const last = lastAsked === null ? Number.POSITIVE_INFINITY : Number(lastAsked);
  const problem = !['0', '1', 'false', 'true'].includes(bodiesAsked)
    ? `bodies must be 1, true, 0 or false, got ${JSON.stringify(bodiesAsked)}`
    : lastAsked !== null && !(/^\d+$/.test(lastAsked) && Number.isSafeInteger(last))
      ? `last must be a whole number, got ${JSON.stringify(lastAsked)}`
      : undefined;
  if (problem) {
    sendJson(res, record, 400, {
      error: {
        message: `GET /sim/requests: ${problem}.`,
        type: 'invalid_request_error',
        code: 400,
      },
    });
    return;
  }
  const bodies = bodiesAsked === '1' || bodiesAsked === 'true';
  let seen = requests.filter((r) => r.path !== '/sim/requests');
  if (last < seen.length) seen = last === 0 ? [] : seen.slice(-last);
  const listed = seen.map(({ method, path, receivedAt, status, outcome, chunksWritten, ...r }) => ({
    method,
    path,
    receivedAt,
    status,
    outcome,
    chunksWritten,
    ...(bodies ? { body: r.body, fault: r.fault ?? null } : {}),
  }));
  sendJson(res, record, 200, { requests: listed });
}

/** An injected HTTP error, shaped as OpenAI's (429 carries `retry-after: 0`). */
function answerHttpFault(
  res: ServerResponse,
  record: RecordedRequest,
  fault: Extract<SimFault, { type: 'http' }>,
): void {
  record.outcome = 'fault';
  const type =
    fault.status === 429
      ? 'rate_limit_error'
      : fault.status === 503
        ? 'overloaded'
        : 'server_error';
  const message =
    fault.message ??
    (fault.status === 429 ? 'Rate limit reached (simulated).' : 'Internal error (simulated).');
  sendJson(
    res,
    record,
    fault.status,
    { error: { message, type, code: fault.status } },
    fault.status === 429 ? { 'retry-after': '0' } : {},
  );
}
