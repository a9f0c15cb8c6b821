export { DEFAULT_MEASURE_BUDGET, measureFolder, type MeasureBudget, type Measurement } from './measure-folder.js';
export { PendingRemovals, type PendingRemoval } from './pending-removals.js';
