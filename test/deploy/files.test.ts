/**
 * The deployment files, checked as data: these machines have no Docker or
 * Kubernetes, so what can be checked without them is (the nginx config runs
 * for real in nginx.test.ts).
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { DEFAULT_SHUTDOWN_GRACE_MS } from '../../src/config/index.js';

type Doc = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

async function yamlDocs(file: string): Promise<Doc[]> {
  return parseAllDocuments(await readFile(file, 'utf8')).map((d) => {
    expect(d.errors).toEqual([]);
    return d.toJS() as Doc;
  });
}

describe('deploy/Dockerfile', () => {
  it('is multi-stage, runs as a non-root user, and lets signals reach Node', async () => {
    const text = await readFile('deploy/Dockerfile', 'utf8');
    expect(text.match(/^FROM /gm)?.length).toBeGreaterThanOrEqual(2);
    expect(text).toMatch(/^COPY --from=deps /m);
    expect(text).toMatch(/^USER node$/m);
    expect(text).toMatch(/^ENTRYPOINT \["\/usr\/bin\/tini", "--"\]$/m);
    // The health check awaits nothing, where the server listens (healthcheck.test.ts runs it).
    expect(text).toMatch(/^HEALTHCHECK .*\n\s+CMD \["node", "src\/cli\/healthcheck.mjs"\]$/m);
    // Exec form, Node itself: no shell or npm in between to swallow SIGTERM.
    expect(text).toMatch(
      /^CMD \["node", "--max-semi-space-size=64", "--heap-growing-percent=100", "--import", "tsx", "src\/cli\/start.ts"\]$/m,
    );
  });
});

describe('deploy/compose.yaml', () => {
  it('runs nginx in front of two Troupe instances sharing Redis, with an optional vLLM', async () => {
    const compose = parse(await readFile('deploy/compose.yaml', 'utf8'), { merge: true }) as Doc;
    const services = compose.services as Record<string, Doc>;
    expect(Object.keys(services).sort()).toEqual([
      'nginx',
      'redis',
      'troupe-1',
      'troupe-2',
      'vllm',
    ]);
    expect(services.vllm!.profiles).toEqual(['vllm']);
    expect(services.nginx!.volumes).toContain(
      './nginx/troupe.conf:/etc/nginx/conf.d/default.conf:ro',
    );
    for (const name of ['troupe-1', 'troupe-2']) {
      const s = services[name]!;
      expect(s.hostname).toBe(name);
      expect(s.environment.REDIS_URL).toBe('redis://redis:6379');
      // WORKERS=auto follows the CPU limit, not the host's cores; the memory guard, the limit.
      expect(s.environment.WORKERS).toBe('auto');
      expect(s.cpus).toBeGreaterThan(0);
      expect(s.mem_limit).toMatch(/^\d+[mg]$/);
      expect(Number.parseInt(s.stop_grace_period as string, 10) * 1000).toBeGreaterThan(
        Number(s.environment.SHUTDOWN_GRACE_MS),
      );
    }
    const nginxConf = await readFile('deploy/nginx/troupe.conf', 'utf8');
    expect(nginxConf).toMatch(/server troupe-1:8080/);
    expect(nginxConf).toMatch(/server troupe-2:8080/);
  });
});

describe('deploy/k8s/troupe.yaml', () => {
  it('has readiness on /health/ready, liveness on /health/live, a preStop drain inside the grace period, and a sessions autoscaler', async () => {
    const docs = await yamlDocs('deploy/k8s/troupe.yaml');
    const byKind = (kind: string, name: string) =>
      docs.find((d) => d.kind === kind && d.metadata?.name === name)!;
    const config = byKind('ConfigMap', 'troupe').data as Record<string, string>;
    const pod = byKind('Deployment', 'troupe').spec.template.spec as Doc;
    const container = pod.containers[0] as Doc;
    expect(container.readinessProbe.httpGet.path).toBe('/health/ready');
    expect(container.livenessProbe.httpGet.path).toBe('/health/live');
    expect(container.livenessProbe.timeoutSeconds).toBeGreaterThanOrEqual(2);
    const preStopS = Number(container.lifecycle.preStop.exec.command[1]);
    const drainS = Number(config.SHUTDOWN_GRACE_MS ?? DEFAULT_SHUTDOWN_GRACE_MS) / 1000;
    expect(pod.terminationGracePeriodSeconds).toBeGreaterThan(preStopS + drainS);
    // Pod Security Standards, restricted: both pods (a namespace enforcing it refuses either).
    for (const name of ['troupe', 'troupe-redis']) {
      const spec = byKind('Deployment', name).spec.template.spec as Doc;
      expect(spec.securityContext).toMatchObject({
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      });
      expect(spec.containers[0].securityContext).toMatchObject({
        allowPrivilegeEscalation: false,
        capabilities: { drop: ['ALL'] },
      });
    }
    expect(container.securityContext).toEqual({
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'] },
      readOnlyRootFilesystem: true,
    });
    // A read-only root: /tmp (tsx's compile cache) is a volume of its own.
    const tmp = container.volumeMounts.find((m: Doc) => m.mountPath === '/tmp');
    expect(pod.volumes.find((v: Doc) => v.name === tmp.name).emptyDir).toEqual({});
    // Speech threads sized to the CPUs requested, one worker per CPU.
    const cpus = Number(container.resources.requests.cpu);
    expect(Number(config.WORKERS)).toBe(cpus);
    expect(Number(config.STT_WORKERS) * Number(config.WORKERS)).toBe(cpus);
    expect(Number(config.TTS_WORKERS) * Number(config.WORKERS)).toBe(cpus);
    const hpa = byKind('HorizontalPodAutoscaler', 'troupe').spec as Doc;
    expect(hpa.metrics[0].pods.metric.name).toBe('troupe_sessions_active');
    expect(config.REDIS_URL).toBe('redis://troupe-redis:6379');
    expect(byKind('Service', 'troupe-redis')).toBeDefined();
  });
});

/**
 * Each document of a manifest as a TypeScript object of its kind's type in
 * `kubernetes-types` (Kubernetes' API types, generated from its OpenAPI
 * spec), type-checked: a wrong type or a misspelt field is an error.
 */
