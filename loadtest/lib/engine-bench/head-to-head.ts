/**
 * Engine bench, section 3: CPU and wall time per two-round tool turn, the
 * three engines run in interleaved blocks, and Troupe's ratio to the others.
 */
import { checkedTurn, type Engine } from './engines.js';
import { cpuMicros, percentiles, type Percentiles } from './common.js';

/** Section 3: turns measured per engine, split into interleaved blocks (flags: --turns, --blocks, --warmup). */
export const H2H_TURNS = 300;
export const H2H_BLOCKS = 6;
export const H2H_WARMUP_TURNS = 30;
/** Section 3 target: Troupe's CPU per turn ÷ the better of the other two. */
export const H2H_TARGET_RATIO = 0.5;

export interface EngineResult {
  key: Engine['key'];
  label: string;
  cpuUs: Percentiles;
  wallMs: Percentiles;
  /** Mean CPU µs of each of the engine's blocks, in run order (shows warm-up drift). */
  cpuUsBlockMeans: number[];
  failures: number;
  firstProblem: string | null;
}

/** Every order of the items, in lexicographic order of their positions. */
function permutations<T>(items: readonly T[]): T[][] {
  if (items.length <= 1) return [[...items]];
  return items.flatMap((item, i) =>
    permutations([...items.slice(0, i), ...items.slice(i + 1)]).map((rest) => [item, ...rest]),
  );
}

/** How long the head-to-head runs; defaults from the constants above, CLI flags override. */
export interface HeadToHeadOptions {
  turns: number;
  warmupTurns: number;
  blocks: number;
}

export async function headToHead(
  engines: readonly Engine[],
  gc: (() => void) | null,
  options: HeadToHeadOptions,
): Promise<{ results: EngineResult[]; order: string[][] }> {
  const cpu = new Map<string, number[]>();
  const wall = new Map<string, number[]>();
  const blockMeans = new Map<string, number[]>();
  const failures = new Map<string, { count: number; first: string | null }>();
  for (const e of engines) {
    cpu.set(e.key, []);
    wall.set(e.key, []);
    blockMeans.set(e.key, []);
    failures.set(e.key, { count: 0, first: null });
  }

  for (const e of engines) {
    const fail = failures.get(e.key)!;
    for (let i = 0; i < options.warmupTurns; i++) {
      // A broken engine is reported as FAILED in the table, not by stopping the bench.
      const problem = await checkedTurn(e.turn);
      if (problem !== null) {
        fail.count++;
        fail.first ??= `warm-up: ${problem}`;
      }
    }
  }

  // Each block runs the engines in another of their orders (all 6 for 3
  // engines), so each runs first, last and right after each of the others
  // equally often. Rotation alone (ABC, BCA, CAB) always puts A after C, and
  // an engine that follows the AI SDK inherits its heap and pays for its GC.
  const orders = permutations(engines);
  const perBlock = Math.ceil(options.turns / options.blocks);
  const order: string[][] = [];
  for (let b = 0; b < options.blocks; b++) {
    const n = Math.max(0, Math.min(perBlock, options.turns - b * perBlock));
    const blockOrder = orders[b % orders.length]!;
    order.push(blockOrder.map((e) => e.key));
    for (const e of blockOrder) {
      // Collect the previous engine's garbage so this block is not charged for it.
      gc?.();
      const cpuList = cpu.get(e.key)!;
      const wallList = wall.get(e.key)!;
      const fail = failures.get(e.key)!;
      const blockStart = cpuList.length;
      for (let i = 0; i < n; i++) {
        const c0 = cpuMicros();
        const t0 = performance.now();
        const problem = await checkedTurn(e.turn);
        const t1 = performance.now();
        const c1 = cpuMicros();
        if (problem !== null) {
          fail.count++;
          fail.first ??= problem;
          continue;
        }
        cpuList.push(c1 - c0);
        wallList.push(t1 - t0);
      }
      blockMeans.get(e.key)!.push(Math.round(percentiles(cpuList.slice(blockStart)).mean));
    }
  }
  return {
    results: engines.map((e) => ({
      key: e.key,
      label: e.label,
      cpuUs: percentiles(cpu.get(e.key)!),
      wallMs: percentiles(wall.get(e.key)!),
      cpuUsBlockMeans: blockMeans.get(e.key)!,
      failures: failures.get(e.key)!.count,
      firstProblem: failures.get(e.key)!.first,
    })),
    order,
  };
}

export interface Ratios {
  vsRunTools: number;
  vsStreamText: number;
  vsRunToolsP50: number;
  vsStreamTextP50: number;
  betterEngine: string;
  betterMeanUs: number;
  vsBetter: number;
  verdict: 'PASS' | 'FAIL' | 'FAILED';
}

export function ratios(results: readonly EngineResult[]): Ratios {
  const get = (k: Engine['key']): EngineResult => results.find((r) => r.key === k)!;
  const troupe = get('troupe');
  const rt = get('runTools');
  const st = get('streamText');
  const better = rt.cpuUs.mean <= st.cpuUs.mean ? rt : st;
  const vsBetter = troupe.cpuUs.mean / better.cpuUs.mean;
  const anyFailed = results.some((r) => r.failures > 0);
  return {
    vsRunTools: troupe.cpuUs.mean / rt.cpuUs.mean,
    vsStreamText: troupe.cpuUs.mean / st.cpuUs.mean,
    vsRunToolsP50: troupe.cpuUs.p50 / rt.cpuUs.p50,
    vsStreamTextP50: troupe.cpuUs.p50 / st.cpuUs.p50,
    betterEngine: better.label,
    betterMeanUs: better.cpuUs.mean,
    vsBetter,
    verdict: anyFailed ? 'FAILED' : vsBetter <= H2H_TARGET_RATIO ? 'PASS' : 'FAIL',
  };
}
