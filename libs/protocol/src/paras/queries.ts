/** Read-only queries on metadata, machines, clusters, backup storage and variables (spec 4.6). */
import { z } from 'zod';
import { hostAddressString, identifierString, portString } from '../formats';
import { clusterReferenceParas } from './clusters';

/** Queries that take no paras; anything sent is ignored like any unknown para. */
export const noParas = z.object({});

/** By cluster_name as the spec has it, and by cluster_id as well (a cluster's id is what the other jobs take). */
export const getClusterDetailParas = clusterReferenceParas('cluster_name');

export const getVariableParas = z.object({
  hostaddr: hostAddressString(),
  port: portString(),
  variable: identifierString(),
});
