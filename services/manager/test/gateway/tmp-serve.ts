import { createLogger } from '@kcm/common';
import { buildGateway } from '../../src/gateway/index';
import { FakeJobService } from './fake-job-service';
const service = new FakeJobService();
service.queryAnswers.get_cluster_detail = { cluster_name: 'cluster_1_000001', nick_name: '商城', shards: '1', comps: '1', list_comp: [{ comp_name: 'comp_1', hostaddr: '127.0.2.4', port: '5432', status: 'online' }], list_shard: [{ shard_name: 'shard_1', nodes: '3', list_node: [{ hostaddr: '127.0.2.1', port: '57001', status: 'online', master: 'true' }, { hostaddr: '127.0.2.2', port: '57001', status: 'online', master: 'false' }] }] };
const app = buildGateway({ service, logger: createLogger({ name: 'gateway' }) });
await app.listen({ host: '127.0.0.1', port: 58999 });