function kubernetesTypeErrors(docs: Doc[]): string[] {
  const file = path.resolve('test/deploy/manifest-check.ts');
  const source = docs
    .map((d, i) => {
      const [group, version] = String(d.apiVersion).includes('/')
        ? String(d.apiVersion).split('/')
        : ['core', d.apiVersion];
      const from = `kubernetes-types/${group!.replace(/\..*$/, '')}/${version}`;
      return `import type { ${d.kind} as T${i} } from '${from}';\nexport const doc${i}: T${i} = ${JSON.stringify(d)};`;
    })
    .join('\n');
  const options: ts.CompilerOptions = {
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    target: ts.ScriptTarget.ES2022,
    types: [],
  };
  const host = ts.createCompilerHost(options);
  const read = host.getSourceFile.bind(host);
  host.getSourceFile = (name, language) =>
    name === file ? ts.createSourceFile(name, source, language) : read(name, language);
  const program = ts.createProgram([file], options, host);
  return ts
    .getPreEmitDiagnostics(program)
    .map((d) => ts.flattenDiagnosticMessageText(d.messageText, ' '));
}

describe("deploy/k8s/troupe.yaml against Kubernetes' API types", () => {
  it('type-checks every object, and would catch a misspelt field', async () => {
    const docs = await yamlDocs('deploy/k8s/troupe.yaml');
    expect(docs.map((d) => d.kind)).toContain('HorizontalPodAutoscaler');
    expect(kubernetesTypeErrors(docs)).toEqual([]);
    // The check itself: a probe's name misspelt, as a hand edit might.
    const text = (await readFile('deploy/k8s/troupe.yaml', 'utf8')).replace(
      'readinessProbe:',
      'readinesProbe:',
    );
    const broken = parseAllDocuments(text).map((d) => d.toJS() as Doc);
    expect(kubernetesTypeErrors(broken).join('\n')).toMatch(
      /'"readinesProbe"' does not exist in type 'Container'/,
    );
  });
});
