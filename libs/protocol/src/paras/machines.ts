/** Machine registration, removal and online/offline marking (spec 2.3, 4.2). */
import { z } from 'zod';
import {
  absolutePathString,
  enumString,
  hostAddressString,
  integerString,
  portRangeString,
  textString,
} from '../formats';

export const MACHINE_TYPES = ['storage', 'computer'] as const;
export const NODE_STATS = ['running', 'dead'] as const;

export const createMachineParas = z.object({
  hostaddr: hostAddressString(),
  machine_type: enumString(MACHINE_TYPES),
  port_range: portRangeString(),
  rack_id: textString(64),
  datadir: absolutePathString(),
  logdir: absolutePathString(),
  wal_log_dir: absolutePathString(),
  comp_datadir: absolutePathString(),
  total_mem: integerString(1),
  total_cpu_cores: integerString(1),
});

export const deleteMachineParas = z.object({
  hostaddr: hostAddressString(),
  machine_type: enumString(MACHINE_TYPES),
});

export const setMachineParas = z.object({
  hostaddr: hostAddressString(),
  node_stats: enumString(NODE_STATS),
});
