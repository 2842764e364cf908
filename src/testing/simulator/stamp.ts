/**
 * Send-time stamps in streamed text, for load tests: with `stamp: true` the
 * simulator ends every text fragment it streams with the moment it wrote it,
 * so a client on the far side of the server can tell how long each delta
 * took to reach it. The stamp is epoch milliseconds with sub-ms precision
 * (`performance.timeOrigin + performance.now()`), comparable across processes.
 */

/** One stamp, e.g. `⟦t=1795313277260.125⟧`. */
const STAMP_RE = /⟦t=(\d+(?:\.\d+)?)⟧/g;

/** Epoch milliseconds with sub-ms precision: the stamps' clock. */
export function epochNow(): number {
  return performance.timeOrigin + performance.now();
}

/**
 * Appends a send-time stamp to a text fragment.
 *
 * @example stampText('Hello', epochNow()) // 'Hello⟦t=1795313277260.125⟧'
 */
export function stampText(text: string, sentAt: number): string {
  return `${text}⟦t=${sentAt.toFixed(3)}⟧`;
}

/**
 * Takes the stamps out of received text: the text as the model meant it and
 * the send times, in order.
 *
 * @example readStamps('Hi⟦t=5.000⟧ there⟦t=6.500⟧') // { text: 'Hi there', sentAt: [5, 6.5] }
 */
export function readStamps(text: string): { text: string; sentAt: number[] } {
  const sentAt: number[] = [];
  const clean = text.replace(STAMP_RE, (_whole, t: string) => {
    sentAt.push(Number(t));
    return '';
  });
  return { text: clean, sentAt };
}
