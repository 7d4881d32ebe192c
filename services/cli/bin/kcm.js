#!/usr/bin/env node
// `kcm` as a command: npm links this file as node_modules/.bin/kcm (services/cli is a
// workspace with a `bin`), so `npx kcm ...` works anywhere in the repository. It loads the
// TypeScript CLI through tsx, the same way `npm run kcm` does, without a build step.
import { register } from 'tsx/esm/api';

register();
const { runAsCommand } = await import('../src/main.ts');
await runAsCommand();
