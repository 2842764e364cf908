#!/usr/bin/env node
// The container's health check (deploy/Dockerfile's HEALTHCHECK): asks this
// server's /health/live, which awaits nothing, where the server listens
// (PORT, HOST; https when TLS_CERT is set), and exits 0 on a 200, else 1.
// Plain JavaScript, so no TypeScript loader starts at every check.
import { request as httpRequest } from 'node:http';
import { request as httpsRequest } from 'node:https';

const env = process.env;
const tls = Boolean(env.TLS_CERT);
// A server on every address is asked on loopback.
const host = ['', '0.0.0.0', '::'].includes(env.HOST ?? '') ? '127.0.0.1' : env.HOST;
const req = (tls ? httpsRequest : httpRequest)(
  {
    host,
    port: Number(env.PORT || 8080),
    path: '/health/live',
    timeout: 2_500,
    // The certificate names the public host, not loopback: this asks itself.
    rejectUnauthorized: false,
  },
  (res) => {
    res.resume();
    if (res.statusCode !== 200)
      console.error(`health check: /health/live answered ${res.statusCode}`);
    process.exit(res.statusCode === 200 ? 0 : 1);
  },
);
req.on('timeout', () => req.destroy(new Error('no answer within 2.5 s')));
req.on('error', (err) => {
  console.error(`health check: ${err.message}`);
  process.exit(1);
});
req.end();
