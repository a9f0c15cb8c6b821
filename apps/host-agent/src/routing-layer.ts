import type { RoutingStatus } from '@tether/protocol';
import type { RoutingController, RoutingMapInput } from './controllers.js';

// Features that sit around the routing controller (the canary, route probes)
// add work to its start and stop and fields to its status. Each used to
// rebuild the controller, copying its optional members by hand, so a member
// added to RoutingController disappeared behind every wrapper that did not
// know it. A layer says only what it adds; every other member, present or
// future, is the inner controller's own, called on it.

export interface RoutingLayer {
  /** After the inner controller started. */
  start?(): Promise<void> | void;
  /** Before the inner controller stops (a layer stops before what it stands on). */
  stop?(): Promise<void> | void;
  /** After a map was applied without error. */
  applied?(map: RoutingMapInput): void;
  /** What the layer adds to every status, the one in apply's result included. */
  status?(status: RoutingStatus): RoutingStatus;
  /** Members the layer sets on the controller (hello's capabilities read them). */
  readonly members?: Partial<Pick<RoutingController, 'probesRoutes'>>;
}

/** `inner` with `layer` around it. */
export function layered(inner: RoutingController, layer: RoutingLayer): RoutingController {
  const decorate = (status: RoutingStatus) => (layer.status ? layer.status(status) : status);
  const own: Partial<RoutingController> = {
    ...layer.members,
    async start() {
      await inner.start();
      await layer.start?.();
    },
    async stop() {
      await layer.stop?.();
      await inner.stop();
    },
    async apply(map) {
      const result = await inner.apply(map);
      if (result.error === null) layer.applied?.(map);
      return { ...result, routing: decorate(result.routing) };
    },
    status: () => decorate(inner.status()),
  };
  return new Proxy(inner, {
    get(target, key) {
      if (Object.prototype.hasOwnProperty.call(own, key)) return own[key as keyof RoutingController];
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
    has: (target, key) => Object.prototype.hasOwnProperty.call(own, key) || Reflect.has(target, key),
  });
}
