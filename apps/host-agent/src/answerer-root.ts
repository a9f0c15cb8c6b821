import { existsSync } from 'node:fs';
import path from 'node:path';

// The answerer tree the agent image carries (TETHER_ANSWERER_ROOT): read by the configuration (config.ts) and
// by the answerer image's build (proxy/knot-image.ts). A leaf, so the configuration loads nothing of the proxy.

/** The answerer tree the agent image carries, when it holds both binaries. */
export function answererRootUsable(root: string | null | undefined): root is string {
  return !!root && ['knotd', 'knotc'].every((b) => existsSync(path.join(root, 'usr', 'sbin', b)));
}
