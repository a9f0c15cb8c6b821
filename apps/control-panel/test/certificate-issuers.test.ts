import { describe, expect, it } from 'vitest';
import { decode, encode, EXAMPLE_MESSAGES, type MessageOf } from '@tether/protocol';
import { certificateIssuerFor, chooseIssuer, type IssuerCandidate } from '../src/routing/certificate-issuers.js';

// The issuer choice of certificates.share, pure: deterministic (the first
// eligible node by name), stable (the current issuer stays while it serves
// and is live), and what each node's route then carries.

const node = (name: string, over: Partial<IssuerCandidate> = {}): IssuerCandidate => ({ name, shares: true, live: true, privateAddress: `10.0.0.${name.charCodeAt(0) - 96}`, challengePort: 80, ...over });

describe('one certificate issuer per domain', () => {
  it('the first eligible node by name, whatever the order given', () => {
    expect(chooseIssuer([node('c'), node('a'), node('b')], null)).toBe('a');
    expect(chooseIssuer([node('a', { shares: false }), node('c'), node('b')], null)).toBe('b');
    expect(chooseIssuer([node('a', { live: false }), node('b', { privateAddress: null }), node('c', { challengePort: null })], null)).toBeNull();
    expect(chooseIssuer([], null)).toBeNull();
  });

  it('keeps the current issuer while it serves the domain and is live; otherwise the first by name', () => {
    expect(chooseIssuer([node('a'), node('b'), node('c')], 'c')).toBe('c');
    expect(chooseIssuer([node('a'), node('b'), node('c', { live: false })], 'c')).toBe('a');
    expect(chooseIssuer([node('b'), node('d')], 'c')).toBe('b');
  });

  it("a non-issuer that shares carries the issuer's challenge endpoint; the issuer, a node without the capability, or no issuer carry nothing", () => {
    const serving = [node('a'), node('b'), node('c', { shares: false }), node('d', { privateAddress: 'fd00::4', challengePort: 8080 })];
    expect(certificateIssuerFor(serving[1]!, 'a', serving)).toEqual({ node: 'a', challengeVia: '10.0.0.1:80' });
    expect(certificateIssuerFor(serving[0]!, 'd', serving)).toEqual({ node: 'd', challengeVia: '[fd00::4]:8080' });
    expect(certificateIssuerFor(serving[0]!, 'a', serving)).toBeUndefined();
    expect(certificateIssuerFor(serving[2]!, 'a', serving)).toBeUndefined();
    expect(certificateIssuerFor(serving[1]!, null, serving)).toBeUndefined();
    // What it gives is a valid route field.
    const map = EXAMPLE_MESSAGES['routing.map'] as MessageOf<'routing.map'>;
    const route = { ...map.routes[0]!, certificateIssuer: certificateIssuerFor(serving[0]!, 'd', serving)! };
    expect(decode(encode({ ...map, routes: [route] })).ok).toBe(true);
  });
});
