// The HTTP floor of bench/emit: one fastify process that answers every Emit with an
// accept envelope and does nothing else (no validation, no forwarding, no Raft, no job),
// run on the same machine with the same load generator. What one HTTP/1.1 request costs
// here, before kcm does any work for it.
//
//   node --import tsx bench/emit/bare-http-server.ts <host> <port>

import Fastify from 'fastify';

const [host = '127.0.1.59', port = '18330'] = process.argv.slice(2);
const app = Fastify({ logger: false });
let next = 0;
app.post('/HttpService/Emit', (request, reply) => {
  const jobType = (request.body as { job_type?: unknown }).job_type;
  void reply.send({ version: '1.0', error_code: '0', error_info: '', status: 'accept', job_id: String(++next), job_type: jobType, attachment: null });
});
await app.listen({ host, port: Number(port) });
process.stdout.write('listening\n');
