/** Read-only queries on metadata, machines, clusters, backup storage and variables (spec 4.6). */
import { z } from 'zod';
import { clusterNameString, hostAddressString, identifierString, idString, portString } from '../formats';

/** Queries that take no paras; anything sent is ignored like any unknown para. */
export const noParas = z.object({});

export const getClusterDetailParas = z
  .object({
    cluster_name: clusterNameString().optional(),
    cluster_id: idString().optional(), // DESIGN.md section 2: also accepted
  })
  .superRefine((p, ctx) => {
    if (p.cluster_name === undefined && p.cluster_id === undefined) {
      ctx.addIssue({ code: 'custom', message: 'is required (or paras.cluster_id)', path: ['cluster_name'] });
    }
  });

export const getVariableParas = z.object({
  hostaddr: hostAddressString(),
  port: portString(),
  variable: identifierString(),
});
