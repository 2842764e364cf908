/**
 * What pocketsphinx's partial hypotheses (`STT_PARTIAL_MS`) cost: the cached
 * speech of loadtest/stt-word-errors.ts (20 sentences, run that first) is
 * decoded on one decoder with partials off and every 500 / 300 / 200 ms,
 * in rounds (so load drifts hit every setting alike). Prints the real-time
 * factor (the worker's decode time / audio time, `ps_get_hyp` included) and
 * the process CPU per second of audio, with the load average.
 *
 * @example npx tsx loadtest/stt-partials-cost.ts --rounds 3
 */
import { readFile, readdir } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PocketsphinxSttProvider } from '../src/voice/stt/pocketsphinx.js';

const { values: args } = parseArgs({
  options: {
    rounds: { type: 'string', default: '3' },
    every: { type: 'string', default: '0,500,300,200' },
  },
});

const dir = os.tmpdir();
const names = (await readdir(dir)).filter((f) => f.startsWith('troupe-stt-word-errors-')).sort();
if (names.length === 0) throw new Error('no cached speech: run loadtest/stt-word-errors.ts first');
const speech = await Promise.all(
  names.map(async (f) => {
    const b = await readFile(path.join(dir, f));
    return new Int16Array(b.buffer, b.byteOffset, b.byteLength / 2);
  }),
);

const settings = args.every.split(',').map(Number);
const totals = new Map(settings.map((ms) => [ms, { audioMs: 0, decodeMs: 0, cpuMs: 0 }]));
for (let round = 0; round < Number(args.rounds); round++) {
  for (const every of settings) {
    const stt = new PocketsphinxSttProvider({
      maxWorkers: 1,
      maxDecoders: 1,
      partialEveryMs: every,
    });
    await stt.preload(1);
    const cpu0 = process.cpuUsage();
    for (const pcm of speech) {
      const s = stt.open({ signal: new AbortController().signal, onEvent: () => undefined });
      // 20 ms chunks, as a session sends them (partials are asked for between chunks).
      for (let at = 0; at < pcm.length; at += 320) s.write(pcm.subarray(at, at + 320));
      await s.commit();
      s.close();
    }
    const cpu = process.cpuUsage(cpu0);
    const st = stt.stats();
    await stt.close();
    const t = totals.get(every)!;
    t.audioMs += st.audioMs;
    t.decodeMs += st.decodeMs;
    t.cpuMs += (cpu.user + cpu.system) / 1000;
  }
  console.log(
    `round ${round + 1} done, load ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
}
for (const [every, t] of totals) {
  console.log(
    `partials ${every === 0 ? 'off   ' : `${every} ms`}  real-time factor ${(t.decodeMs / t.audioMs).toFixed(3)}  process CPU per audio s ${(t.cpuMs / t.audioMs).toFixed(3)}  (${(t.audioMs / 1000).toFixed(0)} s of audio)`,
  );
}
