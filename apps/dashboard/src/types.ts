// What the panel sends: the wire types live in @tether/fleet-wire, which the
// panel's presenters are typed with too (types only: nothing is bundled).

export type { AllocationView, Changes, FleetRow, FleetState, NodeDetail, RouteView, Snapshot } from '@tether/fleet-wire';
