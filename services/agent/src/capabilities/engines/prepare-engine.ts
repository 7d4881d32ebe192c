// PrepareEngine, the same for both engines' services: fetch a version into the cache and say
// which one it is (the default's, when the request names none).

import { AgentFailure } from '@kcm/agent-api';
import type { AgentContext } from '../../capability';
import { versionFormatProblem, type EngineKind } from './engine-versions';

export interface PrepareEngineReplyFields {
  version: string;
  debian_version: string;
  dir: string;
}

export async function prepareEngineReply(ctx: AgentContext, kind: EngineKind, version: string): Promise<PrepareEngineReplyFields> {
  const problem = version ? versionFormatProblem(kind, version) : '';
  if (problem) throw new AgentFailure('invalid_argument', `version: ${problem}`);
  const prepared = await ctx.engines.prepare(kind, version);
  ctx.logger.info({ kind, version: prepared.version, debian_version: prepared.debianVersion, dir: prepared.dir }, 'engine prepared');
  return { version: prepared.version, debian_version: prepared.debianVersion, dir: prepared.dir };
}
