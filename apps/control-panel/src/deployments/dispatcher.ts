import type { Workload } from '@tether/protocol';

/** What the REST layer hands over once a deployment row is persisted (status `pending`). */
export interface DispatchRequest {
  deploymentId: string;
  nodeId: string;
  nodeName: string;
  workload: Workload;
}

export interface DispatchOutcome {
  /** HTTP status for the POST answer: 202 delivered, 201 recorded only. */
  httpStatus: 201 | 202;
}

/**
 * Sends a persisted deployment to its node. Implementations update the
 * deployment row to its next state themselves and throw `AppError`s
 * (`NODE_UNREACHABLE`, `ACK_TIMEOUT`) after recording the terminal state.
 */
export interface DeploymentDispatcher {
  dispatch(request: DispatchRequest): Promise<DispatchOutcome>;
}

/** Until a session layer is wired in: the deployment stays `pending`. */
export const recordOnlyDispatcher: DeploymentDispatcher = {
  async dispatch() {
    return { httpStatus: 201 };
  },
};
