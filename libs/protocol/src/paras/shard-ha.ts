/**
 * Shard high availability jobs beyond the spec's list, with the reference system's names
 * and paras (DESIGN.md section 2, "job types beyond the spec's list"; section 8).
 */
import { z } from 'zod';
import { addFieldIssue, enumString, formatted, idString, integerString, parseHostAddress, parsePort, type Parsed } from '../formats';

/** A storage node as the reference system names it in manual_switch: `<ip>_<port>`. */
export interface IpPort {
  hostaddr: string;
  port: number;
}

export function parseIpPort(s: string): Parsed<IpPort> {
  const rule = 'must be <ip>_<port>, e.g. 127.0.2.1_55100 (an IPv4 or IPv6 address, port 1..65535)';
  const cut = s.lastIndexOf('_');
  if (cut <= 0) return { ok: false, rule };
  const host = parseHostAddress(s.slice(0, cut));
  const port = parsePort(s.slice(cut + 1));
  if (!host.ok || !port.ok) return { ok: false, rule };
  return { ok: true, value: { hostaddr: host.value, port: port.value } };
}

/** The string is kept as sent (the result echoes it); jobs read the parts with parseIpPort. */
export const ipPortString = () => formatted(parseIpPort, '<ip>_<port>');

export const manualSwitchParas = z
  .object({
    cluster_id: idString(),
    shard_id: idString(),
    master_hostaddr: ipPortString(),
    assign_hostaddr: ipPortString(),
  })
  .superRefine((p, ctx) => {
    if (typeof p.master_hostaddr === 'string' && p.master_hostaddr === p.assign_hostaddr) {
      addFieldIssue(ctx, ['assign_hostaddr'], 'must name another node than master_hostaddr', p.assign_hostaddr);
    }
  });

/** type "1" opens a no-switch window of `timeout` seconds; "0" closes it before its end. */
export const NOSWITCH_TYPES = ['0', '1'] as const;

/** The longest window one set_noswitch may open: maintenance is hours, not months. */
export const MAX_NOSWITCH_TIMEOUT_S = 7 * 24 * 3600;

export const setNoswitchParas = z
  .object({
    type: enumString(NOSWITCH_TYPES),
    timeout: integerString(1, MAX_NOSWITCH_TIMEOUT_S).optional(),
    cluster_id: idString(),
    shard_id: idString().optional(),
  })
  .superRefine((p, ctx) => {
    if (p.type === '1' && p.timeout === undefined) {
      ctx.addIssue({ code: 'custom', message: 'is required when type is "1" (seconds the window lasts)', path: ['timeout'] });
    }
  });
