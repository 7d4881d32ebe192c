import { parseRequest } from '@kcm/protocol';
import { MACHINE_PARAS, envelope } from './helpers';
const body = envelope('create_machine', MACHINE_PARAS);
for (let i = 0; i < 500; i++) parseRequest(body);
const n = 5000; const t = performance.now();
for (let i = 0; i < n; i++) parseRequest(body);
console.log('parseRequest per call us', (((performance.now() - t) / n) * 1000).toFixed(1));
