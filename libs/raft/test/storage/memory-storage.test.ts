import { MemoryStorage } from '../../src/core/storage';
import { runStorageContract } from './storage-contract';

// MemoryStorage keeps nothing across a close, so the suite runs without reopen checks.
runStorageContract('MemoryStorage', {
  supportsReopen: false,
  async bootstrap(conf) {
    return {
      storage: MemoryStorage.bootstrap(conf.voters, conf.learners),
      async reopen() {
        throw new Error('MemoryStorage cannot be reopened');
      },
      async dispose() {},
    };
  },
});
