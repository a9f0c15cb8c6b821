import { catalogCodes, defineErrorCatalog } from '@tether/common';

// The codes the agent defines for itself (beside the runtime's and the proxy's, merged in errors.ts). A leaf:
// the parts that raise them (docker/isolation.ts) load nothing of what the catalog merges.

export const AGENT_OWN_ERROR_CATALOG = defineErrorCatalog({
  AGENT_ERROR: 'the agent itself failed while carrying out a deployment (a bug, not the workload); the message says what',
  ISOLATION_NOT_ENFORCED:
    "cross-node routing: the agent could not keep its rule in Docker's DOCKER-USER chain (iptables missing or refused, the chain absent): other hosts may reach containers' own addresses on Tether's network; published ports work either way",
});

export const AGENT_OWN_ERROR_CODES = catalogCodes(AGENT_OWN_ERROR_CATALOG);
