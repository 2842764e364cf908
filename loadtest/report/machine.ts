/** The machine a report was measured on. */
import os from 'node:os';
import type { LoadtestReport } from './model.js';

/** CPU, cores, memory, Node and OS of this machine, as reports show them. */
export function reportMachine(): LoadtestReport['machine'] {
  return {
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    cpus: os.cpus().length,
    memGiB: Number((os.totalmem() / 2 ** 30).toFixed(1)),
    node: process.version,
    platform: `${process.platform} ${os.release()}`,
  };
}
