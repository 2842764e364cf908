#!/usr/bin/env node
// The `troupe` executable: loads TypeScript through tsx, then runs the CLI.
import { register } from 'tsx/esm/api';

register();
await import('./troupe.ts');
