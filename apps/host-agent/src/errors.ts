import { CONFIG_ERROR_CATALOG, catalogCodes, defineErrorCatalog, mergeErrorCatalogs } from '@tether/common';
import { PROXY_ERROR_CATALOG } from './proxy/errors.js';
import { RUNTIME_ERROR_CATALOG } from './runtime/errors.js';

// Every code the agent produces, in one catalog: the runtime's and the proxy's
// (which travel in deploy.result and routing.applied), the configuration's,
// and the agent's own. Merging throws if two areas ever define the same code.

export const AGENT_OWN_ERROR_CATALOG = defineErrorCatalog({
  AGENT_ERROR: 'the agent itself failed while carrying out a deployment (a bug, not the workload); the message says what',
  ISOLATION_NOT_ENFORCED:
    "cross-node routing: the agent could not keep its rule in Docker's DOCKER-USER chain (iptables missing or refused, the chain absent): other hosts may reach containers' own addresses on Tether's network; published ports work either way",
});

export const AGENT_ERROR_CATALOG = mergeErrorCatalogs(RUNTIME_ERROR_CATALOG, PROXY_ERROR_CATALOG, CONFIG_ERROR_CATALOG, AGENT_OWN_ERROR_CATALOG);

export type AgentErrorCode = keyof typeof AGENT_ERROR_CATALOG;

export const AGENT_ERROR_CODES = catalogCodes(AGENT_ERROR_CATALOG);
