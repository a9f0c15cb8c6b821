import { CONFIG_ERROR_CATALOG, catalogCodes, mergeErrorCatalogs } from '@tether/common';
import { AGENT_OWN_ERROR_CATALOG } from './own-errors.js';
import { PROXY_ERROR_CATALOG } from './proxy/errors.js';
import { RUNTIME_ERROR_CATALOG } from './runtime/errors.js';

// Every code the agent produces, in one catalog: the runtime's and the proxy's
// (which travel in deploy.result and routing.applied), the configuration's,
// and the agent's own (own-errors.ts). Merging throws if two areas ever define the same code.

export { AGENT_OWN_ERROR_CATALOG };

export const AGENT_ERROR_CATALOG = mergeErrorCatalogs(RUNTIME_ERROR_CATALOG, PROXY_ERROR_CATALOG, CONFIG_ERROR_CATALOG, AGENT_OWN_ERROR_CATALOG);

export type AgentErrorCode = keyof typeof AGENT_ERROR_CATALOG;

export const AGENT_ERROR_CODES = catalogCodes(AGENT_ERROR_CATALOG);
