import { MIN_PROTOCOL_VERSION, PROTOCOL_VERSION } from './constants.js';

// Which protocol versions an end speaks. A panel accepts a `hello` of any
// version in its range and refuses the others with UNSUPPORTED_PROTOCOL_VERSION;
// an agent says the highest of its range and, refused for its version, says
// the next lower one on its next connection (docs/protocol.md, "Versions").

export interface ProtocolRange {
  /** The oldest version this end speaks. */
  min: number;
  /** The newest version this end speaks; below PROTOCOL_VERSION when an operator pins it for a rolling upgrade. */
  max: number;
}

export const DEFAULT_PROTOCOL_RANGE: Readonly<ProtocolRange> = Object.freeze({ min: MIN_PROTOCOL_VERSION, max: PROTOCOL_VERSION });

/** The range of a build whose newest version is pinned to `max` (TETHER_PROTOCOL_VERSION_MAX). */
export function pinnedProtocolRange(max: number = PROTOCOL_VERSION): ProtocolRange {
  if (!Number.isInteger(max) || max < MIN_PROTOCOL_VERSION || max > PROTOCOL_VERSION) {
    throw new RangeError(`protocol version ${max} is outside ${MIN_PROTOCOL_VERSION}..${PROTOCOL_VERSION}`);
  }
  return { min: MIN_PROTOCOL_VERSION, max };
}

export function speaksVersion(range: ProtocolRange, version: number): boolean {
  return Number.isInteger(version) && version >= range.min && version <= range.max;
}

/** The version to say after `refused` was refused, or null when this end speaks nothing lower. */
export function versionBelow(range: ProtocolRange, refused: number): number | null {
  const next = Math.min(refused - 1, range.max);
  return next >= range.min ? next : null;
}

export function describeRange(range: ProtocolRange): string {
  return range.min === range.max ? `${range.min}` : `${range.min} to ${range.max}`;
}
